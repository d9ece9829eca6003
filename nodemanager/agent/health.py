"""The agent's /healthz and /readyz probes.

/healthz means "the worker enforces": it fails once a reconcile has run longer than the stuck
limit, or once reconciles have not completed (each raised) for longer than the failing limit,
so a supervisor restarts an agent that stopped enforcing. /readyz fails at once while the last
reconcile could not complete.
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

    def __init__(self, stuck_after: float, failing_after: float = 300.0):
        self.stuck_after = stuck_after
        self.failing_after = failing_after
        self.busy_since: float | None = None
        self.failing_since: float | None = None  # the first of the reconciles that raised
        self.why = ""  # the last of them, for the probe's body

    def failed(self, why: str) -> None:
        """A reconcile could not complete (it raised): nothing was enforced by it."""
        self.why = why
        if self.failing_since is None:
            self.failing_since = time.monotonic()

    def completed(self) -> None:
        self.failing_since = None
        self.why = ""

    def failing(self) -> bool:
        return self.failing_since is not None

    def failing_for(self) -> float:
        """Seconds past the failing limit that reconciles have not completed (0 when fine)."""
        since = self.failing_since
        if since is None or self.failing_after <= 0:
            return 0.0
        over = time.monotonic() - since - self.failing_after
        return over if over > 0 else 0.0

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
        if stuck:
            return 500, f"reconcile running {stuck:.0f} s past the limit"
        if liveness and liveness.failing_for():
            return (
                500,
                f"reconciles not completing for {liveness.failing_after:g} s: {liveness.why}",
            )
        return 200, "ok"

    def readyz() -> tuple[int, str]:
        if liveness and liveness.failing():
            return 503, f"reconcile cannot complete: {liveness.why}"
        return (200, "ok") if ready.is_set() else (503, "not reconciled yet")

    return serve_probes(address, {"/healthz": healthz, "/readyz": readyz})
