"""The controller's endpoints: Prometheus metrics and /healthz, /readyz (ready = leading)."""

from __future__ import annotations

from collections.abc import Callable
from http.server import ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge

from nodemanager.endpoints import Probe, serve_metrics, serve_probes


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.api_requests = Counter(
            "nodemanager_controller_api_requests_total",
            "Requests sent to the API server, by HTTP method.",
            ["method"],
            registry=self.registry,
        )
        self.writes = Counter(
            "nodemanager_controller_writes_total",
            "Objects written, by what was written.",
            ["kind"],
            registry=self.registry,
        )
        self.lease_reads = Counter(
            "nodemanager_controller_lease_reads_total",
            "Leases read to confirm an expiry the cache showed before marking a node.",
            registry=self.registry,
        )
        self.syncs = Counter(
            "nodemanager_controller_syncs_total", "Full syncs of the fleet.", registry=self.registry
        )
        self.leader = Gauge(
            "nodemanager_controller_leader", "1 while this replica leads.", registry=self.registry
        )


def serve(
    metrics_address: str,
    health_address: str,
    metrics: ControllerMetrics,
    alive: Callable[[], bool],
    leading: Callable[[], bool],
) -> list[ThreadingHTTPServer]:
    probes: dict[str, Probe] = {
        "/healthz": lambda: (200, "ok") if alive() else (503, "stopping"),
        "/readyz": lambda: (200, "leading") if leading() else (503, "standby"),
    }
    servers = [
        serve_metrics(metrics_address, metrics.registry),
        serve_probes(health_address, probes),
    ]
    return [s for s in servers if s]
