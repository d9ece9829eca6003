"""The metrics endpoint and the /healthz and /readyz probes."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import MetricsHandler


def parse_address(address: str) -> tuple[str, int] | None:
    """':8080' -> ('', 8080); '0' or '' disables the endpoint (as controller-runtime does)."""
    if address in ("", "0"):
        return None
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _serve(address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(address, handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=f"http-{address[1]}", daemon=True).start()
    return server


def serve_metrics(address: str, registry: CollectorRegistry) -> ThreadingHTTPServer | None:
    parsed = parse_address(address)
    return _serve(parsed, MetricsHandler.factory(registry)) if parsed else None


def serve_health(address: str, ready: threading.Event) -> ThreadingHTTPServer | None:
    parsed = parse_address(address)
    if not parsed:
        return None

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/healthz":
                code, body = 200, b"ok"
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

    return _serve(parsed, Handler)
