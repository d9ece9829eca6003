"""Reconcile one ConfigSet from the caches: its status, and for a staged one its rollout step.

``reconcile`` reads the ConfigSet, the parsed ManagedNodes and its ControllerRevisions and
returns an ``Outcome`` (effects.py): the rollout's writes (revisions, admissions, ready marks,
collected from staging.py through ``Deferred``), then the status write, with the Events they
earn. It never calls the API server. ``Memory`` is what the controller remembers between syncs;
all of it is rebuilt after a restart (a whole progress deadline again, the status read back).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodemanager.controller import events, rollout, staging
from nodemanager.controller.effects import Deferred, Effect, Outcome, Write
from nodemanager.controller.summary import (
    NodeView,
    configset_status,
    differs,
    progress_only,
    waiting,
)
from nodemanager.controller.written import StatusWrites
from nodemanager.kube.recorder import involved

log = logging.getLogger(__name__)


@dataclass
class Memory(StatusWrites):
    """The status writes the cache may not show yet (written.py), and the rollouts' state.

    What follows a write (the revision a rollout aims at, a ready mark) is remembered only
    from writes the API server took (``applied``, controller-runtime's expectations): a failed
    write leaves memory as it was, so the next try (with the object's backoff) plans it again."""

    METHOD = "patch_configset_status"
    # ConfigSet -> (revision, updated nodes, when that last changed): progress deadlines
    progress: dict[str, tuple[str, int, float]] = field(default_factory=dict)
    targets: dict[str, str] = field(default_factory=dict)  # revision the rollout last aimed at
    # (ConfigSet, node, revision) -> the ready time written, until the cache shows it
    ready_marked: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def applied(
        self, name: str, done: Sequence[Effect], mono: float, resource_version: str
    ) -> None:
        super().applied(name, done, mono, resource_version)
        for effect in done:
            if isinstance(effect, Write):
                self._confirmed(name, effect)

    def _confirmed(self, name: str, write: Write) -> None:
        args = write.args
        if write.method == "mark_ready":
            node, _field, configset, revision, since = args
            self.ready_marked[(configset, node, revision)] = since
        elif write.method == "create_revision":
            self.targets[name] = args[0]["metadata"]["name"]
            log.info(
                "ConfigSet %s: revision %d (%s)", name, args[0]["revision"], self.targets[name]
            )
        elif write.method == "renumber_revision":
            self.targets[name] = args[0]
            log.info("ConfigSet %s: revision %s is current again as %d", name, *args)
        elif write.method == self.METHOD and args[1].get("updateRevision"):
            self.targets[name] = args[1]["updateRevision"]
        elif write.method == "admit":
            log.info("ConfigSet %s: admitted %s to %s", name, args[0], args[3])
        elif write.method == "delete_revision":
            log.info("ConfigSet %s: revision %s deleted (revisionHistoryLimit)", name, args[0])


@dataclass(frozen=True)
class Settings:
    namespace: str
    progress_period: float  # progress-only status writes at most this often
    requeue: float  # how soon to look again when a rollout waits on time


def reconcile(
    raw: Mapping[str, Any],
    views: Sequence[NodeView],
    nodes: Sequence[Mapping[str, Any]],
    revisions: Sequence[Mapping[str, Any]],
    memory: Memory,
    settings: Settings,
    *,
    now: str,
    mono: float,
    gate: rollout.Gate | None = None,
) -> Outcome:
    """The writes and Events that bring one ConfigSet's rollout and status up to date;
    ``gate``: the pools' budget this sync's rollouts share (controller/pools.py)."""
    name = raw["metadata"]["name"]
    base = {**raw, "status": memory.base(raw)}
    staged = staging.settings(raw, nodes, gate)
    if staged is None:
        step = _Step(configset_status(base, views, now=now), [], [], False)
    else:
        step = _rollout(
            raw, base, views, nodes, revisions, memory, settings, staged, now, mono, gate
        )
    effects, notes, waits = step.effects, step.notes, step.waits
    if differs(step.wanted, base["status"]):
        recent = memory.since(name, mono) < settings.progress_period
        if recent and progress_only(step.wanted, base["status"]):
            waits = True  # a progress-only write waits: every agent's watch receives each one
        else:
            effects.append(Write("configset_status", "patch_configset_status", (name, step.wanted)))
            # Transitions only from a status actually written: the Events are recorded after
            # the effects, and not at all when a write failed (it is retried).
            notes.extend(events.transitions(base["status"], step.wanted))
    return Outcome(
        tuple(effects),
        tuple(notes),
        involved(raw, "ConfigSet"),
        settings.requeue if waits else None,
    )


@dataclass
class _Step:
    wanted: dict[str, Any]  # the status
    effects: list[Effect]  # the rollout's writes, before the status
    notes: list[events.Note]
    waits: bool  # on time: minReadySeconds, a progress deadline


def _rollout(
    raw: Mapping[str, Any],
    base: Mapping[str, Any],
    views: Sequence[NodeView],
    nodes: Sequence[Mapping[str, Any]],
    revisions: Sequence[Mapping[str, Any]],
    memory: Memory,
    settings: Settings,
    staged: rollout.Rollout,
    now: str,
    mono: float,
    gate: rollout.Gate | None,
) -> _Step:
    """A staged ConfigSet's rollout step (staging.py) and the status it earns."""
    name = raw["metadata"]["name"]
    deferred = Deferred()
    mine = [r for r in revisions if _owner(r) == name]
    last = memory.targets.get(name) or (raw.get("status") or {}).get("updateRevision")
    step = staging.sync(
        deferred,
        settings.namespace,
        raw,
        staged,
        nodes,
        mine,
        last,
        memory.ready_marked,
        gate,
        now=dt.datetime.fromisoformat(now.replace("Z", "+00:00")),  # one clock per sync
    )
    held = bool((raw.get("spec") or {}).get("paused") or step.halted or step.held_by_pool)
    stalled = _stalled(memory, name, staged, step, held, mono)
    wanted = configset_status(
        base,
        views,
        now=now,
        extra=step.extra,
        counts=step.counts,
        halted=step.halted,
        held_by_pool=step.held_by_pool,
        stalled=stalled,
        waits=step.waits,
    )
    waits = bool(step.counts.pending and not stalled and not held) or (
        staged.min_ready_seconds > 0 and step.extra["unavailable"] > 0
    )
    return _Step(wanted, list(deferred.effects), list(step.notes), waits)


def _owner(revision: Mapping[str, Any]) -> str | None:
    return (revision["metadata"].get("labels") or {}).get(rollout.CONFIGSET_LABEL)


def _stalled(
    memory: Memory,
    name: str,
    settings: rollout.Rollout,
    step: staging.Outcome,
    held: bool,
    mono: float,
) -> str:
    """The ProgressDeadlineExceeded message once no node got updated for the deadline (the
    controller's clock; a restart gives the rollout a whole deadline again)."""
    mark = (str(step.extra["updateRevision"]), len(step.counts.updated))
    prior = memory.progress.get(name)
    if prior is None or prior[:2] != mark or not step.counts.pending or held:
        memory.progress[name] = (*mark, mono)
        return ""
    if mono - prior[2] < settings.progress_deadline_seconds:
        return ""
    return (
        f"no node updated for {settings.progress_deadline_seconds}s; "
        f"waiting for {waiting(step.counts.pending, step.waits)}"
    )
