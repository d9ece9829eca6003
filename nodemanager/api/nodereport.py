"""The ManagedNode status, the contract between agent and controller: typed, parsed once (pure).

The agent writes its ``status.configsets[]`` entries from ``ConfigSetEntry.to_raw``,
``status.fencing`` from ``FencingStatus.to_raw`` and every
condition, its own and the controller's ``Ready=Unknown``, through ``set_condition``; readers
on both sides go through ``parse_report`` instead of string keys.

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
from typing import Any, NotRequired, TypedDict, cast

from nodemanager.api.fencing import REASONS
from nodemanager.api.nodestatus import MAX_CONFLICTS, MAX_ERROR, REVISION, TIMESTAMP, has_control


@dataclass(frozen=True)
class Problem:
    node: str
    field: str  # the path of the refused field, e.g. status.configsets[2].lastApplied


MAX_CONFLICT = 512  # the schema's bound on one conflict's text


class RawConfigSetEntry(TypedDict):
    """One ``status.configsets[]`` entry on the wire (crds/managednodes.yaml)."""

    name: str
    resourceVersion: str
    generation: int
    revision: NotRequired[str]
    lastApplied: NotRequired[str]
    error: str
    conflicts: NotRequired[list[str]]


@dataclass(frozen=True)
class ConfigSetEntry:
    """One ``status.configsets[]`` entry: what the node says it did for one ConfigSet."""

    name: str
    generation: int = 0
    revision: str | None = None
    error: str = ""
    last_applied: str | None = None  # the node's clock: shown, never used for fleet timing
    # The node's text: the controller counts them, never puts them in an operator's message.
    conflicts: tuple[str, ...] = ()
    resource_version: str = ""

    def to_raw(self) -> RawConfigSetEntry:
        """The entry as the agent writes it (keys in the order the status has always had)."""
        out: dict[str, Any] = {
            "name": self.name,
            "resourceVersion": self.resource_version,
            "generation": self.generation,
        }
        if self.last_applied:
            out["lastApplied"] = self.last_applied
        out["error"] = self.error
        if self.conflicts:
            out["conflicts"] = list(self.conflicts)
        if self.revision:
            out["revision"] = self.revision
        return cast(RawConfigSetEntry, out)


class RawFencingStatus(TypedDict):
    """``status.fencing`` on the wire (crds/managednodes.yaml)."""

    armed: bool
    reason: str
    deviceTimeoutSeconds: int


@dataclass(frozen=True)
class FencingStatus:
    """``status.fencing``: whether the node's watchdog is open (api/fencing.py)."""

    armed: bool
    reason: str = ""  # one of api.fencing.REASONS
    device_timeout_seconds: int = 0  # as the device reported it; 0 when unknown (a FIFO)

    def to_raw(self) -> RawFencingStatus:
        return {
            "armed": self.armed,
            "reason": self.reason,
            "deviceTimeoutSeconds": self.device_timeout_seconds,
        }


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
    fencing: FencingStatus | None = None

    @property
    def armed(self) -> bool:
        """The node says its watchdog is open. The controller fences only such a node (a host
        whose watchdog never armed is not reset: its pods must stay)."""
        return self.fencing is not None and self.fencing.armed

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
    for j, text in enumerate(conflicts):
        if not _text(text, MAX_CONFLICT):
            return None, f"{where}.conflicts[{j}]"
    version = raw.get("resourceVersion") or ""
    if not _text(version, 64):
        return None, f"{where}.resourceVersion"
    return ConfigSetEntry(
        raw["name"], generation, revision or None, error, applied, tuple(conflicts), version
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


def _fencing(raw: Any) -> FencingStatus | None:
    """Only a real boolean counts as armed; an odd reason or timeout reads as unknown."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("armed"), bool):
        return None
    reason, timeout = raw.get("reason"), raw.get("deviceTimeoutSeconds", 0)
    return FencingStatus(
        raw["armed"], reason if reason in REASONS else "", timeout if _int(timeout) else 0
    )


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
        _fencing(status.get("fencing")),
    )


def set_condition(
    conditions: Iterable[Mapping[str, Any]] | None,
    new: Mapping[str, Any],
    now: str,
    *,
    previous: Iterable[Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """apimachinery's SetStatusCondition: replace the condition of ``new``'s type (or append
    it), keeping its lastTransitionTime unless the status changes (then ``now``, or ``new``'s
    own time). The time carries over from ``previous`` when given: a status being built from
    parts carries each condition's time from the status last written."""
    prior = next(
        (
            c
            for c in (conditions if previous is None else previous) or ()
            if c.get("type") == new["type"]
        ),
        None,
    )
    if (
        prior is not None
        and prior.get("status") == new.get("status")
        and prior.get("lastTransitionTime")
    ):
        since = prior["lastTransitionTime"]
    else:
        since = new.get("lastTransitionTime") or now
    out: list[dict[str, Any]] = []
    placed = False
    for c in conditions or ():
        if c.get("type") != new["type"]:
            out.append(dict(c))
            continue
        placed = True
        out.append({**c, **new, "lastTransitionTime": since})
    if not placed:
        out.append({**new, "lastTransitionTime": since})
    return out
