"""The controller's endpoints: Prometheus metrics and /healthz, /readyz (ready = leading)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import MetricsHandler


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
        self.syncs = Counter(
            "nodemanager_controller_syncs_total", "Full syncs of the fleet.", registry=self.registry
        )
        self.leader = Gauge(
            "nodemanager_controller_leader", "1 while this replica leads.", registry=self.registry
        )


def _address(text: str) -> tuple[str, int] | None:
    """':8082' -> ('', 8082); '0' or '' disables the endpoint."""
    if text in ("", "0"):
        return None
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def _start(address: tuple[str, int], handler: Any) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(address, handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=f"http-{address[1]}", daemon=True).start()
    return server


def serve(
    metrics_address: str,
    health_address: str,
    metrics: ControllerMetrics,
    alive: Callable[[], bool],
    leading: Callable[[], bool],
) -> list[ThreadingHTTPServer]:
    servers = []
    address = _address(metrics_address)
    if address:
        servers.append(_start(address, MetricsHandler.factory(metrics.registry)))
    address = _address(health_address)
    if address:

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/healthz":
                    code, body = (200, b"ok") if alive() else (503, b"stopping")
                elif self.path == "/readyz":
                    code, body = (200, b"leading") if leading() else (503, b"standby")
                else:
                    code, body = 404, b"not found"
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        servers.append(_start(address, Handler))
    return servers
