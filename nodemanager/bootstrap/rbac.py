"""RBAC for one node, least privilege, printed for the administrator's pipeline to apply.

Two outputs, so that deleting one node never deletes the others: ``manifests(host)`` holds
that node's objects (its ServiceAccount, Roles and RoleBindings) after the Namespace and the
node's guard of it (bootstrap/policy.py ``namespace_guard``), so it applies on a fresh cluster
and ``kubectl delete -f`` of it keeps the Namespace; ``shared_manifests()`` holds what every node
shares (the Namespace and the admission policies of bootstrap/policy.py), applied once.

The node's account reads ConfigSets and ManagedNodes of its namespace, creates and updates only
its own ManagedNode and Lease, records Events and renews its own token. RBAC cannot see fields,
so the admission policies add what it cannot say (see bootstrap/policy.py).

Secrets and ConfigMaps are not granted here at all: only the fleet controller knows which ones
each node's ConfigSets reference, so it keeps the Role ``nodemanager-refs-<node>`` naming
exactly those (controller/access.py), and the agent reads them by name
(``fieldSelector=metadata.name=<name>``, which RBAC authorises against ``resourceNames``).
Without a running controller a node can read no Secret or ConfigMap: a file referencing one
reports it missing (kube/refs.py) until the controller grants it.

``--drain`` (opt-in, for hosts that are Kubernetes Nodes) adds a ClusterRole: get and patch of
the Node named after the host only (the admission policy lets it change nothing there but
``spec.unschedulable``), and, cluster-wide because RBAC cannot narrow them to one Node's pods,
list pods and create evictions. So a compromised host with ``--drain`` can read every pod's
spec and evict any pod, within its PodDisruptionBudgets: grant it only where the upgrade must
drain.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from nodemanager.api import nodeuser
from nodemanager.bootstrap.policy import (
    GROUP,
    KEEP_LABEL,
    RESERVED_NAMES,
    RESERVED_PREFIX,
    admission_policies,
    cluster_scoped,
    namespace_guard,
)

LABELS = {"app.kubernetes.io/name": "nodemanager"}
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def name_problems(hostname: str | None, lease_groups: Sequence[str] = ()) -> list[str]:
    """Why these names cannot be a node's or its groups' (each becomes a Lease name)."""
    problems = []
    if hostname is not None:
        if not _DNS_SUBDOMAIN.fullmatch(hostname):
            problems.append(f"hostname {hostname!r} is not a lower-case DNS name")
        elif hostname in RESERVED_NAMES:
            problems.append(f"hostname {hostname!r} is reserved (the controller's election Lease)")
    for group in lease_groups:
        if not _DNS_SUBDOMAIN.fullmatch(group):
            problems.append(f"lease group {group!r} is not a lower-case DNS name")
        elif group.startswith(RESERVED_PREFIX):
            problems.append(f"lease group {group!r}: names starting {RESERVED_PREFIX} are reserved")
        elif group == hostname:
            problems.append(f"lease group {group!r} is the node's own liveness Lease")
    return problems


def service_account(hostname: str) -> str:
    return f"nodemanager-{hostname}"


def binding_secret(hostname: str) -> str:
    """The Secret every token of the node is bound to: deleting it revokes them all."""
    return service_account(hostname)


def _role(name: str, namespace: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace, "labels": LABELS},
        "rules": rules,
    }


def subjects(hostname: str, namespace: str, certificate: bool) -> list[dict[str, Any]]:
    """Who the node is: its ServiceAccount (tokens) and, with ``certificate``, the user of its
    client certificate (`bootstrap --certificate`). `revoke` deletes the bindings naming them."""
    out: list[dict[str, Any]] = [
        {"kind": "ServiceAccount", "name": service_account(hostname), "namespace": namespace}
    ]
    if certificate:
        out.append(
            {
                "kind": "User",
                "apiGroup": "rbac.authorization.k8s.io",
                "name": nodeuser.user_name(namespace, hostname),
            }
        )
    return out


def _binding(name: str, namespace: str, hostname: str, certificate: bool) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace, "labels": LABELS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": subjects(hostname, namespace, certificate),
    }


def upstream_wireguard_secret(interface: str, hostname: str) -> str:
    """Where upstream nodemanager kept a node's WireGuard private key."""
    return f"wg-{interface}-{hostname}"


