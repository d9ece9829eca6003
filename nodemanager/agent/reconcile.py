"""Reconcile the whole node from a snapshot of the cache: select, merge, render, plan, run.

Ansible runs only for resources whose planned tasks differ from what last applied cleanly
(digests kept under --state-dir), or for everything when a drift check is due. A reconcile
returns the status it wants and when to come back; it never sleeps and never writes status
itself (the daemon does, only when it changed).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nodemanager.agent.hostfeatures import HostFeatures
from nodemanager.agent.metrics import Metrics
from nodemanager.agent.report import log_outcomes, log_results
from nodemanager.agent.state import Applied, Snapshot, StateStore
from nodemanager.agent.status import ConfigSetOutcome, compute
from nodemanager.api import ConfigSet, InvalidObject, Node
from nodemanager.desired.merge import merge
from nodemanager.desired.select import matches, select
from nodemanager.desired.templates import TemplateData, render_templates
from nodemanager.executor.errors import ExecutorError
from nodemanager.executor.run import RunResult, apply
from nodemanager.executor.summary import summarize
from nodemanager.playbook.build import build

log = logging.getLogger(__name__)
RETRY_AFTER_FAILURE = 60.0


@dataclass(frozen=True)
class Result:
    status: dict[str, Any]
    ran: bool = False
    failed: bool = False
    requeue_after: float | None = None
    event: tuple[str, str, bool] | None = None  # (reason, message, warning)
    # ConfigSets whose spec.notifies[] are due: they changed something and applied cleanly.
    notify: tuple[ConfigSet, ...] = ()


def _invalid_matching(raw: Mapping[str, Any], labels: Mapping[str, str]) -> str | None:
    """The error of an invalid ConfigSet that targets this node, shown in this node's status."""
    try:
        ConfigSet.from_dict(raw)
        return None
    except InvalidObject as e:
        error = "; ".join(str(x) for x in e.errors)
    meta = raw.get("metadata") or {}
    try:
        probe = ConfigSet.from_dict(
            {
                "metadata": meta,
                "spec": {k: v for k, v in (raw.get("spec") or {}).items() if k == "selector"},
            }
        )
    except InvalidObject:
        return error  # even its selector is broken: report it rather than hide it
    return error if matches(probe, labels) else None


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
        self.name, self.managed_labels, self.family = name, dict(managed_labels), family
        self.store, self.metrics, self.agent_version = store, metrics, agent_version
        self.observe, self.run = observe, run
        self.host = host  # file backups and the WireGuard key (agent/hostfeatures.py)
        self.clock = clock or (lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self.applied: Applied = store.load()
        self._observed: Mapping[str, Any] | None = None

    def labels(self, node: Mapping[str, Any]) -> dict[str, str]:
        return {**((node.get("metadata") or {}).get("labels") or {}), **self.managed_labels}

    def uses_nodes(self, snap: Snapshot) -> bool:
        return any(
            "nodes" in (f.get("template") or "")
            for cs in snap.configsets
            for f in (cs.get("spec") or {}).get("files") or []
        )

    def reconcile(self, snap: Snapshot, *, full: bool) -> Result:
        now = self.clock()
        labels = self.labels(snap.node)
        parsed, invalid = [], {}
        for raw in snap.configsets:
            try:
                parsed.append(ConfigSet.from_dict(raw))
            except InvalidObject as e:
                error = _invalid_matching(raw, labels)
                if error:
                    invalid[e.name] = (raw, error)

        merged = merge(select(parsed, labels))
        me = Node(self.name, labels, (snap.node or {}).get("status") or {})
        others = tuple(Node.from_dict(n) for n in snap.nodes)
        desired, contents, template_failures = render_templates(
            merged, TemplateData(me, others, snap.secrets, snap.configmaps)
        )
        plan = build(desired, self.family, self.name, contents=contents)
        digests = plan.resource_digests()
        changed = {rid for rid, d in digests.items() if self.applied.digests.get(rid) != d}

        run_result, involved = None, set()
        if full or changed:
            to_run = plan if full else plan.only(changed)
            involved = {name for o in to_run.origins.values() for name in o.configsets}
            started = time.monotonic()
            try:
                hooks = (
                    {"before_change": self.host.before_change(to_run, contents)}
                    if self.host
                    else {}
                )
                run_result = self.run(to_run, **hooks)
            except ExecutorError as e:  # Ansible could not start at all (missing module, no pty)
                run_result = RunResult("failed", -1, (), ansible=False, message=str(e))
            if run_result.ansible:
                self.metrics.ansible_runs.inc()
                self.metrics.observe_run(time.monotonic() - started, involved)
            self.metrics.record_results(run_result.results, to_run.desired)
            log_results(run_result.results)
            failed_ids = {r.resource for r in run_result.results if r.status == "failed"}
            ran_ids = {o.resource for o in to_run.origins.values()} if full else changed
            kept = {
                rid: d
                for rid, d in self.applied.digests.items()
                if rid in digests and rid not in ran_ids
            }
            kept.update(
                {rid: digests[rid] for rid in ran_ids if rid in digests and rid not in failed_ids}
            )
            if run_result.status != "successful" and not failed_ids:
                kept = {}  # the run broke down as a whole: trust nothing it did
            self.applied.digests = kept

        summaries = summarize(
            merged, run_result.results if run_result else (), {**template_failures, **plan.errors}
        )
        outcomes = []
        previous_entries = {
            e["name"]: e for e in ((snap.node or {}).get("status") or {}).get("configsets") or []
        }
        for cs in merged.configsets:
            s = summaries[cs.name]
            errors = [f"{rid}: {msg}" for rid, msg in s.failures]
            if (
                run_result
                and run_result.status != "successful"
                and not s.failures
                and cs.name in involved
            ):
                errors.append(run_result.breakdown())
            key = f"{cs.name}@{cs.resource_version}"
            if not errors and key not in self.applied.applied_at and (run_result or not changed):
                self.applied.applied_at[key] = now
            outcomes.append(
                ConfigSetOutcome(
                    cs.name,
                    cs.resource_version,
                    cs.generation,
                    errors,
                    list(s.conflicts),
                    self.applied.applied_at.get(key)
                    or previous_entries.get(cs.name, {}).get("lastApplied"),
                )
            )
        for name, (raw, error) in invalid.items():
            meta = raw.get("metadata") or {}
            outcomes.append(
                ConfigSetOutcome(
                    name,
                    meta.get("resourceVersion", ""),
                    meta.get("generation", 0),
                    [f"InvalidSpec: {error}"],
                )
            )
        live = {f"{cs.name}@{cs.resource_version}" for cs in merged.configsets}
        self.applied.applied_at = {k: v for k, v in self.applied.applied_at.items() if k in live}

        log_outcomes(outcomes)
        self.metrics.conflicts(n for c in merged.conflicts for n in c.configsets)
        failed = any(o.errors for o in outcomes)
        for o in outcomes:
            if run_result:
                self.metrics.configset_applied(o.name, o.resource_version, error=bool(o.errors))
        # Something was done when Ansible ran or the fast path wrote natively.
        acted = bool(run_result and (run_result.ansible or run_result.changed()))
        outcome = "failed" if failed else ("applied" if acted else "unchanged")
        self.metrics.reconciled(outcome)

        self.applied.snapshot = snap
        self.store.save(self.applied)
        if (
            full or self._observed is None
        ):  # the host's facts are re-read with each drift check only
            self._observed = self.observe()
        observed, host_event = (
            self.host.status(snap.node, self._observed, full=full)
            if self.host
            else (self._observed, None)
        )
        status = compute(
            observed=observed,
            agent_version=self.agent_version,
            outcomes=outcomes,
            previous=(snap.node or {}).get("status") or {},
            generation=(snap.node.get("metadata") or {}).get("generation", 0),
            now=now,
        )
        event = None
        if run_result and (acted or failed):
            changed_count = len(run_result.changed())
            if failed:
                event = (
                    "ApplyFailed",
                    "; ".join(f"{o.name}: {'; '.join(o.errors)}" for o in outcomes if o.errors),
                    True,
                )
            else:
                event = (
                    "Applied",
                    f"{len(merged.configsets)} ConfigSets applied, {changed_count} tasks changed",
                    False,
                )
        event = event or host_event
        touched = {
            name for r in (run_result.changed() if run_result else ()) for name in r.configsets
        }
        clean = {o.name for o in outcomes if not o.errors}
        notify = tuple(cs for cs in merged.configsets if cs.notifies and cs.name in touched & clean)
        return Result(
            status,
            ran=bool(run_result and run_result.ansible),
            failed=failed,
            requeue_after=RETRY_AFTER_FAILURE if failed else None,
            event=event,
            notify=notify,
        )
