"""Durable file writes shared by every room: write a temporary file, fsync, rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# In every temporary file's name, so the agent can find and remove those a kill -9 left behind.
TEMP_MARK = ".nm-tmp-"


def write_atomic(path: str | os.PathLike[str], data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` so readers see the old or the new file, never half of one.

    The temporary file is created with ``mode`` before any byte is written, so a secret never
    sits in a world-readable file, even briefly.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}{TEMP_MARK}", dir=target.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
