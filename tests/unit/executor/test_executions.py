"""Native executions: return when the command exits, see the one documented environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from nodemanager.executor import config, native
from nodemanager.playbook.steps import EXEC_PATH, EXEC_UNSET, Origin, Step, exec_argv, user_argv
from nodemanager.procutil import RUN_MARK, pids_of_run
from tests.waits import eventually


def _step(*argv: str) -> Step:
    return Step(
        "command", "t", Origin("execution:x", ("cs",)), "ansible.builtin.command", argv=argv
    )


def test_a_background_child_holding_stdout_does_not_hold_the_step(tmp_path):
    pidfile = tmp_path / "pid"
    result = native.act(_step("/bin/sh", "-c", f"sleep 300 & echo $! > {pidfile}"), check=False)
    pid = int(pidfile.read_text())
    try:
        assert result is not None and result.status == "changed"
        os.kill(pid, 0)  # returned while the child, with the command's stdout open, still runs
        assert os.getsid(pid) != os.getsid(0)  # the command had a session of its own
    finally:
        os.kill(pid, 9)


def test_a_failing_command_reports_its_output(tmp_path):
    result = native.act(_step("/bin/sh", "-c", "echo to-out; echo to-err >&2; exit 3"), check=False)
    assert result is not None and result.status == "failed"
    assert result.message == "/bin/sh -c echo to-out; echo to-err >&2; exit 3 exited 3: to-err"


def test_a_missing_command_fails():
    result = native.act(_step("/nonexistent/nm-cmd"), check=False)
    assert result is not None and result.status == "failed"
    assert "/nonexistent/nm-cmd exited 127" in result.message


def test_the_environment_has_no_internal_variable(tmp_path, monkeypatch):
    for name in EXEC_UNSET:
        monkeypatch.setenv(name, "/private/run/dir")
    out = tmp_path / "env"
    native.act(_step("/bin/sh", "-c", f"env > {out}"), check=False)
    seen = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    assert not set(seen) & set(EXEC_UNSET)
    assert seen["PATH"] == EXEC_PATH


def test_every_variable_the_executor_sets_is_dropped(tmp_path):
    assert set(config.envvars(tmp_path)) - {"PATH", "LC_ALL"} <= set(EXEC_UNSET)
    assert RUN_MARK in EXEC_UNSET


def test_user_argv_undoes_exec_argv():
    assert user_argv(exec_argv(["a", "-u", "b"])) == ["a", "-u", "b"]
    assert user_argv(["plain"]) == ["plain"]


def test_an_uninstalled_locale_gets_c_utf8_for_ansible_and_executions(tmp_path, monkeypatch):
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_CTYPE", raising=False)
    monkeypatch.setenv("LANG", "xx_YY.UTF-8")
    assert config.locale_env() == {"LC_ALL": "C.UTF-8"}
    assert config.envvars(tmp_path)["LC_ALL"] == "C.UTF-8"
    # What ansible-playbook checks at start-up now passes.
    env = {**os.environ, **config.locale_env()}
    ansible = [f"{config.ansible_bin_dir()}/ansible-playbook", "--version"]
    assert subprocess.run(ansible, env=env, capture_output=True).returncode == 0
    monkeypatch.setenv("LANG", "C.UTF-8")
    assert config.locale_env() == {}


def test_a_run_marks_the_commands_its_modules_start(tmp_path):
    # A marked process (a module) starts an unmarked one (an execution, through env -u).
    pidfile = tmp_path / "pid"
    script = f"/usr/bin/env -u {RUN_MARK} /bin/sh -c 'echo $$ > {pidfile}; exec sleep 300' & wait"
    parent = subprocess.Popen(
        ["/bin/sh", "-c", script], env={**os.environ, RUN_MARK: str(tmp_path) + "/run"}
    )
    try:

        def started() -> bool:
            assert parent.poll() is None, "the module exited before starting the command"
            return pidfile.exists() and bool(pidfile.read_text().strip())

        eventually(started, timeout=30, interval=0.05, message="the command's pid file")
        child = int(pidfile.read_text())
        assert RUN_MARK.encode() not in Path(f"/proc/{child}/environ").read_bytes()
        assert {parent.pid, child} <= set(pids_of_run(str(tmp_path)))
        os.kill(child, 9)
    finally:
        parent.kill()
        parent.wait()
