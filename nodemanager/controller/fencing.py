"""Fencing, the controller's decision (pure): which nodes' Kubernetes Nodes to fence.

A ManagedNode with ``spec.fencing.enabled`` whose Lease was last renewed more than
``spec.fencing.timeout`` (default 60 s) ago has stopped petting its watchdog for that long, so
the device has reset the host: its pods can be deleted and run elsewhere. Never a node with the
maintenance annotation (its agent disarmed the watchdog; the host may well be running).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from nodemanager.api import parse_duration

MAINTENANCE = "nodemanager.io/maintenance"
DEFAULT_TIMEOUT = 60.0


def due(node: Mapping[str, Any], renewed: datetime | None, now: datetime) -> bool:
    """Whether ``node`` (a ManagedNode) is to be fenced, its Lease last renewed at ``renewed``."""
    fencing = (node.get("spec") or {}).get("fencing") or {}
    if not fencing.get("enabled") or renewed is None:
        return False
    if MAINTENANCE in ((node.get("metadata") or {}).get("annotations") or {}):
        return False
    timeout = parse_duration(str(fencing.get("timeout", "60s")))
    return (now - renewed).total_seconds() > timeout
