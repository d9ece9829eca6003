"""Taking one user out of RoleBindings and ClusterRoleBindings (`revoke` of a certificate).

A client certificate cannot be revoked: the API server trusts it until it expires. What can be
taken away is everything it is granted, so `revoke` removes the certificate's user from each
binding of the node; a binding left with no subject is deleted. Each change is a replace at the
resourceVersion read, retried on a conflict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodemanager.kube.errors import KUBE_ERRORS, translate

ATTEMPTS = 5


def _remove(read: Any, replace: Any, delete: Any, user: str) -> bool:
    """Whether ``user`` was taken out of the binding that ``read()`` returns."""
    for _ in range(ATTEMPTS):
        try:
            binding = read()
        except ApiException as e:
            if e.status == 404:
                return False
            raise translate(e) from e
        subjects = binding.subjects or []
        kept = [s for s in subjects if not (s.kind == "User" and s.name == user)]
        if len(kept) == len(subjects):
            return False
        try:
            if kept:
                binding.subjects = kept
                replace(binding)
            else:
                delete()
            return True
        except ApiException as e:
            if e.status == 404:
                return True
            if e.status != 409:
                raise translate(e) from e
    raise translate(ApiException(status=409, reason="the binding kept changing"))


def remove_user(
    api: client.ApiClient,
    user: str,
    namespace: str,
    role_bindings: Sequence[str],
    cluster_role_bindings: Sequence[str],
) -> list[str]:
    """Take ``user`` out of these bindings; the names of those it was in."""
    rbac = client.RbacAuthorizationV1Api(api)
    changed = []
    try:
        for name in role_bindings:
            if _remove(
                lambda n=name: rbac.read_namespaced_role_binding(n, namespace),
                lambda b, n=name: rbac.replace_namespaced_role_binding(n, namespace, b),
                lambda n=name: rbac.delete_namespaced_role_binding(n, namespace),
                user,
            ):
                changed.append(f"RoleBinding {namespace}/{name}")
        for name in cluster_role_bindings:
            if _remove(
                lambda n=name: rbac.read_cluster_role_binding(n),
                lambda b, n=name: rbac.replace_cluster_role_binding(n, b),
                lambda n=name: rbac.delete_cluster_role_binding(n),
                user,
            ):
                changed.append(f"ClusterRoleBinding {name}")
    except KUBE_ERRORS as e:
        raise translate(e) from e
    return changed
