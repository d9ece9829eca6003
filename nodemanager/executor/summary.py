"""Per-ConfigSet summary of a run: counts, failures (with the module's message) and conflicts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from nodemanager.desired.merge import DesiredState
from nodemanager.executor.events import TaskResult

_RANK = {"skipped": 0, "ok": 1, "changed": 2, "failed": 3}


@dataclass
class ConfigSetSummary:
    name: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (resource id, message)
    conflicts: list[str] = field(default_factory=list)

    @property
    def error(self) -> str:
        parts = [f"{res}: {msg}" for res, msg in self.failures]
        parts += [f"{res}: conflicting declarations" for res in self.conflicts]
        return "; ".join(parts)


def resource_outcomes(results: list[TaskResult] | tuple[TaskResult, ...]) -> dict[str, TaskResult]:
    """The worst outcome per resource (a resource may take several tasks and handlers)."""
    worst: dict[str, TaskResult] = {}
    for r in results:
        if r.resource not in worst or _RANK[r.status] > _RANK[worst[r.resource].status]:
            worst[r.resource] = r
    return worst


def summarize(
    desired: DesiredState,
    results: list[TaskResult] | tuple[TaskResult, ...],
    errors: Mapping[str, str] | None = None,
) -> dict[str, ConfigSetSummary]:
    """Per-ConfigSet counts; ``errors`` (resource id -> message) are resources that could not be
    planned or rendered, counted as failed for the ConfigSets declaring them."""
    summaries = {
        cs.name: ConfigSetSummary(cs.name, conflicts=desired.conflicts_of(cs.name))
        for cs in desired.configsets
    }
    owners = {r.id: r.configsets for r in desired.resources}
    for resource, message in (errors or {}).items():
        for name in owners.get(resource, ()):
            summaries[name].failed += 1
            summaries[name].failures.append((resource, message))
    for resource, outcome in resource_outcomes(results).items():
        for name in outcome.configsets:
            s = summaries.setdefault(name, ConfigSetSummary(name))
            setattr(s, outcome.status, getattr(s, outcome.status) + 1)
            if outcome.status == "failed":
                s.failures.append((resource, outcome.message or "failed"))
    return summaries
