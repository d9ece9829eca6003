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
A fencing that fails is retried for that node with the controller's per-object backoff, and
not at all while the API server does not answer (a hung server proves no host is gone).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodemanager.api.fencing import Fencing, in_maintenance
from nodemanager.api.nodereport import parse_report
from nodemanager.controller import liveness
from nodemanager.controller.effects import Fleet, Outcome


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


Report = Callable[[Mapping[str, Any], str, str, str], None]


@dataclass(frozen=True)
class Fence:
    """Delete the pods and the Kubernetes Node of ``node``, after one read of its Lease: the
    cache may lag, and a renewal it has not shown yet means the host is alive (a no-op)."""

    node: Mapping[str, Any] = field(repr=False, compare=False)  # the ManagedNode, as cached
    record: str  # the Lease renewTime it is fenced at
    why: str
    # (node, reason, message, key): a Warning Event on the ManagedNode, for each step as done
    report: Report = field(repr=False, compare=False)
    what: str = "fencing"

    def apply(self, fleet: Fleet) -> bool:
        name = self.node["metadata"]["name"]
        if liveness.renewed(liveness.own_lease(fleet.get_lease(name), name), self.record):
            return False
        self.report(self.node, "Fencing", f"fencing {name}: {self.why}", self.record)
        fleet.fence(name, lambda reason, message: self.report(self.node, reason, message, message))
        return True


def reconcile(
    node: Mapping[str, Any],
    lease: Mapping[str, Any] | None,
    unchanged_for: float,
    fenced_at: str | None,
    report: Report,
) -> Outcome:
    """One node's fencing: a ``Fence`` when it is due, once per Lease record (``fenced_at``:
    the renewTime this controller fenced it at)."""
    record = liveness.renew_time(lease)
    if fenced_at == record:
        return Outcome()
    why = due(node, lease, unchanged_for)
    if not why:
        return Outcome()
    return Outcome((Fence(node, record, why, report),))
