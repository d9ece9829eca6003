"""Fencing on the agent: drives the watchdog from the own ManagedNode and reports it in status.

One thread steps the watchdog every quarter of the device timeout with what the informer cache
says of the node: ``spec.fencing`` and the maintenance annotation (api/fencing.py). Before the
cache has the node, and if the node is gone, fencing counts as off. A change of state wakes the
worker, so ``status.fencing`` says it with the next status write.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import Gauge

from nodemanager.agent.watchdog import Watchdog
from nodemanager.api.fencing import DISABLED, Fencing, in_maintenance
from nodemanager.api.nodereport import FencingStatus

log = logging.getLogger(__name__)
Node = Callable[[], Mapping[str, Any] | None]  # the own ManagedNode from the cache


class FencingAgent:
    def __init__(
        self, dog: Watchdog, node: Node, on_change: Callable[[], None], gauge: Gauge
    ) -> None:
        self.dog, self.node, self.on_change, self.gauge = dog, node, on_change, gauge
        self.state = DISABLED
        self.interval = dog.wanted_timeout / 4

    def step(self) -> str:
        me = self.node() or {}
        fencing = Fencing.of(me)
        state = self.dog.step(fencing.enabled, fencing.timeout_seconds, in_maintenance(me))
        self.gauge.set(1 if self.dog.armed else 0)
        if state != self.state:
            log.info("fencing: %s -> %s", self.state, state)
            self.state = state
            self.on_change()
        return state

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.step()
            stop.wait(self.interval)
        self.dog.close()

    def close(self) -> None:
        """Clean shutdown: disarm at once (the worker may still finish an Ansible run)."""
        self.dog.close()
        self.state = DISABLED
        self.gauge.set(0)

    def report(self) -> FencingStatus:
        """status.fencing now."""
        armed = self.dog.armed
        timeout = (self.dog.device_timeout or 0) if armed else 0
        return FencingStatus(armed, self.state, timeout)

    def with_status(
        self, status: Mapping[str, Any], previous: Mapping[str, Any], node: Mapping[str, Any]
    ) -> dict[str, Any]:
        """``status`` with status.fencing, once the node is or was fenced."""
        if Fencing.of(node).enabled or self.dog.armed or "fencing" in previous:
            return {**status, "fencing": self.report().to_raw()}
        return dict(status)
