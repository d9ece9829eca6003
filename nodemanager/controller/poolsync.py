"""Reconcile the pools from the caches: the default pool, each node's spec.pool, disruption
grants and each pool's status, as outcomes (effects.py); never calls the API server.

Runs before the ConfigSets in every sync and returns the ``Budget`` their rollouts draw from, so
a disruption request and every staged ConfigSet share one count per pool. A grant is computed
as if it succeeded (the budget counts it); one that fails is retried with its own backoff and
the next sync recounts from the nodes. A node spec write made and not yet in the cache is not
made again (``PoolMemory.spec_written``): the cache lags behind a sync's writes under load.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nodemanager.api import InvalidObject
from nodemanager.api.nodereport import set_condition
from nodemanager.api.pool import CONFLICT_CONDITION, DEFAULT_POOL, NodePool, default_pool
from nodemanager.controller.access import trusted
from nodemanager.controller.effects import Effect, Outcome, Write
from nodemanager.controller.events import Note, pool_transitions
from nodemanager.controller.pools import (
    GRANT_FIELD,
    POOL_FIELD,
    Budget,
    Member,
    Target,
    grants,
    placements,
)
from nodemanager.controller.poolstatus import PoolCounts, counts, pool_status, waiting_for
from nodemanager.controller.summary import NodeView, differs, progress_only
from nodemanager.controller.written import StatusWrites
from nodemanager.kube.recorder import involved

log = logging.getLogger(__name__)
Work = tuple[str, str, Outcome]  # (retry key, resourceVersion, outcome)
PLACEMENTS_PER_SYNC = 200
# A node spec write the cache has not shown this long after it was made is taken as lost (a
# relist past it, an edit since, the node deleted and created again) and made again: the
# timeout of ReplicaSet's expectations.
SEEN_WITHIN = 300.0
GRANT_BACKOFF_BASE, GRANT_BACKOFF_CAP = 1.0, 60.0  # seconds between one node's grants


@dataclass
class PoolMemory(StatusWrites):
    """The status writes the cache may not show yet (written.py), and the pools' state."""

    METHOD = "patch_pool_status"
    progress: dict[str, tuple[int, float]] = field(default_factory=dict)  # (updated, since)
    warned: set[tuple[str, str]] = field(default_factory=set)  # (pool, resourceVersion)
    # (what, node) -> (spec patch, when): node spec writes made and perhaps not in the cache
    # yet. A sync computes from the cache; when the watch lags behind the last sync's writes
    # (5,000 nodes on a loaded server), the same nodes look unplaced and were written again.
    spec_written: dict[tuple[str, str], tuple[dict[str, Any], float]] = field(default_factory=dict)
    # node -> (the grant it holds, when this controller first saw it held): a grant held past
    # the deadline is taken back (a host that never gives its slot back holds its pool).
    held_since: dict[str, tuple[str, float]] = field(default_factory=dict)
    expired: dict[str, str] = field(default_factory=dict)  # node -> request taken back
    self_labels_warned: set[tuple[str, str]] = field(default_factory=set)  # (pool, rv)
    # node -> (grants in a row, each within GRANT_BACKOFF_CAP of the last; the last one's time)
    grant_streak: dict[str, tuple[int, float]] = field(default_factory=dict)

    def grant_wait(self, node: str, mono: float) -> float:
        """Seconds before ``node`` may be granted again: each status.disruption.id a node
        writes cost a controller write (100 ids in 38 s were 37 grants, issue 37). A grant
        soon after the last doubles the wait (1 s, 2 s, ... 60 s); a node that asks now and
        then (an OS upgrade a week) never waits."""
        streak, last = self.grant_streak.get(node, (0, -math.inf))
        if mono - last > GRANT_BACKOFF_CAP:
            return 0.0
        return max(0.0, last + min(GRANT_BACKOFF_CAP, GRANT_BACKOFF_BASE * 2.0**streak) - mono)

    def granted(self, node: str, mono: float) -> None:
        streak, last = self.grant_streak.get(node, (0, -math.inf))
        self.grant_streak[node] = (streak + 1 if mono - last <= GRANT_BACKOFF_CAP else 0, mono)

    def expire(self, members: Sequence[Member], mono: float, deadline: float) -> dict[str, str]:
        """node -> the request whose grant was held past ``deadline`` seconds (0: never).
        Measured on this controller's clock from when it first saw the grant: a restarted
        controller starts counting again, which only ever gives more time."""
        held = {m.name: m.granted for m in members if m.granted and m.granted == m.request}
        self.held_since = {
            node: prior if (prior := self.held_since.get(node)) and prior[0] == grant
            else (grant, mono)
            for node, grant in held.items()
        }  # fmt: skip
        requests = {m.name: m.request for m in members}
        self.expired = {n: r for n, r in self.expired.items() if requests.get(n) == r}
        if deadline > 0:
            for node, (grant, since) in self.held_since.items():
                if mono - since > deadline and node not in self.expired:
                    log.warning(
                        "ManagedNode %s held its disruption grant %s %.0f s, past the "
                        "deadline of %.0f s: taken back", node, grant, mono - since, deadline,
                    )  # fmt: skip
                    self.expired[node] = grant
        return self.expired

    def applied(
        self, name: str, done: Sequence[Effect], mono: float, resource_version: str
    ) -> None:
        """Remember the writes in ``done`` (the effects the server took, not skipped)."""
        super().applied(name, done, mono, resource_version)
        for effect in done:
            if isinstance(effect, Write) and effect.method == "patch_node_spec":
                node, patch = effect.args
                self.spec_written[(effect.what, node)] = (dict(patch), mono)

    def unseen(self, what: str, node: str, patch: Mapping[str, Any], mono: float) -> bool:
        """Whether this very ``patch`` was written to ``node`` less than SEEN_WITHIN ago (the
        caller still wants it: the cache does not show it yet). Not written again then."""
        prior = self.spec_written.get((what, node))
        if prior is None or prior[0] != patch:
            return False
        if mono - prior[1] < SEEN_WITHIN:
            return True
        log.info(
            "ManagedNode %s: %s written %.0f s ago is not in the cache; writing it again",
            node, dict(patch), mono - prior[1],
        )  # fmt: skip
        return False


