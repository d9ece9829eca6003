"""Staged rollouts (pure): revisions of a ConfigSet's content and which nodes to admit next.

The DaemonSet pattern. A revision is the ConfigSet's spec without ``rollout`` and ``paused``
(those steer the rollout, they are not content), kept as a ControllerRevision named after the
content's hash, so going back to earlier content finds the same revision again. Each node's
admission (``ManagedNode.spec.configsetRevisions[<configset>]``, a field nodes cannot write) names
the revision its agent enforces; the agent reports the revision it applied in
``status.configsets[].revision``.

A node admitted to the target revision is *unavailable* until it reports that revision applied
without error for ``minReadySeconds``; at most ``maxUnavailable`` nodes are unavailable at once.
A node new to the fleet (nothing applied, nothing admitted) gets the target at once; an existing
node with no admission yet (a new or re-created staged ConfigSet, ``rollout`` added, a node that
starts matching) waits for the budget like any other change. A failure at the target stops all
further admissions when ``pauseOnFailure`` (the default) is set.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nodemanager.api.maxunavailable import budget
from nodemanager.api.nodereport import NodeReport

REVISIONS_FIELD = "configsetRevisions"
READY_FIELD = "configsetReadySince"  # when the controller first saw a revision applied
CONFIGSET_LABEL = "nodemanager.io/configset"
STEERING = ("rollout", "paused")


@dataclass(frozen=True)
class Rollout:
    max_unavailable: int | str = 1
    pause_on_failure: bool = True
    min_ready_seconds: int = 0
    history_limit: int = 10
    progress_deadline_seconds: int = 600

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> Rollout | None:
        raw = spec.get("rollout")
        if not isinstance(raw, Mapping):
            return None
        return cls(
            raw.get("maxUnavailable", 1),
            bool(raw.get("pauseOnFailure", True)),
            int(raw.get("minReadySeconds") or 0),
            int(raw.get("revisionHistoryLimit") or 10),
            int(raw.get("progressDeadlineSeconds") or 600),
        )

    def budget(self, matched: int) -> int:
        """maxUnavailable as a node count: a percentage rounds down, and never below 1."""
        return budget(self.max_unavailable, matched)


def content(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k not in STEERING}


def revision_name(configset: str, spec: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(
        json.dumps(content(spec), sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    return f"{configset}-{digest[:10]}"


def revision_object(cs: Mapping[str, Any], namespace: str, number: int) -> dict[str, Any]:
    meta = cs.get("metadata") or {}
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name(meta["name"], cs.get("spec") or {}),
            "namespace": namespace,
            "labels": {CONFIGSET_LABEL: meta["name"]},
            "ownerReferences": [
                {
                    "apiVersion": "common.nodemanager/v1",
                    "kind": "ConfigSet",
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "data": {"spec": content(cs.get("spec") or {})},
        "revision": number,
    }


def down(report: NodeReport) -> bool:
    """Not live (as MCO: not Ready): Ready Unknown, the controller's mark of a lapsed Lease
    (Ready=False says a ConfigSet failed, an apply result), or MemoryPressure True."""
    return report.condition("Ready") == "Unknown" or report.condition("MemoryPressure") == "True"


@dataclass(frozen=True)
class NodeState:
    name: str
    admitted: str | None  # the revision name in its ManagedNode spec
    reported: str | None  # the revision its agent reports applied
    error: str
    ready_since: str | None  # the controller's clock: first seen applied without error
    fresh: bool = False  # new to the fleet: has applied and been admitted to nothing yet
    down: bool = False  # Ready Unknown (its Lease lapsed) or MemoryPressure: not admitted


@dataclass
class Plan:
    target: str
    admit: list[str] = field(default_factory=list)  # nodes to admit to the target now
    # Nodes to admit to ``last_good`` now: joining while the rollout is paused or halted.
    admit_last_good: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # not admitted to the target yet
    down: list[str] = field(default_factory=list)  # not Ready or under memory pressure
    halted_by_failure: bool = False


class Gate(Protocol):
    """The node's pool (controller/pools.py): its budget is shared by every ConfigSet."""

    def held(self, node: str) -> bool:
        """Nothing may be admitted on this node (two pools select it)."""
        ...

    def take(self, node: str, *, force: bool = False) -> bool:
        """A slot of the node's pool for a change: free when the node is disrupted already;
        ``force`` (a node new to the pool) takes it whatever the budget says."""
        ...

    def min_ready(self, node: str) -> int:
        """The pool's minReadySeconds for this node."""
        ...

    def paused_pool(self, node: str) -> str:
        """The node's pool when that pool is paused (nothing is admitted on it), else ""."""
        ...

    def stages_all(self, node: str) -> bool:
        """The node's pool stages every ConfigSet (NodePool spec.stageAll)."""
        ...


