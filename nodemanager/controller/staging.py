"""Staged rollouts step by step: revisions, admissions, and the rollout's counts. The writes are
collected in a ``Deferred`` (effects.py) and sent by the controller after the step.

A ConfigSet without ``spec.rollout`` is staged only on the nodes whose pool stages everything
(NodePool ``spec.stageAll``, on the node as ``spec.poolStageAll``): there it has revisions and
admissions like any staged ConfigSet, with no budget of its own (its nodes' pools' alone);
on the other nodes it applies at once and counts by generation, as before."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodemanager.api.revisions import has_rollout, staged
from nodemanager.controller import events, firstapplied, rollout
from nodemanager.controller.effects import Deferred
from nodemanager.controller.pools import Target
from nodemanager.controller.summary import Counts, NodeView, count
from nodemanager.desired.select import matches, selector_only

# A ConfigSet staged only by its nodes' pools: their budgets bound it, it adds none of its own.
POOL_STAGED = rollout.Rollout(max_unavailable="100%")


def settings(
    cs: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], gate: rollout.Gate | None
) -> rollout.Rollout | None:
    """How ``cs`` is staged: its spec.rollout; without one, POOL_STAGED while some node it
    selects is in a pool that stages everything (its revisions are made before the pool's
    nodes are switched over: pools.adoptions waits for them); else None, applied at once."""
    own = rollout.Rollout.of(cs.get("spec") or {})
    if own is not None:
        return own
    selector = selector_only(cs)
    if selector is None:
        return None
    for node in nodes:
        meta = node.get("metadata") or {}
        # The cheap test first: label matching is the cost of a sync over many nodes.
        if not staged(cs, node) and not (gate is not None and gate.stages_all(meta["name"])):
            continue
        if matches(selector, meta.get("labels") or {}):
            return POOL_STAGED
    return None


@dataclass(frozen=True)
class Outcome:
    counts: Counts
    extra: dict[str, Any]
    halted: str  # why admissions stopped after a failure; empty otherwise
    held_by_pool: str  # why nothing can move: every node it waits for is in a paused pool
    notes: list[events.Note]  # what this step did, for Events on the ConfigSet
    waits: Mapping[str, str]  # pending node -> why it is not updated yet (condition messages)


def _admitted(node: Mapping[str, Any], configset: str) -> str | None:
    revisions = (node.get("spec") or {}).get(rollout.REVISIONS_FIELD) or {}
    value = revisions.get(configset)
    return str(value) if value else None


@dataclass
class _Ready:
    """When the controller first saw a node report a revision applied without error: its own
    clock (a node's may be wrong), kept in the node's spec (nodes cannot write it) so agent and
    controller restarts, metadata edits and pause/resume do not restart minReadySeconds.

    Written whatever minReadySeconds is now: raising the ConfigSet's or the pool's later must
    not turn every settled node unavailable at once (a missing time reads as "not ready")."""

    fleet: Deferred
    configset: str
    target: str
    now: dt.datetime
    # Marks the API server took, perhaps not in the cache yet (configsets.Memory.applied adds
    # them once a write is confirmed; one that failed is not here and is written again).
    marked: dict[tuple[str, str, str], str] | None

    def since(self, node: Mapping[str, Any], reported: str | None, error: str) -> str | None:
        if not reported or error:
            return None
        name = node["metadata"]["name"]
        key = (self.configset, name, reported)
        seen = ((node.get("spec") or {}).get(rollout.READY_FIELD) or {}).get(self.configset)
        if isinstance(seen, Mapping) and seen.get("revision") == reported and seen.get("since"):
            if self.marked is not None:
                # The cache shows the write: forget it, so a later return to this revision
                # (undo after another one) is recorded again, not taken as written.
                self.marked.pop(key, None)
            return str(seen["since"])
        if self.marked is not None and key in self.marked:
            return self.marked[key]  # written, not in the cache yet
        if reported != self.target:
            return None
        stamp = self.now.strftime("%Y-%m-%dT%H:%M:%SZ")
        # Planned as if it lands; when it does not, nothing after it is written either
        # (effects.apply stops) and the next try plans again from the cache.
        self.fleet.mark_ready(name, rollout.READY_FIELD, self.configset, reported, stamp)
        return stamp


def sync(
    fleet: Deferred,
    namespace: str,
    cs: Mapping[str, Any],
    settings: rollout.Rollout,
    nodes: Sequence[Mapping[str, Any]],
    revisions: Sequence[Mapping[str, Any]],
    last_target: str | None,
    marked: dict[tuple[str, str, str], str] | None = None,
    gate: rollout.Gate | None = None,
    now: dt.datetime | None = None,
) -> Outcome:
    """One rollout step for one ConfigSet at ``now`` (the caller's clock); returns what its
    status should say. Its writes go to ``fleet`` in the order they must land."""
    now = now or dt.datetime.now(dt.UTC)
    spec = cs.get("spec") or {}
    name = cs["metadata"]["name"]
    target = rollout.revision_name(name, spec)
    mine, notes = _revisions(fleet, namespace, cs, settings, revisions, last_target, target)
    found = _matched(cs, nodes, target, _Ready(fleet, name, target, now, marked))
    good = last_good(found.states, mine, target)
    paused = bool(spec.get("paused"))
    p = rollout.plan(
        target, settings, found.states, paused=paused, now=now, gate=gate, last_good=good
    )
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    notes += _admissions(fleet, name, p, (target, mine[target]), good, found, nodes, stamp)
    _trim(fleet, name, mine, target, nodes, settings.history_limit)
    rest = count(cs, found.at_once)
    halted = (
        f"rollout of revision {mine[target]} stopped: failed on {', '.join(p.failed[:10])}"
        if p.halted_by_failure
        else ""
    )
    updating = [n for n in p.unavailable if n not in p.failed and n not in p.down]
    extra = {
        "updating": len(updating),
        "updateRevision": target,
        "revision": mine[target],
        "unavailable": len(p.unavailable),
        "notReadyNodes": p.down[: events.NAMES_IN_MESSAGE],
    }
    if p.down and extra["notReadyNodes"] != (cs.get("status") or {}).get("notReadyNodes"):
        notes.append(events.not_ready(p.down))  # when the set changes, not every sync
    held = "rollout paused" if paused else ("rollout halted" if halted else "")
    waits = _waits(p, gate, found.states, target, held) | dict.fromkeys(
        rest.pending, "not reported"
    )
    return Outcome(
        _counts(name, found, p, rest),
        extra,
        halted,
        _held_by_pool(p, gate, updating),
        notes,
        waits,
    )


def _admissions(
    fleet: Deferred,
    name: str,
    p: rollout.Plan,
    target: tuple[str, int],
    good: str | None,
    found: _Matched,
    nodes: Sequence[Mapping[str, Any]],
    stamp: str,
) -> list[events.Note]:
    """The plan's admissions as writes (each host's first-applied mark before its first
    admission), and the Event saying them."""
    unmarked = {n["metadata"]["name"] for n in nodes if not firstapplied.recorded(n)}
    admitted = _admit(fleet, name, p.admit, target[0], unmarked, stamp)
    if good and p.admit_last_good:
        _admit(fleet, name, p.admit_last_good, good, unmarked, stamp)
    if not admitted:
        return []
    at_target = sum(1 for s in found.states if s.admitted == target[0]) + len(admitted)
    return [events.admitted(target[1], target[0], admitted, len(found.states), at_target)]


def _revisions(
    fleet: Deferred,
    namespace: str,
    cs: Mapping[str, Any],
    settings: rollout.Rollout,
    revisions: Sequence[Mapping[str, Any]],
    last_target: str | None,
    target: str,
) -> tuple[dict[str, int], list[events.Note]]:
    """The ConfigSet's revisions by name -> number once this step's writes land: the target
    made when new, renumbered newest when earlier content is back (undo)."""
    mine = {r["metadata"]["name"]: int(r.get("revision") or 0) for r in revisions}
    newest = max(mine.values(), default=0)
    spec = cs.get("spec") or {}
    if target not in mine:
        fleet.create_revision(rollout.revision_object(cs, namespace, newest + 1))
        mine[target] = newest + 1
        if not newest:
            return mine, []
        budget = settings.max_unavailable if has_rollout(cs) else "of each stageAll pool"
        return mine, [events.started(newest + 1, target, budget, bool(spec.get("paused")))]
    if mine[target] < newest and last_target != target:
        fleet.renumber_revision(target, newest + 1)
        mine[target] = newest + 1
        return mine, [events.undone(newest + 1, target)]
    return mine, []


@dataclass(frozen=True)
class _Matched:
    """The nodes a ConfigSet selects, parsed once."""

    states: list[rollout.NodeState]  # where it is staged: through the rollout
    views: list[NodeView]  # the same nodes' reports
    at_once: list[NodeView]  # where it is not staged (only a pool stages it): by generation


def _matched(
    cs: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], target: str, ready: _Ready
) -> _Matched:
    selector = selector_only(cs)
    at = Target.of(cs)
    found = _Matched([], [], [])
    for node in nodes:
        view = NodeView.from_dict(node)
        if selector is None or not matches(selector, view.labels):
            continue
        if not staged(cs, node):
            found.at_once.append(view)
            continue
        found.views.append(view)
        found.states.append(_state(node, view, at, target, ready))
    return found


def _state(
    node: Mapping[str, Any], view: NodeView, at: Target, target: str, ready: _Ready
) -> rollout.NodeState:
    entry = view.entries.get(at.name)
    admission = _admitted(node, at.name)
    if entry is None:
        reported, error, since = None, "", None
    else:
        # Adopted at the content it ran before its pool staged the ConfigSet: at the target.
        reported = target if at.at_target(entry, admission) else entry.revision
        error, since = entry.error, ready.since(node, reported, entry.error)
    # New to the fleet as the controller recorded it, not as the status reads now.
    fresh = firstapplied.fresh(node)
    return rollout.NodeState(
        view.name, admission, reported, error, since, fresh, rollout.down(view)
    )


def _counts(name: str, found: _Matched, p: rollout.Plan, rest: Counts) -> Counts:
    matched = sorted(s.name for s in found.states)
    done = set(p.updated) | set(p.failed)
    conflicts = [v.name for v in found.views if (e := v.entries.get(name)) and e.conflicts]
    return Counts(
        sorted(matched + rest.matched),
        sorted(p.updated + rest.updated),
        sorted(p.failed + rest.failed),
        sorted([n for n in matched if n not in done] + rest.pending),
        sorted(conflicts + rest.conflicts),
    )


def _waits(
    p: rollout.Plan,
    gate: rollout.Gate | None,
    states: Sequence[rollout.NodeState],
    target: str,
    held: str,
) -> dict[str, str]:
    """Why each node of the plan is not updated yet, in a few words an operator can act on."""
    g: rollout.Gate = gate or rollout.Unpooled()
    why: dict[str, str] = {}
    for s in states:
        if s.name in p.updated or s.name in p.failed:
            continue
        if s.name in p.down:
            why[s.name] = "not ready"
        elif g.held(s.name):
            why[s.name] = "selected by two pools"
        elif s.admitted == target or s.name in p.admit:
            applied = s.reported == target and not s.error
            why[s.name] = "minReadySeconds" if applied else "updating"
        elif pool := g.paused_pool(s.name):
            why[s.name] = f"pool {pool} paused"
        else:
            why[s.name] = held or "waiting for maxUnavailable"
    return why


def _held_by_pool(p: rollout.Plan, gate: rollout.Gate | None, updating: Sequence[str]) -> str:
    """Nothing in progress and every node still to go is in a paused pool: the rollout is
    paused by its pools (said as such, so `rollout status` does not wait forever)."""
    if gate is None or updating or not p.waiting or p.admit or p.admit_last_good:
        return ""
    pools = {gate.paused_pool(n) for n in p.waiting}
    if "" in pools:
        return ""
    which = ", ".join(sorted(pools))
    return (
        f"pool {which} is paused (NodePool spec.paused): {len(p.waiting)} nodes wait"
        if len(pools) == 1
        else f"pools {which} are paused (NodePool spec.paused): {len(p.waiting)} nodes wait"
    )


def last_good(
    states: Sequence[rollout.NodeState], numbers: Mapping[str, int], target: str
) -> str | None:
    """The newest revision some matched node applied without error (the target only while no
    node failed it): what a node joining a paused or halted rollout gets."""
    failed = any(s.reported == target and s.error for s in states)
    good = {
        s.reported
        for s in states
        if s.reported and not s.error and s.reported == s.admitted and s.reported in numbers
    }
    if failed:
        good.discard(target)
    return max(good, key=lambda r: numbers[r], default=None)


def _admit(
    fleet: Deferred,
    name: str,
    nodes: Sequence[str],
    revision: str,
    unmarked: set[str],
    stamp: str,
) -> list[str]:
    for node_name in nodes:
        if node_name in unmarked:
            # Recorded before the admission (effects apply in order, stopping at a failure):
            # no later delete or selector change can make this host look new again.
            fleet.mark_first_applied(node_name, stamp)
        fleet.admit(node_name, rollout.REVISIONS_FIELD, name, revision)
    return list(nodes)


def _trim(
    fleet: Deferred,
    name: str,
    mine: Mapping[str, int],
    target: str,
    nodes: Sequence[Mapping[str, Any]],
    limit: int,
) -> None:
    """revisionHistoryLimit: delete the oldest revisions, never the target or an admitted one."""
    keep = {target} | {r for node in nodes if (r := _admitted(node, name))}
    for old in rollout.expired(mine, keep, limit):
        fleet.delete_revision(old)


def prune(
    fleet: Deferred, configsets: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]
) -> list[tuple[str, str]]:
    """Remove admissions of ConfigSets that are gone or no longer staged on the node (no
    spec.rollout, and its pool no longer stages all), and of nodes that left the selector:
    coming back is then a change through the budget, never a stale admission."""
    by_name = {(cs.get("metadata") or {}).get("name"): cs for cs in configsets}
    pruned = []
    for node in nodes:
        spec = node.get("spec") or {}
        labels = (node.get("metadata") or {}).get("labels") or {}
        held = set(spec.get(rollout.REVISIONS_FIELD) or {}) | set(
            spec.get(rollout.READY_FIELD) or {}
        )
        for name in sorted(held):
            cs = by_name.get(name)
            selector = selector_only(cs) if cs is not None else None
            if cs is not None and staged(cs, node) and selector and matches(selector, labels):
                continue
            fleet.unadmit(
                node["metadata"]["name"], (rollout.REVISIONS_FIELD, rollout.READY_FIELD), name
            )
            pruned.append((node["metadata"]["name"], name))
    return pruned
