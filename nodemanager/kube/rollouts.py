"""The API calls behind `nodemanager rollout`: read a ConfigSet and its revisions, pause,
resume, and put an earlier revision's content back (`undo`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodemanager.kube import plain
from nodemanager.kube.client import ClientFactory
from nodemanager.kube.errors import Temporary, translate
from nodemanager.kube.nodes import GROUP, VERSION

CLI_MANAGER = "nodemanager-rollout"


class RolloutClient:
    def __init__(self, clients: ClientFactory, namespace: str) -> None:
        self.clients, self.namespace = clients, namespace

    def _custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.clients.get())

    def configset(self, name: str) -> dict[str, Any]:
        try:
            found = self._custom().get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "configsets", name
            )
            return cast(dict[str, Any], found)
        except ApiException as e:
            raise translate(e) from e

    def nodes(self) -> list[dict[str, Any]]:
        try:
            listing = cast(
                dict[str, Any],
                self._custom().list_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, "managednodes"
                ),
            )
        except ApiException as e:
            raise translate(e) from e
        return list(listing.get("items") or [])

    def revisions(self, configset: str, label: str) -> list[dict[str, Any]]:
        path = plain.namespaced(plain.APPS, self.namespace, "controllerrevisions")
        try:
            listing = plain.request(
                self.clients.get(), "GET", path, label_selector=f"{label}={configset}"
            )
        except ApiException as e:
            raise translate(e) from e
        return list(listing.get("items") or [])

    def set_paused(self, name: str, paused: bool) -> None:
        try:
            self._custom().patch_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace,
                "configsets",
                name,
                {"spec": {"paused": paused}},
                field_manager=CLI_MANAGER,
            )
        except ApiException as e:
            raise translate(e) from e

    def replace_spec(
        self, name: str, new_spec: Callable[[Mapping[str, Any]], dict[str, Any]]
    ) -> None:
        """Replace the spec with ``new_spec(current spec)``, retrying on a concurrent write."""
        for _ in range(5):
            current = self.configset(name)
            body = {**current, "spec": new_spec(current.get("spec") or {})}
            body.pop("status", None)
            try:
                self._custom().replace_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    self.namespace,
                    "configsets",
                    name,
                    body,
                    field_manager=CLI_MANAGER,
                )
                return
            except ApiException as e:
                error = translate(e)
                if error.status != 409:
                    raise error from e
        raise Temporary(f"ConfigSet {name} kept changing; try again", "Conflict", 409)
