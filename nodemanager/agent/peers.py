"""Other nodes' data, checked before this node's templates see it (``nodes[]``).

Each ManagedNode's status is cleaned by api/nodestatus.py: invalid entries are dropped and the
rest of that node stays. Each problem is reported once as a Warning Event on this node's own
ManagedNode (``InvalidPeerData``, naming the peer and the field, never the value), and again
only when that peer writes something new.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from nodemanager.api.nodestatus import clean_status

log = logging.getLogger(__name__)
REASON = "InvalidPeerData"


def clean_node(node: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """One ManagedNode with its status cleaned; (node, problems)."""
    status, problems = clean_status(node.get("status"))
    out = dict(node)
    if "status" in node:
        out["status"] = status
    return out, problems


class PeerFilter:
    """Cleans the node list on every snapshot; reports each new problem once."""

    def __init__(self, report: Callable[[str, str], None]):
        self.report = report  # (reason, message): a Warning Event on this node
        self._reported: dict[str, tuple[str, tuple[str, ...]]] = {}  # name -> (rv, problems)

    def clean(self, nodes: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for node in nodes:
            clean, problems = clean_node(node)
            out.append(clean)
            meta = node.get("metadata") or {}
            name, rv = str(meta.get("name", "")), str(meta.get("resourceVersion", ""))
            if not problems:
                self._reported.pop(name, None)
                continue
            seen = self._reported.get(name)
            if seen and (seen[0] == rv or seen[1] == tuple(problems)):
                continue
            self._reported[name] = (rv, tuple(problems))
            message = f"ignored invalid status of ManagedNode {name}: " + "; ".join(problems)
            log.warning("%s", message)
            try:
                self.report(REASON, message)
            except Exception as e:  # an Event is a courtesy; dropping the data is the guard
                log.warning("could not report %s: %s", REASON, e)
        return out


def clean_own(observed: Mapping[str, Any]) -> dict[str, Any]:
    """This host's observed status without entries the schema would refuse (an interface name
    of 16 characters, a WireGuard interface without a key): one odd entry must not make the
    whole status write fail."""
    status, problems = clean_status(observed)
    for problem in problems:
        log.warning("not reporting %s", problem)
    return status
