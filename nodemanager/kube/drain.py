"""Cordon and drain the Kubernetes Node named like this host, as ``kubectl drain`` does.

Used around a scheduled OS upgrade (``agent/upgrade.py``). Cordoning sets
``spec.unschedulable``; draining evicts the Node's pods through the Eviction API, so
PodDisruptionBudgets are honoured (a 429 means "not now": retried until the timeout), and skips
what kubectl drain skips: DaemonSet pods (their controller would put them straight back) and
mirror pods (the kubelet owns them). Pods that already finished are not waited for. A drain
waits until the evicted pods are gone, which takes the pod's grace period on a real kubelet.

Access: ``nodemanager rbac --drain`` grants get/patch on the Node of the host's own name only,
and list pods plus create evictions cluster-wide (RBAC cannot scope those to one Node's pods);
the admission policy lets the node change nothing of its Node but ``spec.unschedulable``.
Without the grant the Node is unreadable (403): the upgrade goes on without a drain, as on a
host that is no Kubernetes Node.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodemanager.kube.client import FIELD_MANAGER, ClientFactory
from nodemanager.kube.errors import translate

log = logging.getLogger(__name__)
MIRROR = "kubernetes.io/config.mirror"


class DrainStopped(Exception):
    """The agent is stopping: the drain was abandoned, and no upgrade may start."""


def _meta(pod: client.V1Pod) -> client.V1ObjectMeta:
    return pod.metadata or client.V1ObjectMeta()


def _key(pod: client.V1Pod) -> tuple[str, str]:
    meta = _meta(pod)
    return str(meta.namespace), str(meta.name)


def drainable(pod: client.V1Pod) -> bool:
    """Whether a drain evicts and waits for ``pod`` (kubectl drain's filters)."""
    meta, status = _meta(pod), pod.status
    if status is not None and status.phase in ("Succeeded", "Failed"):
        return False
    if MIRROR in (meta.annotations or {}):
        return False
    return not any(ref.kind == "DaemonSet" for ref in meta.owner_references or [])


class NodeDrainer:
    """The Kubernetes Node called ``name``: cordon, drain, uncordon."""

    def __init__(
        self,
        clients: ClientFactory,
        name: str,
        *,
        wait: Callable[[float], object] = time.sleep,
        poll: float = 2.0,
    ):
        """``wait(seconds)`` returns true when the agent is stopping (``Event.wait``)."""
        self.clients, self.name, self.wait, self.poll = clients, name, wait, poll

    def _core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.clients.get())

    def cordon(self) -> bool | None:
        """Mark the Node unschedulable. None: there is no such Node (or no ``rbac --drain``
        grant to see it); False: it was cordoned already (an administrator's, left alone);
        True: this call cordoned it."""
        core = self._core()
        try:
            node = core.read_node(self.name)
        except ApiException as e:
            if e.status == 404:
                return None
            if e.status == 403:
                log.info("cannot read Kubernetes Node %s (no `rbac --drain`): no drain", self.name)
                return None
            raise translate(e) from e
        if node.spec and node.spec.unschedulable:
            return False
        self._schedulable(False)
        log.info("cordoned Kubernetes Node %s", self.name)
        return True

    def uncordon(self) -> None:
        """Make the Node schedulable again (only called when ``cordon`` cordoned it)."""
        try:
            self._schedulable(True)
        except ApiException as e:
            if e.status != 404:
                raise translate(e) from e
        log.info("uncordoned Kubernetes Node %s", self.name)

    def _schedulable(self, yes: bool) -> None:
        # A merge patch of this one field: the admission policy refuses any other change.
        body = {"spec": {"unschedulable": None if yes else True}}
        self._core().patch_node(self.name, body, field_manager=FIELD_MANAGER)

    def pods(self) -> list[client.V1Pod]:
        """The Node's pods a drain must see gone."""
        try:
            found = self._core().list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={self.name}"
            )
        except ApiException as e:
            raise translate(e) from e
        return [p for p in found.items if drainable(p)]

    def drain(self, timeout: float) -> list[str]:
        """Evict the Node's pods and wait until they are gone; the ones left at ``timeout``
        (``namespace/name``), empty when the drain completed. DrainStopped when the agent
        stops meanwhile."""
        deadline = time.monotonic() + timeout
        core = self._core()
        while True:
            left = self.pods()
            for pod in left:
                if _meta(pod).deletion_timestamp is None:
                    self._evict(core, pod)
            if not left:
                log.info("drained Kubernetes Node %s", self.name)
                return []
            if time.monotonic() >= deadline:
                return sorted("/".join(_key(p)) for p in left)
            if self.wait(self.poll):
                raise DrainStopped(f"stopped while draining Kubernetes Node {self.name}")

    def evict_lowest(self) -> tuple[str, list[str]]:
        """Early OOM: evict one pod of the Node, the lowest priority first (the newest among
        equals: it has done the least work). A pod a PodDisruptionBudget protects is passed
        over for the next. (``namespace/name`` evicted or "", the ones PDBs blocked)."""
        core = self._core()
        blocked: list[str] = []
        for pod in sorted(
            (p for p in self.pods() if _meta(p).deletion_timestamp is None), key=_eviction_order
        ):
            if self._evict(core, pod):
                return "/".join(_key(pod)), blocked
            blocked.append("/".join(_key(pod)))
        return "", blocked

    def _evict(self, core: client.CoreV1Api, pod: client.V1Pod) -> bool:
        """Whether the pod is evicted (or gone); False when a PodDisruptionBudget said no."""
        namespace, name = _key(pod)
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
        try:
            core.create_namespaced_pod_eviction(name, namespace, body)
            log.info("evicted pod %s/%s", namespace, name)
        except ApiException as e:
            if e.status == 404:
                return True  # gone already
            if e.status == 429:  # a PodDisruptionBudget says not now: retried next round
                log.info("eviction of %s/%s blocked by a PodDisruptionBudget", namespace, name)
                return False
            raise translate(e) from e
        return True


def _eviction_order(pod: client.V1Pod) -> tuple[int, float]:
    created = _meta(pod).creation_timestamp
    return (
        (pod.spec.priority if pod.spec and pod.spec.priority is not None else 0),
        -created.timestamp() if created else 0.0,
    )
