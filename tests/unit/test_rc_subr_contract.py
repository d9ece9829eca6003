"""Contract test of deploy/nodemanager.rc against FreeBSD's rc.subr and daemon(8), which cannot
run here: the script is sourced by sh with a stand-in /etc/rc.subr that records what it set,
and the process rc.subr would find is decided by rc.subr's own rule, copied below from
_find_processes (FreeBSD's libexec/rc/rc.subr, a daemon without command_interpreter): the
pidfile's pid must be a process whose first word of `ps -o command=` is procname, its base
name, or the base name followed by a colon. daemon(8) titles itself
"daemon: TITLE[CHILD-PID] (daemon)" (setproctitle: program name, colon, title) and writes its
own pid to -P's file, the agent's to -p's.

The script before this test matched nothing: procname was the agent while the pidfile held
daemon's pid, so `status` and `stop` failed and `start` started a second agent."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

RC = Path(__file__).resolve().parents[2] / "deploy" / "nodemanager.rc"

# Records what the script set when rc.subr's run_rc_command is reached.
STAND_IN = """
load_rc_config() { :; }
check_pidfile() { :; }
_run_rc_notrunning() { :; }
run_rc_command() {
    printf '%s\\n' "$command" "$procname" "$pidfile" "$command_args" "$reload_cmd" \
        "$extra_commands" "$command_interpreter" "$_agent_pidfile"
}
"""

# rc.subr's match for a daemon without command_interpreter (_find_processes, verbatim case).
FIND_PROCESSES = r"""
_procname=$1; _arg0=$2
_procnamebn=${_procname##*/}
case "$_arg0" in
$_procname|$_procnamebn|${_procnamebn}:|"(${_procnamebn})"|"[${_procnamebn}]")
    echo found ;;
*)
    echo absent ;;
esac
"""


def sourced(tmp_path: Path, rc_text: str) -> dict[str, str]:
    subr = tmp_path / "rc.subr"
    subr.write_text(STAND_IN)
    script = tmp_path / "nodemanager"
    script.write_text(rc_text.replace("/etc/rc.subr", str(subr)))
    out = subprocess.run(
        ["sh", str(script), "status"], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    keys = ("command", "procname", "pidfile", "command_args", "reload_cmd", "extra", "interp")
    keys += ("agent_pidfile",)
    return dict(zip(keys, out, strict=False))


def daemon_title(command_args: str, child_pid: int) -> tuple[dict[str, str], str]:
    """daemon(8)'s options and the `ps -o command=` line of the supervisor it becomes."""
    args = shlex.split(command_args)
    options: dict[str, str] = {}
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        options[flag] = args.pop(0) if flag in ("-P", "-p", "-o", "-t", "-R", "-u") else ""
    title = options.get("-t", args[0])  # without -t: the child's command
    return options, f"daemon: {title}[{child_pid}] (daemon)"


def rc_subr_finds(procname: str, ps_command: str) -> bool:
    arg0 = ps_command.split()[0]
    out = subprocess.run(
        ["sh", "-c", FIND_PROCESSES, "find", procname, arg0], capture_output=True, text=True
    ).stdout.strip()
    return out == "found"


def test_rc_subr_finds_the_supervisor_whose_pid_the_pidfile_holds(tmp_path):
    got = sourced(tmp_path, RC.read_text())
    assert got["command"] == "/usr/sbin/daemon" and not got["interp"]
    options, title = daemon_title(got["command_args"], 4242)
    assert options["-P"] == got["pidfile"]  # the supervisor's pid is what rc.subr reads
    assert "-R" in options  # restarted when it dies, as Restart= on systemd
    assert rc_subr_finds(got["procname"], title), (got["procname"], title)
    # not some other daemon(8)'s: only the pidfile's pid is ever checked, and a process of
    # another program under that pid is not taken for it
    assert not rc_subr_finds(got["procname"], "/usr/local/bin/python3.11 /x")


def test_reload_signals_the_agent_not_the_supervisor(tmp_path):
    got = sourced(tmp_path, RC.read_text())
    options, _ = daemon_title(got["command_args"], 4242)
    assert got["extra"] == "reload" and got["reload_cmd"] == "nodemanager_reload"
    body = RC.read_text().split("nodemanager_reload()", 1)[1]
    assert options["-p"] != options["-P"]
    assert options["-p"] == got["agent_pidfile"]  # the agent's pid, written by daemon(8)
    assert '"${_agent_pidfile}"' in body and 'kill -HUP "${_agent_pid}"' in body


def test_the_old_script_matched_nothing(tmp_path):
    """The rule sees the defect it is here for: procname the agent, pidfile daemon's."""
    old = RC.read_text().replace(
        'procname="/usr/sbin/daemon"', 'procname="/usr/local/bin/nodemanager"'
    )
    got = sourced(tmp_path, old)
    _, title = daemon_title(got["command_args"], 4242)
    assert not rc_subr_finds(got["procname"], title)


@pytest.mark.parametrize("flag", ["-P", "-p", "-o"])
def test_daemon_paths_are_absolute(tmp_path, flag):
    options, _ = daemon_title(sourced(tmp_path, RC.read_text())["command_args"], 1)
    assert options[flag].startswith("/var/")
