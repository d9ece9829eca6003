"""Early OOM's eviction choice on the real API server with pod objects bound to a Node object
(no kubelet runs: the test marks the pods Running, since a Pending pod's eviction ignores
PodDisruptionBudgets, and writes the budget's status as the disruption controller would)."""

from __future__ import annotations

import uuid

from kubernetes import client

from nodemanager.kube.client import ClientFactory
from nodemanager.kube.drain import NodeDrainer
from tests.cluster.test_drain import budget


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
