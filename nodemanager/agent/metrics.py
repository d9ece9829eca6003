"""Prometheus metrics on the upstream names, plus the agent's own reconcile counters."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from nodemanager import __version__
from nodemanager.executor.events import TaskResult


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.build_info = Gauge(
            "nodemanager_build_info", "Build information.", ["version"], registry=r
        )
        self.build_info.labels(__version__).set(1)
        self.apply_total = Counter(
            "nodemanager_configset_apply",
            "ConfigSet applies by result.",
            ["configset", "result"],
            registry=r,
        )
        self.apply_duration = Histogram(
            "nodemanager_configset_apply_duration_seconds",
            "Duration of Ansible runs.",
            buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900),
            registry=r,
        )
        self.file_changes = Counter(
            "nodemanager_file_changes", "Files changed on the host.", registry=r
        )
        self.package_ops = Counter(
            "nodemanager_package_operations", "Package tasks by result.", ["result"], registry=r
        )
        self.service_ops = Counter(
            "nodemanager_service_operations", "Service tasks by result.", ["result"], registry=r
        )
        self.conflicts = Counter(
            "nodemanager_configset_conflicts", "Conflicting declarations found.", registry=r
        )
        self.last_apply = Gauge(
            "nodemanager_last_configset_apply_timestamp_seconds",
            "When a ConfigSet was last applied.",
            ["configset"],
            registry=r,
        )
        self.reconciles = Counter(
            "nodemanager_reconcile",
            "Reconciles by outcome (applied, unchanged, failed).",
            ["outcome"],
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
        self.status_writes = Counter(
            "nodemanager_status_writes", "ManagedNode status patches.", registry=r
        )

    def record_results(self, results: Iterable[TaskResult]) -> None:
        for r in results:
            kind = r.resource.split(":", 1)[0]
            if kind == "file" and r.status == "changed":
                self.file_changes.inc()
            elif kind == "package":
                self.package_ops.labels(r.status).inc()
            elif kind == "service":
                self.service_ops.labels(r.status).inc()
