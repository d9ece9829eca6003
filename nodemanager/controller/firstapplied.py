"""Which hosts are new to the fleet: recorded once by the controller, never inferred later.

A host new to the fleet gets the current revision of a staged ConfigSet at once (as MCO: there
is nothing on it to disrupt). Every other host is changed through its pool's budget and
minReadySeconds. "New" cannot be read from what the host's status holds *now*: after a staged
ConfigSet is deleted (its entries and admissions go), or the host leaves every selector
(``maint=true``) and comes back, or its agent restarts, the status is as empty as a new host's
while the host still carries the old files. So the controller records, in a ManagedNode spec
field nodes cannot write (``spec.firstApplied``, its own clock), the first time it sees the
host applying anything: a ConfigSet entry in its status, or an admission it is about to write
(staging.py writes this mark first, in the same ordered effects). Once set, never removed: a
host is new only until then.

The one window left is a host applying an unstaged ConfigSet whose entry the controller has not
seen yet (less than one sync) when that ConfigSet is deleted; this module closes it at the
controller's next sync after the entry appears.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nodemanager.controller.effects import Outcome, Write
from nodemanager.controller.rollout import REVISIONS_FIELD

FIELD = "firstApplied"


def recorded(node: Mapping[str, Any]) -> bool:
    """The controller recorded that this host applied (or was admitted to) something."""
    return bool((node.get("spec") or {}).get(FIELD))


def applying(node: Mapping[str, Any]) -> bool:
    """What the host shows now of having applied something: any ConfigSet entry in its status
    (an invalid one too: it still ran), or any admission in its spec."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    return bool(status.get("configsets")) or bool(spec.get(REVISIONS_FIELD))


def fresh(node: Mapping[str, Any]) -> bool:
    """New to the fleet: never recorded applying anything, and showing nothing now either."""
    return not recorded(node) and not applying(node)


def mark(node: str, now: str) -> Write:
    """The spec write that records ``node`` as no longer new (a merge patch of one field)."""
    return Write("first_applied", "patch_node_spec", (node, {FIELD: now}))


@dataclass
class Marks:
    """The marks the API server took, by node, with the node's resourceVersion the write was
    computed from: while the cache still shows that version it has not caught up with our
    write, so the mark is not written again (written.py's rule). Only confirmed writes are
    remembered: a failed one is written again, with the node's backoff."""

    written: dict[str, str] = field(default_factory=dict)

    def pending(self, node: Mapping[str, Any]) -> bool:
        meta = node["metadata"]
        return self.written.get(meta["name"]) == str(meta.get("resourceVersion", ""))

    def confirmed(self, name: str, version: str) -> None:
        self.written[name] = version

    def retain(self, live: set[str]) -> None:
        self.written = {n: v for n, v in self.written.items() if n in live}


def reconcile(node: Mapping[str, Any], marks: Marks, now: str) -> Outcome:
    """The mark for a host seen applying something and not recorded yet; else nothing."""
    if recorded(node) or not applying(node) or marks.pending(node):
        return Outcome()
    return Outcome((mark(node["metadata"]["name"], now),))
