"""Commands that do not talk to the API start without the heavy libraries (bench/cli_start.py
measures the time; this checks the imports that decide it, in a fresh process)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ["kubernetes", "ansible_runner", "jinja2", "prometheus_client", "yaml"]
# Our own resource model (dataclasses for every kind): only commands that read objects need it.
MODEL = ["nodemanager.api"]
PROBE = """
import json, sys
sys.argv = ["nodemanager", *json.loads(sys.argv[1])]
from nodemanager.cli import main
try:
    main()
except SystemExit:
    pass
loaded = [m for m in sys.modules if m in %r or m.split(".")[0] in %r]
print(json.dumps(sorted(loaded)), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["render", "--help"],
        ["apply", "--help"],
        ["run", "--help"],
        ["completion", "bash"],
        ["--help"],
    ],
)
def test_no_heavy_import_without_the_api(args):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE % (MODEL, HEAVY), json.dumps(args)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(proc.stderr.splitlines()[-1]) == []


def test_local_commands_load_no_cluster_client_nor_jinja(tmp_path):
    """`render -f` and `apply -f` of a ConfigSet without templates: YAML is read, but neither the
    kubernetes client (the agent's upgrader, metrics) nor Jinja2 nor ansible-runner is loaded."""
    target = tmp_path / "motd"
    cs = tmp_path / "cs.yaml"
    cs.write_text(
        json.dumps(
            {
                "apiVersion": "common.nodemanager/v1",
                "kind": "ConfigSet",
                "metadata": {"name": "start"},
                "spec": {"selector": {}, "files": [{"path": str(target), "content": "hi\n"}]},
            }
        )
    )
    heavy = [m for m in HEAVY if m != "yaml"]
    for args in (
        ["render", "-f", str(cs), "--os", "debian"],
        ["apply", "-f", str(cs), "--state-dir", str(tmp_path / "state")],
    ):
        proc = subprocess.run(
            [sys.executable, "-c", PROBE % ([], heavy), json.dumps(args)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(proc.stderr.splitlines()[-1]) == [], args
    assert target.read_text() == "hi\n"  # apply really ran


def test_watchdog_timeout_over_what_a_device_keeps_is_refused():
    """The bound comes from api.fencing when the agent runs (not at import), still one line."""
    from click.testing import CliRunner

    from nodemanager.api.fencing import MAX_DEVICE_TIMEOUT
    from nodemanager.cli import main

    result = CliRunner().invoke(main, ["run", "--watchdog-timeout", str(MAX_DEVICE_TIMEOUT + 1)])
    assert result.exit_code == 2
    assert f"2<=x<={MAX_DEVICE_TIMEOUT}" in result.output and "Traceback" not in result.output


def test_agent_without_certificate_loads_no_cryptography(tmp_path):
    """cryptography (8.6 MB of the agent's RSS) is for a node certificate and the controller's
    approver: an agent with a token, its renewer chosen, has not loaded it."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    code = (
        "import sys, nodemanager.cli, nodemanager.agent.daemon, nodemanager.kube.policycheck\n"
        "from nodemanager.bootstrap.credentials import renewer\n"
        "print(type(renewer(sys.argv[1], 'h', 'ns', 0.8)).__name__)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'cryptography'))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(kubeconfig)], capture_output=True, text=True, check=True
    )
    assert proc.stdout.split("\n")[:2] == ["TokenRenewer", "[]"]
