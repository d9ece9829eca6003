"""ansible-playbook, and everything it started, dies with the agent.

ansible-runner starts ansible-playbook with ``pexpect.spawn`` (a new session on a pty) and
offers no hook to run code in the child, so its view of pexpect gets a ``spawn`` that

- passes ``preexec_fn``: the parent death signal (``nodemanager.procutil``) for
  ansible-playbook itself; the setting is not inherited by its workers and modules, and the
  pty's hangup cannot reach them either (ansible-runner makes the session ignore SIGHUP); so
- forks a guard, a tiny process that notices the agent is gone (it is reparented) and kills
  every process of the run: Ansible's workers start sessions of their own, so they are found
  by the run directory in their environment (``procutil.pids_of_run``). The guard ends by
  itself once ansible-playbook has exited.

Only ansible-runner's module reference changes; pexpect itself is untouched for others.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import types
from typing import Any

from nodemanager.procutil import RUN_MARK, die_with_parent, kill_run

_guards: list[int] = []


def _exists(pid: int) -> bool:
    """Whether ``pid`` exists, a zombie too: only the agent reaps ansible-playbook, or init once
    the whole agent is gone (and this guard reparented with it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _guard(session: int, agent: int, run_dir: str | None) -> None:
    """In the guard: watch the agent and ansible-playbook; never returns."""
    try:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(-1)
        while True:
            # Session before parent. The parent death signal follows the agent's thread that
            # started ansible-playbook: a kill -9 ends that thread, and so ansible-playbook,
            # while the agent's other threads still exit (under load, seconds), and until
            # then the agent stays our parent. A zombie is not an ended run: the dying agent
            # never reaps it, and once the agent is gone we are reparented (no later than it).
            ended = not _exists(session)
            if os.getppid() != agent:
                with contextlib.suppress(OSError):
                    os.killpg(session, signal.SIGKILL)
                if run_dir:
                    kill_run(run_dir)
                break
            if ended:
                break
            time.sleep(0.2)
    finally:
        os._exit(0)


def start_guard(session: int, run_dir: str | None) -> None:
    agent = os.getpid()
    pid = os.fork()
    if pid == 0:
        _guard(session, agent, run_dir)
    _guards.append(pid)


def reap_guards() -> None:
    """After a run: end and reap the guards (their session is over)."""
    while _guards:
        pid = _guards.pop()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def install(runner_module: Any) -> None:
    """Make ``runner_module`` (``ansible_runner.runner``) start children that die with us, and
    close them without waiting for one already gone."""
    real = runner_module.pexpect
    if getattr(real, "nodemanager_guarded", False):
        return

    class Spawn(real.spawn):  # type: ignore[misc,name-defined]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("preexec_fn", die_with_parent)
            super().__init__(*args, **kwargs)
            if self.pid:
                start_guard(self.pid, (kwargs.get("env") or {}).get(RUN_MARK))

        def close(self, force: bool = True) -> None:
            # ansible-runner closes the terminal once its loop saw ansible-playbook gone
            # (reaped); ptyprocess would still sleep 0.1 s before looking whether the child
            # exited: a tenth of a second of every Ansible run's wall time, waiting for nothing.
            # A child still running is closed as before (the sleep, then it is ended).
            if not self.isalive():
                self.ptyproc.delayafterclose = 0
            super().close(force)

    view = types.SimpleNamespace(**{k: getattr(real, k) for k in dir(real)})
    view.spawn = Spawn
    view.nodemanager_guarded = True
    runner_module.pexpect = view
