"""Pools (pure): which pool each node is in, which nodes are disrupted, and the shared budget.

A node is *disrupted* (it takes a slot of its pool's budget) while any of these holds, whatever
caused it:

- it is not Ready (Unknown: its Lease lapsed) or under memory pressure: as MCO, a node that is
  not Ready is unavailable and is not changed;
- a staged ConfigSet admitted it to a revision it has not reported applied, or reported with an
  error, or (at the ConfigSet's target) applied less than minReadySeconds ago on the
  controller's clock (the larger of the ConfigSet's and the pool's);
- it holds a slot granted for an OS upgrade or a ``lock_group`` restart (``spec.disruptionGranted``
  names its ``status.disruption`` request).

Disruption is read from the nodes, not from the ConfigSets' plans, so every ConfigSet and every
request sees the same count in one sync whatever order they are handled in. ``Budget`` hands
out the free slots: a change on a node that is disrupted already costs none (a node being
changed by one ConfigSet may take another's change too, as MCO renders one config per node).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodemanager.api import ConfigSet
from nodemanager.api.fencing import POOL_FIELD as FENCING_FIELD
from nodemanager.api.nodereport import NodeReport
from nodemanager.api.pool import DEFAULT_POOL, NodePool
from nodemanager.controller import rollout
from nodemanager.desired.select import matches, selector_matches, selector_only

POOL_FIELD = "pool"
GRANT_FIELD = "disruptionGranted"
REQUEST_FIELD = "disruption"


@dataclass(frozen=True)
class Target:
    """What one ConfigSet asks of the nodes it selects."""

    name: str
    selector: ConfigSet | None
    revision: str | None  # staged: the target revision; None: applied at once
    generation: int
    min_ready: int

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Target:
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        settings = rollout.Rollout.of(spec)
        return cls(
            meta.get("name", ""),
            selector_only(raw),
            rollout.revision_name(meta.get("name", ""), spec) if settings else None,
            int(meta.get("generation") or 0),
            settings.min_ready_seconds if settings else 0,
        )

    def selects(self, labels: Mapping[str, str]) -> bool:
        return self.selector is not None and matches(self.selector, labels)


@dataclass(frozen=True)
class Member:
    """What pools need of one ManagedNode."""

    report: NodeReport
    pool: str | None  # spec.pool as written (None: never assigned)
    admitted: Mapping[str, str]
    ready_since: Mapping[str, tuple[str, str]]  # ConfigSet -> (revision, since)
    granted: str
    request: str  # the id of its status.disruption request, "" without one
    reason: str
    pool_fencing: Mapping[str, Any] | None = None  # spec.poolFencing as written

    @property
    def name(self) -> str:
        return self.report.name

    @property
    def down(self) -> bool:
        return rollout.down(self.report)

    @classmethod
    def of(cls, raw: Mapping[str, Any], report: NodeReport | None = None) -> Member:
        spec, status = raw.get("spec") or {}, raw.get("status") or {}
        since = {}
        for name, value in (spec.get(rollout.READY_FIELD) or {}).items():
            if isinstance(value, Mapping):
                since[name] = (str(value.get("revision") or ""), str(value.get("since") or ""))
        found = status.get(REQUEST_FIELD)
        request: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        return cls(
            report or NodeReport.from_dict(raw),
            str(spec[POOL_FIELD]) if isinstance(spec.get(POOL_FIELD), str) else None,
            {k: str(v) for k, v in (spec.get(rollout.REVISIONS_FIELD) or {}).items() if v},
            since,
            str(spec.get(GRANT_FIELD) or ""),
            str(request.get("id") or ""),
            str(request.get("reason") or ""),
            fencing if isinstance(fencing := spec.get(FENCING_FIELD), Mapping) else None,
        )


def assign(
    pools: Sequence[NodePool], nodes: Sequence[Member]
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(node -> its pool, node -> the pools selecting it when more than one)."""
    selecting = [(p.name, p.selector) for p in pools if not p.is_default and p.selector]
    member: dict[str, str] = {}
    conflicts: dict[str, list[str]] = {}
    for node in nodes:
        found = sorted(n for n, s in selecting if selector_matches(s, node.report.labels))
        if len(found) > 1:
            conflicts[node.name] = found
        else:
            member[node.name] = found[0] if found else DEFAULT_POOL
    return member, conflicts


def _ready_for(node: Member, target: Target, seconds: int, now: dt.datetime) -> bool:
    revision, since = node.ready_since.get(target.name, ("", ""))
    if revision != target.revision:
        return seconds <= 0
    return rollout._ready_since(since, now, seconds)  # noqa: SLF001 (one rule, one place)


