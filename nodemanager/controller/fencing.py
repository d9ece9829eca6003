"""Fencing, the controller's side: delete the pods and the Kubernetes Node of a fenced node.

A node is fenced when its ManagedNode has ``spec.fencing.enabled``, its agent last said its
watchdog is armed (``status.fencing.armed``), it is not in maintenance, and the controller has
seen its Lease unchanged for the Lease's duration plus ``timeoutSeconds``, on its own clock (as
liveness.py counts: a skewed host clock must not make a live node look dead).

Why that is safe: the agent stops petting ``timeoutSeconds`` after its last successful renewal
and the device resets the host within its own timeout, which the agent keeps below the Lease
duration (--watchdog-timeout). The controller first sees a renewal no earlier than it happened,
so by the time it acts the host has been reset. A node whose watchdog never armed (no device,
maintenance, an agent stopped cleanly that said so) is never fenced: its host may be running.

Each node is fenced once per Lease record (its renewTime): nothing again until the agent comes
back and renews. A restarted controller looks again; nothing is left to delete, so no Event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import Counter

from nodemanager.api.fencing import Fencing, in_maintenance
from nodemanager.api.nodereport import parse_report
from nodemanager.controller import liveness
from nodemanager.kube.client import ClientFactory
from nodemanager.kube.errors import KubeError
from nodemanager.kube.fence import POD_DELETED, fence
from nodemanager.kube.fleet import FleetClient
from nodemanager.kube.recorder import EventRecorder, involved

log = logging.getLogger(__name__)
RETRY = 10.0  # seconds before a failed fencing is tried again


def due(node: Mapping[str, Any], lease: Mapping[str, Any] | None, unchanged_for: float) -> str:
    """Why ``node`` (a raw ManagedNode) is to be fenced now, or "" when it is not.

    ``unchanged_for``: seconds the controller has seen its Lease record unchanged."""
    fencing = Fencing.of(node)
    if not fencing.enabled or lease is None or in_maintenance(node):
        return ""
    if not parse_report(node).armed:
        return ""
    spec = lease.get("spec") or {}
    duration = int(spec.get("leaseDurationSeconds") or liveness.DEFAULT_LEASE_SECONDS)
    if unchanged_for <= duration + fencing.timeout_seconds:
        return ""
    return (
        f"Lease unchanged for {unchanged_for:.0f} s (last renewTime {spec.get('renewTime')}, "
        f"lease {duration} s + fencing timeout {fencing.timeout_seconds} s)"
    )


class Fencer:
    """Called with every liveness pass; fences each due node once per Lease record."""

    def __init__(
        self, clients: ClientFactory, fleet: FleetClient, recorder: EventRecorder, writes: Counter
    ) -> None:
        self.clients, self.fleet, self.recorder, self.writes = clients, fleet, recorder, writes
        self._done: dict[str, str] = {}  # node -> the Lease renewTime it was fenced at
        self._retry_at: dict[str, float] = {}  # node -> when a failed fencing may run again

    def sync(
        self,
        nodes: list[dict[str, Any]],
        leases: Mapping[str, Mapping[str, Any]],
        unchanged_for: Callable[[str], float],
        mono: float,
    ) -> list[str]:
        """Fence the nodes due now; the names fenced."""
        fenced = []
        names = set()
        for node in nodes:
            name = node["metadata"]["name"]
            names.add(name)
            lease = leases.get(name)
            record = liveness.renew_time(lease)
            if self._done.get(name) == record or mono < self._retry_at.get(name, 0.0):
                continue
            why = due(node, lease, unchanged_for(name))
            if why and self._fence(node, record, why, mono):
                fenced.append(name)
        self._done = {n: r for n, r in self._done.items() if n in names}
        return fenced

    def _event(self, node: Mapping[str, Any], reason: str, message: str, key: str) -> None:
        about = involved(node, "ManagedNode")
        self.recorder.record(about, reason, message, key=key, warning=True)
        self.writes.labels("event").inc()

    def _fence(self, node: Mapping[str, Any], record: str, why: str, mono: float) -> bool:
        name = node["metadata"]["name"]
        try:
            # The cache may lag: a renewal it has not shown yet means the host is alive.
            if liveness.renewed(self.fleet.get_lease(name), record):
                return False
            self._event(node, "Fencing", f"fencing {name}: {why}", record)

            def report(reason: str, message: str) -> None:
                self._event(node, reason, message, record + message)
                self.writes.labels("fenced_pod" if reason == POD_DELETED else "fenced_node").inc()

            fence(self.clients, name, report)
        except KubeError as e:
            log.warning("ManagedNode %s: fencing failed (retry in %.0f s): %s", name, RETRY, e)
            self._event(node, "FencingFailed", f"fencing {name} failed: {e}", record)
            self._retry_at[name] = mono + RETRY
            return False
        log.warning("ManagedNode %s fenced: %s", name, why)
        self._done[name] = record
        self._retry_at.pop(name, None)
        return True
