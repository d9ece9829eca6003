"""What the controller says in Events on a ConfigSet or a NodePool (pure): rollout steps and
transitions of the conditions it writes.

Events come from *changes* the controller makes or observes in the status it writes, never from
a sync loop as such: a ConfigSet that stays Degraded gets one ``Degraded`` Event, not one a
second. Each Note carries a ``key``; the recorder (kube/recorder.py) keeps one Event per
(ConfigSet, reason, key) and counts repeats on it, as Kubernetes' event correlator does. So the
admissions of one revision are one ``NodesAdmitted`` Event whose count and message grow, not one
Event per node. Messages name nodes and revisions only, never file content or Secret values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodemanager.controller.conditions import by_type

NAMES_IN_MESSAGE = 10


@dataclass(frozen=True)
class Note:
    reason: str
    message: str
    key: str = ""  # Events with the same reason and key aggregate into one
    warning: bool = False


def names(nodes: Sequence[str]) -> str:
    shown = ", ".join(nodes[:NAMES_IN_MESSAGE])
    more = len(nodes) - NAMES_IN_MESSAGE
    return f"{shown} and {more} more" if more > 0 else shown


def not_ready(nodes: Sequence[str]) -> Note:
    """Matched nodes counted unavailable (and not admitted) because they are not Ready."""
    return Note(
        "NodesNotReady",
        f"{names(nodes)}: Ready is Unknown or MemoryPressure is True; counted unavailable "
        "and not admitted until they recover",
        key=",".join(nodes),
        warning=True,
    )


def invalid_status(node: str, field: str) -> Note:
    """A node wrote a status field the controller refuses; only its name and path are shown."""
    return Note(
        "InvalidNodeStatus",
        f"ManagedNode {node}: {field} is invalid; that entry is skipped until the node fixes it",
        key=field,
        warning=True,
    )


def started(revision: int, target: str, max_unavailable: int | str, paused: bool) -> Note:
    when = "paused: no node is admitted until resumed" if paused else "started"
    return Note(
        "RolloutStarted",
        f"rollout of revision {revision} ({target}), maxUnavailable {max_unavailable}: {when}",
        key=target,
    )


def admitted(revision: int, target: str, nodes: Sequence[str], total: int, done: int) -> Note:
    """Nodes admitted to a revision in one step; ``done`` of ``total`` admitted so far."""
    return Note(
        "NodesAdmitted",
        f"admitted {names(nodes)} to revision {revision} ({target}); "
        f"{done} of {total} nodes admitted",
        key=target,
    )


def undone(revision: int, target: str) -> Note:
    return Note(
        "RolloutUndone",
        f"earlier content is current again as revision {revision} ({target})",
        key=target,
    )


def _status(conditions: Mapping[str, Mapping[str, Any]], type_: str) -> str:
    return str((conditions.get(type_) or {}).get("status") or "")


def transitions(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Note]:
    """Notes for what changed between the status last written and the one just written."""
    old, new = by_type(before.get("conditions")), by_type(after.get("conditions"))
    revision = str(after.get("updateRevision") or "")
    return [
        *_degraded(old, new, revision),
        *_label_not_carried(old, new),
        *_paused(old, new, revision),
        *_complete(old, new, after, revision),
    ]


Conditions = Mapping[str, Mapping[str, Any]]


def _degraded(old: Conditions, new: Conditions, revision: str) -> list[Note]:
    degraded = new.get("Degraded") or {}
    if _status(new, "Degraded") == "True":
        # Again when more nodes fail: one Event per revision, its message naming them all.
        if _status(old, "Degraded") != "True" or (old.get("Degraded") or {}).get(
            "message"
        ) != degraded.get("message"):
            message = str(degraded.get("message") or "")
            return [Note("Degraded", message, key=revision, warning=True)]
        return []
    if _status(old, "Degraded") == "True" and _status(new, "Degraded") == "False":
        return [Note("Recovered", "no matched node reports a failure", key=revision)]
    return []


def _label_not_carried(old: Conditions, new: Conditions) -> list[Note]:
    matched = new.get("Matched") or {}
    if matched.get("reason") != "LabelNotCarried":
        return []
    if (old.get("Matched") or {}).get("message") == matched.get("message"):
        return []
    return [Note("LabelNotCarried", str(matched.get("message") or ""), warning=True)]


def _paused(old: Conditions, new: Conditions, revision: str) -> list[Note]:
    paused = new.get("Paused") or {}
    if _status(new, "Paused") == "True" and _status(old, "Paused") != "True":
        if paused.get("reason") == "RolloutFailed":
            message = str(paused.get("message") or "")
            return [Note("RolloutPausedOnFailure", message, key=revision, warning=True)]
        why = str(paused.get("message") or "spec.paused is set")
        return [Note("RolloutPaused", f"{why}: no node is admitted")]
    if _status(old, "Paused") == "True" and _status(new, "Paused") == "False":
        why = {
            "RolloutFailed": "no failure at the current revision",
            "PoolPaused": "the pool's spec.paused cleared",
        }.get(str((old.get("Paused") or {}).get("reason")), "spec.paused cleared")
        return [Note("RolloutResumed", f"{why}: admitting nodes again", key=revision)]
    return []


def _complete(
    old: Conditions, new: Conditions, after: Mapping[str, Any], revision: str
) -> list[Note]:
    progressing = new.get("Progressing") or {}
    if not (
        revision
        and _status(old, "Progressing") == "True"
        and _status(new, "Progressing") == "False"
        and progressing.get("reason") == "AllNodesReported"
        and not int(after.get("failed") or 0)
    ):
        return []
    message = (
        f"revision {after.get('revision')} ({revision}) on all "
        f"{after.get('matched', 0)} matched nodes"
    )
    return [Note("RolloutComplete", message, key=revision)]


def _changed(old: Mapping[str, Any], new: Mapping[str, Any], type_: str) -> bool:
    before, after = old.get(type_) or {}, new.get(type_) or {}
    return (before.get("status"), before.get("reason")) != (
        after.get("status"),
        after.get("reason"),
    )


def pool_transitions(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Note]:
    """Events on a NodePool for what its conditions now say that they did not (written
    status to written status): degraded and recovered, past its deadline, paused and resumed,
    updating and updated, and its membership's size."""
    old, new = by_type(before.get("conditions")), by_type(after.get("conditions"))
    notes = _pool_degraded(old, new)
    if old and _changed(old, new, "Updating"):
        notes += _pool_updating(old.get("Updating") or {}, new.get("Updating") or {})
    if _status(new, "Updated") == "True" and _status(old, "Updated") == "False":
        notes.append(Note("PoolUpdated", str((new.get("Updated") or {}).get("message") or "")))
    if before and before.get("nodes") != after.get("nodes"):
        size = f"{after.get('nodes', 0)} nodes (were {before.get('nodes', 0)})"
        notes.append(Note("MembersChanged", size))
    return notes


def _pool_degraded(
    old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]
) -> list[Note]:
    """Degraded said again whenever its message names more (one Event per reason)."""
    was, now = old.get("Degraded") or {}, new.get("Degraded") or {}
    if now.get("status") == "True":
        if _changed(old, new, "Degraded") or was.get("message") != now.get("message"):
            return [Note(str(now.get("reason")), str(now.get("message") or ""), warning=True)]
        return []
    if was.get("status") == "True" and now.get("status") == "False":
        return [Note("Recovered", "no node of the pool is degraded or held")]
    return []


def _pool_updating(was: Mapping[str, Any], now: Mapping[str, Any]) -> list[Note]:
    reason, message = str(now.get("reason") or ""), str(now.get("message") or "")
    if reason == "ProgressDeadlineExceeded":
        return [Note(reason, message, warning=True)]
    if reason == "Paused":
        return [Note("PoolPaused", f"{message}: nothing is admitted on its nodes")]
    if was.get("reason") == "Paused":
        return [Note("PoolResumed", f"spec.paused cleared: {message}")]
    if reason in ("NodesUpdating", "NodesWaiting"):
        return [Note(reason, message)]
    return []