def parse(
    raw_pools: Sequence[Mapping[str, Any]], memory: PoolMemory
) -> tuple[list[NodePool], dict[str, str]]:
    """The pools, and why each invalid one is (pool -> its bad fields). The CRD refuses most;
    an invalid pool stands as one that selects nothing (the default pool as if it had no
    spec), so its status says what is wrong and the rest of the fleet goes on."""
    pools, invalid = [], {}
    for raw in raw_pools:
        try:
            pools.append(NodePool.from_dict(raw))
        except InvalidObject as e:
            meta = raw["metadata"]
            name = str(meta.get("name"))
            pools.append(NodePool(name, generation=int(meta.get("generation") or 0)))
            invalid[name] = "; ".join(str(f) for f in e.errors)
            key = (name, str(meta.get("resourceVersion")))
            if key not in memory.warned:
                log.warning("%s", e)
                memory.warned.add(key)
    return pools, invalid


def reconcile(
    raw_pools: Sequence[Mapping[str, Any]],
    configsets: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    views: Sequence[NodeView],
    memory: PoolMemory,
    *,
    namespace: str,
    now: str,
    mono: float,
    progress_period: float = 0.0,
    revisions: Collection[str] = (),
    trust_node_labels: bool = False,
    grant_deadline: float = 0.0,
) -> tuple[Budget, list[Work]]:
    """This sync's budget, and the writes that bring pools and memberships up to date;
    ``revisions``: the names of the ControllerRevisions in the cache; ``grant_deadline``:
    seconds a disruption grant may be held (0: no limit)."""
    work: list[Work] = []
    work += _default_pool(raw_pools, namespace)
    pools, invalid = parse(raw_pools, memory)
    members = [Member.of(raw, view) for raw, view in zip(nodes, views, strict=True)]
    targets = [Target.of(cs) for cs in configsets]
    budget, why = Budget.of(
        pools, members, targets, dt.datetime.now(dt.UTC), trust_node_labels=trust_node_labels
    )
    if not trust_node_labels:
        work += _self_reported_selectors(raw_pools, pools, memory)
    raw_of = {n["metadata"]["name"]: n for n in nodes}

    # Writes made and not in the cache yet stay remembered; the rest (shown, no longer
    # wanted, node gone) are forgotten here. applied() adds this sync's.
    unseen: dict[tuple[str, str], tuple[dict[str, Any], float]] = {}

    def due(what: str, node: str, patch: dict[str, Any]) -> bool:
        if memory.unseen(what, node, patch, mono):
            unseen[(what, node)] = memory.spec_written[(what, node)]
            return False
        return True

    def on_node(node: str, what: str, spec: Mapping[str, Any], notes: tuple[Note, ...]) -> None:
        raw = raw_of[node]
        write = Write(what, "patch_node_spec", (node, dict(spec)))
        outcome = Outcome((write,), notes, involved(raw, "ManagedNode"))
        work.append((f"{what}/{node}", str(raw["metadata"].get("resourceVersion", "")), outcome))

    # Spaced over syncs: after an upgrade every node needs its spec.pool once, and 5,000
    # writes in one sync would hold ConfigSet status and liveness back for minutes. The
    # budget does not wait for them (it reads labels); each write wakes the next sync.
    for node, patch, held in _placed(members, budget, targets, revisions, due):
        on_node(node, "pool", patch, held)
    for member in members:
        conditions = conflict_conditions(
            raw_of[member.name], budget.conflicts.get(member.name), now
        )
        if conditions is not None:
            rv = str(raw_of[member.name]["metadata"].get("resourceVersion", ""))
            write = Write("pool_condition", "patch_node_conditions", (member.name, rv, conditions))
            work.append((f"pool_condition/{member.name}", rv, Outcome((write,))))
    expired = memory.expire(members, mono, grant_deadline)
    granted, revoked = grants(budget, members, expired)  # counted in the budget, written or not
    for node, grant in [*granted, *((node, None) for node in revoked)]:
        wait = memory.grant_wait(node, mono) if grant else 0.0
        if wait > 0:  # a node churning request ids: its next grant waits (backed off)
            work.append((f"grant-backoff/{node}", "", Outcome(requeue_after=wait)))
        elif due("grant", node, {GRANT_FIELD: grant}):
            on_node(node, "grant", {GRANT_FIELD: grant}, ())
            if grant:
                memory.granted(node, mono)
    memory.spec_written = unseen
    parsed = {p.name: p for p in pools}
    for raw in raw_pools:
        found = parsed.get(raw["metadata"]["name"])
        if found is None:
            continue
        c = counts(found, members, budget, why, targets)
        outcome = _pool_outcome(
            raw, found, c, budget.limit(found.name), memory, now, mono, progress_period, invalid
        )
        if outcome is not None:
            rv = str(raw["metadata"].get("resourceVersion"))
            work.append((f"NodePool/{found.name}", rv, outcome))
    return budget, work


