"""The HTTP endpoints of the agent and the controller: Prometheus metrics and plain-text probes.

A port that cannot be bound is logged and the endpoint is left out: probes must never stop the
work they report on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import MetricsHandler

log = logging.getLogger(__name__)

# A probe answers (HTTP status, text).
Probe = Callable[[], tuple[int, str]]


def parse_address(address: str) -> tuple[str, int] | None:
    """':8080' -> ('', 8080); '0' or '' disables the endpoint (as controller-runtime does)."""
    if address in ("", "0"):
        return None
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _serve(
    address: str, handler: type[BaseHTTPRequestHandler], what: str
) -> ThreadingHTTPServer | None:
    parsed = parse_address(address)
    if not parsed:
        return None
    try:
        server = ThreadingHTTPServer(parsed, handler)
    except OSError as e:  # port in use, no permission: the work goes on without the endpoint
        log.error("cannot serve %s on %s:%d: %s; continuing without it", what, *parsed, e)
        return None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=f"http-{parsed[1]}", daemon=True).start()
    return server


def serve_metrics(address: str, registry: CollectorRegistry) -> ThreadingHTTPServer | None:
    return _serve(address, MetricsHandler.factory(registry), "metrics")


def serve_probes(address: str, probes: Mapping[str, Probe]) -> ThreadingHTTPServer | None:
    """Serve each path of ``probes`` (e.g. /healthz, /readyz) as text; other paths are 404."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            probe = probes.get(self.path)
            code, text = probe() if probe else (404, "not found")
            body = text.encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every few seconds would flood the log

    return _serve(address, Handler, "health probes")
