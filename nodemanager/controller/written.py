"""The status writes a controller remembers between syncs, and the one rule for trusting them.

The informer cache lags behind our own writes: compared against the cache alone, a status just
written would be written again at the next sync. So a reconcile compares against the status it
wrote, but only while the cache still shows the object at the resourceVersion that write was
computed from. Any other version is the truth: our write arriving, a spec edit, a relist,
another writer, the object deleted and re-created under the same name. Trusting the memory past
that would compare against a status the server no longer holds (or never held) and skip a
needed write for as long as nothing else changes. Only writes the server took are remembered
(a write skipped on 404 or failed is not). ConfigSet and NodePool status share this rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nodemanager.controller.effects import Effect, Write
from nodemanager.controller.summary import differs


@dataclass
class StatusWrites:
    """Status writes by object name; ``METHOD`` is the Fleet method that writes the status."""

    METHOD: ClassVar[str]
    # name -> (status written, the object's resourceVersion it was computed from)
    written: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    written_at: dict[str, float] = field(default_factory=dict)  # monotonic

    def applied(
        self, name: str, done: Sequence[Effect], mono: float, resource_version: str
    ) -> None:
        """Remember the status write in ``done`` (the effects the server took), computed from
        the object at ``resource_version``."""
        for effect in done:
            if isinstance(effect, Write) and effect.method == self.METHOD:
                self.written[name] = (effect.args[1], resource_version)
                self.written_at[name] = mono

    def base(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The status to compare a wanted one against: ours while the cache shows the version
        it was computed from and not yet our write, else the cache's."""
        meta = raw["metadata"]
        cached: dict[str, Any] = raw.get("status") or {}
        ours = self.written.get(meta["name"])
        if ours is None:
            return cached
        status, version = ours
        if version != str(meta.get("resourceVersion", "")) or not differs(status, cached):
            del self.written[meta["name"]]
            return cached
        return status

    def since(self, name: str, mono: float) -> float:
        """Seconds since this object's status was last written (progress writes are spaced)."""
        return mono - self.written_at.get(name, float("-inf"))