class Unpooled:
    """No pools: only the ConfigSet's own maxUnavailable counts."""

    def held(self, node: str) -> bool:
        return False

    def take(self, node: str, *, force: bool = False) -> bool:
        return True

    def min_ready(self, node: str) -> int:
        return 0

    def paused_pool(self, node: str) -> str:
        return ""

    def stages_all(self, node: str) -> bool:
        return False


def _ready_since(ready_since: str | None, now: dt.datetime, seconds: int) -> bool:
    if seconds <= 0:
        return True
    if not ready_since:
        return False
    try:
        since = dt.datetime.fromisoformat(ready_since.replace("Z", "+00:00"))
    except ValueError:
        return False
    return (now - since).total_seconds() >= seconds


def _place(p: Plan, n: NodeState, target: str, ready: bool, broken: list[str]) -> None:
    """Where one node stands against ``target`` (no admission decided here)."""
    if n.down:
        # As MCO: a node that is not Ready is unavailable, takes a slot, and is not changed.
        p.down.append(n.name)
        p.unavailable.append(n.name)
        if n.admitted == target and n.reported == target and n.error:
            p.failed.append(n.name)  # a failure still halts the rollout
    elif n.admitted is None:
        # New to the fleet (admitted at once) or an existing node newly staged (a new or
        # re-created ConfigSet, rollout added, a label change): through the budget.
        p.waiting.append(n.name)
    elif n.admitted != target:
        if n.error or n.reported != n.admitted:  # broken or busy at an older revision
            broken.append(n.name)
            p.unavailable.append(n.name)
        else:
            p.waiting.append(n.name)
    elif n.reported == target and n.error:
        p.failed.append(n.name)
        p.unavailable.append(n.name)
    elif n.reported == target and ready:
        p.updated.append(n.name)
    else:
        p.unavailable.append(n.name)


def plan(
    target: str,
    rollout: Rollout,
    nodes: Sequence[NodeState],
    *,
    paused: bool,
    now: dt.datetime,
    gate: Gate | None = None,
    last_good: str | None = None,
) -> Plan:
    """Which nodes to admit to ``target`` (or, paused or halted, to ``last_good``) now, and
    where every matched node stands. ``gate`` is the pools' shared budget: a waiting node is
    admitted only with a slot of the ConfigSet's maxUnavailable and of its pool's."""
    g: Gate = gate or Unpooled()
    p, broken = _placed(target, rollout, nodes, now, g)
    fresh = {n.name for n in nodes if n.admitted is None and n.fresh and not n.down}
    p.halted_by_failure = bool(p.failed) and rollout.pause_on_failure
    held = paused or p.halted_by_failure
    _admit_new(p, fresh, g, held, last_good)
    if held:
        return _held(p, rollout, nodes, g, broken, last_good)
    # Moving an already unavailable node costs no availability: those go first, always.
    for name in broken:
        (p.admit if g.take(name) else p.waiting).append(name)
    _admit(p, p.admit, list(p.waiting), rollout.budget(len(nodes)), g)
    return p


def _held(
    p: Plan,
    rollout: Rollout,
    nodes: Sequence[NodeState],
    g: Gate,
    broken: list[str],
    last_good: str | None,
) -> Plan:
    """Paused or halted: nothing new at the target; an existing node that starts matching gets
    the last good revision, through the budget like any change."""
    joining = [n.name for n in nodes if n.admitted is None and n.name in p.waiting]
    if last_good and last_good != p.target:
        _admit(p, p.admit_last_good, sorted(joining), rollout.budget(len(nodes)), g)
    p.waiting = broken + p.waiting
    return p


def _placed(
    target: str, rollout: Rollout, nodes: Sequence[NodeState], now: dt.datetime, g: Gate
) -> tuple[Plan, list[str]]:
    """Every node placed against ``target``; and the broken ones (unavailable at an older
    revision: moving them costs no availability)."""
    p = Plan(target)
    broken: list[str] = []
    for n in sorted(nodes, key=lambda n: n.name):
        seconds = max(rollout.min_ready_seconds, g.min_ready(n.name))
        _place(p, n, target, _ready_since(n.ready_since, now, seconds), broken)
    return p, broken


