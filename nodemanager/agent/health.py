"""The metrics endpoint and the /healthz and /readyz probes.

/healthz means "the worker makes progress": it fails once a reconcile has run longer than the
stuck limit, so a supervisor restarts an agent that stopped enforcing. A port that cannot be
bound is logged and the endpoint is left out: the probes must never stop enforcement.
"""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import MetricsHandler

log = logging.getLogger(__name__)


class Liveness:
    """The worker says when a reconcile starts and ends; anyone may ask whether it is stuck.

    Plain attribute writes, no lock: readers only need a recent value, and the signal path
    and the HTTP threads must never wait on the worker."""

    def __init__(self, stuck_after: float):
        self.stuck_after = stuck_after
        self.busy_since: float | None = None

    def busy(self) -> None:
        self.busy_since = time.monotonic()

    def idle(self) -> None:
        self.busy_since = None

    def stuck_for(self) -> float:
        """Seconds past the limit the current reconcile has run (0 when fine)."""
        since = self.busy_since
        if since is None or self.stuck_after <= 0:
            return 0.0
        over = time.monotonic() - since - self.stuck_after
        return over if over > 0 else 0.0

    def alive(self) -> bool:
        return self.stuck_for() == 0.0


def parse_address(address: str) -> tuple[str, int] | None:
    """':8080' -> ('', 8080); '0' or '' disables the endpoint (as controller-runtime does)."""
    if address in ("", "0"):
        return None
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _serve(
    address: tuple[str, int], handler: type[BaseHTTPRequestHandler], what: str
) -> ThreadingHTTPServer | None:
    try:
        server = ThreadingHTTPServer(address, handler)
    except OSError as e:  # port in use, no permission: enforcement goes on without the endpoint
        log.error("cannot serve %s on %s:%d: %s; continuing without it", what, *address, e)
        return None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=f"http-{address[1]}", daemon=True).start()
    return server


def serve_metrics(address: str, registry: CollectorRegistry) -> ThreadingHTTPServer | None:
    parsed = parse_address(address)
    return _serve(parsed, MetricsHandler.factory(registry), "metrics") if parsed else None


def serve_health(
    address: str, ready: threading.Event, liveness: Liveness | None = None
) -> ThreadingHTTPServer | None:
    parsed = parse_address(address)
    if not parsed:
        return None

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            stuck = liveness.stuck_for() if liveness else 0.0
            if self.path == "/healthz":
                code, body = (
                    (200, b"ok")
                    if not stuck
                    else (500, f"reconcile running {stuck:.0f} s past the limit".encode())
                )
            elif self.path == "/readyz":
                code, body = (200, b"ok") if ready.is_set() else (503, b"not reconciled yet")
            else:
                code, body = 404, b"not found"
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every few seconds would flood the log

    return _serve(parsed, Handler, "health probes")
