"""One result per ConfigSet: counts, failures (with the field and the module's message), conflicts.

The same type serves the CLI's summary lines and the agent's ``status.configsets[]`` entries, so
a run's outcome is turned into words once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nodemanager.desired.merge import DesiredState
from nodemanager.executor.events import TaskResult, TaskStatus

_RANK: dict[TaskStatus, int] = {"skipped": 0, "ok": 1, "changed": 2, "failed": 3}


@dataclass(frozen=True)
class Failure:
    resource: str  # a ResourceId ("file:/etc/x"), or "" for a failure of the whole run
    message: str  # names the field path when the failure is the ConfigSet's own (templates)

    def __str__(self) -> str:
        return f"{self.resource}: {self.message}" if self.resource else self.message


@dataclass
class ConfigSetResult:
    name: str
    resource_version: str = ""
    generation: int = 0
    ok: int = 0
    changed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[Failure] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)  # ResourceIds declared differently
    last_applied: str | None = None  # RFC 3339, the agent fills it in

    @property
    def errors(self) -> list[str]:
        return [str(f) for f in self.failures]

    @property
    def error(self) -> str:
        return "; ".join(self.errors)

    def count(self, status: TaskStatus) -> None:
        setattr(self, status, getattr(self, status) + 1)


def resource_outcomes(results: Sequence[TaskResult]) -> dict[str, TaskResult]:
    """The worst outcome per resource (a resource may take several tasks and handlers)."""
    worst: dict[str, TaskResult] = {}
    for r in results:
        if r.resource not in worst or _RANK[r.status] > _RANK[worst[r.resource].status]:
            worst[r.resource] = r
    return worst


def summarize(
    desired: DesiredState,
    results: Sequence[TaskResult],
    errors: Mapping[str, str] | None = None,
) -> dict[str, ConfigSetResult]:
    """Per-ConfigSet results; ``errors`` (resource id -> message) are resources that could not be
    planned or rendered, counted as failed for the ConfigSets declaring them."""
    out = {
        cs.name: ConfigSetResult(
            cs.name,
            cs.resource_version,
            cs.generation,
            conflicts=list(desired.conflicts_of(cs.name)),
        )
        for cs in desired.configsets
    }
    if errors:
        owners: dict[str, tuple[str, ...]] = {r.id: r.configsets for r in desired.resources}
        for resource, message in errors.items():
            for name in owners.get(resource, ()):
                out[name].count("failed")
                out[name].failures.append(Failure(resource, message))
    for resource, outcome in resource_outcomes(results).items():
        for name in outcome.configsets:
            s = out.setdefault(name, ConfigSetResult(name))
            s.count(outcome.status)
            if outcome.status == "failed":
                s.failures.append(Failure(resource, outcome.message or "failed"))
    return out
