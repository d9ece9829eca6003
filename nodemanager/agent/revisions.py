"""Staged ConfigSets in the snapshot: the admitted revision's content replaces the live spec.

A ConfigSet with ``spec.rollout`` is applied as the ControllerRevision its node was admitted to
(``ManagedNode.spec.configsetRevisions[<name>]``, written by the controller, never by nodes), so
a change reaches a node only when the rollout admits it, and a node keeps enforcing its last
admitted content. Not admitted yet means not applied: the controller admits new nodes at once.
Without ``spec.rollout`` the live object applies, as before. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodemanager.api.revisions import REVISION_LABEL, REVISIONS_FIELD, admitted

__all__ = ["REVISIONS_FIELD", "REVISION_LABEL", "admitted", "report"]


def report(status: dict[str, Any], running: Mapping[str, str]) -> dict[str, Any]:
    """The status with each staged ConfigSet's entry naming the revision it applied."""
    entries = []
    for entry in status.get("configsets") or []:
        revision = running.get(entry.get("name", ""))
        entries.append({**entry, "revision": revision} if revision else entry)
    return {**status, "configsets": entries}
