"""Pools (pure): which pool each node is in, which nodes are disrupted, and the shared budget.

A node is *disrupted* (it takes a slot of its pool's budget) while any of these holds, whatever
caused it:

- it is not Ready (Unknown: its Lease lapsed) or under memory pressure: as MCO, a node that is
  not Ready is unavailable and is not changed;
- a ConfigSet staged on it (``spec.rollout``, or any ConfigSet while its pool has
  ``stageAll``: api/revisions.py ``staged``) admitted it to a revision it has not reported
  applied, or reported with an error, or (at the ConfigSet's target) applied less than
  minReadySeconds ago on the controller's clock (the larger of the ConfigSet's and the pool's);
- it holds a slot granted for an OS upgrade or a ``lock_group`` restart (``spec.disruptionGranted``
  names its ``status.disruption`` request).

Disruption is read from the nodes, not from the ConfigSets' plans, so every ConfigSet and every
request sees the same count in one sync whatever order they are handled in. ``Budget`` hands
out the free slots: a change on a node that is disrupted already costs none (a node being
changed by one ConfigSet may take another's change too, as MCO renders one config per node).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from nodemanager.api import ConfigSet
from nodemanager.api.fencing import POOL_FIELD as FENCING_FIELD
from nodemanager.api.nodereport import ConfigSetEntry, NodeReport
from nodemanager.api.pool import DEFAULT_POOL, NodePool
from nodemanager.api.revisions import STAGE_ALL_FIELD, has_rollout, is_staged, stages_all
from nodemanager.controller import rollout
from nodemanager.controller.access import trusted
from nodemanager.desired.select import matches, selector_matches, selector_only

POOL_FIELD = "pool"
GRANT_FIELD = "disruptionGranted"
REQUEST_FIELD = "disruption"
# The ready time of a node adopted at the content it applied before its pool staged the
# ConfigSet: no change to wait out, so minReadySeconds does not turn it unavailable.
ADOPTED_SINCE = "1970-01-01T00:00:00Z"


@dataclass(frozen=True)
class Target:
    """What one ConfigSet asks of the nodes it selects."""

    name: str
    selector: ConfigSet | None
    spec: Mapping[str, Any] = field(repr=False, compare=False)
    generation: int
    min_ready: int
    rollout: bool = True  # spec.rollout: staged everywhere, else only where a pool stages all

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Target:
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        settings = rollout.Rollout.of(spec)
        return cls(
            meta.get("name", ""),
            selector_only(raw),
            spec,
            int(meta.get("generation") or 0),
            settings.min_ready_seconds if settings else 0,
            has_rollout(raw),
        )

    @cached_property
    def revision(self) -> str:
        """The current content's revision: the target wherever it is staged (hashed only when
        asked: most ConfigSets are staged nowhere)."""
        return rollout.revision_name(self.name, self.spec)

    def selects(self, labels: Mapping[str, str]) -> bool:
        return self.selector is not None and matches(self.selector, labels)

    def staged_on(self, node: Member) -> bool:
        return is_staged(self.rollout, node.stage_all)

    def at_target(self, entry: ConfigSetEntry, admitted: str | None) -> bool:
        """The node runs this target's content: it reports the revision, or (staged only by its
        pool, just adopted, its agent not switched yet) the current generation unstaged."""
        if admitted != self.revision or entry.error:
            return False
        return entry.revision == self.revision or (
            not self.rollout and entry.revision is None and entry.generation == self.generation
        )


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
    stage_all: bool = False  # spec.poolStageAll as written: what its agent goes by

    @property
    def name(self) -> str:
        return self.report.name

    @property
    def down(self) -> bool:
        return rollout.down(self.report)

    @classmethod
    def of(cls, raw: Mapping[str, Any], report: NodeReport | None = None) -> Member:
        spec, status = raw.get("spec") or {}, raw.get("status") or {}
        found = status.get(REQUEST_FIELD)
        request: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        return cls(
            report or NodeReport.from_dict(raw),
            str(spec[POOL_FIELD]) if isinstance(spec.get(POOL_FIELD), str) else None,
            {k: str(v) for k, v in (spec.get(rollout.REVISIONS_FIELD) or {}).items() if v},
            _ready_marks(spec),
            str(spec.get(GRANT_FIELD) or ""),
            str(request.get("id") or ""),
            str(request.get("reason") or ""),
            fencing if isinstance(fencing := spec.get(FENCING_FIELD), Mapping) else None,
            stages_all(raw),
        )


def assign(
    pools: Sequence[NodePool], nodes: Sequence[Member], *, trust_node_labels: bool = False
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(node -> its pool, node -> the pools selecting it when more than one).

    Only labels a node cannot set on itself count (access.py ``trusted``), as for Secret
    grants: a host that labels itself ``kubernetes.io/arch=arm64`` must not move into the
    ``arm`` pool and take its only disruption slot. ``trust_node_labels`` is the same opt-out."""
    selecting = [(p.name, p.selector) for p in pools if not p.is_default and p.selector]
    member: dict[str, str] = {}
    conflicts: dict[str, list[str]] = {}
    for node in nodes:
        labels = node.report.labels if trust_node_labels else trusted(node.report.labels)
        found = sorted(n for n, s in selecting if selector_matches(s, labels))
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
        if not t.staged_on(node) or admitted is None or not t.selects(node.report.labels):
            continue
        entry = node.report.entries.get(t.name)
        if entry is None or entry.error:
            return f"ConfigSet {t.name}"
        if entry.revision != admitted and not t.at_target(entry, admitted):
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
        if t.staged_on(node):
            if not t.at_target(entry, node.admitted.get(t.name)):
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
        *,
        trust_node_labels: bool = False,
    ) -> tuple[Budget, dict[str, str]]:
        """The budget, and why each disrupted node is (node -> reason)."""
        by_name = {p.name: p for p in pools}
        by_name.setdefault(DEFAULT_POOL, NodePool(DEFAULT_POOL))
        member, conflicts = assign(pools, nodes, trust_node_labels=trust_node_labels)
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

    def stages_all(self, node: str) -> bool:
        """The node's pool stages every ConfigSet (not a node two pools select)."""
        pool = self.member.get(node)
        return pool is not None and self.pools[pool].stage_all


