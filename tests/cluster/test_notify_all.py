"""`notifies[]` without `name` (upstream's NotifyRef): every object of that kind in the
namespace is annotated, on the real API server."""

from __future__ import annotations

import pytest
from kubernetes import client

from nodemanager.kube.client import ClientFactory
from nodemanager.kube.notify import NOTIFIED_BY, Notifier

pytestmark = pytest.mark.cluster


def test_without_name_every_object_of_the_kind_is_annotated(kubeconfig, api_client, namespace):
    core = client.CoreV1Api(api_client)
    for name in ("one", "two"):
        core.create_namespaced_config_map(
            namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name))
        )
    Notifier(ClientFactory(kubeconfig)).annotate(
        "v1", "ConfigMap", None, namespace, {NOTIFIED_BY: "web-1/jails@7"}
    )
    for name in ("one", "two"):
        annotations = core.read_namespaced_config_map(name, namespace).metadata.annotations or {}
        assert annotations.get(NOTIFIED_BY) == "web-1/jails@7", name
    Notifier(ClientFactory(kubeconfig)).annotate(
        "v1", "ConfigMap", "one", namespace, {NOTIFIED_BY: "web-1/jails@8"}
    )
    by_name = {
        c.metadata.name: (c.metadata.annotations or {}).get(NOTIFIED_BY)
        for c in core.list_namespaced_config_map(namespace).items
    }
    assert by_name["one"] == "web-1/jails@8" and by_name["two"] == "web-1/jails@7"
