"""The controller's fencing end to end on the real API server, with the RBAC deploy/ ships:
two fenced nodes whose agents (each with a FIFO in place of its watchdog) are killed. The one
not in maintenance loses the pods bound to its Kubernetes Node, then the Node, each an Event,
no sooner than its Lease's duration plus timeoutSeconds after the kill (minus one renewal
period); the one an administrator put in maintenance (due first) keeps them until the
annotation goes. A pod bound again to the fenced Node's name is not deleted again."""

from __future__ import annotations

import signal
import time
import uuid

import pytest
from kubernetes import client

from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually
from tests.cluster.test_fencing_agent import annotate, fenced_node, fencing_status, start
from tests.cluster.test_fencing_api import bound_pod

pytestmark = pytest.mark.cluster
LEASE, TIMEOUT, RENEWAL = 40, 30, 10  # the agent's Lease, timeoutSeconds, its renewal period


def pods(core: client.CoreV1Api, namespace: str) -> set[str]:
    return {p.metadata.name for p in core.list_namespaced_pod(namespace).items}


def nodes(core: client.CoreV1Api) -> set[str]:
    return {n.metadata.name for n in core.list_node().items}


def reasons(core: client.CoreV1Api, namespace: str, about: str) -> dict[str, int]:
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={about}")
    out: dict[str, int] = {}
    for e in events.items:
        out[e.reason] = out.get(e.reason, 0) + (e.count or 1)
    return out


def renew_time(api_client, namespace: str, host: str) -> str:
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease(host, namespace)
    return str(lease.spec.renew_time)


def test_killed_fenced_agent_loses_pods_then_node_but_not_while_in_maintenance(
    api_client, kubeconfig, namespace, tmp_path, measured
):
    core = client.CoreV1Api(api_client)
    controller = ControllerProcess(
        shipped_kubeconfig(kubeconfig, namespace, tmp_path), namespace, tmp_path
    ).start()
    tag = uuid.uuid4().hex[:6]
    x, y, other = f"fx-{tag}", f"fy-{tag}", f"fo-{tag}"
    for n in (x, y, other):
        core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=n)))
    for name, n in (("x-a", x), ("x-b", x), ("y-a", y), ("o-a", other)):
        bound_pod(core, namespace, name, n)
    agents = {}
    try:
        for host in (x, y):
            fenced_node(api_client, namespace, host)
            agents[host] = start(kubeconfig, namespace, tmp_path / host, host, device_timeout=8)
        for host in (x, y):
            eventually(
                lambda h=host: fencing_status(api_client, namespace, h).get("armed"),
                timeout=60,
                message=f"{host} armed",
            )
        eventually(controller.leading, timeout=60, message="controller leading")

        # y first, then into maintenance; x once its Lease was renewed after that: y is due
        # before x, so when x is fenced y was passed over for its annotation alone.
        agents[y][1].signal(signal.SIGKILL)
        agents[y][1].proc.wait()
        annotate(api_client, namespace, y, "hardware check")
        seen = renew_time(api_client, namespace, x)
        eventually(lambda: renew_time(api_client, namespace, x) != seen, timeout=30)
        agents[x][1].signal(signal.SIGKILL)
        agents[x][1].proc.wait()
        killed = time.monotonic()

        eventually(lambda: x not in nodes(core), timeout=LEASE + TIMEOUT + 60, interval=0.5)
        took = time.monotonic() - killed
        measured("fenced agent killed -> Node deleted (Lease 40 s + timeoutSeconds 30)", took)
        assert took >= LEASE + TIMEOUT - RENEWAL - 1, took  # never before the host reset
        assert pods(core, namespace) == {"y-a", "o-a"}
        assert reasons(core, namespace, x) == {
            "Fencing": 1, "FencedPodDeleted": 2, "FencedNodeDeleted": 1,
        }  # fmt: skip
        fifo_x = agents[x][0]
        assert fifo_x.wait_closed(1) and b"V" not in fifo_x.data()  # killed: left armed

        assert y in nodes(core) and not reasons(core, namespace, y)  # in maintenance
        bound_pod(core, namespace, "x-c", x)  # bound again to the fenced name
        annotate(api_client, namespace, y, None)
        eventually(lambda: y not in nodes(core), timeout=30, message="y fenced once out")
        assert pods(core, namespace) == {"o-a", "x-c"}  # x was not fenced twice
        assert reasons(core, namespace, x)["FencedNodeDeleted"] == 1
        assert other in nodes(core)
    finally:
        for fifo, agent in agents.values():
            agent.stop()
            fifo.stop()
        assert controller.stop() == 0, controller.log()[-3000:]
        for n in (x, y, other):
            try:
                core.delete_node(n)
            except client.ApiException as e:
                assert e.status == 404