def _self_reported_selectors(
    raw_pools: Sequence[Mapping[str, Any]], pools: Sequence[NodePool], memory: PoolMemory
) -> list[Work]:
    """A Warning Event (once per resourceVersion) on each NodePool whose nodeSelector names a
    label nodes set on themselves: it selects no node through it (``pools.assign``)."""
    work: list[Work] = []
    raw_of = {r["metadata"]["name"]: r for r in raw_pools}
    for pool in pools:
        raw = raw_of.get(pool.name)
        if raw is None or pool.selector is None:
            continue
        keys = [k for k, _ in pool.selector.match_labels]
        keys += [e.key for e in pool.selector.match_expressions]
        spoofable = sorted({k for k in keys if not trusted({k: ""})})
        rv = str(raw["metadata"].get("resourceVersion", ""))
        if not spoofable or (pool.name, rv) in memory.self_labels_warned:
            continue
        memory.self_labels_warned.add((pool.name, rv))
        message = (
            f"spec.nodeSelector uses {', '.join(spoofable)}, set by each node on itself: it "
            "is not used for membership (a node could move itself into this pool); select on "
            "labels an administrator sets, or run the controller with --trust-node-labels"
        )
        log.warning("NodePool %s: %s", pool.name, message)
        note = Note("SelfReportedLabel", message, key="nodeSelector", warning=True)
        work.append(
            (f"NodePool-warning/{pool.name}", rv, Outcome((), (note,), involved(raw, "NodePool")))
        )
    return work