def grants(
    budget: Budget, nodes: Sequence[Member], expired: Mapping[str, str] | None = None
) -> tuple[list[tuple[str, str]], list[str]]:
    """OS-upgrade and lock_group requests: (node, request id) to grant now (oldest request
    first, through the budget), and nodes whose grant is stale (request withdrawn) or held past
    its deadline (``expired``: node -> the request id whose grant was held too long; that
    request is not granted again, the node asks anew with a new id)."""
    expired = expired or {}
    grant = []
    for node in sorted(nodes, key=lambda n: n.name):
        if not node.request or node.granted == node.request or budget.held(node.name):
            continue
        if expired.get(node.name) == node.request:
            continue
        if not node.down and budget.take(node.name):
            grant.append((node.name, node.request))
    granted = {name for name, _ in grant}
    revoke = [
        n.name
        for n in nodes
        if n.granted
        and (n.granted != n.request or expired.get(n.name) == n.granted)
        and n.name not in granted
    ]
    return grant, revoke


def placements(
    nodes: Sequence[Member],
    member: Mapping[str, str],
    conflicts: Mapping[str, list[str]],
    pools: Mapping[str, NodePool],
    targets: Sequence[Target] = (),
    revisions: Collection[str] = (),
) -> list[tuple[str, dict[str, Any]]]:
    """(node, spec patch) for every node whose spec.pool, spec.poolFencing or
    spec.poolStageAll is not what its pool says: spec.pool "" while two pools select it (the
    agent then waits for a slot that is never granted) and no pool fencing then (fencing a
    host on a guess is the one mistake not to make); spec.poolStageAll is left as it is then
    (a staged node stays held). ``revisions``: the ControllerRevisions that exist (stageAll
    waits for those of the ConfigSets it adopts)."""
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
        stage_all = pool is not None and pool.stage_all
        if node.name in conflicts:
            pass  # held as it is: staged, nothing is admitted; not staged, it was never held
        elif stage_all and not node.stage_all:
            patch.update(adoptions(node, targets, revisions) or {})
        elif node.stage_all and not stage_all:
            patch[STAGE_ALL_FIELD] = None  # back to applying at once
        if patch:
            out.append((node.name, patch))
    return out


def adoptions(
    node: Member, targets: Sequence[Target], revisions: Collection[str]
) -> dict[str, Any] | None:
    """The spec patch that turns stageAll on for ``node``: the flag and, in the same write (the
    agent must never see one without the other), an admission to the current revision of each
    ConfigSet it staged only now that the node runs at its current generation without error, with
    a ready time that asks no minReadySeconds of it: nothing changes on the node. A ConfigSet it
    does not run cleanly gets no admission and waits for the budget. None while a revision to
    adopt is not made yet (the next sync, once the ConfigSet's reconcile made it)."""
    admit: dict[str, str] = {}
    for t in targets:
        if t.rollout or t.name in node.admitted or not t.selects(node.report.labels):
            continue
        if t.revision not in revisions:
            return None
        entry = node.report.entries.get(t.name)
        if entry is not None and t.at_target(entry, t.revision):
            admit[t.name] = t.revision
    patch: dict[str, Any] = {STAGE_ALL_FIELD: True}
    if admit:
        patch[rollout.REVISIONS_FIELD] = admit
        patch[rollout.READY_FIELD] = {
            name: {"revision": revision, "since": ADOPTED_SINCE} for name, revision in admit.items()
        }
    return patch


def _ready_marks(spec: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """spec.configsetReadySince as ConfigSet -> (revision, since); malformed entries skipped."""
    since = {}
    for name, value in (spec.get(rollout.READY_FIELD) or {}).items():
        if isinstance(value, Mapping):
            since[name] = (str(value.get("revision") or ""), str(value.get("since") or ""))
    return since
