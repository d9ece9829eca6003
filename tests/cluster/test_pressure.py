"""The agent's MemoryPressure on the real API server, driven through a pressure directory the
test writes in place of /proc/pressure (the host's own PSI cannot be raised on demand)."""

from __future__ import annotations

import uuid

from kubernetes import client

from tests.cluster.agent import Agent
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import GROUP, VERSION, condition, node
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
