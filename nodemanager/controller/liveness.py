"""Stale nodes: a ManagedNode whose agent stopped renewing its Lease gets Ready=Unknown.

This is the node-lifecycle pattern, shaped so agent and controller never fight over the
condition: the controller only ever writes ``Unknown``, and only while the Lease is expired;
the agent writes ``True``/``False`` whenever it reconciles, and an agent that comes back
renews its Lease and rewrites its own condition (it sees the controller's write on its watch
of its own ManagedNode, and ``Unknown`` differs from what it computes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodemanager.api.nodereport import parse_report, set_condition

REASON = "NodeStatusUnknown"
DEFAULT_LEASE_SECONDS = 40


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
