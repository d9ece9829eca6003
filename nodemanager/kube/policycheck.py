"""Is the admission policy in force? Ask the API server with a write it must refuse.

A server-side dry-run (``dryRun=All``) runs authentication, RBAC and every admission policy,
then stores nothing. The probe patches the node's own ManagedNode with a label and a spec
field a node may never set: refused means the policy holds; accepted means it or its binding
is gone and the node could opt itself into any ConfigSet. An agent run with a credential that
is not a node account (an administrator's, in development) is not restricted by design, so an
accepted write means nothing there: the answer is "unknown".
"""

from __future__ import annotations

import logging

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodemanager.kube.client import FIELD_MANAGER, ClientFactory
from nodemanager.kube.nodes import GROUP, PLURAL, VERSION

log = logging.getLogger(__name__)
PROBE_LABEL = "nodemanager.io/policy-self-test"
FORBIDDEN = {
    "metadata": {"labels": {PROBE_LABEL: "must-be-refused"}},
    "spec": {"domain": "policy-self-test.invalid"},
}


def forbidden_write_allowed(clients: ClientFactory, namespace: str, name: str) -> bool | None:
    """True if the API server accepted the forbidden write (dry-run), False if it refused it,
    None if the answer says nothing about the policy (unreachable, no ManagedNode yet)."""
    try:
        client.CustomObjectsApi(clients.get()).patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            FORBIDDEN,
            dry_run="All",
            field_manager=FIELD_MANAGER,
        )
    except ApiException as e:
        if e.status in (403, 422):
            return False
        log.info("policy self-test inconclusive: %s %s", e.status, e.reason)
        return None
    except Exception as e:  # connection errors: try again with the next drift check
        log.info("policy self-test inconclusive: %s", e)
        return None
    return _is_node_account(clients, namespace) or None


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
    return str(user).startswith(f"system:serviceaccount:{namespace}:nodemanager-")
