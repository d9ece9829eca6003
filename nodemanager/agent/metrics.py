"""Prometheus metrics, label-compatible with upstream nodemanager, plus the agent's own.

Upstream's series carry a ``node`` label and ``result="success"|"error"``; package and service
counters carry ``operation``; upstream's alert rules and dashboards (deploy/monitoring/) query
those labels, so they work unchanged. Reconciles are also counted under controller-runtime's
names, which upstream's ``NodeManagerReconcileErrors`` alert reads. Process metrics come from
prometheus_client's collectors; ``_created`` series are off (one series per counter, as Go).
"""

from __future__ import annotations

import platform
import time
from collections.abc import Iterable

import prometheus_client
from prometheus_client import (
    PLATFORM_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

from nodemanager.desired.merge import DesiredState, ResourceId
from nodemanager.executor.events import TaskResult
from nodemanager.version import build_info

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
del PLATFORM_COLLECTOR  # the default registry's; this registry gets its own below

RESULT = {"ok": "success", "changed": "success", "failed": "error"}  # skipped: not an operation
PACKAGE_OPERATION = {"installed": "install", "absent": "remove", "latest": "upgrade"}
CONTROLLER = "managednode"  # the reconciler's name under controller-runtime's metrics


class Metrics:
    def __init__(self, node: str = "") -> None:
        self.node = node
        r = self.registry = CollectorRegistry()
        # 1 refused, 0 accepted (policy missing), -1 not known yet: agent/selftest.py sets it.
        self.admission_policy_enforced = Gauge(
            "nodemanager_admission_policy_enforced",
            "1 when the API server refuses this node's forbidden write (dry-run), 0 when it "
            "accepts it (the admission policy is missing), -1 before the first answer.",
            registry=r,
        )
        self.admission_policy_enforced.set(-1)
        # agent/fencing.py sets it with every step of the watchdog.
        self.watchdog_armed = Gauge(
            "nodemanager_watchdog_armed",
            "1 while the fencing watchdog device is open (the host resets if keepalives stop), "
            "else 0.",
            registry=r,
        )
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        build = build_info()
        Gauge(
            "nodemanager_build_info",
            "Build information; the value is always 1.",
            ["version", "revision", "date", "goarch", "goos"],
            registry=r,
        ).labels(
            build.version, build.commit, build.date, platform.machine(), platform.system().lower()
        ).set(1)
        self._apply_total = Counter(
            "nodemanager_configset_apply",
            "ConfigSet applies by result (success, error).",
            ["node", "configset", "result"],
            registry=r,
        )
        self._apply_duration = Histogram(
            "nodemanager_configset_apply_duration_seconds",
            "Duration of the Ansible run that applied the ConfigSet.",
            ["node", "configset"],
            buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900),
            registry=r,
        )
        self._file_changes = Counter(
            "nodemanager_file_changes",
            "File changes by ConfigSet and result.",
            ["node", "configset", "result"],
            registry=r,
        )
        self._package_ops = Counter(
            "nodemanager_package_operations",
            "Package operations (install, remove, upgrade) by result.",
            ["node", "operation", "result"],
            registry=r,
        )
        self._service_ops = Counter(
            "nodemanager_service_operations",
            "Service operations (start, stop, restart, enable, disable) by result.",
            ["node", "operation", "result"],
            registry=r,
        )
        self._conflicts = Counter(
            "nodemanager_configset_conflicts",
            "Conflicting declarations found, by ConfigSet.",
            ["node", "configset"],
            registry=r,
        )
        self._last_apply = Gauge(
            "nodemanager_last_configset_apply_timestamp_seconds",
            "When a ConfigSet was last applied without error.",
            ["node", "configset"],
            registry=r,
        )
        self._applied_version = Gauge(
            "nodemanager_configset_applied_resource_version",
            "When a ConfigSet was last applied without error, by the resourceVersion applied: "
            "rollout convergence across nodes.",
            ["node", "configset", "resource_version"],
            registry=r,
        )
        self.upgrades = Counter(
            "nodemanager_upgrade", "Node upgrades by result.", ["node", "result"], registry=r
        )
        self._reconciles = Counter(
            "nodemanager_reconcile",
            "Reconciles by outcome (applied, unchanged, failed; error: it could not complete).",
            ["outcome"],
            registry=r,
        )
        self._cr_reconciles = Counter(
            "controller_runtime_reconcile",
            "Reconciles by controller and result (success, error), as controller-runtime.",
            ["controller", "result"],
            registry=r,
        )
        self._cr_errors = Counter(
            "controller_runtime_reconcile_errors",
            "Reconcile errors by controller, as controller-runtime.",
            ["controller"],
            registry=r,
        )
        self.ansible_runs = Counter("nodemanager_ansible_runs", "Ansible runs started.", registry=r)
        self.informer_lists = Counter(
            "nodemanager_informer_lists",
            "Full lists per kind (first sync and relists).",
            ["kind"],
            registry=r,
        )
        self.api_requests = Counter(
            "nodemanager_api_requests",
            "Requests sent to the API server by method.",
            ["method"],
            registry=r,
        )
        self.upgrade_duration = Histogram(
            "nodemanager_upgrade_duration_seconds",
            "Duration of OS upgrades.",
            ["node"],
            buckets=(10, 30, 60, 120, 300, 600, 1200, 1800, 3600),
            registry=r,
        )
        self.last_upgrade = Gauge(
            "nodemanager_last_upgrade_timestamp_seconds",
            "When the OS was last upgraded successfully.",
            ["node"],
            registry=r,
        )
        self.cordoned = Gauge(
            "nodemanager_kubernetes_node_cordoned_timestamp_seconds",
            "Since when the agent keeps the Kubernetes Node of its name cordoned for an upgrade; "
            "0 when it does not.",
            ["node"],
            registry=r,
        )
        self.pressure = Gauge(
            "nodemanager_pressure_stall_percent",
            "PSI: percent of wall time tasks stalled on the resource (kind some|full) over the "
            "window (10s, 60s, 300s), from /proc/pressure (agent/pressure.py sets it).",
            ["node", "resource", "kind", "window"],
            registry=r,
        )
        self.status_writes = Counter(
            "nodemanager_status_writes", "ManagedNode status patches.", registry=r
        )
        self._versions: dict[str, str] = {}  # configset -> the resourceVersion in the gauge

    # -- what the reconciler reports -------------------------------------------------------

    def observe_run(self, seconds: float, configsets: Iterable[str]) -> None:
        """One Ansible run applies every ConfigSet it covers at once: each of them took the
        run's time (so quantiles per ConfigSet are right; a sum over ConfigSets is not)."""
        for name in configsets:
            self._apply_duration.labels(self.node, name).observe(seconds)

    def configset_applied(self, name: str, resource_version: str, *, error: bool) -> None:
        self._apply_total.labels(self.node, name, "error" if error else "success").inc()
        if error:
            return
        now = time.time()
        self._last_apply.labels(self.node, name).set(now)
        old = self._versions.get(name)
        if old is not None and old != resource_version:  # one series per ConfigSet
            self._applied_version.remove(self.node, name, old)
        self._versions[name] = resource_version
        self._applied_version.labels(self.node, name, resource_version).set(now)

    def conflicts(self, configsets: Iterable[str]) -> None:
        for name in configsets:
            self._conflicts.labels(self.node, name).inc()

    def reconciled(self, outcome: str) -> None:
        self._reconciles.labels(outcome).inc()
        error = outcome in ("failed", "error")
        self._cr_reconciles.labels(CONTROLLER, "error" if error else "success").inc()
        if error:
            self._cr_errors.labels(CONTROLLER).inc()

    def record_results(
        self, results: Iterable[TaskResult], desired: DesiredState | None = None
    ) -> None:
        """Count each task that did something (changed) or failed, by what it did. ``desired``
        (the plan's DesiredState) says what a package or service task was asked for."""
        specs: dict[str, object] = (
            {r.id: r.spec for r in desired.resources} if desired is not None else {}
        )
        for r in results:
            result = RESULT.get(r.status)
            if result is None or r.status == "ok":
                continue
            kind = ResourceId(r.resource).kind
            spec = specs.get(r.resource)
            if kind == "file":
                for configset in r.configsets or ("",):
                    self._file_changes.labels(self.node, configset, result).inc()
            elif kind == "package":
                operation = PACKAGE_OPERATION.get(getattr(spec, "ensure", ""), "install")
                self._package_ops.labels(self.node, operation, result).inc()
            elif kind == "service":
                self._service_ops.labels(self.node, _service_operation(r, spec), result).inc()


def _service_operation(result: TaskResult, spec: object) -> str:
    if result.handler:
        return "restart"
    if result.task.endswith(" enabled"):  # the separate enable task (see playbook/build.py)
        return "enable" if getattr(spec, "enable", False) else "disable"
    return "stop" if getattr(spec, "ensure", None) == "stopped" else "start"
