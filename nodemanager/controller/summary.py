"""A ConfigSet's status, summarised from the ManagedNodes it selects (pure; the MCO pattern).

A node is *matched* when the ConfigSet's selector matches its labels. It is *updated* when its
agent reports this ConfigSet at the current generation without an error, *failed* when it
reports the current generation with an error, and *pending* otherwise (not reported yet, or an
older generation). Agents report ``generation`` rather than ``resourceVersion`` here on purpose:
the controller's own status writes change the resourceVersion but not the generation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodemanager.api.nodereport import NodeReport
from nodemanager.controller.conditions import by_type, condition
from nodemanager.controller.events import names
from nodemanager.desired.select import explain, matches, missing_values, selector_only

FAILED_NAMES_LIMIT = 10


NodeView = NodeReport  # what the controller needs of one ManagedNode, parsed once


@dataclass(frozen=True)
class Counts:
    matched: list[str]
    updated: list[str]
    failed: list[str]
    pending: list[str]
    conflicts: list[str]  # names of nodes reporting conflicting declarations


def count(raw: Mapping[str, Any], nodes: Sequence[NodeView]) -> Counts:
    meta = raw.get("metadata") or {}
    name, generation = meta.get("name", ""), int(meta.get("generation") or 0)
    selector = selector_only(raw)
    matched: list[str] = []
    updated: list[str] = []
    failed: list[str] = []
    pending: list[str] = []
    conflicts: set[str] = set()
    for node in nodes:
        if selector is None or not matches(selector, node.labels):
            continue
        matched.append(node.name)
        entry = node.entries.get(name)
        current = entry is not None and entry.generation >= generation
        if entry is not None and current and entry.error:
            failed.append(node.name)
        elif current:
            updated.append(node.name)
        else:
            pending.append(node.name)
        if entry is not None and entry.conflicts:
            conflicts.add(node.name)
    return Counts(sorted(matched), updated, sorted(failed), pending, sorted(conflicts))


def configset_status(
    raw: Mapping[str, Any],
    nodes: Sequence[NodeView],
    *,
    now: str,
    extra: Mapping[str, Any] | None = None,
    counts: Counts | None = None,
    halted: str = "",
    held_by_pool: str = "",
    stalled: str = "",
    waits: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The status the controller wants for one ConfigSet.

    A staged rollout passes its own ``counts`` (by revision), ``extra`` fields and, when a
    failure stopped it, ``halted`` (the message of the Paused condition); when its nodes' pools
    are paused, ``held_by_pool``; past its progressDeadlineSeconds, ``stalled`` (the message
    of Progressing=False); ``waits``, why each pending node waits (named in the message)."""
    meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
    generation = int(meta.get("generation") or 0)
    previous = by_type((raw.get("status") or {}).get("conditions"))
    c = counts or count(raw, nodes)
    pause = _pause(halted, bool(spec.get("paused")), held_by_pool)
    paused = pause[0] != "NotPaused"
    progressing = ("False", *pause) if paused else _progressing(c, stalled, waits)
    wanted = [
        ("Matched", *_matched(raw, c, nodes)),
        ("Progressing", *progressing),
        ("Degraded", *_degraded(c)),
        ("Conflicted", *_conflicted(c)),
        ("Paused", "True" if paused else "False", *pause),
    ]
    conditions = [condition(previous, *w, generation, now) for w in wanted]
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "matched": len(c.matched),
        "updated": len(c.updated),
        "failed": len(c.failed),
        "pending": len(c.pending),
        "failedNodes": c.failed[:FAILED_NAMES_LIMIT],
        **(extra or {}),
        "conditions": conditions,
    }
    return status


def _matched(raw: Mapping[str, Any], c: Counts, nodes: Sequence[NodeView]) -> tuple[str, str, str]:
    if c.matched:
        return "True", "NodesMatched", f"{len(c.matched)} nodes match"
    selector = selector_only(raw)
    missing = [] if selector is None else missing_values(selector, [n.labels for n in nodes])
    if missing:
        return "False", "LabelNotCarried", explain(missing)
    return "False", "NoNodeMatches", "0 nodes match"


def _degraded(c: Counts) -> tuple[str, str, str]:
    if not c.failed:
        return "False", "AsExpected", ""
    shown = c.failed[:FAILED_NAMES_LIMIT]
    more = f" and {len(c.failed) - len(shown)} more" if len(c.failed) > len(shown) else ""
    return "True", "ApplyFailed", f"failed on {', '.join(shown)}{more}"


def _conflicted(c: Counts) -> tuple[str, str, str]:
    if not c.conflicts:
        return "False", "NoConflicts", ""
    # Counts and node names only: the conflicts' text is written by the nodes.
    shown = ", ".join(c.conflicts[:FAILED_NAMES_LIMIT])
    message = f"{len(c.conflicts)} nodes report conflicting declarations: {shown}"
    return "True", "ConflictingDeclarations", message


def _pause(halted: str, paused: bool, held_by_pool: str) -> tuple[str, str]:
    """(reason, message) of the Paused condition; reason NotPaused when it is not."""
    if halted:
        return "RolloutFailed", halted
    if paused:
        return "Paused", "spec.paused is set"
    if held_by_pool:
        return "PoolPaused", held_by_pool
    return "NotPaused", ""


def _progressing(c: Counts, stalled: str, waits: Mapping[str, str] | None) -> tuple[str, str, str]:
    """(status, reason, message) of Progressing while not paused."""
    if c.pending and stalled:
        return "False", "ProgressDeadlineExceeded", stalled
    if c.pending:
        pending = f"{len(c.pending)} of {len(c.matched)} nodes pending"
        return "True", "NodesUpdating", f"{pending}: {waiting(c.pending, waits)}"
    return "False", "AllNodesReported", f"{len(c.updated)} of {len(c.matched)} nodes updated"


def waiting(nodes: Sequence[str], waits: Mapping[str, str] | None) -> str:
    """Node names, each with why it waits when known ("n1 (not ready), n2"), the first ten."""
    why = waits or {}
    return names([f"{n} ({why[n]})" if why.get(n) else n for n in nodes])


def differs(wanted: Mapping[str, Any], current: Mapping[str, Any] | None) -> bool:
    """Whether writing ``wanted`` changes anything the controller owns in ``current``."""
    current = current or {}
    return any(current.get(k) != v for k, v in wanted.items())


def progress_only(wanted: Mapping[str, Any], current: Mapping[str, Any] | None) -> bool:
    """Whether ``wanted`` differs from ``current`` only in counts and messages of a rollout in
    progress: same generation, same condition statuses and reasons (no completion, no failure,
    no pause). Such a write may wait: every agent's ConfigSet watch receives each one."""
    current = current or {}
    if not current or current.get("observedGeneration") != wanted.get("observedGeneration"):
        return False
    if current.get("failedNodes") != wanted.get("failedNodes"):
        return False

    def shape(status: Mapping[str, Any]) -> list[tuple[Any, Any, Any]]:
        return [
            (c.get("type"), c.get("status"), c.get("reason"))
            for c in status.get("conditions") or []
        ]

    return shape(current) == shape(wanted)
