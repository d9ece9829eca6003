"""Early OOM's eviction choice on the real API server with pod objects bound to a Node object
(no kubelet runs: the test marks the pods Running, since a Pending pod's eviction ignores
PodDisruptionBudgets, and writes the budget's status as the disruption controller would); and
the agent end to end on the node's own credential (`rbac --drain`), driven through a pressure
directory the test writes: it evicts and says so in an Event."""

from __future__ import annotations

import uuid

from kubernetes import client

from nodemanager.kube.client import ClientFactory
from nodemanager.kube.drain import NodeDrainer
from tests.cluster.agent import Agent
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import GROUP, VERSION
from tests.cluster.test_drain import budget
from tests.cluster.test_isolation import credential, kubectl, managednode, nm
from tests.unit.agent.test_pressure import write_psi


def test_evicts_lowest_priority_newest_first_one_at_a_time_and_passes_over_pdb(
    api_client, kubeconfig, namespace
):
    core, policy = client.CoreV1Api(api_client), client.PolicyV1Api(api_client)
    sched = client.SchedulingV1Api(api_client)
    tag = uuid.uuid4().hex[:6]
    host = f"oom-{tag}"
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=host)))
    classes = {"low": 10, "high": 1000}
    for name, value in classes.items():
        sched.create_priority_class(
            client.V1PriorityClass(metadata=client.V1ObjectMeta(name=f"{name}-{tag}"), value=value)
        )

    def pod(name: str, cls: str, labels: dict[str, str] | None = None) -> None:
        container = client.V1Container(name="c", image="busybox")
        body = client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, labels=labels),
            spec=client.V1PodSpec(
                node_name=host, containers=[container], priority_class_name=f"{cls}-{tag}"
            ),
        )
        core.create_namespaced_pod(namespace, body)
        p = core.read_namespaced_pod(name, namespace)
        ready = client.V1PodCondition(type="Ready", status="True")
        p.status = client.V1PodStatus(phase="Running", conditions=[ready])
        core.replace_namespaced_pod_status(name, namespace, p)

    pod("low-old", "low")
    pod("low-new-guarded", "low", {"app": "web"})
    pod("high", "high")
    policy.create_namespaced_pod_disruption_budget(
        namespace,
        client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1PodDisruptionBudgetSpec(
                min_available=1, selector=client.V1LabelSelector(match_labels={"app": "web"})
            ),
        ),
    )
    budget(policy, namespace, 0)  # the disruption controller's part: none allowed

    drainer = NodeDrainer(ClientFactory(kubeconfig), host)
    try:
        # the newest low-priority pod first, but its budget says no: the older one goes
        assert drainer.evict_lowest() == (
            f"{namespace}/low-old",
            [f"{namespace}/low-new-guarded"],
        )
        assert core.read_namespaced_pod("high", namespace).metadata.deletion_timestamp is None
        # one at a time: the terminating pod is not chosen again; high priority goes last
        assert drainer.evict_lowest() == (f"{namespace}/high", [f"{namespace}/low-new-guarded"])
        assert drainer.evict_lowest() == ("", [f"{namespace}/low-new-guarded"])
    finally:
        core.delete_node(host)
        for name in classes:
            sched.delete_priority_class(f"{name}-{tag}")


def test_pressure_dir_past_early_oom_threshold_evicts_the_lowest_pod_with_an_event(
    api_client, kubeconfig, tmp_path
):
    tag = uuid.uuid4().hex[:6]
    ns, host = f"eoom-{tag}", f"eoom-{tag}"
    shared = kubectl(kubeconfig, "apply", nm("rbac", "--shared", "--namespace", ns).stdout)
    assert shared.returncode == 0, shared.stderr
    path = credential(kubeconfig, ns, host, tmp_path, "--drain")
    core, sched = client.CoreV1Api(api_client), client.SchedulingV1Api(api_client)
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=host)))
    sched.create_priority_class(
        client.V1PriorityClass(metadata=client.V1ObjectMeta(name=f"high-{tag}"), value=1000)
    )
    for name, cls in (("low", None), ("high", f"high-{tag}")):
        spec = client.V1PodSpec(
            node_name=host,
            containers=[client.V1Container(name="c", image="busybox")],
            priority_class_name=cls,
        )
        core.create_namespaced_pod(
            ns, client.V1Pod(metadata=client.V1ObjectMeta(name=name), spec=spec)
        )
    oom = {"enabled": True, "threshold": 40, "for": "10s"}
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes",
        managednode(host, spec={"pressure": {"earlyOOM": oom}}),
    )  # fmt: skip
    psi = tmp_path / "pressure"
    write_psi(psi, 2.0)
    agent = Agent(str(path), ns, host, tmp_path / "state", "--pressure-dir", str(psi)).start()

    def evictions() -> list[client.CoreV1Event]:
        found = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={host}")
        return [e for e in found.items if e.reason == "EarlyOOMEviction"]

    def terminating(name: str) -> bool:
        return core.read_namespaced_pod(name, ns).metadata.deletion_timestamp is not None

    try:
        write_psi(psi, 50.0)
        [event] = eventually(evictions, timeout=60, message="an EarlyOOMEviction Event")
        assert event.type == "Warning" and f"evicted pod {ns}/low" in event.message, event
        assert terminating("low") and not terminating("high")  # one at a time, lowest first
    finally:
        agent.stop()
        core.delete_node(host)
        sched.delete_priority_class(f"high-{tag}")
