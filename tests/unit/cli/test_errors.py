"""Every command that talks to the API fails in one line, exit 1, never a traceback: an
unreachable server (a refused port), a malformed kubeconfig (not YAML; YAML but not a
kubeconfig; no such file) and a context that is not there. Commands that do not talk to the
API (rbac, render) do not read the kubeconfig at all."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from nodemanager.bootstrap.credentials import TokenRenewer
from nodemanager.cli import main

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def kubeconfig(path: Path, port: int, context: str = "c") -> Path:
    """A kubeconfig whose server is 127.0.0.1:port (nothing listens: refused at once)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": context,
                "clusters": [
                    {"name": f"k{port}", "cluster": {"server": f"https://127.0.0.1:{port}"}}
                ],
                "users": [{"name": f"u{port}", "user": {"token": "abc"}}],
                "contexts": [
                    {"name": context, "context": {"cluster": f"k{port}", "user": f"u{port}"}}
                ],
            }
        )
    )
    return path


@pytest.fixture
def configs(tmp_path):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("apiVersion: v1\nclusters: [\n  x")
    a_list = tmp_path / "list.yaml"
    a_list.write_text("- not a kubeconfig\n")
    return {
        "unreachable": kubeconfig(tmp_path / "ok.yaml", 1),
        "bad_yaml": bad_yaml,
        "not_kubeconfig": a_list,
        "missing": tmp_path / "absent.yaml",
    }


# Each API command, with what it needs besides the kubeconfig.
API_COMMANDS = {
    "token": ["token", "--hostname", "h"],
    "revoke": ["revoke", "--hostname", "h"],
    "rollout status": ["rollout", "status", "configset/x"],
    "rollout history": ["rollout", "history", "configset/x"],
    "rollout pause": ["rollout", "pause", "configset/x"],
    "rollout undo": ["rollout", "undo", "configset/x"],
    "run": [
        "run",
        "--state-dir",
        "{tmp}/state",
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
    ],  # fmt: skip
}
EXPECTED = {
    "unreachable": "API server unreachable: https://127.0.0.1:1: ",
    "bad_yaml": "is not valid YAML at line 3",
    "not_kubeconfig": "is not a kubeconfig",
    "missing": "no such file",
}


def one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def invoke(args, env=None):
    # catch_exceptions=False: an exception the CLI let through fails the test as itself
    return CliRunner().invoke(main, args, catch_exceptions=False, env=env)


# The agent starts offline by design when the server is away (tests/cluster/test_cli.py runs
# it), and without a kubeconfig it uses the in-cluster account of a pod.
CASES = [
    (command, case)
    for command in sorted(API_COMMANDS)
    for case in sorted(EXPECTED)
    if not (command == "run" and case in ("unreachable", "missing"))
]


@pytest.mark.parametrize(("command", "case"), CASES)
def test_api_commands_fail_in_one_line(command, case, configs, tmp_path):
    args = [a.replace("{tmp}", str(tmp_path)) for a in API_COMMANDS[command]]
    line = one_line_error(invoke([*args, "--kubeconfig", str(configs[case])]))
    assert EXPECTED[case] in line


@pytest.mark.parametrize("command", sorted(API_COMMANDS))
def test_wrong_context_is_named_with_the_contexts_there(command, configs, tmp_path):
    args = [a.replace("{tmp}", str(tmp_path)) for a in API_COMMANDS[command]]
    env = {"KUBECONFIG": str(configs["unreachable"])}
    line = one_line_error(invoke([*args, "--context", "nope"], env))
    assert "--context 'nope' not found (contexts: ['c'])" in line


def test_bootstrap_fails_in_one_line(configs, tmp_path):
    out = tmp_path / "node.kubeconfig"
    for case in ("unreachable", "bad_yaml", "not_kubeconfig"):
        args = ["bootstrap", "--bootstrap-kubeconfig", str(configs[case])]
        line = one_line_error(invoke([*args, "--kubeconfig", str(out), "--hostname", "h"]))
        assert EXPECTED[case] in line
    assert not out.exists()
    args = ["bootstrap", "--bootstrap-kubeconfig", str(configs["unreachable"])]
    line = one_line_error(invoke([*args, "--context", "x", "--kubeconfig", str(out)]))
    assert "--context 'x' not found" in line


def test_verbose_adds_the_traceback(configs):
    args = ["token", "--hostname", "h", "--kubeconfig", str(configs["unreachable"])]
    quiet = invoke(args)
    loud = invoke([*args, "-v"])
    assert quiet.exit_code == loud.exit_code == 1
    assert "Traceback" not in quiet.stderr and "Traceback" in loud.stderr


@pytest.mark.parametrize("case", ["unreachable", "bad_yaml", "not_kubeconfig"])
def test_commands_without_the_api_do_not_read_the_kubeconfig(case, configs, tmp_path):
    env = {"KUBECONFIG": str(configs[case])}
    rbac = invoke(["rbac", "--hostname", "h"], env)
    assert rbac.exit_code == 0 and "kind: ServiceAccount" in rbac.stdout
    render = invoke(["render", "-f", str(EXAMPLES / "demo.yaml"), "--os", "debian"], env)
    assert render.exit_code == 0 and "hosts: localhost" in render.stdout
    node = tmp_path / "node.yaml"
    node.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "common.nodemanager/v1",
                "kind": "ManagedNode",
                "metadata": {"name": "h"},
            }
        )
    )
    apply = invoke(["apply", "--check", "-f", str(node)], env)
    assert apply.exit_code == 0, apply.output
    # and a ManagedNode given to -f is named as such, not reported as an invalid ConfigSet
    assert f"note: skipped {node} (document 1): ManagedNode h: not a ConfigSet" in apply.stderr


def test_token_renewer_thread_logs_one_line_for_a_broken_kubeconfig(configs, caplog):
    renewer = TokenRenewer(str(configs["bad_yaml"]), "h", "nodemanager")
    with caplog.at_level(logging.WARNING):
        thread = threading.Thread(target=renewer.run, args=(threading.Event(),))
        thread.start()
        thread.join(timeout=10)
    assert not thread.is_alive()  # it stopped, having said why
    [record] = caplog.records
    assert "is not valid YAML" in record.getMessage() and record.exc_info is None


def test_bootstrap_certificate_fails_in_one_line(configs, tmp_path):
    out = tmp_path / "node.kubeconfig"
    for case in ("unreachable", "bad_yaml", "not_kubeconfig"):
        args = ["bootstrap", "--certificate", "--bootstrap-kubeconfig", str(configs[case])]
        line = one_line_error(invoke([*args, "--kubeconfig", str(out), "--hostname", "h"]))
        assert EXPECTED[case] in line
    assert not out.exists() and not Path(f"{out}-client.pem").exists()


# A duration is parsed after click has the options, so the error names the flag itself.
BAD_VALUES = [
    (["bootstrap", "--certificate", "--cert-ttl", "5m"], "Error: --cert-ttl: at least 10"),
    (["bootstrap", "--certificate", "--cert-ttl", "200h"], "Error: --cert-ttl: at most 168h"),
    (["bootstrap", "--certificate", "--approval-timeout", "soon"], "'--approval-timeout': 'soon'"),
    (["bootstrap", "--token-ttl", "9999h"], "Error: --token-ttl: at most 30 days"),
    (["bootstrap", "--token-ttl", "q"], "'--token-ttl': 'q' is not a duration"),
    (["controller", "--sync-period", "x"], "'--sync-period': 'x' is not a duration"),
    (["rollout", "status", "configset/x", "--timeout", "x"], "'--timeout': 'x' is not"),
    (["run", "--drain-timeout", "x"], "'--drain-timeout': 'x' is not a duration"),
    (["run", "--watchdog-timeout", "31"], "'--watchdog-timeout': 31 is not in the range"),
]


@pytest.mark.parametrize(("args", "expected"), BAD_VALUES, ids=lambda v: " ".join(v)[:40])
def test_bad_values_name_their_flag_in_one_line(args, expected, configs, tmp_path):
    server = str(configs["unreachable"])
    if args[0] == "bootstrap":
        args = [*args, "--bootstrap-kubeconfig", server, "--kubeconfig", str(tmp_path / "k")]
    else:
        args = [*args, "--kubeconfig", server]
    result = invoke(args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert expected in result.stderr.splitlines()[-1], result.stderr
