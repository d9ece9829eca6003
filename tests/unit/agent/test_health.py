import logging
import socket
import threading
import urllib.error
import urllib.request

from prometheus_client import CollectorRegistry

from nodemanager.agent.health import Liveness, serve_health
from nodemanager.endpoints import serve_metrics


def get(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_healthz_fails_while_a_reconcile_runs_past_the_limit():
    ready, liveness = threading.Event(), Liveness(stuck_after=0.001)
    server = serve_health("127.0.0.1:0", ready, liveness)
    port = server.server_address[1]
    try:
        assert get(port, "/healthz") == 200  # idle is healthy
        liveness.busy()
        liveness.busy_since -= 1
        assert get(port, "/healthz") == 500 and not liveness.alive()
        liveness.idle()
        assert get(port, "/healthz") == 200 and liveness.alive()
    finally:
        server.shutdown()
        server.server_close()


def test_reconciles_that_cannot_complete_fail_readyz_at_once_and_healthz_past_the_limit():
    ready, liveness = threading.Event(), Liveness(stuck_after=60, failing_after=30)
    ready.set()
    server = serve_health("127.0.0.1:0", ready, liveness)
    port = server.server_address[1]
    try:
        assert get(port, "/readyz") == 200 and get(port, "/healthz") == 200
        liveness.failed("OSError: disk full")
        assert get(port, "/readyz") == 503  # at once
        assert get(port, "/healthz") == 200  # not yet past the limit
        liveness.failed("OSError: disk full")
        assert liveness.failing_since is not None
        liveness.failing_since -= 31  # the first failure, 31 s ago
        assert get(port, "/healthz") == 500 and liveness.alive()  # the Lease is still renewed
        liveness.completed()
        assert get(port, "/healthz") == 200 and get(port, "/readyz") == 200
    finally:
        server.shutdown()
        server.server_close()


def test_a_busy_port_is_logged_not_fatal(caplog):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with caplog.at_level(logging.ERROR):
            assert serve_metrics(f"127.0.0.1:{port}", CollectorRegistry()) is None
            assert serve_health(f"127.0.0.1:{port}", threading.Event()) is None
        assert f"cannot serve metrics on 127.0.0.1:{port}" in caplog.text
        assert "continuing without it" in caplog.text
    finally:
        taken.close()
