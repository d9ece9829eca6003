"""Reconcile the whole node from a snapshot of the cache: plan, decide, run, outcomes.

- plan (``agent/plan.py``): parse, select, merge, render, build; cached while inputs are equal.
- decide: only resources whose planned tasks differ from what last applied cleanly run
  (digests kept under --state-dir), or everything when a drift check is due.
- run: the executor (fast path, then Ansible for the rest).
- outcomes: one ``ConfigSetResult`` per ConfigSet, then the status, an Event, the notifications.

A reconcile returns the status it wants and when to come back (``Result``); it never sleeps and
never writes status itself (the daemon does, only when it changed). A failure comes back after
an exponential backoff with jitter (``nodemanager/backoff.py``), reset when the inputs change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodemanager.agent.hostfeatures import HostFeatures
from nodemanager.agent.identity import NodeIdentity
from nodemanager.agent.metrics import Metrics
from nodemanager.agent.plan import NodePlan, Planner
from nodemanager.agent.report import log_outcomes, log_results
from nodemanager.agent.retries import stable
from nodemanager.agent.sources import Snapshot
from nodemanager.agent.state import Applied, StateStore
from nodemanager.agent.status import compute
from nodemanager.api import ConfigSet, File
from nodemanager.api.nodereport import parse_report
from nodemanager.backoff import Backoff
from nodemanager.executor.errors import ExecutorError
from nodemanager.executor.run import RunResult, apply
from nodemanager.executor.summary import ConfigSetResult, Failure, summarize
from nodemanager.playbook.build import Plan

log = logging.getLogger(__name__)
RETRY_BASE, RETRY_CAP = 5.0, 300.0  # seconds: a failed apply is retried after 2.5-5 s, ... 5 min


@dataclass(frozen=True)
class Result:
    """What one reconcile wants: the status to write and when to be called again.

    ``requeue_after`` is set only after a failure (seconds, backed off); the daemon comes back
    earlier anyway when an input changes. ``event`` is (reason, message, warning)."""

    status: dict[str, Any]
    ran: bool = False
    failed: bool = False
    requeue_after: float | None = None
    event: tuple[str, str, bool] | None = None
    # ConfigSets with spec.notifies[] that applied cleanly, each with whether it changed
    # something on the host (the daemon notifies once per generation, as upstream).
    notify: tuple[Notification, ...] = ()


@dataclass(frozen=True)
class Notification:
    configset: ConfigSet
    changed: bool  # it changed something on this host in this run


@dataclass(frozen=True)
class Decision:
    """What to run: a plan limited to ``resources`` (every resource on a drift check)."""

    plan: Plan
    resources: frozenset[str]


@dataclass
class Run:
    decision: Decision
    result: RunResult
    configsets: set[str] = field(default_factory=set)  # ConfigSets with a task in the run


class Reconciler:
    def __init__(
        self,
        *,
        name: str,
        managed_labels: Mapping[str, str],
        family: str,
        store: StateStore,
        metrics: Metrics,
        agent_version: str,
        observe: Callable[[], Mapping[str, Any]],
        run: Callable[..., RunResult] = apply,
        clock: Callable[[], str] | None = None,
        host: HostFeatures | None = None,
    ):
        self.name = name
        self.planner = Planner(NodeIdentity(name, dict(managed_labels), family))
        self.store, self.metrics, self.agent_version = store, metrics, agent_version
        self.observe, self.run = observe, run
        self.host = host  # file backups and the WireGuard key (agent/hostfeatures.py)
        self.clock = clock or (lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self.applied: Applied = store.load()
        self.retry = Backoff(RETRY_BASE, RETRY_CAP)
        self._failed_inputs: Hashable = None
        # (plan, applied digests) found in sync: the Planner returns the same NodePlan object
        # while inputs are equal and every run assigns a new digests dict, so identity suffices.
        self._in_sync: tuple[NodePlan, dict[str, str]] | None = None
        self._observed: Mapping[str, Any] | None = None

    def uses_nodes(self, snap: Snapshot) -> bool:
        return self.planner.uses_nodes(snap)

    def reconcile(self, snap: Snapshot, *, full: bool) -> Result:
        """plan -> decide -> run -> outcomes, then the status, Event and notifications."""
        now = self.clock()
        planned = self.planner.plan(snap)
        decision = self.decide(planned, full=full)
        run = self.execute(decision, planned) if decision else None
        results = self.outcomes(planned, run, snap, now)
        failed = any(r.failures for r in results)
        self._count(planned, results, run, failed)
        self.applied.snapshot = snap
        self.store.save(self.applied, inputs=planned.key)
        secret = frozenset(
            r.key
            for r in planned.desired.of_kind("file")
            if isinstance(r.spec, File) and r.spec.uses_secrets
        ) | frozenset(p for p, c in planned.contents.items() if c.secret)  # no digest in status
        status, host_event = self._status(snap, results, full=full, now=now, secret=secret)
        return Result(
            status,
            ran=bool(run and run.result.ansible),
            failed=failed,
            requeue_after=self._requeue(planned, failed),
            event=_event(planned, results, run, failed) or host_event,
            notify=_due_notifications(planned, results, run),
        )

    # -- decide ------------------------------------------------------------------------------

    def decide(self, planned: NodePlan, *, full: bool) -> Decision | None:
        """Everything on a drift check; else the resources whose digest differs from the one
        that last applied cleanly; None when there is nothing to do."""
        if full:
            return Decision(planned.plan, frozenset(planned.digests))
        applied = self.applied.digests
        if self._in_sync and self._in_sync[0] is planned and self._in_sync[1] is applied:
            return None  # the same plan and the same applied digests as last time: in sync
        changed = frozenset(rid for rid, d in planned.digests.items() if applied.get(rid) != d)
        if not changed:
            self._in_sync = (planned, applied)
            return None
        return Decision(planned.plan.only(set(changed)), changed)

    # -- run ---------------------------------------------------------------------------------

    def execute(self, decision: Decision, planned: NodePlan) -> Run:
        """Run the decided plan and remember the digests of what applied cleanly."""
        plan = decision.plan
        involved = {name for o in plan.origins.values() for name in o.configsets}
        started = time.monotonic()
        try:
            hooks = (
                {"before_change": self.host.before_change(plan, planned.contents)}
                if self.host
                else {}
            )
            result = self.run(plan, **hooks)
        except ExecutorError as e:  # Ansible could not start at all (missing module, no pty)
            result = RunResult("failed", -1, (), ansible=False, message=str(e))
        finally:
            if self.host:
                self.host.after_run()  # services[].lock_group: give the Leases back
        if result.ansible:
            self.metrics.ansible_runs.inc()
            self.metrics.observe_run(time.monotonic() - started, involved)
        self.metrics.record_results(result.results, plan.desired)
        log_results(result.results)
        self._remember(planned, decision, result)
        return Run(decision, result, involved)

    def _remember(self, planned: NodePlan, decision: Decision, result: RunResult) -> None:
        failed = {r.resource for r in result.results if r.status == "failed"}
        if result.status != "successful" and not failed:
            self.applied.digests = {}  # the run broke down as a whole: trust nothing it did
            return
        digests, ran = planned.digests, decision.resources
        kept = {rid: d for rid, d in self.applied.digests.items() if rid in digests}
        for rid in ran:
            if rid in digests and rid not in failed:
                kept[rid] = digests[rid]
            else:
                kept.pop(rid, None)
        self.applied.digests = kept

    # -- outcomes ----------------------------------------------------------------------------

    def outcomes(
        self, planned: NodePlan, run: Run | None, snap: Snapshot, now: str
    ) -> list[ConfigSetResult]:
        """One result per selected ConfigSet, plus the invalid ones that target this node."""
        by_name = summarize(planned.desired, run.result.results if run else (), planned.errors)
        previous = parse_report(snap.node or {}).entries
        applied_at = self.applied.applied_at
        results = []
        for cs in planned.desired.configsets:
            r = by_name[cs.name]
            # Stable text: a repeat must not change the status (retries.stable).
            r.failures = [Failure(f.resource, stable(f.message)) for f in r.failures]
            if run and run.result.status != "successful" and not r.failures:
                if cs.name in run.configsets:
                    r.failures.append(Failure("", stable(run.result.breakdown())))
            key = f"{cs.name}@{cs.resource_version}"
            if not r.failures:
                applied_at.setdefault(key, now)
            before = previous.get(cs.name)
            r.last_applied = applied_at.get(key) or (before.last_applied if before else None)
            results.append(r)
        for bad in planned.invalid:
            if bad.targets(planned.node.labels):
                failure = Failure("", f"InvalidSpec: {bad.error}")
                results.append(
                    ConfigSetResult(
                        bad.name, bad.resource_version, bad.generation, failures=[failure]
                    )
                )
        live = {f"{cs.name}@{cs.resource_version}" for cs in planned.desired.configsets}
        self.applied.applied_at = {k: v for k, v in applied_at.items() if k in live}
        return results

    def _count(
        self, planned: NodePlan, results: list[ConfigSetResult], run: Run | None, failed: bool
    ) -> None:
        """Log lines and metrics of one reconcile."""
        log_outcomes(results)
        self.metrics.conflicts(n for c in planned.desired.conflicts for n in c.configsets)
        if run:
            for r in results:
                self.metrics.configset_applied(r.name, r.resource_version, error=bool(r.failures))
        outcome = "failed" if failed else ("applied" if _acted(run) else "unchanged")
        self.metrics.reconciled(outcome)

    def _status(
        self,
        snap: Snapshot,
        results: list[ConfigSetResult],
        *,
        full: bool,
        now: str,
        secret: frozenset[str] = frozenset(),
    ) -> tuple[dict[str, Any], tuple[str, str, bool] | None]:
        if full or self._observed is None:  # the host's facts are re-read with each drift check
            self._observed = self.observe()
        observed, host_event = (
            self.host.status(snap.node, self._observed, full=full, secret=secret)
            if self.host
            else (self._observed, None)
        )
        status = compute(
            observed=observed,
            agent_version=self.agent_version,
            outcomes=results,
            previous=(snap.node or {}).get("status") or {},
            generation=(snap.node.get("metadata") or {}).get("generation", 0),
            now=now,
        )
        if self.host:
            status = self.host.finish(status, (snap.node or {}).get("status") or {}, now)
        return status, host_event

    def _requeue(self, planned: NodePlan, failed: bool) -> float | None:
        """After a failure, when to try again: backed off, restarting when the inputs changed."""
        if not failed:
            self.retry.reset()
            self._failed_inputs = None
            return None
        if planned.key is None or planned.key != self._failed_inputs:
            self.retry.reset()
        self._failed_inputs = planned.key
        return self.retry.next()


def _acted(run: Run | None) -> bool:
    """Something was done when Ansible ran or the fast path wrote natively."""
    return bool(run and (run.result.ansible or run.result.changed()))


def _event(
    planned: NodePlan, results: list[ConfigSetResult], run: Run | None, failed: bool
) -> tuple[str, str, bool] | None:
    if not run or not (_acted(run) or failed):
        return None
    if failed:
        message = "; ".join(f"{r.name}: {r.error}" for r in results if r.failures)
        return "ApplyFailed", message, True
    changed = len(run.result.changed())
    count = len(planned.desired.configsets)
    return "Applied", f"{count} ConfigSets applied, {changed} tasks changed", False


def _due_notifications(
    planned: NodePlan, results: list[ConfigSetResult], run: Run | None
) -> tuple[Notification, ...]:
    touched = {name for r in (run.result.changed() if run else ()) for name in r.configsets}
    clean = {r.name for r in results if not r.failures}
    return tuple(
        Notification(cs, cs.name in touched)
        for cs in planned.desired.configsets
        if cs.notifies and cs.name in clean
    )
