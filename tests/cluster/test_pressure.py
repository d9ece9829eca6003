"""The agent's MemoryPressure on the real API server, driven through a pressure directory the
test writes in place of /proc/pressure (the host's own PSI cannot be raised on demand), and
the controller's rollout gate: a node under pressure is not admitted to a new revision."""

from __future__ import annotations

import uuid

from kubernetes import client

from tests.cluster.agent import Agent
from tests.cluster.fleet import start_controller
from tests.cluster.helpers import eventually
from tests.cluster.test_controller import after_more_syncs, rollout_status
from tests.cluster.test_daemon import GROUP, VERSION, condition, node, put_configset
from tests.unit.agent.test_pressure import write_psi


def memory_pressure(api_client, namespace, host, field="status"):
    return condition(node(api_client, namespace, host), "MemoryPressure").get(field)


def test_pressure_dir_past_spec_threshold_sets_memory_pressure_in_status(
    api_client, kubeconfig, namespace, tmp_path
):
    host = f"host-{uuid.uuid4().hex[:6]}"
    psi = tmp_path / "pressure"
    write_psi(psi, 2.0)
    agent = Agent(
        kubeconfig, namespace, host, tmp_path / "state", "--pressure-dir", str(psi)
    ).start()
    try:

        def published():
            n = node(api_client, namespace, host)
            pressure = (n.get("status") or {}).get("pressure") or {}
            return (
                pressure.get("memory", {}).get("some", {}).get("avg10") == 2
                and condition(n, "MemoryPressure").get("status") == "False"
            )

        eventually(published, timeout=30, message="status.pressure and MemoryPressure False")
        assert agent.metric("nodemanager_pressure_stall_percent", 'resource="memory"') > 0

        write_psi(psi, 50.0)  # past the flag's default (10)
        eventually(
            lambda: memory_pressure(api_client, namespace, host) == "True",
            timeout=30,
            message="MemoryPressure True",
        )
        # spec.pressure.memoryThreshold above the sample: False again, without a restart
        client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            "managednodes",
            host,
            {"spec": {"pressure": {"memoryThreshold": 60}}},
        )
        eventually(
            lambda: memory_pressure(api_client, namespace, host, "reason") == "MemoryAvailable",
            timeout=30,
            message="MemoryPressure False under the spec's threshold",
        )
    finally:
        agent.stop()


def test_pressure_dir_past_threshold_keeps_the_node_out_of_a_new_revision_until_it_eases(
    api_client, kubeconfig, namespace, tmp_path
):
    host = f"host-{uuid.uuid4().hex[:6]}"
    psi, target, name = tmp_path / "pressure", tmp_path / "staged", "gated"
    write_psi(psi, 2.0)
    agent = Agent(
        kubeconfig, namespace, host, tmp_path / "state", "--pressure-dir", str(psi)
    ).start()
    controller = start_controller(kubeconfig, namespace, tmp_path)
    try:
        spec = {
            "selector": {"matchLabels": {"kubernetes.io/hostname": host}},
            "rollout": {"maxUnavailable": 1},
            "files": [{"path": str(target), "content": "v1\n"}],
        }
        put_configset(api_client, namespace, name, spec)
        eventually(lambda: rollout_status(api_client, namespace, name).get("updated") == 1,
                   timeout=90, message="revision 1 applied")  # fmt: skip
        first = rollout_status(api_client, namespace, name)["updateRevision"]

        write_psi(psi, 50.0)
        eventually(lambda: memory_pressure(api_client, namespace, host) == "True", timeout=30)
        spec["files"] = [{"path": str(target), "content": "v2\n"}]
        put_configset(api_client, namespace, name, spec)
        eventually(lambda: rollout_status(api_client, namespace, name).get("revision") == 2,
                   timeout=30, message="revision 2 made")  # fmt: skip
        after_more_syncs(controller)
        held = node(api_client, namespace, host)
        assert held["spec"]["configsetRevisions"][name] == first  # not admitted
        assert target.read_text() == "v1\n"
        status = rollout_status(api_client, namespace, name)
        assert status["unavailable"] == 1 and status["updated"] == 0, status

        write_psi(psi, 2.0)  # the pressure eases: admitted and applied, no restart
        eventually(lambda: target.read_text() == "v2\n", timeout=90, message="v2 applied")
        assert rollout_status(api_client, namespace, name)["updateRevision"] != first
    finally:
        assert controller.stop() == 0, controller.log()[-3000:]
        agent.stop()
