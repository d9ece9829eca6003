"""Per-node read access to exactly the Secrets and ConfigMaps its ConfigSets reference.

The node-authorizer pattern, in plain RBAC: one Role per node whose ``resourceNames`` list the
objects referenced (``secretRefs``, ``configMapRefs``) by the valid ConfigSets selecting that
node, bound to the node's ServiceAccount. A rule with an empty ``resourceNames`` would grant
*every* object of the kind, so a kind with no references gets no rule at all. ``list`` and
``watch`` are granted too: the API server authorises them against ``resourceNames`` when the
request selects one object with ``fieldSelector=metadata.name=...``.

Only labels a node cannot set on itself decide (``trusted``): a ConfigSet selecting on
``kubernetes.io/os`` or ``kubernetes.io/arch`` still applies, but grants its references only
to nodes it selects through administrator-set labels or the node's name
(``--trust-node-labels`` restores the old, spoofable behaviour).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodemanager.api import ConfigSet, nodeuser
from nodemanager.controller.effects import Outcome, Write
from nodemanager.desired.select import matches
from nodemanager.host.labels import MANAGED_KEYS, RETIRED_KEYS

READ = ["get", "list", "watch"]
MANAGED_BY = {
    "app.kubernetes.io/name": "nodemanager",
    "app.kubernetes.io/managed-by": "nodemanager-controller",
}


def role_name(node: str) -> str:
    return f"nodemanager-refs-{node}"


def service_account(node: str) -> str:
    """The node's ServiceAccount; the same name `nodemanager rbac` creates (bootstrap/rbac.py)."""
    return f"nodemanager-{node}"


# Labels the agent sets on its own ManagedNode: the admission policy pins kubernetes.io/hostname
# to the node's name, but the rest are whatever the host says, so a compromised host could
# select itself into another host's ConfigSets. Grants are decided without them (nor the ones
# earlier agents set: their values were the host's word too).
SELF_REPORTED = tuple(k for k in MANAGED_KEYS if k != "kubernetes.io/hostname") + RETIRED_KEYS
SELF_PREFIX = "agent.nodemanager.io/"


def trusted(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels a node cannot set on itself: the administrator's, and its pinned hostname."""
    return {
        k: v for k, v in labels.items() if k not in SELF_REPORTED and not k.startswith(SELF_PREFIX)
    }


def references(
    configsets: Sequence[ConfigSet], labels: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """(Secret names, ConfigMap names) referenced by the ConfigSets selecting these labels."""
    secrets: set[str] = set()
    configmaps: set[str] = set()
    for cs in configsets:
        if not matches(cs, labels):
            continue
        for f in cs.files:
            secrets.update(r.name for r in f.secret_refs)
            configmaps.update(r.name for r in f.configmap_refs)
    return sorted(secrets), sorted(configmaps)


def rules(secrets: Sequence[str], configmaps: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    if secrets:
        out.append(
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "resourceNames": list(secrets),
                "verbs": READ,
            }
        )
    if configmaps:
        out.append(
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": list(configmaps),
                "verbs": READ,
            }
        )
    return out


def role(node: Mapping[str, Any], namespace: str, wanted: list[dict[str, Any]]) -> dict[str, Any]:
    """The Role, owned by the ManagedNode so garbage collection removes it with the node."""
    meta = node.get("metadata") or {}
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {
            "name": role_name(meta["name"]),
            "namespace": namespace,
            "labels": dict(MANAGED_BY),
            "ownerReferences": [
                {
                    "apiVersion": "common.nodemanager/v1",
                    "kind": "ManagedNode",
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                }
            ],
        },
        "rules": wanted,
    }


def node_binding_name(node: str) -> str:
    """The RoleBinding `nodemanager rbac` gives the node (bootstrap/rbac.py ``role_names``)."""
    return f"nodemanager-node-{node}"


def subjects(node: str, namespace: str, node_binding: Mapping[str, Any] | None) -> list[Any]:
    """Who reads the node's references: its ServiceAccount, and its certificate's user while
    the node's own binding names it (`rbac --certificate`; `revoke` takes it out there and
    here, so the controller never puts it back)."""
    user = nodeuser.user_name(namespace, node)
    named = [
        s
        for s in (node_binding or {}).get("subjects") or []
        if s.get("kind") == "User" and s.get("name") == user
    ]
    return [
        {"kind": "ServiceAccount", "name": service_account(node), "namespace": namespace},
        *(
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}
            for _ in named[:1]
        ),
    ]


def same_subjects(current: Mapping[str, Any], wanted: list[Any]) -> bool:
    def key(s: Mapping[str, Any]) -> tuple[str, str, str]:
        return (s.get("kind", ""), s.get("name", ""), s.get("namespace") or "")

    return sorted(map(key, current.get("subjects") or [])) == sorted(map(key, wanted))


def binding(
    node: Mapping[str, Any], namespace: str, node_binding: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    meta = node.get("metadata") or {}
    name = role_name(meta["name"])
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(MANAGED_BY),
            "ownerReferences": role(node, namespace, [])["metadata"]["ownerReferences"],
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": subjects(meta["name"], namespace, node_binding),
    }


def normalised(rules_: Any) -> list[dict[str, Any]]:
    """A Role's rules as read from the API, in the shape ``rules`` builds (for comparison)."""
    out = []
    for r in rules_ or []:
        out.append(
            {
                "apiGroups": list(r.get("apiGroups") or []),
                "resources": list(r.get("resources") or []),
                "resourceNames": list(r.get("resourceNames") or []),
                "verbs": list(r.get("verbs") or []),
            }
        )
    return out


def reconcile(
    node: Mapping[str, Any],
    applied: Sequence[ConfigSet],
    current: Mapping[str, Any] | None,
    bound: Mapping[str, Any] | None,
    namespace: str,
    *,
    trust_node_labels: bool = False,
    node_binding: Mapping[str, Any] | None = None,
) -> Outcome:
    """One node's Role (read access to what ``applied``, the ConfigSets it applies, reference)
    and RoleBinding; ``current`` is its Role in the cache, ``bound`` its RoleBinding,
    ``node_binding`` the binding `rbac` gave the node (whether its certificate is granted)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if not trust_node_labels:
        labels = trusted(labels)
    wanted = rules(*references(applied, labels))
    effects = []
    if current is None or normalised(current.get("rules")) != wanted:
        effects.append(Write("role", "put_role", (role(node, namespace, wanted),)))
    want = binding(node, namespace, node_binding)
    if bound is None:
        effects.append(Write("rolebinding", "create_binding", (want,)))
    elif not same_subjects(bound, want["subjects"]):
        effects.append(Write("rolebinding", "put_binding", (want,)))
    return Outcome(tuple(effects))
