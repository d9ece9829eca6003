"""Are the admission policies in force? Ask the API server with writes they must refuse.

A server-side dry-run (``dryRun=All``) runs authentication, RBAC and every admission policy,
then stores nothing. One probe per policy that `rbac --shared` prints: a label and a spec field
on the node's own ManagedNode, an Event about another node, its own Lease held as another node, an
unbound token. Refused means the policy holds; accepted means it or its binding is gone (the
node could opt itself into any ConfigSet, or take another node's Lease). An agent run with a
credential that is not a node account (an administrator's, in development) is not restricted by
design, so an accepted write means nothing there: the answer is "unknown".
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodemanager.api.nodeuser import USER_PREFIX
from nodemanager.kube import plain
from nodemanager.kube.client import FIELD_MANAGER, ClientFactory
from nodemanager.kube.nodes import GROUP, PLURAL, VERSION

log = logging.getLogger(__name__)
PROBE_LABEL = "nodemanager.io/policy-self-test"
FORBIDDEN = {
    "metadata": {"labels": {PROBE_LABEL: "must-be-refused"}},
    "spec": {"domain": "policy-self-test.invalid"},
}


def _managednode(api: client.ApiClient, namespace: str, name: str) -> None:
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, FORBIDDEN, dry_run="All",
        field_manager=FIELD_MANAGER,
    )  # fmt: skip


def _event(api: client.ApiClient, namespace: str, name: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{OTHER}.self-test"},
        "involvedObject": {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ManagedNode",
            "name": OTHER,
            "namespace": namespace,
        },
        "reason": "PolicySelfTest",
        "message": "an Event about another node: must be refused",
        "type": "Normal",
    }
    path = plain.namespaced(plain.CORE, namespace, "events")
    plain.request(api, "POST", path, body, dry_run="All")


def _lease(api: client.ApiClient, namespace: str, name: str) -> None:
    # Its own liveness Lease (RBAC lets it update that one) held as another node.
    leases = client.CoordinationV1Api(api)
    lease = leases.read_namespaced_lease(name, namespace)
    lease.spec = client.V1LeaseSpec(holder_identity=OTHER, lease_duration_seconds=1)
    leases.replace_namespaced_lease(name, namespace, lease, dry_run="All")


def _token(api: client.ApiClient, namespace: str, name: str) -> None:
    # Unbound: never issued, as a dry-run, and refused by the policy before that.
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"audiences": [], "expirationSeconds": 600},
    }
    path = plain.namespaced(
        plain.CORE, namespace, "serviceaccounts", f"nodemanager-{name}", "token"
    )
    plain.request(api, "POST", path, body, dry_run="All")


OTHER = "nodemanager-policy-self-test"  # no node can be named so (bootstrap/policy.py reserves it)
# policy name -> a write it must refuse (every policy `rbac --shared` prints that a node's own
# RBAC would otherwise allow; the cordon policy guards a grant only `rbac --drain` gives)
PROBES: dict[str, Callable[[client.ApiClient, str, str], None]] = {
    "nodemanager-node-restriction": _managednode,
    "nodemanager-node-events": _event,
    "nodemanager-node-leases": _lease,
    "nodemanager-node-tokens": _token,
}


def missing_policies(clients: ClientFactory, namespace: str, name: str) -> list[str] | None:
    """The policies whose forbidden write the API server accepted (dry-run); [] when all
    refused theirs; None when the answer says nothing (unreachable, no ManagedNode yet, or a
    credential that is not a node account)."""
    missing = []
    for policy, probe in PROBES.items():
        try:
            probe(clients.get(), namespace, name)
        except ApiException as e:
            if e.status in (403, 422):
                continue
            log.info("policy self-test inconclusive (%s): %s %s", policy, e.status, e.reason)
            return None
        except Exception as e:  # connection errors: try again with the next drift check
            log.info("policy self-test inconclusive (%s): %s", policy, e)
            return None
        missing.append(policy)
    if missing and not _is_node_account(clients, namespace):
        return None
    return missing


_NODE_ACCOUNT: dict[int, bool] = {}  # per ClientFactory: the account does not change


def _is_node_account(clients: ClientFactory, namespace: str) -> bool:
    """Whether the agent's credential is a node account (``nodemanager-<host>``)."""
    if id(clients) not in _NODE_ACCOUNT:
        answer = _ask_node_account(clients, namespace)
        if answer is None:
            return False  # ask again next time
        _NODE_ACCOUNT[id(clients)] = answer
    return _NODE_ACCOUNT[id(clients)]


def _ask_node_account(clients: ClientFactory, namespace: str) -> bool | None:
    try:
        review = client.AuthenticationV1Api(clients.get()).create_self_subject_review(
            client.V1SelfSubjectReview()
        )
        user = review.status.user_info.username if review.status and review.status.user_info else ""
    except Exception as e:
        log.info("cannot tell which account the agent runs as: %s", e)
        return None
    return str(user).startswith(
        (f"system:serviceaccount:{namespace}:nodemanager-", f"{USER_PREFIX}{namespace}:")
    )
