"""Which content a node applies for a staged ConfigSet: the admitted revision, not the live spec.

A ConfigSet with ``spec.rollout`` is applied as the ControllerRevision its node was admitted to
(``ManagedNode.spec.configsetRevisions[<name>]``, written by the controller, never by nodes), so
a change reaches a node only when the rollout admits it, and a node keeps enforcing its last
admitted content. Not admitted yet means not applied. Without ``spec.rollout`` the live object
applies. The agent applies exactly this and the controller grants Secret and ConfigMap access
for exactly this (controller/access.py): one function, so the two cannot disagree. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

REVISIONS_FIELD = "configsetRevisions"  # the controller's nodemanager.controller.rollout
REVISION_LABEL = "nodemanager.io/configset"


def admitted(
    configsets: Sequence[Mapping[str, Any]],
    node: Mapping[str, Any],
    revisions: Mapping[str, Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """(ConfigSets to apply, ConfigSet name -> revision applied) for this node."""
    wanted = (node.get("spec") or {}).get(REVISIONS_FIELD) or {}
    out: list[dict[str, Any]] = []
    running: dict[str, str] = {}
    for cs in configsets:
        spec = cs.get("spec") or {}
        if not isinstance(spec.get("rollout"), Mapping):
            out.append(dict(cs))
            continue
        name = (cs.get("metadata") or {}).get("name", "")
        revision = revisions.get(str(wanted.get(name) or ""))
        if revision is None:
            continue
        content = (revision.get("data") or {}).get("spec") or {}
        # The revision joins the resourceVersion: whatever is cached per version (the parsed
        # ConfigSet, its plan) must not serve one revision's content for another.
        meta = dict(cs.get("metadata") or {})
        meta["resourceVersion"] = (
            f"{meta.get('resourceVersion', '')}:{revision['metadata']['name']}"
        )
        out.append({**cs, "metadata": meta, "spec": {**content, "rollout": spec["rollout"]}})
        running[name] = revision["metadata"]["name"]
    return out, running
