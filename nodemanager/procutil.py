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


def _ppid(entry: Path) -> int | None:
    try:
        return int((entry / "stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def pids_of_run(prefix: str) -> list[int]:
    """Processes whose environment has ``NODEMANAGER_RUN_DIR`` under ``prefix`` (ansible-playbook
    and its workers, which start sessions of their own), and their descendants: the commands
    their modules run no longer carry the mark (executions see none of the run's variables,
    playbook.steps.EXEC_UNSET). Linux /proc only; elsewhere none."""
    wanted = f"{RUN_MARK}={prefix}".encode()
    marked: set[int] = set()
    children: dict[int, list[int]] = {}
    me = os.getpid()
    for entry in Path("/proc").glob("[0-9]*") if Path("/proc/self").exists() else []:
        pid = int(entry.name)
        parent = _ppid(entry)
        if parent is not None:
            children.setdefault(parent, []).append(pid)
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if pid != me and any(v.startswith(wanted) for v in environ.split(b"\0")):
            marked.add(pid)
    found, todo = set(marked), list(marked)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found and child != me:
                found.add(child)
                todo.append(child)
    return sorted(found)


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
