"""Options hold wherever they stand: before the subcommand, after it, or on a group between;
$KUBECONFIG is every file it names, merged as kubectl merges them; -v counts anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from nodemanager.cli import main
from tests.unit.cli.test_errors import kubeconfig


def invoke(args, env=None):
    return CliRunner().invoke(main, args, catch_exceptions=False, env=env)


def namespaces(text: str) -> set[str]:
    """The namespaces the output names: its objects' and the Namespace object's own."""
    docs = [d for d in yaml.safe_load_all(text) if d]
    return {d["metadata"].get("namespace") for d in docs if "namespace" in d["metadata"]} | {
        d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"
    }


@pytest.mark.parametrize(
    "args",
    [
        ["-n", "staging", "rbac", "--hostname", "h"],
        ["--namespace", "staging", "rbac", "--hostname", "h"],
        ["rbac", "--hostname", "h", "-n", "staging"],
        ["-n", "other", "rbac", "--hostname", "h", "-n", "staging"],  # the subcommand's wins
        ["--hostname", "h", "-n", "staging", "rbac"],
    ],
)
def test_namespace_before_or_after_the_subcommand(args):
    result = invoke(args)
    assert result.exit_code == 0, result.output
    assert namespaces(result.stdout) == {"staging"}


def test_an_option_the_subcommand_lacks_is_an_error_not_ignored():
    result = invoke(["--log-format", "text", "rbac", "--hostname", "h"])
    assert result.exit_code == 2
    assert (
        "--log-format is not an option of `main rbac`" in result.stderr
    )  # CliRunner names it main


def test_kubeconfig_and_context_before_the_subcommand_choose_the_server(tmp_path):
    """Which server a command talks to shows in the unreachable error: port 1 or port 2."""
    first = kubeconfig(tmp_path / "a.yaml", 1, context="one")
    second = kubeconfig(tmp_path / "b.yaml", 2, context="two")
    both = os.pathsep.join([str(first), str(second)])
    cases = {
        # $KUBECONFIG: the files merged; the first file's current-context wins (kubectl's rule)
        ("token", "--hostname", "h"): ":1: ",
        ("--context", "two", "token", "--hostname", "h"): ":2: ",
        ("token", "--hostname", "h", "--context", "two"): ":2: ",
        ("--context", "two", "revoke", "--hostname", "h"): ":2: ",
        ("--context", "two", "rollout", "status", "configset/x"): ":2: ",
        ("rollout", "--context", "two", "status", "configset/x"): ":2: ",
        ("rollout", "status", "configset/x", "--context", "two"): ":2: ",
        ("--kubeconfig", str(second), "token", "--hostname", "h"): ":2: ",
        ("--kubeconfig", str(second), "rollout", "history", "configset/x"): ":2: ",
    }
    for args, port in cases.items():
        result = invoke(list(args), env={"KUBECONFIG": both})
        assert result.exit_code == 1, (args, result.output)
        assert f"unreachable: https://127.0.0.1{port}" in result.stderr, (args, result.stderr)


def test_verbose_anywhere():
    for args in (["-v", "rbac", "--hostname", "h"], ["rbac", "-vv", "--hostname", "h"]):
        result = invoke(args)
        assert result.exit_code == 0 and "kind: ServiceAccount" in result.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell):
    result = invoke(["completion", shell])
    assert result.exit_code == 0 and "_NODEMANAGER_COMPLETE" in result.stdout


def test_bash_completion_completes_commands_and_flags():
    """The protocol the bash script speaks, run against the installed command."""

    def complete(words: str) -> list[str]:
        cword = len(words.split()) - (0 if words.endswith(" ") else 1)
        env = {**os.environ, "_NODEMANAGER_COMPLETE": "bash_complete"}
        env.update(COMP_WORDS=words, COMP_CWORD=str(cword))
        out = subprocess.run(
            [str(Path(sys.executable).parent / "nodemanager")],
            env=env,
            capture_output=True,
            text=True,
        )
        return [line.split(",", 1)[1] for line in out.stdout.splitlines()]

    assert "rollout" in complete("nodemanager rol")
    assert set(complete("nodemanager rollout st")) == {"status"}
    assert "--context" in complete("nodemanager token --con")
