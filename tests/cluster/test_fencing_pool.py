"""Fencing from a NodePool on the real API server, the agent on the node's own credential (which
may not read NodePools) and the controller with deploy/controller.yaml's permissions: the
controller copies the pool's spec.fencing to the member's spec.poolFencing and the agent arms
its watchdog (a FIFO in place of the device); the node's own spec.fencing wins (enabled false:
magic close); the pool's fencing removed disarms it."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client, config

from tests.cluster.agent import Agent
from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually
from tests.cluster.test_fencing_agent import fencing_status
from tests.cluster.test_isolation import (
    GROUP,
    VERSION,
    credential,
    kubectl,
    managednode,
    nm,
    refused,
)
from tests.watchdog_fifo import FifoWatchdog

pytestmark = pytest.mark.cluster
ON = {"enabled": True, "timeoutSeconds": 30}


def test_pool_fencing_arms_a_member_on_its_own_credential_and_its_own_setting_wins(
    kubeconfig, api_client, tmp_path
):
    ns, host = f"fpool-{uuid.uuid4().hex[:6]}", "pooled"
    shared = kubectl(kubeconfig, "apply", nm("rbac", "--shared", "--namespace", ns).stdout)
    assert shared.returncode == 0, shared.stderr
    path = credential(kubeconfig, ns, host, tmp_path)
    custom = client.CustomObjectsApi(api_client)
    as_node = config.new_client_from_config(str(path))
    assert refused(
        lambda: client.CustomObjectsApi(as_node).list_namespaced_custom_object(
            GROUP, VERSION, ns, "nodepools"
        )
    )
    client.CustomObjectsApi(as_node).create_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes", managednode(host)
    )
    as_node.close()
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, "nodepools", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "NodePool", "metadata": {"name": "fenced"},
        "spec": {"nodeSelector": {"matchLabels": {"kubernetes.io/hostname": host}},
                 "fencing": ON},
    })  # fmt: skip
    controller = ControllerProcess(
        shipped_kubeconfig(kubeconfig, ns, tmp_path), ns, tmp_path, "--sync-period", "1s"
    ).start()
    fifo = FifoWatchdog(tmp_path / "watchdog")
    agent = Agent(
        str(path), ns, host, tmp_path / "state",
        "--watchdog-device", str(fifo.path), "--watchdog-timeout", "4",
    )  # fmt: skip

    def spec() -> dict:
        raw = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "managednodes", host)
        return raw["spec"]

    def patch(plural: str, name: str, body: dict) -> None:
        custom.patch_namespaced_custom_object(GROUP, VERSION, ns, plural, name, body)

    try:
        agent.start()
        eventually(lambda: fencing_status(api_client, ns, host).get("armed"), timeout=90,
                   message="armed by the pool's fencing")  # fmt: skip
        assert spec()["pool"] == "fenced" and spec()["poolFencing"] == ON
        assert "fencing" not in spec() and fifo.keepalives()

        patch("managednodes", host, {"spec": {"fencing": {"enabled": False}}})  # its own wins
        assert fifo.wait_closed(1, timeout=30) and fifo.data().endswith(b"V")
        eventually(lambda: fencing_status(api_client, ns, host)["reason"] == "Disabled",
                   timeout=30)  # fmt: skip
        assert fencing_status(api_client, ns, host)["armed"] is False

        closed = fifo.closes[0]
        patch("managednodes", host, {"spec": {"fencing": None}})  # the pool's again
        eventually(lambda: fifo.keepalives(since=closed), timeout=30, message="armed again")

        patch("nodepools", "fenced", {"spec": {"fencing": None}})
        assert fifo.wait_closed(2, timeout=30), "no magic close once the pool stops fencing"
        eventually(lambda: "poolFencing" not in spec(), timeout=30)
        eventually(lambda: fencing_status(api_client, ns, host)["armed"] is False, timeout=30)
    finally:
        agent.stop()
        fifo.stop()
        assert controller.stop() == 0, controller.log()[-3000:]
