"""Upstream nodemanager's file backups (its "filebucket"), read where upstream's agent left them.

Upstream (``pkg/files SaveToFileBucket``, on with ``-configset.file-bucket.enabled``) keeps the
previous content of each file it overwrites under ``-configset.file-bucket.path`` (default
``/var/lib/nodemanager/filebucket``, inside our default state directory):

- ``<root>/<sha[0:2]>/<sha[2:4]>/<sha[4:]>``: the content (sha256 of it in hex), 0600;
- the same path plus ``.meta``: JSON ``{path, backedUpAt (RFC 3339), mode ("0644"), uid, gid,
  owner, group}``, written when the blob was first stored.

This module reads them as versions of ``host/backups.py`` so ``nodemanager restore`` lists
and restores them beside ours, and collects them as upstream's GC did (a blob and its sidecar
go once the blob's modification time is older than the maximum age). It never writes one.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Entry:
    """One blob of upstream's bucket and what its sidecar says."""

    sha256: str
    path: str
    saved_at: float
    mode: int
    uid: int
    gid: int
    owner: str
    group: str


def _parse_time(text: str, fallback: float) -> float:
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return fallback


def _entry(blob: Path, sha: str) -> Entry | None:
    """The entry of ``blob``, or None when its sidecar is missing or not upstream's shape (a
    blob without a path cannot be listed under one)."""
    try:
        meta = json.loads(blob.with_name(blob.name + ".meta").read_text())
        mtime = blob.stat().st_mtime
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("path"), str):
        return None
    try:
        mode = int(str(meta.get("mode") or "0600"), 8)
        uid, gid = int(meta.get("uid") or 0), int(meta.get("gid") or 0)
    except ValueError:
        return None
    return Entry(
        sha,
        meta["path"],
        _parse_time(str(meta.get("backedUpAt") or ""), mtime),
        mode & 0o7777,
        uid,
        gid,
        str(meta.get("owner") or ""),
        str(meta.get("group") or ""),
    )


class UpstreamBucket:
    """Upstream's filebucket at ``root`` (absent: empty)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    def blob(self, sha: str) -> Path:
        return self.root / sha[0:2] / sha[2:4] / sha[4:]

    def _blobs(self) -> Iterator[tuple[Path, str]]:
        if not self.root.is_dir():
            return
        for first in sorted(self.root.iterdir()):
            if len(first.name) != 2 or not first.is_dir():
                continue
            for second in sorted(first.iterdir()):
                if len(second.name) != 2 or not second.is_dir():
                    continue
                for blob in sorted(second.iterdir()):
                    sha = first.name + second.name + blob.name
                    if len(sha) == 64 and set(sha) <= _HEX and blob.is_file():
                        yield blob, sha

    def entries(self) -> list[Entry]:
        """Every readable entry, oldest first."""
        found = [e for blob, sha in self._blobs() if (e := _entry(blob, sha)) is not None]
        return sorted(found, key=lambda e: (e.saved_at, e.sha256))

    def gc(self, max_age: float, now: float | None = None) -> int:
        """Remove blobs (and sidecars) last modified more than ``max_age`` seconds ago, as
        upstream's GCFileBucket; the number removed."""
        horizon = (time.time() if now is None else now) - max_age
        removed = 0
        for blob, _ in list(self._blobs()):
            try:
                if blob.stat().st_mtime >= horizon:
                    continue
                blob.unlink()
            except FileNotFoundError:
                continue
            blob.with_name(blob.name + ".meta").unlink(missing_ok=True)
            removed += 1
        return removed
