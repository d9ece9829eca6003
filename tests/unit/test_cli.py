"""kubectl's conventions on the command line: $KUBECONFIG, -n, -f - (stdin), -o yaml|json,
--version; upstream's flags: a bare --leader-elect, --log-level. Parsed by the real CLI."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from nodemanager import __version__
from nodemanager.cli import main
from nodemanager.cli.logs import JsonFormatter, setup_logging
from nodemanager.version import build_info

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.yaml"


def invoke(*args: str, **kw):
    return CliRunner().invoke(main, list(args), catch_exceptions=False, **kw)


def test_version_flag_and_command():
    info = build_info()
    assert info.version.startswith(__version__) and len(info.commit) == 40  # from this checkout
    line = f"nodemanager {info.version} (commit {info.commit}, {info.date})"
    assert invoke("--version").output.strip() == line
    assert invoke("version").output.strip() == line
    assert json.loads(invoke("version", "-o", "json").output) == {
        "nodemanagerVersion": info.version,
        "commit": info.commit,
        "date": info.date,
    }


def test_kubeconfig_comes_from_the_environment_like_kubectl(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    result = CliRunner().invoke(
        main,
        ["token", "--hostname", "web-1"],
        env={"KUBECONFIG": f"{first}:{second}"},
    )
    # The first file of the list is the one read (it does not exist: the error names it).
    assert result.exit_code != 0 and str(first) in result.output, result.output


def test_rbac_takes_short_namespace_and_prints_json_or_yaml():
    as_json = json.loads(invoke("rbac", "--hostname", "web-1", "-n", "edge", "-o", "json").output)
    assert as_json["kind"] == "List"
    assert {i["metadata"].get("namespace") for i in as_json["items"]} >= {"edge"}
    as_yaml = list(yaml.safe_load_all(invoke("rbac", "--hostname", "web-1", "-n", "edge").output))
    assert as_yaml == as_json["items"]


def test_render_reads_standard_input():
    from_file = invoke("render", "-f", str(DEMO))
    from_stdin = invoke("render", "-f", "-", input=DEMO.read_text())
    assert from_stdin.exit_code == 0 and from_stdin.output == from_file.output


def test_render_keeps_old_dash_o_file_and_refuses_json(tmp_path):
    out = tmp_path / "site.yml"
    result = invoke("render", "-f", str(DEMO), "-o", str(out))
    assert result.exit_code == 0 and out.read_text() == invoke("render", "-f", str(DEMO)).output
    refused = CliRunner().invoke(main, ["render", "-f", str(DEMO), "-o", "json"])
    assert refused.exit_code == 2 and "YAML only" in refused.output


@pytest.mark.parametrize(
    "argv, leader",
    [
        (["--leader-elect"], True),  # bare, as upstream's manifests pass it
        (["--leader-elect", "--log-level", "debug"], True),
        (["--leader-elect=false"], False),
        ([], False),
    ],
)
def test_leader_elect_may_be_bare(argv, leader):
    ctx = main.commands["run"].make_context("run", list(argv))
    assert ctx.params["leader_elect"] is leader


def test_log_level_and_unknown_level():
    ctx = main.commands["run"].make_context("run", ["--log-level", "WARN"])
    assert ctx.params["log_level"] == "warn"
    with pytest.raises(click.BadParameter, match="loud"):
        main.commands["run"].make_context("run", ["--log-level", "loud"])


def test_logging_puts_the_zone_in_timestamps_and_quiets_urllib3():
    try:
        setup_logging("json", "info")
        assert logging.getLogger("urllib3").getEffectiveLevel() == logging.ERROR
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
        stamp = json.loads(JsonFormatter().format(record))["time"]
        assert stamp[-6] in "+-" and stamp[-3] == ":", stamp  # ...T12:00:00.000+00:00
        setup_logging("text", "debug")
        assert logging.getLogger("urllib3").getEffectiveLevel() == logging.DEBUG
    finally:
        logging.getLogger("urllib3").setLevel(logging.NOTSET)
        logging.basicConfig(level=logging.WARNING, handlers=[logging.NullHandler()], force=True)


def test_local_mode_is_strict_with_a_non_zero_exit(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "common.nodemanager/v1",
                "kind": "ConfigSet",
                "metadata": {"name": "bad"},
                "spec": {"selector": {}, "files": [{"path": "/tmp/x", "mdoe": "0644"}]},
            }
        )
    )
    result = CliRunner().invoke(main, ["render", "-f", str(bad)])
    assert result.exit_code == 1 and "spec.files[0].mdoe: unknown field" in result.output


def test_unsupported_os_still_renders_files_and_executions(tmp_path):
    cs = tmp_path / "cs.yaml"
    cs.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "common.nodemanager/v1",
                "kind": "ConfigSet",
                "metadata": {"name": "suse"},
                "spec": {
                    "selector": {},
                    "packages": [{"name": "vim"}],
                    "files": [{"path": "/tmp/suse", "content": "x\n"}],
                    "executions": [{"command": "/bin/true", "onEveryApply": True}],
                },
            }
        )
    )
    result = CliRunner().invoke(main, ["render", "-f", str(cs), "--os", "opensuse-leap"])
    assert result.exit_code == 1
    assert "package:vim: spec.packages: unsupported OS 'opensuse-leap'" in result.output
    # render refuses what apply refuses, per resource: the rest is written, the exit says so
    assert "community.general" not in result.stdout and "vim" not in result.stdout
    assert "ansible.builtin.copy" in result.stdout and "/bin/true" in result.stdout
    assert "leaves out what the errors above name" in result.stderr
    spec = yaml.safe_load(cs.read_text())
    del spec["spec"]["packages"]
    cs.write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(main, ["render", "-f", str(cs), "--os", "opensuse-leap"])
    assert result.exit_code == 0, result.output
    assert "ansible.builtin.copy" in result.output and "/bin/true" in result.output


def test_render_of_a_managednode_says_what_it_is(tmp_path):
    node = tmp_path / "node.yaml"
    node.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "common.nodemanager/v1",
                "kind": "ManagedNode",
                "metadata": {"name": "host1"},
                "spec": {"domain": "example.com"},
            }
        )
    )
    result = CliRunner().invoke(main, ["render", "-f", str(node)])
    assert result.exit_code == 0, result.output
    assert "ManagedNode host1: not a ConfigSet" in result.stderr
    assert "invalid" not in result.stderr


def test_render_writes_nothing_when_it_fails(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "common.nodemanager/v1",
                "kind": "ConfigSet",
                "metadata": {"name": "bad"},
                "spec": {"files": [{"path": "/tmp/x", "mode": "zz"}]},
            }
        )
    )
    out = tmp_path / "playbook.yaml"
    to_file = CliRunner().invoke(main, ["render", "-f", str(bad), "--out", str(out)])
    assert to_file.exit_code == 1 and not out.exists()
    to_stdout = CliRunner().invoke(main, ["render", "-f", str(bad)])
    assert to_stdout.exit_code == 1 and to_stdout.stdout == ""
    assert "no playbook written" in to_stdout.stderr