def _status(
    raw: Mapping[str, Any],
    pool: NodePool,
    c: PoolCounts,
    limit: int,
    memory: PoolMemory,
    now: str,
    stalled: str,
    invalid: str | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the status stored or just written, the status wanted)."""
    base = {**raw, "status": memory.base(raw)}
    return base["status"], pool_status(base, pool, c, limit, now, stalled, invalid)


def _stalled(
    memory: PoolMemory, pool: NodePool, c: PoolCounts, mono: float
) -> tuple[str, float | None]:
    """(the nodes waited for, when none was newly updated for progressDeadlineSeconds; the
    seconds until that deadline, None when none runs). The controller's clock: a restart
    gives a whole deadline again."""
    waiting = [n for n in c.nodes if n not in c.updated] + c.conflicting
    prior = memory.progress.get(pool.name)
    if prior is None or prior[0] != len(c.updated) or not waiting or pool.paused:
        memory.progress[pool.name] = (len(c.updated), mono)
        running = bool(waiting) and not pool.paused
        return "", float(pool.progress_deadline_seconds) if running else None
    left = pool.progress_deadline_seconds - (mono - prior[1])
    if left > 0:
        return "", left
    deadline = pool.progress_deadline_seconds
    return f"no node updated for {deadline}s; waiting for {waiting_for(c)}", None


def conflict_conditions(
    node: Mapping[str, Any], pools: list[str] | None, now: str
) -> list[dict[str, Any]] | None:
    """The node's conditions with PoolConflict as it should be (True naming both pools while
    two select it, absent otherwise), or None when they say so already. Written with the
    node's resourceVersion, as Ready=Unknown is, so it never overwrites the agent's newer write."""
    current = list((node.get("status") or {}).get("conditions") or [])
    present = next((c for c in current if c.get("type") == CONFLICT_CONDITION), None)
    if not pools:
        if present is None:
            return None
        return [c for c in current if c.get("type") != CONFLICT_CONDITION]
    message = f"selected by NodePools {' and '.join(pools)}: held, nothing is admitted on it"
    if (
        present is not None
        and present.get("status") == "True"
        and present.get("message") == message
    ):
        return None
    new = {
        "type": CONFLICT_CONDITION,
        "status": "True",
        "reason": "SelectedByTwoPools",
        "message": message,
        # The node's spec this was judged against: every condition carries all six fields.
        "observedGeneration": int((node.get("metadata") or {}).get("generation") or 0),
    }
    return set_condition(current, new, now)


def _two_pools(node: str, pools: list[str]) -> Note:
    return Note(
        "NodeInTwoPools",
        f"ManagedNode {node} is selected by NodePools {' and '.join(pools)}: held, nothing is "
        "admitted on it until one pool's nodeSelector stops matching it",
        key=f"two-pools-{node}",
        warning=True,
    )


def _pool_outcome(
    raw: Mapping[str, Any],
    pool: NodePool,
    c: PoolCounts,
    limit: int,
    memory: PoolMemory,
    now: str,
    mono: float,
    progress_period: float,
    invalid: Mapping[str, str],
) -> Outcome | None:
    """One pool's status write with the Events it earns, or when to look again; None: nothing
    to do until something changes."""
    stalled, deadline_in = _stalled(memory, pool, c, mono)
    base, wanted = _status(raw, pool, c, limit, memory, now, stalled, invalid.get(pool.name))
    since = memory.since(pool.name, mono)
    if not differs(wanted, base):
        # Nothing to write now; the deadline's transition is due without any event.
        return None if deadline_in is None else Outcome(requeue_after=deadline_in)
    if since < progress_period and progress_only(wanted, base):
        # Counts of a change in progress: written at most every progress_period.
        wait = progress_period - since
        return Outcome(requeue_after=min(wait, deadline_in or wait))
    write = Write("pool_status", "patch_pool_status", (pool.name, wanted))
    # Events only from a status actually written (recorded after it went through).
    notes = tuple(pool_transitions(base, wanted))
    return Outcome((write,), notes, involved(raw, "NodePool"))


class _Due(Protocol):
    def __call__(self, what: str, node: str, patch: dict[str, Any]) -> bool: ...


def _placed(
    members: Sequence[Member],
    budget: Budget,
    targets: Sequence[Target],
    revisions: Collection[str],
    due: _Due,
) -> list[tuple[str, dict[str, Any], tuple[Note, ...]]]:
    """(node, spec patch, its Events) for the placements due this sync, the first
    PLACEMENTS_PER_SYNC of them; a node held by two pools gets a Warning."""
    placed = [
        (node, patch)
        for node, patch in placements(
            members, budget.member, budget.conflicts, budget.pools, targets, revisions
        )
        if due("pool", node, patch)
    ]
    out: list[tuple[str, dict[str, Any], tuple[Note, ...]]] = []
    for node, patch in placed[:PLACEMENTS_PER_SYNC]:
        held = (_two_pools(node, budget.conflicts[node]),) if patch.get(POOL_FIELD) == "" else ()
        out.append((node, patch, held))
    return out


def _default_pool(raw_pools: Sequence[Mapping[str, Any]], namespace: str) -> list[Work]:
    """The default pool's creation while it does not exist."""
    if any(p["metadata"]["name"] == DEFAULT_POOL for p in raw_pools):
        return []
    create = Write("pool_created", "create_pool", (default_pool(namespace),))
    return [(f"NodePool/{DEFAULT_POOL}", "", Outcome((create,)))]
