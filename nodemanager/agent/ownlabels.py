"""The labels the agent manages come back as soon as its watch sees them changed.

The admission policy only lets a node set values that can be true of it, but an administrator
(or a stale tool) can still change ``kubernetes.io/hostname`` or ``kubernetes.io/os``, and
ConfigSets select on them. Waiting for an agent restart would leave the node selected wrongly,
so every reconcile compares and restores.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def drifted(node: Mapping[str, Any], managed: Mapping[str, str]) -> dict[str, str]:
    """The managed labels whose value on ``node`` differs from the agent's (empty: none)."""
    current = (node.get("metadata") or {}).get("labels") or {}
    return {k: v for k, v in managed.items() if current.get(k) != v}
