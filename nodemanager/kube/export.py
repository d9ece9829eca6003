"""Read the project's objects of one namespace as plain dicts (for ``nodemanager migrate``)."""

from __future__ import annotations

from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodemanager.kube.client import ClientFactory
from nodemanager.kube.errors import translate
from nodemanager.kube.nodes import GROUP, VERSION

PLURALS = (("ConfigSet", "configsets"), ("ManagedNode", "managednodes"))


def export(clients: ClientFactory, namespace: str) -> list[dict[str, Any]]:
    """Every ConfigSet and ManagedNode in ``namespace``, status included, as stored."""
    custom = client.CustomObjectsApi(clients.get())
    out: list[dict[str, Any]] = []
    for kind, plural in PLURALS:
        try:
            listed = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)
        except ApiException as e:
            raise translate(e) from e
        for item in cast(dict[str, Any], listed).get("items") or []:
            out.append({"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, **item})
    return out
