"""What a killed agent left behind, removed before the agent does anything else.

``kill -9`` runs no ``finally``: a run directory (the playbook, which may hold Secret content)
stays on disk, a native write leaves its temporary file beside the target, and a process of
the run may still be going if its guard could not stop it. The agent keeps its run
directories under ``--state-dir/runs`` (0700), so at start every entry there is a leftover:
processes of those runs (found by the run directory in their environment) are killed, then
the directories are removed. Temporary files carry
``fsutil.TEMP_MARK`` in their name and sit beside the files the last applied state declared.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nodemanager.fsutil import TEMP_MARK
from nodemanager.procutil import kill_run

log = logging.getLogger(__name__)


def clean_runs(runs: Path) -> int:
    """Kill what still works in a leftover run directory and remove them all; how many."""
    runs.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(runs, 0o700)
    leftovers = list(runs.iterdir())
    if not leftovers:
        return 0
    killed = kill_run(str(runs) + os.sep)
    if killed:
        log.warning("killed %d processes a previous agent's Ansible run left running", killed)
    for entry in leftovers:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    log.warning("removed %d run directories a previous agent left behind", len(leftovers))
    return len(leftovers)


def clean_temp_files(paths: Iterable[str]) -> int:
    """Remove native-write temporary files beside ``paths``; how many."""
    removed = 0
    for path in {Path(p) for p in paths}:
        with contextlib.suppress(OSError):
            for tmp in path.parent.glob(f".{path.name}{TEMP_MARK}*"):
                tmp.unlink()
                removed += 1
    if removed:
        log.warning("removed %d temporary files a previous agent left behind", removed)
    return removed


def declared_paths(configsets: Iterable[dict[str, Any]]) -> list[str]:
    """The file paths raw ConfigSets declare (the last applied snapshot's)."""
    return [
        str(f["path"])
        for cs in configsets
        for f in (cs.get("spec") or {}).get("files") or []
        if isinstance(f, dict) and f.get("path")
    ]
