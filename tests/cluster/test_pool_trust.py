"""Pools go by labels a node cannot set, and a disruption grant has a deadline (issue 37).

web-1 labelled itself ``kubernetes.io/arch=arm64`` with its own credential, landed in pool
``arm`` (maxUnavailable 1) and held its only slot as long as it liked. The real controller
with the shipped RBAC, the node with the credential `rbac`, `token` and `bootstrap` give it.
"""

from __future__ import annotations

import time

import pytest
from kubernetes import client, config

from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually
from tests.cluster.test_bootstrap import bootstrapped, node_name  # noqa: F401 (fixtures)
from tests.cluster.test_controller import after_more_syncs, get
from tests.cluster.test_daemon import GROUP, VERSION
from tests.cluster.test_pools import put_pool

pytestmark = pytest.mark.cluster


def test_a_node_cannot_label_itself_into_a_pool_and_a_held_grant_is_taken_back(
    kubeconfig,
    bootstrapped,  # noqa: F811
    node_name,  # noqa: F811
    tmp_path,
):
    ns, _, permanent = bootstrapped
    admin, own = (config.new_client_from_config(str(k)) for k in (kubeconfig, permanent))
    controller = None
    try:
        put_pool(admin, ns, "default", {"maxUnavailable": 1})
        arm = {"matchLabels": {"kubernetes.io/arch": "arm64"}}
        put_pool(admin, ns, "arm", {"maxUnavailable": 1, "nodeSelector": arm})
        labels = {"kubernetes.io/hostname": node_name, "kubernetes.io/arch": "arm64"}
        client.CustomObjectsApi(own).create_namespaced_custom_object(
            GROUP, VERSION, ns, "managednodes",
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ManagedNode",
             "metadata": {"name": node_name, "labels": labels}},
        )  # fmt: skip
        own_kubeconfig = shipped_kubeconfig(kubeconfig, ns, tmp_path)
        controller = ControllerProcess(
            own_kubeconfig, ns, tmp_path, "--sync-period", "1s", "--disruption-grant-timeout", "8s"
        ).start()
        eventually(controller.leading, timeout=120, message="controller ready")

        def placed():
            spec = get(admin, ns, "managednodes", node_name).get("spec") or {}
            assert spec.get("pool") == "default", spec
            return True

        eventually(placed, timeout=60, message="the node placed in the default pool, not arm")

        def warned():
            events = client.CoreV1Api(admin).list_namespaced_event(
                ns, field_selector="involvedObject.kind=NodePool,involvedObject.name=arm"
            )
            return [e for e in events.items if e.reason == "SelfReportedLabel"]

        (event,) = eventually(warned, timeout=60, message="a Warning Event on NodePool arm")
        assert event.type == "Warning" and "kubernetes.io/arch" in event.message

        since = "2026-01-01T00:00:00Z"
        asked = {"disruption": {"id": "r1", "reason": "OS upgrade", "since": since}}
        client.CustomObjectsApi(own).patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, "managednodes", node_name, {"status": asked}
        )

        def granted():
            return (get(admin, ns, "managednodes", node_name).get("spec") or {}).get(
                "disruptionGranted"
            ) == "r1"

        eventually(granted, timeout=60, message="the slot granted")
        since = time.monotonic()
        eventually(lambda: not granted(), timeout=60, message="the grant taken back")
        held = time.monotonic() - since
        assert held > 4, f"taken back after {held:.1f} s, before the 8 s deadline"
        after_more_syncs(controller)
        assert not granted()  # the same request is not granted again; a new one may be
        assert "past the deadline of 8 s: taken back" in controller.log()
    finally:
        if controller is not None:
            assert controller.stop() == 0
        admin.close()
        own.close()
