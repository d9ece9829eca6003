"""Child processes that do not outlive the agent, shared by every room.

``kill -9`` of the agent runs no cleanup code, so the kernel has to do it: a child started
with ``PR_SET_PDEATHSIG`` gets SIGKILL when the thread that started it dies (the agent starts
children from its worker, the main thread). Elsewhere than Linux this is a no-op; the start-up
cleanup (``agent/cleanup.py``) still finds leftovers by the run directory in their environment.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies. Safe in a preexec_fn."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


RUN_MARK = "NODEMANAGER_RUN_DIR"  # in the environment of everything an Ansible run starts


def pids_of_run(prefix: str) -> list[int]:
    """Processes whose environment has ``NODEMANAGER_RUN_DIR`` under ``prefix``: ansible-playbook,
    its workers (which start their own sessions) and the commands their modules run, whatever
    their parent is now. Linux /proc only; elsewhere none."""
    wanted = f"{RUN_MARK}={prefix}".encode()
    found = []
    me = os.getpid()
    for entry in Path("/proc").glob("[0-9]*") if Path("/proc/self").exists() else []:
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if int(entry.name) != me and any(v.startswith(wanted) for v in environ.split(b"\0")):
            found.append(int(entry.name))
    return found


def kill_run(prefix: str, rounds: int = 3) -> int:
    """SIGKILL every process of the runs under ``prefix`` (again, for any forked meanwhile)."""
    killed = 0
    for _ in range(rounds):
        pids = pids_of_run(prefix)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed
