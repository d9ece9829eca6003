"""Stale nodes: a ManagedNode whose agent stopped renewing its Lease gets Ready=Unknown.

This is the node-lifecycle pattern, shaped so agent and controller never fight over the
condition: the controller only ever writes ``Unknown``, and only while the Lease is expired;
the agent writes ``True``/``False`` whenever it reconciles, and an agent that comes back
renews its Lease and rewrites its own condition (it sees the controller's write on its watch
of its own ManagedNode, and ``Unknown`` differs from what it computes).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodemanager.api.nodereport import parse_report, set_condition
from nodemanager.controller.effects import Fleet, Outcome

REASON = "NodeStatusUnknown"
DEFAULT_LEASE_SECONDS = 40
# A Lease read that took longer than this came from a server that was hanging: the agents could
# not renew either, so what it shows is no proof the node is gone.
SLOW_READ = 10.0


def expired(lease: Mapping[str, Any] | None, unchanged_for: float) -> str | None:
    """Why the node's agent counts as gone (a message), or None while its Lease is live.

    ``unchanged_for`` is how long *the controller* has seen this Lease record (or its absence)
    unchanged, measured on its own clock, as the node-lifecycle controller does: the agent's
    timestamps come from the host's clock, and a skewed host must not look dead (or alive).
    """
    spec = (lease or {}).get("spec") or {}
    duration = int(spec.get("leaseDurationSeconds") or DEFAULT_LEASE_SECONDS)
    if unchanged_for <= duration:
        return None
    if lease is None:
        return f"the agent has not written a Lease for {unchanged_for:.0f} s"
    return (
        f"the agent stopped renewing its Lease (last renewTime {spec.get('renewTime')}, "
        f"unchanged for {unchanged_for:.0f} s, lease {duration} s)"
    )


def own_lease(lease: Mapping[str, Any] | None, node: str) -> Mapping[str, Any] | None:
    """The Lease named after ``node`` when ``node`` holds it, else None (no liveness Lease).

    Group Leases (``lock_group``, upgrade groups) share the name space and any node may hold
    one: ``rbac --lease-groups db-1`` let web-1 renew Lease ``db-1``, and a silent db-1 stayed
    Ready (issue 37). The agent holds its own Lease as itself, and no node may hold one as
    another (the admission policy), so only a Lease held by its node proves the node alive."""
    spec = (lease or {}).get("spec") or {}
    return lease if spec.get("holderIdentity") == node else None


def renew_time(lease: Mapping[str, Any] | None) -> str:
    """The Lease's renewTime as the API server sent it ('' without a Lease)."""
    return str(((lease or {}).get("spec") or {}).get("renewTime") or "")


def renewed(fresh: Mapping[str, Any] | None, recorded: str) -> bool:
    """Whether a Lease just read was renewed since ``recorded`` (what the cache showed)."""
    return fresh is not None and renew_time(fresh) != recorded


def stale_conditions(
    node: Mapping[str, Any], message: str, now: str
) -> list[dict[str, Any]] | None:
    """The node's conditions with Ready=Unknown, or None when they already say so."""
    ready = parse_report(node).conditions.get("Ready")
    if ready and ready.status == "Unknown" and ready.reason == REASON:
        return None
    unknown: dict[str, Any] = {
        "type": "Ready",
        "status": "Unknown",
        "reason": REASON,
        "message": message,
    }
    if ready is None:  # the agent never wrote one: the node's generation stands in for its own
        unknown["observedGeneration"] = int((node.get("metadata") or {}).get("generation") or 0)
    current = (node.get("status") or {}).get("conditions")
    return set_condition(current if isinstance(current, list) else [], unknown, now)


@dataclass(frozen=True)
class MarkUnknown:
    """Ready=Unknown, after one read of the Lease: a cache behind a busy API server must not
    get a live node marked, so a renewal since ``renew_time`` makes this a no-op, and so does
    a read slower than ``SLOW_READ`` (the server just came back from a hang)."""

    node: str
    resource_version: str  # the patch fails (409) if the agent wrote its status since
    conditions: list[dict[str, Any]]
    renew_time: str
    message: str
    what: str = "node_ready_unknown"
    probe: bool = False  # only read: the first answer after a hang proves nothing either
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    def apply(self, fleet: Fleet) -> bool:
        started = self.clock()
        fresh = own_lease(fleet.get_lease(self.node), self.node)
        if self.probe or renewed(fresh, self.renew_time) or self.clock() - started > SLOW_READ:
            return False
        fleet.patch_node_conditions(self.node, self.resource_version, self.conditions)
        return True


def reconcile(
    node: Mapping[str, Any],
    lease: Mapping[str, Any] | None,
    unchanged_for: float,
    marked_at: str | None,
    now: str,
    *,
    probe: bool = False,
) -> Outcome:
    """One node's liveness: Ready=Unknown once its Lease has been unchanged for longer than its
    duration (``unchanged_for``, the controller's clock). ``marked_at`` is the node's
    resourceVersion this controller last marked it at (nothing to do again until it changes);
    ``probe``: the API server did not answer lately, only read the Lease (an answer ends it)."""
    message = expired(lease, unchanged_for)
    version = str(node["metadata"].get("resourceVersion", ""))
    if message is None or marked_at == version:
        return Outcome()
    conditions = stale_conditions(node, message, now)
    if conditions is None:
        return Outcome()
    name = node["metadata"]["name"]
    mark = MarkUnknown(name, version, conditions, renew_time(lease), message, probe=probe)
    return Outcome((mark,))
