"""Which content a node applies for a staged ConfigSet: the admitted revision, not the live spec.

A ConfigSet with ``spec.rollout`` is applied as the ControllerRevision its node was admitted to
(``ManagedNode.spec.configsetRevisions[<name>]``, written by the controller, never by nodes), so
a change reaches a node only when the rollout admits it, and a node keeps enforcing its last
admitted content. Not admitted yet means not applied. A ConfigSet without ``spec.rollout`` is
staged the same way on a node whose NodePool stages everything (``spec.stageAll``; the
controller copies it onto the node as ``spec.poolStageAll``, which nodes cannot write); elsewhere
the live object applies. ``staged`` is that rule, for the agent and the controller alike. The
agent applies exactly what ``admitted`` returns and the controller grants Secret and ConfigMap
access for exactly this (controller/access.py): one function, so the two cannot disagree.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

REVISIONS_FIELD = "configsetRevisions"  # the controller's nodemanager.controller.rollout
REVISION_LABEL = "nodemanager.io/configset"
STAGE_ALL_FIELD = "poolStageAll"  # ManagedNode spec: its pool's spec.stageAll, by the controller


def has_rollout(configset: Mapping[str, Any]) -> bool:
    """The ConfigSet stages its own changes (``spec.rollout``)."""
    return isinstance((configset.get("spec") or {}).get("rollout"), Mapping)


def stages_all(node: Mapping[str, Any]) -> bool:
    """The node's pool stages every ConfigSet (``spec.poolStageAll`` as the controller wrote it)."""
    return (node.get("spec") or {}).get(STAGE_ALL_FIELD) is True


def is_staged(own_rollout: bool, pool_stages_all: bool) -> bool:
    """The one rule: a ConfigSet is staged on a node when it has ``spec.rollout`` or the node's
    pool stages everything; staged means applied only at the node's admitted revision."""
    return own_rollout or pool_stages_all


def staged(configset: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    return is_staged(has_rollout(configset), stages_all(node))


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
        if not staged(cs, node):
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
        steering = {"rollout": spec["rollout"]} if has_rollout(cs) else {}
        out.append({**cs, "metadata": meta, "spec": {**content, **steering}})
        running[name] = revision["metadata"]["name"]
    return out, running
