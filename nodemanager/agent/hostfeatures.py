"""What the agent does for the host beside ConfigSets, wired into each reconcile by two hooks:

- ``before_change``: the executor calls it before native writes or Ansible touch a file. It
  takes the Leases of the lock groups whose services this change may restart, held until
  ``after_run`` (``agent/grouplocks.py``), then backs up every file a task is about to replace
  or remove (other content, absent, a directory or symlink in its place; ``host/backups.py``).
- ``status``: the status fields these features own: ``wireGuard`` with the keypair of
  ``spec.wireGuard`` (``host/wgkeys.py``) and ``fileBackups``; backups older than
  ``--backup-max-age`` are collected with each drift check.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodemanager.agent.grouplocks import GroupLocks, groups_to_lock
from nodemanager.api import File
from nodemanager.api.nodereport import set_condition
from nodemanager.desired.templates import Rendered
from nodemanager.fsutil import write_atomic
from nodemanager.host.backups import BackupStore, Version
from nodemanager.host.wgkeys import KeyStore, WireGuardKeyError, with_managed_key
from nodemanager.playbook.build import Plan

if TYPE_CHECKING:  # the upgrader brings the kubernetes client: `apply -f` needs neither
    from nodemanager.agent.upgrade import Upgrader

log = logging.getLogger(__name__)
STATUS_BACKUPS_MAX = 256  # newest entries in status.fileBackups; every backup stays on disk
STATUS_BACKUPS_KEPT_MAX = 512  # with the entries read back (upstream's records) kept beside ours


def backups_status(
    index: Mapping[str, Sequence[Version]], prior: object, secret: Iterable[str] = ()
) -> dict[str, str | None]:
    """``status.fileBackups`` in upstream's shape: path -> sha256 of the newest version.

    Upstream merges into the map and never prunes it, so entries read back from the stored
    status (``prior``: upstream's records, which name blobs in its filebucket) are kept, not
    overwritten: ours win for the same path, then the others fill up to a bound. A path whose
    newest backup was fed by a Secret is never listed, and an entry read back for it is removed
    (``None`` in the merge patch): a digest of a short secret is the secret. So is one for a
    path declared Secret-fed now (``secret``), which upstream listed like any other."""
    newest = sorted(
        ((p, v[-1]) for p, v in index.items() if v and not v[-1].secret),
        key=lambda e: e[1].saved_at,
        reverse=True,
    )[:STATUS_BACKUPS_MAX]
    out: dict[str, str | None] = {p: v.sha256 for p, v in sorted(newest) if p not in secret}
    secret = {p for p, v in index.items() if v and v[-1].secret} | set(secret)
    stored = prior if isinstance(prior, Mapping) else {}  # our earlier list shape: ours anyway
    for path in sorted(stored):
        if path in out:
            continue
        keep = path not in secret and isinstance(stored[path], str)
        out[path] = stored[path] if keep and len(out) < STATUS_BACKUPS_KEPT_MAX else None
    return out


SECRET_FED_MAX = 4096  # paths remembered; a fleet's Secret-fed files are far fewer


class SecretFed:
    """Every path declared Secret-fed in some pass, kept under the state dir.

    A file made ``ensure: absent`` (or given plain content) is no longer Secret-fed in the plan
    that removes it, yet what it held came from a Secret: its backup is marked secret and its
    digest never reaches ``status.fileBackups`` (issue 37: it did)."""

    def __init__(self, state_dir: str):
        self.file = Path(state_dir) / "secret-fed-paths.json"
        try:
            loaded = json.loads(self.file.read_text())
            self.paths = {p for p in loaded if isinstance(p, str)}
        except (OSError, ValueError, TypeError):
            self.paths = set()

    def add(self, paths: Iterable[str]) -> None:
        new = set(paths) - self.paths
        if not new:
            return
        self.paths = set(sorted(self.paths | new)[-SECRET_FED_MAX:])
        try:
            write_atomic(self.file, json.dumps(sorted(self.paths)).encode(), mode=0o600)
        except OSError as e:  # remembered in memory still
            log.warning("cannot write %s: %s", self.file, e)


def _replaces(f: File, contents: Mapping[str, Rendered]) -> bool:
    """Whether applying ``f`` would overwrite or remove the regular file now at its path."""
    try:
        if not stat.S_ISREG(os.lstat(f.path).st_mode):
            return False
    except OSError:
        return False
    if f.ensure != "file":
        return True  # absent, or a directory or symlink where the file is
    if f.create_only:
        return False
    if f.content is not None:
        want: str | None = f.content
    else:
        rendered = contents.get(f.path) if f.template is not None else None
        want = rendered.text if rendered else None
    if want is None:
        return False  # attributes only: the bytes stay
    try:
        return Path(f.path).read_bytes() != want.encode()
    except OSError:
        return False


PURGE_MODULE = "nodemanager.core.purge"


def _purged(directory: str, keep: Sequence[str]) -> list[str]:
    """What ``nodemanager.core.purge`` will remove from ``directory``: every entry directly in
    it that is not a directory and not kept (the module's rule; only regular files have content
    to back up, the store skips the rest)."""
    kept = {os.path.normpath(p) for p in keep}
    try:
        with os.scandir(directory) as entries:
            return sorted(
                e.path
                for e in entries
                if not e.is_dir(follow_symlinks=False) and e.path not in kept
            )
    except OSError:  # missing: the module removes nothing there either
        return []


class HostFeatures:
    def __init__(
        self,
        state_dir: str,
        *,
        backup_max_age: float | None = None,
        filebucket: str | None = None,
        locks: GroupLocks | None = None,
        upgrader: Upgrader | None = None,
        adopt_key: Callable[[str], str | None] | None = None,
    ):
        self.upgrader = upgrader  # spec.upgrade: status.lastUpgrade, the Upgrading condition
        self.locks = locks  # services[].lock_group; None without a cluster
        self.backups = BackupStore(state_dir, filebucket=filebucket)
        self.secret_fed = SecretFed(state_dir)
        self.keys = KeyStore(state_dir, adopt_key)
        self.backup_max_age = backup_max_age
        self.problem: str | None = None  # the last WireGuard error, reported once per change

    def before_change(
        self, plan: Plan, contents: Mapping[str, Rendered]
    ) -> Callable[[list[str]], None]:
        files: dict[str, object] = {r.id: r.spec for r in plan.desired.of_kind("file")}
        keeps = {s.path: s.keep for s in plan.steps if s.module == PURGE_MODULE}

        def backup(resources: list[str]) -> None:
            if self.locks:
                self.locks.acquire(groups_to_lock(plan, resources))  # may wait, may raise
            due = []
            for rid in resources:
                f = files.get(rid)
                if isinstance(f, File) and _replaces(f, contents):
                    secret = (
                        f.uses_secrets
                        or bool(contents.get(f.path) and contents[f.path].secret)
                        or f.path in self.secret_fed.paths  # was Secret-fed: made absent now
                    )
                    due.append((f.path, secret))
                elif isinstance(f, File) and f.purge and f.path in keeps:
                    for doomed in _purged(f.path, keeps[f.path]):
                        log.info("purge of %s removes %s (backed up first)", f.path, doomed)
                        due.append((doomed, False))
            try:
                saved = self.backups.save(due)
            except OSError as e:  # a full disk must not stop the host from converging
                log.warning("file backup failed: %s", e)
                return
            if saved:
                log.info("backed up %s", ", ".join(sorted(saved)))

        return backup

    def after_run(self) -> None:
        """The run is over (restarts included): give the group Leases back."""
        if self.locks:
            self.locks.release()

    def status(
        self,
        node: Mapping[str, Any],
        observed: Mapping[str, Any],
        *,
        full: bool,
        secret: Iterable[str] = (),
    ) -> tuple[dict[str, Any], tuple[str, str, bool] | None]:
        """``observed`` with the fields these features own; an Event when WireGuard broke anew."""
        if full and self.backup_max_age:
            try:
                removed = self.backups.gc(self.backup_max_age)
                if removed:
                    log.info("removed %d file backups older than --backup-max-age", removed)
            except OSError as e:
                log.warning("file backup garbage collection failed: %s", e)
        out = dict(observed)
        if self.upgrader:
            self.upgrader.adopt(node)  # before the status could drop upstream's marker
            out.update(self.upgrader.status())
        self.secret_fed.add(secret)
        try:
            prior = (node.get("status") or {}).get("fileBackups")
            hidden = self.secret_fed.paths
            out["fileBackups"] = backups_status(self.backups.index(), prior, hidden)
        except (OSError, ValueError) as e:
            log.warning("cannot read file backups: %s", e)
        wg = (node.get("spec") or {}).get("wireGuard") or {}
        event = None
        if wg.get("enabled"):
            interface = str(wg.get("interface") or "wg0")
            try:
                public = self.keys.public_key(interface)
                out["wireGuard"] = with_managed_key(
                    list(observed.get("wireGuard") or []), interface, public
                )
                self.problem = None
            except WireGuardKeyError as e:
                message = f"spec.wireGuard: {e}"
                if message != self.problem:
                    log.warning("%s", message)
                    event = ("WireGuardKeyFailed", message, True)
                self.problem = message
        return out, event

    def finish(
        self, status: dict[str, Any], previous: Mapping[str, Any], now: str
    ) -> dict[str, Any]:
        """``status`` with the conditions these features own (Upgrading)."""
        if not self.upgrader:
            return status
        upgrading = self.upgrader.condition(int(status.get("observedGeneration") or 0))
        conditions = set_condition(
            status.get("conditions"), upgrading, now, previous=previous.get("conditions")
        )
        return {**status, "conditions": conditions}
