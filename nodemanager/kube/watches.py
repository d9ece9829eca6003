"""The kinds the agent watches, all in its own namespace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client

from nodemanager.kube.informer import Kind
from nodemanager.kube.nodes import GROUP, VERSION
from nodemanager.kube.plain import APPS, CORE, lister


def _custom(
    plural: str, group: str = GROUP, version: str = VERSION
) -> Callable[[client.ApiClient], Callable[..., Any]]:
    def lister(api: client.ApiClient) -> Callable[..., Any]:
        custom = client.CustomObjectsApi(api)

        def list_objects(namespace: str, **kwargs: Any) -> Any:
            return custom.list_namespaced_custom_object(group, version, namespace, plural, **kwargs)

        return list_objects

    return lister


CONFIGSETS = Kind("configsets", _custom("configsets"))
MANAGEDNODES = Kind("managednodes", _custom("managednodes"))
NODEPOOLS = Kind("nodepools", _custom("nodepools"))
# Built-in kinds as plain dicts too (kube/plain.py): the typed API modules load ~280 models.
SECRETS = Kind("secrets", lister(CORE, "secrets"))
CONFIGMAPS = Kind("configmaps", lister(CORE, "configmaps"))
# Leases as plain dicts through the generic path: 5,000 agents renew 500 a second, and the
# client's model classes cost 4x the CPU of the JSON decode alone (317 vs 80 us an event).
LEASES = Kind("leases", _custom("leases", "coordination.k8s.io", "v1"))
ROLES = Kind("roles", lambda api: client.RbacAuthorizationV1Api(api).list_namespaced_role)
ROLEBINDINGS = Kind(
    "rolebindings", lambda api: client.RbacAuthorizationV1Api(api).list_namespaced_role_binding
)
CONTROLLERREVISIONS = Kind("controllerrevisions", lister(APPS, "controllerrevisions"))
