"""Events about any object, aggregated per key: one Event object whose count and message move.

The controller's Events are about ConfigSets, the agent's about its own ManagedNode.
Kubernetes' correlator folds similar Events into one with a growing ``count``; here the caller
names what is similar (``key``): the Event is named after a digest of (kind, object, type,
reason, key), so a repeat patches ``count``, ``lastTimestamp`` and ``message`` of the same
object, and a restarted process finds it by name (409 on create) and keeps counting. Only create
and patch are used: a node may not read Events (they tell of other nodes), and a patch answers
with the object, count included.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from nodemanager.kube import plain
from nodemanager.kube.client import ClientFactory

log = logging.getLogger(__name__)
REMEMBERED = 1024


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def involved(obj: Mapping[str, Any], kind: str) -> dict[str, str]:
    """The reference an Event names for one of our objects (raw, as the cache holds it)."""
    meta = obj["metadata"]
    return {
        "apiVersion": obj.get("apiVersion", "common.nodemanager/v1"),
        "kind": kind,
        "name": meta["name"],
        "uid": meta.get("uid", ""),
    }


class EventRecorder:
    def __init__(
        self, clients: ClientFactory, namespace: str, component: str, host: str | None = None
    ) -> None:
        self.clients, self.namespace, self.component = clients, namespace, component
        self.host = host
        self._counts: dict[str, int] = {}  # Event name -> count last written

    @staticmethod
    def event_name(obj_name: str, kind: str, type_: str, reason: str, key: str) -> str:
        digest = hashlib.sha256(f"{kind}\0{obj_name}\0{type_}\0{reason}\0{key}".encode())
        return f"{obj_name}.{digest.hexdigest()[:16]}"

    def record(
        self,
        involved: Mapping[str, Any],
        reason: str,
        message: str,
        *,
        key: str = "",
        warning: bool = False,
    ) -> None:
        """An Event about ``involved`` (apiVersion, kind, name, uid); never raises."""
        type_ = "Warning" if warning else "Normal"
        message = message[:1024]
        name = self.event_name(involved["name"], involved["kind"], type_, reason, key)
        api = self.clients.get()
        try:
            count = self._counts.get(name)
            if count is None:
                try:
                    self._create(api, name, involved, reason, message, type_)
                    self._remember(name, 1)
                    return
                except ApiException as e:
                    if e.status != 409:
                        raise
                    count = self._patch(api, name, {"message": message}).get("count") or 1
            try:
                self._patch(api, name, {"count": count + 1, "message": message})
                self._remember(name, count + 1)
            except ApiException as e:
                if e.status != 404:
                    raise
                self._create(api, name, involved, reason, message, type_)  # expired (TTL)
                self._remember(name, 1)
        except Exception as e:  # an Event is a courtesy; the status carries the truth
            self._counts.pop(name, None)
            log.warning("could not record event %s on %s: %s", reason, involved["name"], e)

    def _patch(self, api: Any, name: str, change: dict[str, Any]) -> dict[str, Any]:
        """Patch the Event (lastTimestamp is always now); the API answers with the Event."""
        path = plain.namespaced(plain.CORE, self.namespace, "events", name)
        return dict(plain.request(api, "PATCH", path, {**change, "lastTimestamp": _now()}))

    def _remember(self, name: str, count: int) -> None:
        self._counts.pop(name, None)
        self._counts[name] = count
        if len(self._counts) > REMEMBERED:
            self._counts.pop(next(iter(self._counts)))

    def _create(
        self,
        api: Any,
        name: str,
        involved: Mapping[str, Any],
        reason: str,
        message: str,
        type_: str,
    ) -> None:
        stamp = _now()
        body: Any = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": self.namespace},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion", ""),
                "kind": involved["kind"],
                "name": involved["name"],
                "namespace": self.namespace,
                "uid": involved.get("uid", ""),
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "source": {"component": self.component, **({"host": self.host} if self.host else {})},
        }
        plain.request(api, "POST", plain.namespaced(plain.CORE, self.namespace, "events"), body)
