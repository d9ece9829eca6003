"""Commands that do not talk to the API start without the heavy libraries (bench/cli_start.py
measures the time; this checks the imports that decide it, in a fresh process)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ["kubernetes", "ansible_runner", "jinja2", "prometheus_client", "yaml"]
PROBE = """
import json, sys
sys.argv = ["nodemanager", *json.loads(sys.argv[1])]
from nodemanager.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in %r)), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args", [["--version"], ["render", "--help"], ["completion", "bash"], ["--help"]]
)
def test_no_heavy_import_without_the_api(args):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE % (HEAVY,), json.dumps(args)],
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
            [sys.executable, "-c", PROBE % (heavy,), json.dumps(args)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(proc.stderr.splitlines()[-1]) == [], args
    assert target.read_text() == "hi\n"  # apply really ran