def _admit_new(p: Plan, fresh: set[str], g: Gate, held: bool, last_good: str | None) -> None:
    """A node new to the fleet gets the current configuration at once (as MCO): the target,
    or while paused or halted the last good revision (paused with none yet: the target;
    halted with none: it waits, the target failed)."""
    new = [n for n in p.waiting if n in fresh and not g.held(n)]
    dest = (last_good or (None if p.halted_by_failure else p.target)) if held else p.target
    if not new or not dest:
        return
    into = p.admit if dest == p.target else p.admit_last_good
    for name in new:
        g.take(name, force=True)
        into.append(name)
        p.unavailable.append(name)
    p.waiting = [n for n in p.waiting if n not in new]


def _admit(p: Plan, into: list[str], candidates: list[str], limit: int, g: Gate) -> None:
    """Admit ``candidates`` in order while the ConfigSet's budget has room and the node's pool
    grants a slot (a node whose pool is full waits; the next one may be in another pool)."""
    for name in candidates:
        if len(p.unavailable) >= limit:
            return
        if g.held(name) or not g.take(name):
            continue
        into.append(name)
        p.unavailable.append(name)
        p.waiting.remove(name)


def expired(revisions: Mapping[str, int], keep: set[str], limit: int) -> list[str]:
    """Revision names past ``limit`` (newest kept), never one in ``keep`` (current, admitted)."""
    newest = sorted(revisions, key=lambda r: revisions[r], reverse=True)
    return [r for r in newest[max(1, limit) :] if r not in keep]


def undo_target(
    revisions: Sequence[Mapping[str, Any]], current: str, to_revision: int = 0
) -> Mapping[str, Any]:
    """The revision `rollout undo` goes back to: ``to_revision``, or the one before the current.

    Raises ValueError with a message for the command line."""
    by_number = sorted(revisions, key=lambda r: int(r.get("revision") or 0))
    if to_revision:
        for r in by_number:
            if int(r.get("revision") or 0) == to_revision:
                return r
        raise ValueError(f"unable to find the specified revision {to_revision}")
    numbers = {r["metadata"]["name"]: int(r.get("revision") or 0) for r in by_number}
    now = numbers.get(current, max(numbers.values(), default=0))
    earlier = [r for r in by_number if int(r.get("revision") or 0) < now]
    if not earlier:
        raise ValueError("no rollout history found: there is no earlier revision")
    return earlier[-1]


def progress(cs: Mapping[str, Any]) -> tuple[str, str]:
    """(state, message) of a ConfigSet's rollout as `rollout status` prints it.

    state is "done", "failed" (Degraded: halted or failed on a node; or past
    progressDeadlineSeconds, as kubectl says of a Deployment), "paused" or "waiting"."""
    name, status = cs["metadata"].get("name", ""), cs.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    if not _observed(cs):
        return "waiting", f'Waiting for configset "{name}" spec update to be observed...'
    stopped = _stopped(name, conditions)
    if stopped is not None:
        return "failed", stopped
    matched, updated, pending = (int(status.get(k) or 0) for k in ("matched", "updated", "pending"))
    paused = conditions.get("Paused") or {}
    if paused.get("status") == "True":
        return "paused", _paused(name, paused, f"{updated} of {matched} nodes updated")
    if updated < matched or pending:
        return (
            "waiting",
            f'Waiting for configset "{name}" rollout to finish: '
            f"{updated} of {matched} updated nodes...",
        )
    return "done", f'configset "{name}" successfully rolled out'


def _stopped(name: str, conditions: Mapping[Any, Mapping[str, Any]]) -> str | None:
    """Why the rollout will not finish by itself (failed, halted, past its deadline), or None."""
    degraded = conditions.get("Degraded") or {}
    if degraded.get("status") == "True":
        return f'configset "{name}" rollout failed: {degraded.get("message", "")}'
    progressing = conditions.get("Progressing") or {}
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        message = progressing.get("message", "")
        return f'configset "{name}" exceeded its progress deadline: {message}'
    return None


def _paused(name: str, paused: Mapping[str, Any], counts: str) -> str:
    why = f": {paused.get('message')}" if paused.get("reason") == "PoolPaused" else ""
    return f'configset "{name}" rollout is paused{why} ({counts})'


def _observed(cs: Mapping[str, Any]) -> bool:
    """The status is of the current spec (observedGeneration caught up)."""
    observed = int((cs.get("status") or {}).get("observedGeneration") or -1)
    return observed >= int(cs["metadata"].get("generation") or 0)
