"""File backups (upstream's "filebucket"): the previous content of a file the agent replaces or
removes, kept on this host so `nodemanager restore` can put it back.

Layout under ``<state_dir>/backups`` (directories 0700, files 0600, atomic writes):

- ``blobs/<first two hex digits>/<sha256>``: content, stored once whatever path held it;
- ``index.json``: the sidecar, per path the saved versions, oldest first, each with its sha256,
  when it was saved, its mode, owner and group (names and ids), and whether a Secret fed it.

Backups of Secret-fed files stay here like any other and are marked ``secret``: the agent leaves
them out of ``status.fileBackups``, because even a digest of a short secret can be guessed.
Garbage collection drops versions older than a maximum age and then every unreferenced blob.

Upstream's filebucket (``host/filebucket.py``, by default ``<state_dir>/filebucket``, where
upstream's default path lies in ours) is read beside: its versions are listed and restored with
ours, and collected by the same maximum age.
"""

from __future__ import annotations

import grp
import hashlib
import json
import os
import pwd
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from nodemanager.fsutil import write_atomic
from nodemanager.host.filebucket import Entry, UpstreamBucket

_HEX = frozenset("0123456789abcdef")


class BackupError(Exception):
    """A backup could not be found or put back; the message names the path."""


@dataclass(frozen=True)
class Version:
    sha256: str
    saved_at: float  # Unix time
    mode: int
    uid: int
    gid: int
    owner: str
    group: str
    secret: bool = False

    @property
    def saved_at_text(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.saved_at))


def _name(lookup: Callable[[int], object], id_: int) -> str:
    try:
        return str(lookup(id_)[0])  # type: ignore[index]
    except KeyError:
        return ""


def _from_upstream(e: Entry) -> Version:
    return Version(e.sha256, e.saved_at, e.mode, e.uid, e.gid, e.owner, e.group)


