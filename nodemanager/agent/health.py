"""The agent's /healthz and /readyz probes.

/healthz means "the worker makes progress": it fails once a reconcile has run longer than the
stuck limit, so a supervisor restarts an agent that stopped enforcing.
"""

from __future__ import annotations

import threading
import time
from http.server import ThreadingHTTPServer

from nodemanager.endpoints import serve_probes


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


def serve_health(
    address: str, ready: threading.Event, liveness: Liveness | None = None
) -> ThreadingHTTPServer | None:
    def healthz() -> tuple[int, str]:
        stuck = liveness.stuck_for() if liveness else 0.0
        return (500, f"reconcile running {stuck:.0f} s past the limit") if stuck else (200, "ok")

    def readyz() -> tuple[int, str]:
        return (200, "ok") if ready.is_set() else (503, "not reconciled yet")

    return serve_probes(address, {"/healthz": healthz, "/readyz": readyz})
