"""Fencing, the API part: delete every pod bound to the Kubernetes Node ``name``, then the Node.

Only called for a node whose watchdog has reset it (its Lease expired more than the fencing
timeout ago): its pods are no longer running, so deleting them at once (grace period 0) lets
their controllers start them elsewhere without waiting for a kubelet that will not answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodemanager.kube.client import ClientFactory
from nodemanager.kube.errors import KUBE_ERRORS, translate

log = logging.getLogger(__name__)
POD_DELETED, NODE_DELETED = "FencedPodDeleted", "FencedNodeDeleted"


def fence(clients: ClientFactory, name: str, report: Callable[[str, str], None]) -> list[str]:
    """Delete the Node's pods, then the Node; ``report(reason, message)`` for each (an Event).
    The deleted pods (``namespace/name``); the Node missing is no error."""
    core = client.CoreV1Api(clients.get())
    try:
        pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
        deleted = []
        for pod in pods:
            meta = pod.metadata or client.V1ObjectMeta()
            ref = f"{meta.namespace}/{meta.name}"
            try:
                core.delete_namespaced_pod(
                    str(meta.name), str(meta.namespace), grace_period_seconds=0
                )
            except ApiException as e:
                if e.status != 404:
                    raise
                continue
            deleted.append(ref)
            report(POD_DELETED, f"deleted pod {ref} of fenced Kubernetes Node {name}")
        try:
            core.delete_node(name)
            report(NODE_DELETED, f"deleted Kubernetes Node {name}")
        except ApiException as e:
            if e.status != 404:
                raise
    except KUBE_ERRORS as e:  # no answer (a hung server) too: a KubeError, never raw
        raise translate(e) from e
    log.warning("fenced Kubernetes Node %s: %d pods deleted", name, len(deleted))
    return deleted
