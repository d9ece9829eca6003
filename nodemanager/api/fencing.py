"""Fencing, as both sides read it: a ManagedNode's ``spec.fencing`` and its maintenance mark.

Fencing is opt-in per ManagedNode (``spec.fencing.enabled``) or per NodePool (the pool's
``spec.fencing``, which the controller copies onto each member as ``spec.poolFencing``: a node
may not read NodePools, and its agent reads only its own ManagedNode). A node's own
``spec.fencing``, when present, wins, ``enabled: false`` included. The agent then arms the host's
watchdog and pets it while its Lease renewals succeed; the controller deletes the pods and the
Kubernetes Node of a fenced node whose Lease expired ``timeoutSeconds`` ago. The annotation
``nodemanager.io/maintenance`` (any value; set by an administrator, never by a node: the
admission policy refuses it) disarms the watchdog and stops the controller from fencing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAINTENANCE = "nodemanager.io/maintenance"
POOL_FIELD = "poolFencing"  # ManagedNode spec: the pool's setting, written by the controller
DEFAULT_TIMEOUT = 60
# The CRD's bounds. The agent renews its Lease every 10 s: a timeout under three renewals
# would reset a host for one slow request.
MIN_TIMEOUT, MAX_TIMEOUT = 30, 3600
# The agent keeps its watchdog's own timeout at most this (--watchdog-timeout): below the
# 40-s Lease, so a host that stopped petting is down before the controller (which waits the
# Lease's duration plus timeoutSeconds) deletes its pods.
MAX_DEVICE_TIMEOUT = 30
# How a node says it is fenced: status.fencing.reason (the CRD's enum).
ARMED = "Armed"  # device open, petted while the Lease is renewed
UNANSWERED = "APIUnanswered"  # device open, no longer petted: the host is about to reset
DISABLED = "Disabled"
IN_MAINTENANCE = "Maintenance"
DEVICE_ERROR = "DeviceError"
REASONS = (ARMED, UNANSWERED, DISABLED, IN_MAINTENANCE, DEVICE_ERROR)


@dataclass(frozen=True)
class Fencing:
    enabled: bool = False
    timeout_seconds: int = DEFAULT_TIMEOUT

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> Fencing:
        """What a raw ManagedNode asks: its own ``spec.fencing``, else its pool's
        (``spec.poolFencing``). Anything malformed (an older CRD let it in) reads as off:
        fencing a host on a guess is the one mistake not to make."""
        spec = node.get("spec")
        if not isinstance(spec, Mapping):
            return cls()
        own = spec.get("fencing")
        return cls.parse(own if own is not None else spec.get(POOL_FIELD))

    @classmethod
    def parse(cls, raw: object) -> Fencing:
        """One ``fencing`` object (a ManagedNode's or a NodePool's spec.fencing); off unless
        it is well-formed and enabled."""
        if not isinstance(raw, Mapping) or raw.get("enabled") is not True:
            return cls()
        timeout = raw.get("timeoutSeconds", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int):
            return cls()
        if not MIN_TIMEOUT <= timeout <= MAX_TIMEOUT:
            return cls()
        return cls(True, timeout)

    def to_raw(self) -> dict[str, Any] | None:
        """As ``spec.poolFencing`` says it (None: the pool does not fence)."""
        return {"enabled": True, "timeoutSeconds": self.timeout_seconds} if self.enabled else None


def in_maintenance(node: Mapping[str, Any]) -> bool:
    """Whether the ManagedNode carries the maintenance annotation (any value)."""
    meta = node.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return isinstance(annotations, Mapping) and MAINTENANCE in annotations
