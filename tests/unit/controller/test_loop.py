"""The controller's loop (manager.Controller.run) over injected parts: informer caches, the
API server's writes and the Event recorder as in-memory fakes, the loop itself real. A key is
reconciled, a failed write is retried after its backoff (not before), a whole sync that
crashes backs off too, and shutdown ends the loop."""

from __future__ import annotations

import threading
import time
from typing import Any

from nodemanager.controller.manager import Controller, Options, Parts
from nodemanager.kube.errors import Temporary
from tests.unit.controller.test_reconcile import Fleet, configset, node
from tests.waits import eventually


class Server(Fleet):
    """The fake API server's writes, each call timed; ``fail_once`` fails a method once."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[tuple[str, float]] = []
        self.pools: dict[str, Any] = {}
        self.fail_once: set[str] = set()

    def _call(self, method: str) -> None:
        self.times.append((method, time.monotonic()))
        if method in self.fail_once:
            self.fail_once.discard(method)
            raise Temporary(f"{method}: timed out")
        super()._call(method)

    def create_pool(self, pool: dict[str, Any]) -> None:
        self._call("create_pool")
        self.pools[pool["metadata"]["name"]] = pool

    def patch_pool_status(self, name: str, status: Any) -> None:
        self._call("patch_pool_status")

    def tried(self, method: str) -> list[float]:
        return [t for m, t in self.times if m == method]


class Cache:
    """An informer's cache: its items, synced at once; ``broken`` times items() raises."""

    def __init__(self, items: list[dict[str, Any]] | None = None, broken: int = 0) -> None:
        self._items, self.broken = items or [], broken
        self.synced = threading.Event()
        self.synced.set()
        self.failed_at = float("-inf")
        self.listed: list[float] = []

    def items(self) -> list[dict[str, Any]]:
        self.listed.append(time.monotonic())
        if self.broken:
            self.broken -= 1
            raise RuntimeError("a bug outside any one object's reconcile")
        return list(self._items)

    def run(self, stop: threading.Event) -> None:
        stop.wait()


class Recorder:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def record(self, involved: Any, reason: str, message: str, **_: Any) -> None:
        self.reasons.append(reason)


class Clients:
    closed = False

    def close(self) -> None:
        self.closed = True


def controller(configsets: Cache, server: Server) -> tuple[Controller, Clients, Recorder]:
    opts = Options(
        kubeconfig=None,
        sync_period=0.05,
        resync_period=60.0,
        manage_access=False,
        metrics_bind_address="0",
        health_probe_bind_address="0",
    )
    informers = {
        "configsets": configsets,
        "managednodes": Cache([node("a", {"name": "web", "generation": 1, "error": ""})]),
        "nodepools": Cache(),
        "leases": Cache(),
        "revisions": Cache(),
    }
    clients, recorder = Clients(), Recorder()
    parts = Parts(clients, server, recorder, informers)  # type: ignore[arg-type]
    return Controller(opts, parts), clients, recorder


def running(c: Controller) -> tuple[threading.Thread, list[int]]:
    code: list[int] = []
    t = threading.Thread(target=lambda: code.append(c.run()), daemon=True)
    t.start()
    c.dirty.set()  # an informer event: wake now
    return t, code


def test_a_key_is_reconciled_a_failed_write_retried_after_backoff_and_shutdown_ends_it():
    server = Server()
    server.fail_once.add("patch_configset_status")
    c, clients, _ = controller(Cache([configset("web")]), server)
    thread, code = running(c)
    try:
        eventually(lambda: "web" in server.statuses, message="web's status written, retried")
        first, second = server.tried("patch_configset_status")[:2]
        # Backoff of that key (1 s, drawn from its upper half), though syncs run every 0.05 s.
        assert second - first >= 0.45, (first, second)
        assert server.statuses["web"]["updated"] == 1
        assert "default" in server.pools  # the pools' reconcile ran in the same loop
    finally:
        c.shutdown()
        thread.join(timeout=30)
    assert not thread.is_alive() and code == [0] and clients.closed


def test_a_sync_that_crashes_outside_any_key_backs_off():
    server = Server()
    configsets = Cache([configset("web")], broken=2)
    c, _, _ = controller(configsets, server)
    thread, _ = running(c)
    try:
        eventually(lambda: "web" in server.statuses, message="web's status after two crashes")
    finally:
        c.shutdown()
        thread.join(timeout=30)
    first, second, third = configsets.listed[:3]
    assert second - first >= 0.45 and third - second >= 0.9, configsets.listed[:3]


def test_a_sync_that_went_through_leaves_no_retry_due():
    """After a good sync, only a requeue, a key's retry or the resync period make the next one
    due: a cleared crash retry once counted as due at every 1 s tick (a sync a second at rest,
    seen by test_controller_scale)."""
    c, _, _ = controller(Cache([configset("web")]), Server())
    c._sync_once()
    c._wake_at = float("inf")  # no requeue asked
    now = time.monotonic()
    assert c._retry.next_due() is None  # every key went through
    assert not c._due(now)
    assert c._due(now - c.opts.resync_period)  # the resync period still makes it due
