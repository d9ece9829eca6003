"""The guard of an Ansible run (executor/child.py) with real processes: a kill -9 of the agent
takes the run's workers with it even when ansible-playbook died first, as a zombie the dying
agent never reaps (the parent death signal follows the thread that started it, and the agent's
other threads may still be exiting)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nodemanager.procutil import kill_run, pids_of_run
from tests.waits import eventually

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")

# The agent: a thread starts "ansible-playbook" (with the parent death signal) and a worker in
# a session of its own, and ends; the agent outlives it until it is killed.
AGENT = """
import os, signal, subprocess, sys, threading, time
from nodemanager.executor import child
from nodemanager.procutil import RUN_MARK, die_with_parent

run_dir = sys.argv[1]
env = {**os.environ, RUN_MARK: run_dir}
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}  # not our pipes
started = {}

def start():
    playbook = subprocess.Popen(["sleep", "300"], preexec_fn=die_with_parent, env=env, **quiet)
    subprocess.Popen(["sleep", "301"], env=env, start_new_session=True, **quiet)
    child.start_guard(playbook.pid, run_dir)
    started["playbook"], started["guard"] = playbook.pid, child._guards[-1]

def state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[0]

thread = threading.Thread(target=start)
thread.start()
thread.join()
deadline = time.monotonic() + 10
while state(started["playbook"]) != "Z" and time.monotonic() < deadline:
    time.sleep(0.05)
print(state(started["playbook"]), flush=True)
# Time for the guard to look at the zombie (main's guard took it for a finished run and left).
deadline = time.monotonic() + 30
while state(started["guard"]) != "Z" and time.monotonic() < deadline:
    time.sleep(0.05)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_agent_takes_the_workers_when_ansible_playbook_died_first(tmp_path: Path):
    run_dir = str(tmp_path / "run")
    try:
        done = subprocess.run(
            [sys.executable, "-c", AGENT, run_dir], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == -9, done.stderr
        assert done.stdout.strip() == "Z", "ansible-playbook died with its thread"
        eventually(lambda: not pids_of_run(run_dir), message="the worker died with the agent")
    finally:
        kill_run(run_dir)


def test_a_finished_child_is_closed_without_the_wait_and_a_running_one_is_ended():
    import types

    import pexpect

    from nodemanager.executor import child

    runner = types.SimpleNamespace(pexpect=pexpect)  # what ansible_runner.runner imports
    child.install(runner)
    try:
        done = runner.pexpect.spawn("/bin/true")
        while done.isalive():  # ansible-runner's loop, which reaps it
            done.expect([pexpect.EOF, pexpect.TIMEOUT], timeout=5)
        done.close()
        assert done.ptyproc.delayafterclose == 0 and done.exitstatus == 0

        running = runner.pexpect.spawn("sleep", ["300"])
        running.close()
        assert running.ptyproc.delayafterclose == 0.1  # pexpect's own wait, then it ends it
        assert not running.isalive() and running.signalstatus is not None
    finally:
        child.reap_guards()
