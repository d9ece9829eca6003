"""The controller's writes: ConfigSet status, a ManagedNode's Ready condition, per-node Roles.

Every write is a merge patch with field manager ``nodemanager-controller``. The ManagedNode
condition patch carries the resourceVersion the controller computed from, so it fails with a
409 (and is recomputed from a fresher cache) instead of overwriting a status the agent wrote
in between.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodemanager.kube import csr
from nodemanager.kube.client import ClientFactory
from nodemanager.kube.errors import KUBE_ERRORS, translate
from nodemanager.kube.fence import fence
from nodemanager.kube.nodes import GROUP, VERSION

CONTROLLER_MANAGER = "nodemanager-controller"


def _body(obj: dict[str, Any]) -> Any:
    """A plain dict as a request body: the client serialises dicts as they are, though its
    hints name model classes."""
    return obj


class FleetClient:
    def __init__(self, clients: ClientFactory, namespace: str) -> None:
        self.clients, self.namespace = clients, namespace

    def _custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.clients.get())

    def patch_configset_status(self, name: str, status: Mapping[str, Any]) -> None:
        try:
            self._custom().patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                self.namespace,
                "configsets",
                name,
                {"status": dict(status)},
                field_manager=CONTROLLER_MANAGER,
            )
        except ApiException as e:
            raise translate(e) from e

    def patch_node_conditions(
        self, name: str, resource_version: str, conditions: list[dict[str, Any]]
    ) -> None:
        body = {
            "metadata": {"resourceVersion": resource_version},
            "status": {"conditions": conditions},
        }
        try:
            self._custom().patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                self.namespace,
                "managednodes",
                name,
                body,
                field_manager=CONTROLLER_MANAGER,
            )
        except ApiException as e:
            raise translate(e) from e

    def get_lease(self, name: str) -> dict[str, Any] | None:
        """A node's Lease read now (not from a cache), or None when it has none."""
        try:
            lease = self._custom().get_namespaced_custom_object(
                "coordination.k8s.io", "v1", self.namespace, "leases", name
            )
        except KUBE_ERRORS as e:  # no answer (a hung server) too: a KubeError, never raw
            if isinstance(e, ApiException) and e.status == 404:
                return None
            raise translate(e) from e
        return cast(dict[str, Any], lease)

    def put_role(self, role: dict[str, Any]) -> None:
        """Create or replace a Role the controller wholly owns."""
        rbac = client.RbacAuthorizationV1Api(self.clients.get())
        name = role["metadata"]["name"]
        try:
            rbac.replace_namespaced_role(
                name, self.namespace, _body(role), field_manager=CONTROLLER_MANAGER
            )
        except ApiException as e:
            if e.status != 404:
                raise translate(e) from e
            try:
                rbac.create_namespaced_role(
                    self.namespace, _body(role), field_manager=CONTROLLER_MANAGER
                )
            except ApiException as e2:
                raise translate(e2) from e2

    def create_binding(self, binding: dict[str, Any]) -> None:
        """Create a RoleBinding; one that exists is left alone (its roleRef cannot change)."""
        rbac = client.RbacAuthorizationV1Api(self.clients.get())
        try:
            rbac.create_namespaced_role_binding(
                self.namespace, _body(binding), field_manager=CONTROLLER_MANAGER
            )
        except ApiException as e:
            if e.status != 409:
                raise translate(e) from e

    def put_binding(self, binding: dict[str, Any]) -> None:
        """Replace the subjects of a RoleBinding the controller wholly owns."""
        rbac = client.RbacAuthorizationV1Api(self.clients.get())
        try:
            rbac.replace_namespaced_role_binding(
                binding["metadata"]["name"],
                self.namespace,
                _body(binding),
                field_manager=CONTROLLER_MANAGER,
            )
        except ApiException as e:
            raise translate(e) from e

    def create_revision(self, revision: dict[str, Any]) -> None:
        """Create a ControllerRevision; one with the same name (same content) is left alone.

        Sent as YAML on purpose: the API server then stores ``data`` as canonical JSON (sorted
        keys, no spaces). Sent as the client's JSON, ``data`` keeps the client's spacing, and
        any later patch of ``revision`` (undo renumbers) fails as a change of immutable data.
        """
        api = self.clients.get()
        method, url, headers, body, _ = api.param_serialize(
            "POST",
            "/apis/apps/v1/namespaces/{namespace}/controllerrevisions",
            path_params={"namespace": self.namespace},
            query_params=[("fieldManager", CONTROLLER_MANAGER)],
            header_params={"Content-Type": "application/yaml", "Accept": "application/json"},
            body=yaml.safe_dump(revision),
            auth_settings=["BearerToken"],
        )
        try:
            response = api.call_api(method, url, header_params=headers, body=body)
            response.read()
        except ApiException as e:
            if e.status != 409:
                raise translate(e) from e
            return
        if response.status not in (200, 201, 409):  # 409: same content, same name: it exists
            raise translate(ApiException(http_resp=response))

    def renumber_revision(self, name: str, number: int) -> None:
        """Make an earlier revision the newest again (its content came back, e.g. by undo)."""
        try:
            client.AppsV1Api(self.clients.get()).patch_namespaced_controller_revision(
                name, self.namespace, {"revision": number}, field_manager=CONTROLLER_MANAGER
            )
        except ApiException as e:
            raise translate(e) from e

    def delete_revision(self, name: str) -> None:
        """Delete a ControllerRevision past revisionHistoryLimit (gone already is fine)."""
        try:
            client.AppsV1Api(self.clients.get()).delete_namespaced_controller_revision(
                name, self.namespace
            )
        except ApiException as e:
            if e.status != 404:
                raise translate(e) from e

    def _patch_node_spec(self, node: str, patch: Mapping[str, Any]) -> None:
        """A merge patch of a ManagedNode's spec under the controller's field manager."""
        try:
            self._custom().patch_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace,
                "managednodes",
                node,
                dict(patch),
                field_manager=CONTROLLER_MANAGER,
            )
        except ApiException as e:
            raise translate(e) from e

    def admit(self, node: str, field: str, configset: str, revision: str) -> None:
        """Admit a node to a revision: a ManagedNode spec field that nodes may not write."""
        self._patch_node_spec(node, {"spec": {field: {configset: revision}}})

    def unadmit(self, node: str, fields: Sequence[str], configset: str) -> None:
        """Remove a ConfigSet's admission (and its ready time) from a node's spec."""
        patch = {"spec": {f: {configset: None} for f in fields}}  # merge patch: null deletes
        self._patch_node_spec(node, patch)

    def mark_ready(self, node: str, field: str, configset: str, revision: str, since: str) -> None:
        """Record when the controller first saw ``node`` report ``revision`` applied without
        error (its clock, not the node's), in a spec field nodes may not write."""
        patch = {"spec": {field: {configset: {"revision": revision, "since": since}}}}
        self._patch_node_spec(node, patch)

    def delete_rbac(self, name: str) -> None:
        rbac = client.RbacAuthorizationV1Api(self.clients.get())
        for delete in (rbac.delete_namespaced_role_binding, rbac.delete_namespaced_role):
            try:
                delete(name, self.namespace)
            except ApiException as e:
                if e.status != 404:
                    raise translate(e) from e

    def fence(self, node: str, report: Callable[[str, str], None]) -> None:
        """Delete the pods and the Kubernetes Node of a fenced node (kube/fence.py)."""
        fence(self.clients, node, report)

    def may(self, user: str, groups: Sequence[str], grant: csr.Grant, name: str) -> bool:
        """Whether ``user`` may ``grant`` (verb, group, resource, subresource) on that object
        of this namespace (a SubjectAccessReview)."""
        verb, *resource = grant
        group, plural, sub = resource
        return csr.may(
            self.clients.get(), user, groups, verb, (group, plural, sub), self.namespace, name
        )

    def approve_csr(self, request: Mapping[str, Any], reason: str, message: str) -> None:
        csr.approve(self.clients.get(), request, reason, message)

    def delete_csr(self, name: str) -> None:
        csr.delete(self.clients.get(), name)

    def patch_node_spec(self, node: str, spec: Mapping[str, Any]) -> None:
        """Merge ``spec`` into a ManagedNode's spec (fields nodes may not write; null deletes):
        its pool, a disruption slot granted."""
        self._patch_node_spec(node, {"spec": dict(spec)})

    def create_pool(self, pool: dict[str, Any]) -> None:
        """Create a NodePool (the default pool); one that exists already is left alone."""
        try:
            self._custom().create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "nodepools", _body(pool),
                field_manager=CONTROLLER_MANAGER,
            )  # fmt: skip
        except ApiException as e:
            if e.status != 409:
                raise translate(e) from e

    def patch_pool_status(self, name: str, status: Mapping[str, Any]) -> None:
        try:
            self._custom().patch_namespaced_custom_object_status(
                GROUP, VERSION, self.namespace, "nodepools", name, {"status": dict(status)},
                field_manager=CONTROLLER_MANAGER,
            )  # fmt: skip
        except ApiException as e:
            raise translate(e) from e