def disruption(
    node: Member, targets: Sequence[Target], pool_min_ready: int, now: dt.datetime
) -> str | None:
    """Why ``node`` takes a slot of its pool now (a short reason), or None."""
    if node.down:
        return "not ready"
    if node.granted and node.granted == node.request:
        return node.reason or "disruption granted"
    for t in targets:
        admitted = node.admitted.get(t.name)
        if t.revision is None or admitted is None or not t.selects(node.report.labels):
            continue
        entry = node.report.entries.get(t.name)
        if entry is None or entry.revision != admitted or entry.error:
            return f"ConfigSet {t.name}"
        seconds = max(t.min_ready, pool_min_ready)
        if admitted == t.revision and not _ready_for(node, t, seconds, now):
            return f"ConfigSet {t.name} (minReadySeconds)"
    return None


def updated(node: Member, targets: Sequence[Target]) -> bool:
    """Every ConfigSet selecting the node is applied at its current revision (staged) or
    generation (not staged), without error."""
    for t in targets:
        if not t.selects(node.report.labels):
            continue
        entry = node.report.entries.get(t.name)
        if entry is None or entry.error:
            return False
        if t.revision is not None:
            if node.admitted.get(t.name) != t.revision or entry.revision != t.revision:
                return False
        elif entry.generation < t.generation:
            return False
    return True


@dataclass
class Budget:
    """The pools' shared budget for one sync (controller/rollout.py ``Gate``)."""

    pools: Mapping[str, NodePool]
    member: Mapping[str, str]  # node -> pool
    conflicts: Mapping[str, list[str]]
    busy: dict[str, set[str]] = field(default_factory=dict)  # pool -> disrupted nodes
    sizes: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        pools: Sequence[NodePool],
        nodes: Sequence[Member],
        targets: Sequence[Target],
        now: dt.datetime,
    ) -> tuple[Budget, dict[str, str]]:
        """The budget, and why each disrupted node is (node -> reason)."""
        by_name = {p.name: p for p in pools}
        by_name.setdefault(DEFAULT_POOL, NodePool(DEFAULT_POOL))
        member, conflicts = assign(pools, nodes)
        b = cls(by_name, member, conflicts)
        why: dict[str, str] = {}
        for node in nodes:
            pool = member.get(node.name)
            if pool is None:
                continue
            b.sizes[pool] = b.sizes.get(pool, 0) + 1
            reason = disruption(node, targets, by_name[pool].min_ready_seconds, now)
            if reason:
                b.busy.setdefault(pool, set()).add(node.name)
                why[node.name] = reason
        return b, why

    def limit(self, pool: str) -> int:
        return self.pools[pool].budget(self.sizes.get(pool, 0))

    def held(self, node: str) -> bool:
        return node in self.conflicts

    def take(self, node: str, *, force: bool = False) -> bool:
        pool = self.member.get(node)
        if pool is None:
            return False
        busy = self.busy.setdefault(pool, set())
        if force:
            busy.add(node)
            return True
        if self.pools[pool].paused:
            return False
        if node in busy:
            return True
        if len(busy) >= self.limit(pool):
            return False
        busy.add(node)
        return True

    def min_ready(self, node: str) -> int:
        pool = self.member.get(node)
        return self.pools[pool].min_ready_seconds if pool is not None else 0

    def paused_pool(self, node: str) -> str:
        pool = self.member.get(node)
        return pool if pool is not None and self.pools[pool].paused else ""


def grants(budget: Budget, nodes: Sequence[Member]) -> tuple[list[tuple[str, str]], list[str]]:
    """OS-upgrade and lock_group requests: (node, request id) to grant now (oldest request
    first, through the budget), and nodes whose grant is stale (request withdrawn)."""
    grant = []
    for node in sorted(nodes, key=lambda n: n.name):
        if not node.request or node.granted == node.request or budget.held(node.name):
            continue
        if not node.down and budget.take(node.name):
            grant.append((node.name, node.request))
    granted = {name for name, _ in grant}
    revoke = [
        n.name for n in nodes if n.granted and n.granted != n.request and n.name not in granted
    ]
    return grant, revoke


def placements(
    nodes: Sequence[Member],
    member: Mapping[str, str],
    conflicts: Mapping[str, list[str]],
    pools: Mapping[str, NodePool],
) -> list[tuple[str, dict[str, Any]]]:
    """(node, spec patch) for every node whose spec.pool or spec.poolFencing is not what its
    pool says: spec.pool "" while two pools select it (the agent then waits for a slot that
    is never granted) and no pool fencing then (fencing a host on a guess is the one mistake
    not to make)."""
    out = []
    for node in nodes:
        wanted = "" if node.name in conflicts else member.get(node.name, DEFAULT_POOL)
        pool = pools.get(wanted)
        fencing = pool.fencing.to_raw() if pool is not None else None
        patch: dict[str, Any] = {}
        if node.pool != wanted:
            patch[POOL_FIELD] = wanted
        if node.pool_fencing != fencing:
            patch[FENCING_FIELD] = fencing  # None: a merge patch removes it
        if patch:
            out.append((node.name, patch))
    return out
