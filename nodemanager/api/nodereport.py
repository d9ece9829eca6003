"""The ManagedNode status as the controller reads it: typed, parsed once, untrusted (pure).

A node writes its own status, so every field is input from that node. ``parse_report`` turns
the raw object into frozen dataclasses and collects, per bad field, a ``Problem`` naming the
node and the field's path; a bad ``status.configsets[]`` entry is dropped (the node counts as
not having reported that ConfigSet), the rest of the node stays. The controller turns each
problem into a Warning Event and goes on with every other node. The string rules are
nodestatus.py's (the CRD schema's): a ControllerRevision name, an RFC 3339 time as Kubernetes
writes it, no control character, bounded lengths.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodemanager.api.nodestatus import MAX_CONFLICTS, MAX_ERROR, REVISION, TIMESTAMP, has_control


@dataclass(frozen=True)
class Problem:
    node: str
    field: str  # the path of the refused field, e.g. status.configsets[2].lastApplied


@dataclass(frozen=True)
class ConfigSetEntry:
    """One ``status.configsets[]`` entry: what the node says it did for one ConfigSet."""

    name: str
    generation: int = 0
    revision: str | None = None
    error: str = ""
    last_applied: str | None = None  # the node's clock: shown, never used for fleet timing
    conflicts: int = 0  # only the count: the text is the node's, never an operator's message


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str = ""


@dataclass(frozen=True)
class NodeReport:
    name: str
    labels: Mapping[str, str]
    entries: Mapping[str, ConfigSetEntry]
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    problems: tuple[Problem, ...] = field(default=())

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> NodeReport:
        return parse_report(raw)

    def condition(self, type_: str) -> str:
        """The status of one condition ("True", "False", "Unknown"), "" when absent."""
        found = self.conditions.get(type_)
        return found.status if found else ""


def _text(value: Any, limit: int) -> bool:
    return isinstance(value, str) and len(value) <= limit and not has_control(value)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _entry(raw: Any, where: str) -> tuple[ConfigSetEntry | None, str]:
    """One entry, or None and the path of its first bad field."""
    if not isinstance(raw, Mapping) or not _text(raw.get("name"), 253) or not raw.get("name"):
        return None, f"{where}.name"
    generation = raw.get("generation", 0)
    if not _int(generation):
        return None, f"{where}.generation"
    revision = raw.get("revision")
    if revision is not None and not (isinstance(revision, str) and REVISION.match(revision)):
        return None, f"{where}.revision"
    applied = raw.get("lastApplied")
    if applied is not None and not (isinstance(applied, str) and TIMESTAMP.match(applied)):
        return None, f"{where}.lastApplied"
    error = raw.get("error") or ""
    if not _text(error, MAX_ERROR):
        return None, f"{where}.error"
    conflicts = raw.get("conflicts") or []
    if not isinstance(conflicts, list) or len(conflicts) > MAX_CONFLICTS:
        return None, f"{where}.conflicts"
    return ConfigSetEntry(
        raw["name"], generation, revision or None, error, applied, len(conflicts)
    ), ""


def _conditions(raw: Any) -> dict[str, Condition]:
    out = {}
    for c in raw if isinstance(raw, list) else ():
        if isinstance(c, Mapping) and isinstance(c.get("type"), str):
            status = c.get("status")
            reason = c.get("reason")
            out[c["type"]] = Condition(
                c["type"],
                status if status in ("True", "False", "Unknown") else "Unknown",
                reason if isinstance(reason, str) and _text(reason, 1024) else "",
            )
    return out


def parse_report(raw: Mapping[str, Any]) -> NodeReport:
    meta = raw.get("metadata") or {}
    name = str(meta.get("name", ""))
    status = raw.get("status") or {}
    status = status if isinstance(status, Mapping) else {}
    problems: list[Problem] = []
    entries: dict[str, ConfigSetEntry] = {}
    listed = status.get("configsets") or []
    if not isinstance(listed, list):
        problems.append(Problem(name, "status.configsets"))
        listed = []
    for i, item in enumerate(listed):
        entry, bad = _entry(item, f"status.configsets[{i}]")
        if entry is None:
            problems.append(Problem(name, bad))
        else:
            entries[entry.name] = entry
    return NodeReport(
        name,
        meta.get("labels") or {},
        entries,
        _conditions(status.get("conditions")),
        tuple(problems),
    )


def set_condition(
    conditions: Iterable[Mapping[str, Any]] | None, new: Mapping[str, Any], now: str
) -> list[dict[str, Any]]:
    """apimachinery's SetStatusCondition: replace the condition of ``new``'s type, keeping its
    lastTransitionTime unless the status changes (then ``now``, or ``new``'s own time)."""
    out: list[dict[str, Any]] = []
    placed = False
    for c in conditions or ():
        if c.get("type") != new["type"]:
            out.append(dict(c))
            continue
        placed = True
        merged = {**c, **new}
        if c.get("status") == new.get("status") and c.get("lastTransitionTime"):
            merged["lastTransitionTime"] = c["lastTransitionTime"]
        else:
            merged["lastTransitionTime"] = new.get("lastTransitionTime") or now
        out.append(merged)
    if not placed:
        out.append({**new, "lastTransitionTime": new.get("lastTransitionTime") or now})
    return out