def node_rules(
    hostname: str, lease_groups: Sequence[str] = (), upstream_wireguard: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """``lease_groups``: the lock_group and spec.upgrade.group Leases this node may take;
    ``upstream_wireguard``: interfaces whose key upstream kept in a Secret (read once)."""
    read = ["get", "list", "watch"]
    migration = [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [upstream_wireguard_secret(i, hostname) for i in upstream_wireguard],
            "verbs": ["get"],
        }
    ]
    return [
        *(migration if upstream_wireguard else []),
        {"apiGroups": [GROUP], "resources": ["configsets"], "verbs": read},
        # All nodes are template data (nodes[]); writes are limited to its own object below.
        {"apiGroups": [GROUP], "resources": ["managednodes"], "verbs": [*read, "create"]},
        {
            "apiGroups": [GROUP],
            "resources": ["managednodes", "managednodes/status"],
            "resourceNames": [hostname],
            "verbs": ["update", "patch"],
        },
        # No Secrets or ConfigMaps: the controller's Role nodemanager-refs-<node> names those
        # its ConfigSets reference (see the module docstring).
        # Admitted revisions of staged ConfigSets (their content; the controller writes them).
        {"apiGroups": ["apps"], "resources": ["controllerrevisions"], "verbs": read},
        # No create: the Leases it may hold are made by this output (``leases``), so a node can
        # make no other (junk Leases, or the liveness Lease of a host not onboarded yet).
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": sorted({hostname, *lease_groups}),
            "verbs": ["get", "update", "patch"],
        },
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]


def drain_rules(hostname: str) -> list[dict[str, Any]]:
    """Cordon and drain the Kubernetes Node of the host's name (``kube/drain.py``)."""
    return [
        {"apiGroups": [""], "resources": ["nodes"], "resourceNames": [hostname],
         "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    ]  # fmt: skip


def leases(hostname: str, namespace: str, lease_groups: Sequence[str]) -> list[dict[str, Any]]:
    """The Leases the node may hold, made here (nodes may not create Leases): its liveness
    Lease and its groups'. Metadata only: the holder writes the spec, and applying this output
    again leaves it alone."""
    return [
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace, "labels": LABELS},
        }
        for name in (hostname, *sorted(set(lease_groups)))
    ]


def csr_rules() -> list[dict[str, Any]]:
    """Ask for a client certificate and read the answer (`bootstrap --certificate` as the
    ServiceAccount, renewals as the certificate's user). ``get`` cannot be narrowed to the
    node's own requests (their names are random), so a node can read any CSR: subjects and
    public keys, no secret. No list or watch: the node polls its own by name. Which requests
    are approved is the fleet controller's decision (controller/csrapprove.py)."""
    return [
        {
            "apiGroups": ["certificates.k8s.io"],
            "resources": ["certificatesigningrequests"],
            "verbs": ["create", "get"],
        }
    ]


def cluster_role_names(hostname: str, namespace: str) -> tuple[str, str]:
    """(CSR, drain) ClusterRoles of the node."""
    return (
        cluster_scoped("nodemanager-csr", namespace, hostname),
        cluster_scoped("nodemanager-drain", namespace, hostname),
    )


def role_names(hostname: str) -> tuple[str, str]:
    """(node, token) Roles and RoleBindings of the node in its namespace."""
    return f"nodemanager-node-{hostname}", f"nodemanager-token-{hostname}"


def _cluster_role(
    name: str, rules: list[dict[str, Any]], hostname: str, ns: str, certificate: bool
) -> list[dict[str, Any]]:
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": LABELS},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": LABELS},
            "roleRef": ref,
            "subjects": subjects(hostname, ns, certificate),
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


def namespace_object(namespace: str) -> dict[str, Any]:
    """The same document in both outputs: kubectl apply would drop a label one of them lacks."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {**LABELS, KEEP_LABEL: "true"}},
    }


def manifests(
    hostname: str,
    namespace: str = "nodemanager",
    node_labels: Mapping[str, str] | None = None,
    lease_groups: Sequence[str] = (),
    drain: bool = False,
    upstream_wireguard: Sequence[str] = (),
    certificate: bool = False,
) -> list[dict[str, Any]]:
    """The Namespace, its guard by this node, and the objects of this node, in apply order; with
    ``node_labels``, also its ManagedNode with those labels approved (CRDs installed first);
    with ``drain``, the ClusterRole to cordon and drain its Kubernetes Node; with
    ``certificate``, every grant also bound to the node's certificate user, and the ClusterRole
    to ask for certificates (`bootstrap --certificate`)."""
    sa = service_account(hostname)
    node_role, token_role = role_names(hostname)
    csr_role, drain_role = cluster_role_names(hostname, namespace)
    approved = [approved_node(hostname, namespace, node_labels)] if node_labels else []
    if drain:
        approved += _cluster_role(
            drain_role, drain_rules(hostname), hostname, namespace, certificate
        )
    if certificate:
        approved += _cluster_role(csr_role, csr_rules(), hostname, namespace, certificate)
    return [
        namespace_object(namespace),
        *namespace_guard(namespace, hostname),
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": sa, "namespace": namespace, "labels": LABELS},
        },
        _role(node_role, namespace, node_rules(hostname, lease_groups, upstream_wireguard)),
        _binding(node_role, namespace, hostname, certificate),
        # The node renews its own token, and only its own (its certificate renews by CSR).
        _role(
            token_role,
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
        _binding(token_role, namespace, hostname, certificate=False),
        *leases(hostname, namespace, lease_groups),
        *approved,
    ]


def shared_manifests(namespace: str = "nodemanager") -> list[dict[str, Any]]:
    """What every node shares: its Namespace and the admission policies (cluster-wide)."""
    return [
        namespace_object(namespace),
        *admission_policies(),
    ]
