"""Fencing and a node's own credential (the README flow, with `rbac --drain` for the most a node
can hold): it can neither turn fencing on or off nor set maintenance, for itself or another
node, and can delete no pod and no Node. Each attempt against the real API server."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client, config

from tests.cluster.helpers import eventually
from tests.cluster.test_isolation import (
    GROUP,
    VERSION,
    credential,
    kubectl,
    managednode,
    nm,
    refused,
)

pytestmark = pytest.mark.cluster
MAINTENANCE = "nodemanager.io/maintenance"


@pytest.fixture(scope="module")
def fenced(kubeconfig, tmp_path_factory):
    """(admin, a's client, namespace): nodes a and b, b fenced by the administrator."""
    ns = f"fence-{uuid.uuid4().hex[:6]}"
    shared = kubectl(kubeconfig, "apply", nm("rbac", "--shared", "--namespace", ns).stdout)
    assert shared.returncode == 0, shared.stderr
    directory = tmp_path_factory.mktemp("fencing-access")
    a = config.new_client_from_config(str(credential(kubeconfig, ns, "a", directory, "--drain")))
    admin = config.new_client_from_config(kubeconfig)
    client.CustomObjectsApi(a).create_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes", managednode("a")
    )
    client.CustomObjectsApi(admin).create_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes", managednode("b", spec={"fencing": {"enabled": True}})
    )
    core = client.CoreV1Api(admin)
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=f"a-{ns}")))
    core.create_namespaced_pod(
        ns,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name="p"),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="x")]),
        ),
    )

    def patch(name: str, body: dict) -> object:
        return client.CustomObjectsApi(a).patch_namespaced_custom_object(
            GROUP, VERSION, ns, "managednodes", name, body
        )

    # The policies are compiled asynchronously after they are created: wait until one bites.
    eventually(lambda: refused(lambda: patch("a", {"spec": {"domain": "x"}})), timeout=30)
    yield admin, a, ns, patch
    core.delete_node(f"a-{ns}")
    for api in (a, admin):
        api.close()


@pytest.mark.parametrize(
    "name, body, because",
    [
        ("a", {"spec": {"fencing": {"enabled": True}}}, "spec is set by administrators"),
        ("b", {"spec": {"fencing": {"enabled": False}}}, ""),
        ("a", {"metadata": {"annotations": {MAINTENANCE: "x"}}}, f"annotation {MAINTENANCE}"),
        ("b", {"metadata": {"annotations": {MAINTENANCE: "x"}}}, ""),
        ("a", {"spec": {"poolFencing": {"enabled": True}}}, "spec is set by administrators"),
    ],
    ids=[
        "fencing-on-for-itself", "fencing-off-for-another", "maintenance-for-itself",
        "maintenance-for-another", "pool-fencing-for-itself",
    ],
)  # fmt: skip
def test_a_node_cannot_switch_fencing_or_maintenance(fenced, name, body, because):
    admin, _, ns, patch = fenced
    assert refused(lambda: patch(name, body), because)
    stored = client.CustomObjectsApi(admin).get_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes", name
    )
    assert MAINTENANCE not in (stored["metadata"].get("annotations") or {})
    assert (stored.get("spec") or {}).get("fencing") == ({"enabled": True} if name == "b" else None)
    assert "poolFencing" not in (stored.get("spec") or {})


def test_a_node_cannot_remove_maintenance_an_administrator_set(fenced):
    admin, _, ns, patch = fenced
    client.CustomObjectsApi(admin).patch_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes", "a", {"metadata": {"annotations": {MAINTENANCE: "x"}}}
    )
    try:
        assert refused(
            lambda: patch("a", {"metadata": {"annotations": {MAINTENANCE: None}}}), MAINTENANCE
        )
        assert refused(
            lambda: patch("a", {"metadata": {"annotations": {MAINTENANCE: "y"}}}), MAINTENANCE
        )
    finally:
        client.CustomObjectsApi(admin).patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            "managednodes",
            "a",
            {"metadata": {"annotations": {MAINTENANCE: None}}},
        )


def test_a_node_deletes_no_pod_and_no_node(fenced):
    admin, a, ns, _ = fenced
    core = client.CoreV1Api(a)
    assert refused(lambda: core.delete_namespaced_pod("p", ns, grace_period_seconds=0))
    assert refused(lambda: core.delete_node(f"a-{ns}"))
    assert refused(lambda: core.delete_node("a"))
    admin_core = client.CoreV1Api(admin)
    assert admin_core.read_namespaced_pod("p", ns).metadata.name == "p"
    assert admin_core.read_node(f"a-{ns}").metadata.name == f"a-{ns}"
