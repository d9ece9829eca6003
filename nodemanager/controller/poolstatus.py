"""A NodePool's status (pure): counts, names and the Updated, Updating and Degraded conditions.

``kubectl wait --for=condition=Updated nodepool/x`` is the operator's question: every node of
the pool runs every ConfigSet that selects it at its current revision or generation, nothing is
being disrupted, and no node is in two pools.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodemanager.api.pool import NodePool
from nodemanager.controller.conditions import by_type, condition
from nodemanager.controller.events import names
from nodemanager.controller.pools import Budget, Member, Target, updated

NAMES = 10


@dataclass(frozen=True)
class PoolCounts:
    nodes: list[str]
    ready: list[str]
    updated: list[str]
    updating: list[str]
    unavailable: list[str]
    degraded: list[str]
    disruptions: list[str]
    conflicting: list[str]
    why: Mapping[str, str] = field(default_factory=dict)  # disrupted node -> why (pools.py)


def counts(
    pool: NodePool,
    nodes: Sequence[Member],
    budget: Budget,
    why: Mapping[str, str],
    targets: Sequence[Target],
) -> PoolCounts:
    mine = sorted(
        (n for n in nodes if budget.member.get(n.name) == pool.name), key=lambda n: n.name
    )
    degraded = _names(mine, _degraded)
    return PoolCounts(
        nodes=[n.name for n in mine],
        ready=_names(mine, _ready),
        updated=_names(mine, lambda n: n.name not in why and updated(n, targets)),
        updating=_names(mine, lambda n: _updating(n, why, degraded)),
        unavailable=sorted(n for n in budget.busy.get(pool.name, set()) if n in why),
        degraded=degraded,
        disruptions=_names(mine, _granted),
        conflicting=sorted(n for n, pools in budget.conflicts.items() if pool.name in pools),
        why={n.name: why[n.name] for n in mine if n.name in why},
    )


def _names(nodes: Sequence[Member], test: Callable[[Member], bool]) -> list[str]:
    return [n.name for n in nodes if test(n)]


def _degraded(node: Member) -> bool:
    return node.report.condition("Degraded") == "True"


def _ready(node: Member) -> bool:
    return node.report.condition("Ready") == "True"


def _granted(node: Member) -> bool:
    """Holds a slot granted for an OS upgrade or a lock_group restart."""
    return bool(node.granted) and node.granted == node.request


def _updating(node: Member, why: Mapping[str, str], degraded: Sequence[str]) -> bool:
    """Being changed now: disrupted, live and not degraded."""
    return node.name in why and not node.down and node.name not in degraded


def waiting_for(c: PoolCounts) -> str:
    """The nodes not updated, each with why (held by two pools, not ready, which ConfigSet
    changes it, or waiting for a slot), the first ten."""
    held = [f"{n} (selected by two pools)" for n in c.conflicting]
    rest = [f"{n} ({c.why.get(n) or 'waiting for a slot'})" for n in c.nodes if n not in c.updated]
    return names(rest + held)


def pool_status(
    raw: Mapping[str, Any],
    pool: NodePool,
    c: PoolCounts,
    limit: int,
    now: str,
    stalled: str = "",
    invalid: str | None = None,
) -> dict[str, Any]:
    """The status the controller wants for one NodePool; ``stalled`` names the nodes waited
    for past progressDeadlineSeconds; ``invalid`` the pool's bad fields (Degraded, InvalidSpec:
    it selects nothing)."""
    previous = by_type((raw.get("status") or {}).get("conditions"))
    total, done = len(c.nodes), len(c.updated)
    is_updated = done == total and not c.unavailable and not c.conflicting
    summary = f"{done} of {total} nodes updated"
    if not is_updated:
        summary += f"; waiting for {waiting_for(c)}"
    updating = _updating_condition(pool, c, is_updated, summary, stalled)
    problems = []
    if invalid:
        held = "its defaults hold" if pool.is_default else "it selects no node"
        problems.append(f"invalid spec, {held}: {invalid}")
    if c.degraded:
        problems.append(f"degraded: {names(c.degraded)}")
    if c.conflicting:
        problems.append(f"selected by two pools (held): {names(c.conflicting)}")
    gen = pool.generation
    return {
        "observedGeneration": gen,
        "nodes": total,
        "ready": len(c.ready),
        "updated": done,
        "updating": len(c.updating),
        "unavailable": len(c.unavailable),
        "degraded": len(c.degraded),
        "maxUnavailable": limit,
        "unavailableNodes": c.unavailable[:NAMES],
        "disruptions": c.disruptions[:NAMES],
        "conflictingNodes": c.conflicting[:NAMES],
        "conditions": [
            condition(
                previous,
                "Updated",
                is_updated,
                "AllNodesUpdated" if is_updated else "NodesNotUpdated",
                summary,
                gen,
                now,
            ),
            condition(previous, "Updating", updating[0], updating[1], updating[2], gen, now),
            condition(
                previous,
                "Degraded",
                bool(problems),
                _degraded_reason(invalid, c) if problems else "AsExpected",
                "; ".join(problems),
                gen,
                now,
            ),
        ],
    }


def _updating_condition(
    pool: NodePool, c: PoolCounts, is_updated: bool, summary: str, stalled: str
) -> tuple[str, str, str]:
    """Updating is True exactly while some node is being changed (the UPDATING column's
    count): nodes that only wait (a paused pool, two pools, not ready) are named, not counted."""
    changing = "True" if c.updating else "False"
    if is_updated:
        return "False", "AllNodesUpdated", summary
    if pool.paused:
        return "False", "Paused", f"spec.paused is set; {summary}"
    if stalled:
        return changing, "ProgressDeadlineExceeded", stalled
    return changing, "NodesUpdating" if c.updating else "NodesWaiting", summary


def _degraded_reason(invalid: str | None, c: PoolCounts) -> str:
    if invalid:
        return "InvalidSpec"
    return "NodesInTwoPools" if c.conflicting else "NodesDegraded"
