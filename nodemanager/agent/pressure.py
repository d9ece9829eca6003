"""Memory pressure: PSI samples to metrics, ``status.pressure`` and the ``MemoryPressure``
condition.

The condition is True while memory ``some`` avg10 (percent of the last 10 s in which at least
one task waited for memory) is at or above the threshold: ``spec.pressure.memoryThreshold`` of
the ManagedNode, else ``--memory-pressure-threshold``. avg10 reacts within seconds, before the
kernel's OOM killer or the kubelet's eviction acts on free memory alone. The fleet controller
reads exactly ``type: MemoryPressure, status: "True"``: such a node counts as unavailable and
is not admitted to a new ConfigSet revision.

Status values are rounded to whole percent so that ordinary jitter does not cause a status
write at every reconcile; the metrics carry the kernel's two decimals.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prometheus_client import Gauge

from nodemanager.api.nodereport import set_condition
from nodemanager.host.pressure import PROC_PRESSURE, Pressure, PressureError, read_pressure

CONDITION = "MemoryPressure"
DEFAULT_THRESHOLD = 10.0  # percent of memory some avg10


def threshold(spec: Mapping[str, Any], default: float) -> float:
    """The node's memory threshold: spec.pressure.memoryThreshold, else the flag's value."""
    value = (spec.get("pressure") or {}).get("memoryThreshold")
    return float(value) if isinstance(value, int | float) else default


def status_block(sample: Mapping[str, Pressure]) -> dict[str, Any]:
    """``status.pressure``: {resource: {some: {avg10, avg60, avg300}, full: ...}}, whole %."""
    block: dict[str, Any] = {}
    for name, p in sorted(sample.items()):
        entry = {"some": _rounded(p.some)}
        if p.full is not None:
            entry["full"] = _rounded(p.full)
        block[name] = entry
    return block


def _rounded(a: Any) -> dict[str, int]:
    return {"avg10": round(a.avg10), "avg60": round(a.avg60), "avg300": round(a.avg300)}


def condition(
    sample: Mapping[str, Pressure] | None,
    limit: float,
    previous: Mapping[str, Any],
    now: str,
) -> dict[str, Any]:
    """The MemoryPressure condition for ``sample`` (Unknown without PSI); the transition time
    carries over from ``previous`` (a status) while the state holds."""
    memory = (sample or {}).get("memory")
    if memory is None:
        state, reason, message = "Unknown", "NoPSI", "this kernel reports no /proc/pressure/memory"
    elif memory.some.avg10 >= limit:
        state, reason = "True", "MemoryStalled"
        message = f"memory some avg10 {memory.some.avg10:.2f}% >= threshold {limit:g}%"
    else:
        state, reason = "False", "MemoryAvailable"
        message = f"memory some avg10 {memory.some.avg10:.2f}% < threshold {limit:g}%"
    new = {"type": CONDITION, "status": state, "reason": reason, "message": message}
    return set_condition([], new, now, previous=previous.get("conditions"))[0]


class PressureMonitor:
    """Samples PSI; keeps the last sample and the gauges; says when the condition flipped."""

    def __init__(self, gauge: Gauge, node: str, directory: Path = PROC_PRESSURE) -> None:
        self.directory = directory
        self.node = node
        self.sample: dict[str, Pressure] | None = None
        self.error = ""
        self._lock = threading.Lock()
        self._gauge = gauge  # Metrics.pressure

    def poll(self) -> dict[str, Pressure] | None:
        """Read PSI once and update the gauges; a read error keeps the last sample."""
        try:
            sample = read_pressure(self.directory)
        except PressureError as e:
            self.error = str(e)
            return self.sample
        with self._lock:
            self.sample, self.error = sample, ""
        for name, p in (sample or {}).items():
            for kind, avg in (("some", p.some), ("full", p.full)):
                if avg is None:
                    continue
                for window, value in (("10s", avg.avg10), ("60s", avg.avg60), ("300s", avg.avg300)):
                    self._gauge.labels(self.node, name, kind, window).set(value)
        return sample

    def with_status(
        self, status: Mapping[str, Any], previous: Mapping[str, Any], limit: float, now: str
    ) -> dict[str, Any]:
        """``status`` with status.pressure and the MemoryPressure condition."""
        with self._lock:
            sample = self.sample
        new = condition(sample, limit, previous, now)
        out = {**status, "conditions": set_condition(status.get("conditions"), new, now)}
        if sample:
            out["pressure"] = status_block(sample)
        return out

    def memory_avg10(self) -> float | None:
        with self._lock:
            memory = (self.sample or {}).get("memory")
        return None if memory is None else memory.some.avg10

    def under_pressure(self, limit: float) -> bool:
        with self._lock:
            memory = (self.sample or {}).get("memory")
        return memory is not None and memory.some.avg10 >= limit
