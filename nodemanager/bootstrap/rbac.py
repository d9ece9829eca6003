"""RBAC for one node, least privilege, printed for the administrator's pipeline to apply.

Namespaced only: the node's ServiceAccount reads ConfigSets, ConfigMaps, Secrets and
ManagedNodes of its namespace, creates and updates only its own ManagedNode, Lease and token.
RBAC cannot see fields, so a ValidatingAdmissionPolicy adds what it cannot say: a node's account
writes only the ManagedNode named after it, never its spec, and no labels beyond the ones the
agent manages (a compromised host must not opt itself into other ConfigSets by labelling itself
``role: db``). Labels a node may set on itself: the four the agent writes, plus keys under
``agent.nodemanager.io/``; every other label is the administrator's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodemanager.host.labels import MANAGED_KEYS

GROUP = "common.nodemanager"
SELF_LABEL_PREFIX = "agent.nodemanager.io/"
POLICY = "nodemanager-node-restriction"


def service_account(hostname: str) -> str:
    return f"nodemanager-{hostname}"


def _role(name: str, namespace: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "nodemanager"},
        },
        "rules": rules,
    }


def _binding(name: str, namespace: str, sa: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "nodemanager"},
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
    }


def node_rules(hostname: str, lease_groups: Sequence[str] = ()) -> list[dict[str, Any]]:
    """``lease_groups``: the lock_group and spec.upgrade.group Leases this node may take."""
    read = ["get", "list", "watch"]
    return [
        {"apiGroups": [GROUP], "resources": ["configsets"], "verbs": read},
        # All nodes are template data (nodes[]); writes are limited to its own object below.
        {"apiGroups": [GROUP], "resources": ["managednodes"], "verbs": [*read, "create"]},
        {
            "apiGroups": [GROUP],
            "resources": ["managednodes", "managednodes/status"],
            "resourceNames": [hostname],
            "verbs": ["update", "patch"],
        },
        {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": read},
        # Admitted revisions of staged ConfigSets (their content; the controller writes them).
        {"apiGroups": ["apps"], "resources": ["controllerrevisions"], "verbs": read},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": sorted({hostname, *lease_groups}),
            "verbs": ["get", "update", "patch"],
        },
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]


def admission_policy() -> list[dict[str, Any]]:
    managed = "[" + ", ".join(f"'{k}'" for k in MANAGED_KEYS) + "]"
    own = f"(k in {managed} || k.startsWith('{SELF_LABEL_PREFIX}'))"
    labels = "(has(object.metadata.labels) ? object.metadata.labels : {})"
    old_labels = (
        "(request.operation == 'UPDATE' && has(oldObject.metadata.labels)"
        " ? oldObject.metadata.labels : {})"
    )
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": POLICY},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [GROUP],
                            "apiVersions": ["*"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["managednodes", "managednodes/status"],
                        }
                    ]
                },
                "matchConditions": [
                    {
                        "name": "is-a-node-account",
                        "expression": "request.userInfo.username.startsWith("
                        "'system:serviceaccount:' + request.namespace + ':nodemanager-')",
                    }
                ],
                "validations": [
                    {
                        "expression": "request.userInfo.username == 'system:serviceaccount:'"
                        " + request.namespace + ':nodemanager-' + object.metadata.name",
                        "message": "a node may only write the ManagedNode named after it",
                        "reason": "Forbidden",
                    },
                    {
                        "expression": "request.operation != 'UPDATE'"
                        " || (has(object.spec) ? object.spec : {})"
                        " == (has(oldObject.spec) ? oldObject.spec : {})",
                        "message": "spec is set by administrators, not by nodes",
                        "reason": "Forbidden",
                    },
                    {
                        "expression": f"{labels}.all(k, {own}"
                        f" || (k in {old_labels} && {old_labels}[k] == {labels}[k]))",
                        "message": "a node may only set its managed labels and labels under "
                        + SELF_LABEL_PREFIX,
                        "reason": "Forbidden",
                    },
                    {
                        "expression": f"{old_labels}.all(k, {own}"
                        f" || (k in {labels} && {labels}[k] == {old_labels}[k]))",
                        "message": "a node may not remove or change labels set by administrators",
                        "reason": "Forbidden",
                    },
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": POLICY},
            "spec": {"policyName": POLICY, "validationActions": ["Deny"]},
        },
    ]


def approved_node(hostname: str, namespace: str, node_labels: Mapping[str, str]) -> dict[str, Any]:
    """The node's ManagedNode carrying the custom labels the administrator approves
    (``rbac --node-labels role=web``), as kubelet's NodeRestriction leaves node labels to admins.
    The admission policy lets a node keep labels an administrator set, never add or change one,
    so ``run --node-labels`` works for exactly these."""
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ManagedNode",
        "metadata": {"name": hostname, "namespace": namespace, "labels": dict(node_labels)},
    }


def manifests(
    hostname: str,
    namespace: str = "nodemanager",
    node_labels: Mapping[str, str] | None = None,
    lease_groups: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Every object one node needs, in apply order; with ``node_labels``, also its ManagedNode
    with those labels approved (the CRDs must be installed first)."""
    sa = service_account(hostname)
    approved = [approved_node(hostname, namespace, node_labels)] if node_labels else []
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "name": sa,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/name": "nodemanager"},
            },
        },
        _role(f"nodemanager-node-{hostname}", namespace, node_rules(hostname, lease_groups)),
        _binding(f"nodemanager-node-{hostname}", namespace, sa),
        # The node renews its own token, and only its own.
        _role(
            f"nodemanager-token-{hostname}",
            namespace,
            [
                {
                    "apiGroups": [""],
                    "resources": ["serviceaccounts/token"],
                    "resourceNames": [sa],
                    "verbs": ["create"],
                }
            ],
        ),
        _binding(f"nodemanager-token-{hostname}", namespace, sa),
        *admission_policy(),
        *approved,
    ]
