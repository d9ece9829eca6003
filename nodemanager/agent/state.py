"""What was last applied, kept on disk under --state-dir.

Two things survive a restart: the inputs of the last reconcile that ran (ConfigSets, node,
Secrets, ConfigMaps, nodes), so an agent started while the API server is unreachable keeps
enforcing them; and a digest per resource that last applied cleanly, so only what changed runs.
The directory is 0700 and the file 0600 (the inputs may hold Secret data), written atomically.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path

from nodemanager.agent.sources import Snapshot as Snapshot  # where it lived before
from nodemanager.fsutil import write_atomic

log = logging.getLogger(__name__)


@dataclass
class Applied:
    digests: dict[str, str] = field(
        default_factory=dict
    )  # resource id -> digest of what applied cleanly
    snapshot: Snapshot | None = None
    applied_at: dict[str, str] = field(
        default_factory=dict
    )  # ConfigSet name@resourceVersion -> RFC 3339


class StateStore:
    def __init__(self, directory: str):
        self.dir = Path(directory)
        self.path = self.dir / "last-applied.json"
        self._saved: bytes | None = None
        self._saved_for: tuple[Hashable, dict[str, str], dict[str, str]] | None = None

    def load(self) -> Applied:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return Applied()
        except (OSError, ValueError) as e:
            log.warning("ignoring unreadable state %s: %s", self.path, e)
            return Applied()
        snap = raw.get("snapshot")
        return Applied(
            raw.get("digests", {}), Snapshot(**snap) if snap else None, raw.get("appliedAt", {})
        )

    def save(self, applied: Applied, *, inputs: Hashable = None) -> None:
        """Write ``applied`` when it changed. ``inputs`` (the plan's key) lets an idle reconcile
        skip even serialising it: equal inputs and digests mean an equal plan to re-enforce.
        The reconciler replaces ``digests`` (never edits it in place) when a run changes it, so
        the same dict object means the same digests."""
        marker = (inputs, applied.digests, dict(applied.applied_at))
        last = self._saved_for
        if inputs is not None and last and last[0] == inputs and last[1] is marker[1]:
            if last[2] == marker[2]:
                return
        snap = applied.snapshot.__dict__ if applied.snapshot else None
        data = json.dumps(
            {"digests": applied.digests, "appliedAt": applied.applied_at, "snapshot": snap},
            sort_keys=True,
        ).encode()
        if data != self._saved:  # nothing changed: no disk write on the idle path
            self.dir.mkdir(parents=True, exist_ok=True)
            os.chmod(self.dir, 0o700)
            write_atomic(self.path, data, mode=0o600)
            self._saved = data
        self._saved_for = marker