class BackupStore:
    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        clock: Callable[[], float] = time.time,
        filebucket: str | os.PathLike[str] | None = None,
    ):
        self.dir = Path(state_dir) / "backups"
        self.index_path = self.dir / "index.json"
        self.clock = clock
        self.upstream = UpstreamBucket(filebucket or Path(state_dir) / "filebucket")

    # -- the index ---------------------------------------------------------------------------

    def _load(self) -> dict[str, list[Version]]:
        try:
            raw = json.loads(self.index_path.read_text())
        except FileNotFoundError:
            return {}
        return {path: [Version(**v) for v in versions] for path, versions in raw.items()}

    def _save(self, index: dict[str, list[Version]]) -> None:
        self._mkdir(self.dir)
        data = {p: [asdict(v) for v in vs] for p, vs in sorted(index.items()) if vs}
        write_atomic(self.index_path, json.dumps(data, sort_keys=True).encode(), mode=0o600)

    @staticmethod
    def _mkdir(path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, 0o700)

    def _blob(self, sha: str) -> Path:
        return self.dir / "blobs" / sha[:2] / sha

    # -- saving ------------------------------------------------------------------------------

    def save(self, paths: Iterable[tuple[str, bool]]) -> dict[str, str]:
        """Back up each ``(path, secret)`` that is a regular file now; the sha256 saved per path.

        A path whose newest backup already holds these bytes gets no new version.
        """
        index, saved = self._load(), {}
        for path, secret in paths:
            try:
                st = os.lstat(path)
                if not stat.S_ISREG(st.st_mode):
                    continue
                data = Path(path).read_bytes()
            except FileNotFoundError:
                continue
            sha = hashlib.sha256(data).hexdigest()
            blob = self._blob(sha)
            if not blob.exists():
                self._mkdir(self.dir / "blobs")
                self._mkdir(blob.parent)
                write_atomic(blob, data, mode=0o600)
            versions = index.setdefault(path, [])
            if not versions or versions[-1].sha256 != sha:
                versions.append(
                    Version(
                        sha,
                        self.clock(),
                        stat.S_IMODE(st.st_mode),
                        st.st_uid,
                        st.st_gid,
                        _name(pwd.getpwuid, st.st_uid),
                        _name(grp.getgrgid, st.st_gid),
                        secret,
                    )
                )
            saved[path] = sha
        if saved:
            self._save(index)
        return saved

    # -- reading -----------------------------------------------------------------------------

    def versions(self, path: str) -> list[Version]:
        """Ours and upstream's saved versions of ``path``, oldest first."""
        theirs = [_from_upstream(e) for e in self.upstream.entries() if e.path == path]
        if not theirs:
            return list(self._load().get(path, []))
        return sorted([*self._load().get(path, []), *theirs], key=lambda v: v.saved_at)

    def index(self) -> dict[str, list[Version]]:
        """Every path with its saved versions, oldest first."""
        return self._load()

    # -- restoring ---------------------------------------------------------------------------

    def restore(self, path: str, sha: str | None = None) -> Version:
        """Put a saved version of ``path`` back (the newest, or the one with digest ``sha``, a
        prefix is enough), with its mode, owner and group. What is there now is backed up first,
        so a restore can itself be undone."""
        versions = self.versions(path)
        if not versions:
            raise BackupError(f"{path}: no backup")
        if sha is None:
            version = versions[-1]
        else:
            wanted = sha.lower()
            if not wanted or not set(wanted) <= _HEX:
                raise BackupError(f"--hash {sha!r}: not a hexadecimal sha256")
            found = {v.sha256: v for v in versions if v.sha256.startswith(wanted)}
            if len(found) != 1:
                raise BackupError(
                    f"{path}: {'no' if not found else 'more than one'} backup with hash {sha}"
                    + (f"; known: {', '.join(v.sha256[:12] for v in versions)}" if versions else "")
                )
            (version,) = found.values()
        try:
            blob = self._blob(version.sha256)
            if not blob.exists():
                blob = self.upstream.blob(version.sha256)
            data = blob.read_bytes()
        except FileNotFoundError as e:
            raise BackupError(f"{path}: the content of {version.sha256[:12]} is gone") from e
        if hashlib.sha256(data).hexdigest() != version.sha256:
            raise BackupError(f"{path}: the content of {version.sha256[:12]} is damaged")
        self.save([(path, version.secret or any(v.secret for v in versions))])
        # Private until owned right: a chown clears setuid/setgid, so the mode comes last, and a
        # setuid file never exists owned by whoever runs the restore.
        write_atomic(path, data, mode=0o600)
        uid = _id(pwd.getpwnam, version.owner, version.uid)
        gid = _id(grp.getgrnam, version.group, version.gid)
        os.lchown(path, uid, gid)
        os.chmod(path, version.mode)
        return version

    # -- garbage collection ------------------------------------------------------------------

    def gc(self, max_age: float) -> int:
        """Drop versions saved more than ``max_age`` seconds ago and blobs no version refers to,
        and upstream's blobs older than that; the number of blobs removed."""
        removed = self.upstream.gc(max_age, self.clock())
        index = self._load()
        horizon = self.clock() - max_age
        kept = {p: [v for v in vs if v.saved_at >= horizon] for p, vs in index.items()}
        if kept != index:
            self._save(kept)
        live = {v.sha256 for vs in kept.values() for v in vs}
        blobs = self.dir / "blobs"
        if not blobs.is_dir():
            return removed
        for sub in blobs.iterdir():
            for blob in sub.iterdir():
                if blob.name not in live and not blob.name.startswith("."):
                    blob.unlink()
                    removed += 1
        return removed


def _id(lookup: Callable[[str], object], name: str, fallback: int) -> int:
    """The id of ``name`` on this host now (ids can change), else the one recorded."""
    if name:
        try:
            return int(lookup(name)[2])  # type: ignore[index]
        except KeyError:
            pass
    return fallback
