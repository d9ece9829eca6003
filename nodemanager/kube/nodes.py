"""The agent's own objects: its ManagedNode (labels, status), Events about it, its Lease.

Status is written with a merge patch on the status subresource, field manager ``nodemanager``;
callers only call ``patch_status`` when the status they computed differs from the cached one.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodemanager.kube import plain
from nodemanager.kube.client import FIELD_MANAGER, ClientFactory
from nodemanager.kube.errors import translate
from nodemanager.kube.recorder import EventRecorder

log = logging.getLogger(__name__)
GROUP, VERSION, PLURAL = "common.nodemanager", "v1", "managednodes"


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _object(value: object) -> dict[str, Any]:
    """The custom-objects API is typed ``object``; what it returns for one object is a dict."""
    if not isinstance(value, dict):
        raise TypeError(f"expected an object from the API, got {type(value).__name__}")
    return value


class NodeClient:
    def __init__(self, clients: ClientFactory, namespace: str, name: str):
        self.clients, self.namespace, self.name = clients, namespace, name
        self._lease: client.V1Lease | None = None
        self.events = EventRecorder(clients, namespace, "nodemanager", host=name)

    def _custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.clients.get())

    def ensure(self, labels: Mapping[str, str]) -> dict[str, Any]:
        """Create the ManagedNode, or bring the labels the agent manages up to date."""
        api = self._custom()
        try:
            node = _object(
                api.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, self.name)
            )
        except ApiException as e:
            if e.status != 404:
                raise translate(e) from e
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ManagedNode",
                "metadata": {
                    "name": self.name,
                    "namespace": self.namespace,
                    "labels": dict(labels),
                },
                "spec": {},
            }
            try:
                return _object(
                    api.create_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, PLURAL, body, field_manager=FIELD_MANAGER
                    )
                )
            except ApiException as e2:
                raise translate(e2) from e2
        current = node.get("metadata", {}).get("labels") or {}
        if all(current.get(k) == v for k, v in labels.items()):
            return node
        try:
            return _object(
                api.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    self.name,
                    {"metadata": {"labels": dict(labels)}},
                    field_manager=FIELD_MANAGER,
                )
            )
        except ApiException as e:
            raise translate(e) from e

    def secret_value(self, name: str, key: str) -> str | None:
        """One key of a Secret in the namespace, decoded; None when the Secret or key is absent.
        Raises KubeError (Forbidden without a grant)."""
        try:
            path = plain.namespaced(plain.CORE, self.namespace, "secrets", name)
            secret = plain.request(self.clients.get(), "GET", path)
        except ApiException as e:
            if e.status == 404:
                return None
            raise translate(e) from e
        value = (secret.get("data") or {}).get(key)
        return base64.b64decode(value).decode() if value else None

    def patch_status(self, status: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return _object(
                self._custom().patch_namespaced_custom_object_status(
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    self.name,
                    {"status": dict(status)},
                    field_manager=FIELD_MANAGER,
                )
            )
        except ApiException as e:
            raise translate(e) from e

    def event(
        self, reason: str, message: str, *, warning: bool = False, uid: str | None = None
    ) -> None:
        """Record a Kubernetes Event on the ManagedNode; failures are logged, never fatal.

        Repeats of one (type, reason, message) are one Event with a growing count."""
        involved = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ManagedNode", "name": self.name}
        self.events.record(
            {**involved, "uid": uid or ""}, reason, message, key=message, warning=warning
        )

    def renew_lease(self, duration_seconds: int = 40) -> None:
        """Create or renew the coordination.k8s.io Lease named after the node (liveness).

        The Lease last written is kept, so a renewal is one request (as the kubelet does); a
        conflict or a missing Lease falls back to read-then-write."""
        api = client.CoordinationV1Api(self.clients.get())
        stamp = dt.datetime.now(dt.UTC)
        lease = self._lease
        try:
            if lease is None:
                lease = api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec is None:
                lease.spec = client.V1LeaseSpec()
            lease.spec.renew_time = stamp
            lease.spec.holder_identity = self.name
            lease.spec.lease_duration_seconds = duration_seconds
            self._lease = api.replace_namespaced_lease(
                self.name, self.namespace, lease, field_manager=FIELD_MANAGER
            )
        except ApiException as e:
            self._lease = None
            if e.status == 409:
                return  # someone else wrote it since: re-read on the next beat
            if e.status != 404:
                raise translate(e) from e
            spec = client.V1LeaseSpec(
                holder_identity=self.name,
                lease_duration_seconds=duration_seconds,
                renew_time=stamp,
                acquire_time=stamp,
            )
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace), spec=spec
            )
            self._lease = api.create_namespaced_lease(
                self.namespace, body, field_manager=FIELD_MANAGER
            )
