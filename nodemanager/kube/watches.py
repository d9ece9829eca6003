"""The kinds the agent watches, all in its own namespace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client

from nodemanager.kube.informer import Kind
from nodemanager.kube.nodes import GROUP, VERSION


def _custom(plural: str) -> Callable[[client.ApiClient], Callable[..., Any]]:
    def lister(api: client.ApiClient) -> Callable[..., Any]:
        custom = client.CustomObjectsApi(api)

        def list_objects(namespace: str, **kwargs: Any) -> Any:
            return custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural, **kwargs)

        return list_objects

    return lister


CONFIGSETS = Kind("configsets", _custom("configsets"))
MANAGEDNODES = Kind("managednodes", _custom("managednodes"))
SECRETS = Kind("secrets", lambda api: client.CoreV1Api(api).list_namespaced_secret)
CONFIGMAPS = Kind("configmaps", lambda api: client.CoreV1Api(api).list_namespaced_config_map)
LEASES = Kind("leases", lambda api: client.CoordinationV1Api(api).list_namespaced_lease)
ROLES = Kind("roles", lambda api: client.RbacAuthorizationV1Api(api).list_namespaced_role)
ROLEBINDINGS = Kind(
    "rolebindings", lambda api: client.RbacAuthorizationV1Api(api).list_namespaced_role_binding
)
CONTROLLERREVISIONS = Kind(
    "controllerrevisions",
    lambda api: client.AppsV1Api(api).list_namespaced_controller_revision,
)
