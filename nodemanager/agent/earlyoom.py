"""Early OOM, opt-in per node (``spec.pressure.earlyOOM``): when memory some avg10 stays at or
above ``threshold`` for ``for``, evict one pod of the Kubernetes Node of this host's name
(``NodeDrainer.evict_lowest``: Eviction API, lowest priority first, PodDisruptionBudgets
honoured), then wait the same time again before the next. Host processes are never killed:
only the kubelet stops the evicted pod's containers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nodemanager.api import parse_duration

Evict = Callable[[], tuple[str, list[str]]]  # NodeDrainer.evict_lowest
Report = Callable[[str, str], None]  # (reason, message): a Warning Event on the ManagedNode


def settings(spec: Mapping[str, Any]) -> tuple[float, float] | None:
    """(threshold percent, seconds held) from spec.pressure.earlyOOM; None when off."""
    eo = (spec.get("pressure") or {}).get("earlyOOM") or {}
    if not eo.get("enabled"):
        return None
    return float(eo.get("threshold", 40)), parse_duration(str(eo.get("for", "30s")))


class EarlyOom:
    """Call ``tick`` at every PSI sample; it evicts when the pressure was held long enough."""

    def __init__(self, evict: Evict, report: Report) -> None:
        self.evict, self.report = evict, report
        self.since: float | None = None  # monotonic time the pressure rose past the threshold

    def tick(self, avg10: float | None, setting: tuple[float, float] | None, now: float) -> str:
        """The pod evicted now (``namespace/name``), or ""."""
        if setting is None or avg10 is None or avg10 < setting[0]:
            self.since = None
            return ""
        limit, hold = setting
        if self.since is None:
            self.since = now
        if now - self.since < hold:
            return ""
        self.since = now  # one at a time: the next only after another full hold
        evicted, blocked = self.evict()
        held = f"memory some avg10 {avg10:.2f}% >= {limit:g}% for {hold:g}s"
        if evicted:
            self.report("EarlyOOMEviction", f"evicted pod {evicted}: {held}")
        elif blocked:
            self.report(
                "EarlyOOMBlocked", f"{held}; PodDisruptionBudgets block: {', '.join(blocked)}"
            )
        return evicted
