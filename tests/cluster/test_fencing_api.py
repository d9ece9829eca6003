"""kube/fence.py on the real API server with Node and pod objects: a fenced node's pods are
deleted before its Node, each reported, and pods of other Nodes are left alone. (The decision
is tests/unit/controller/test_fencing.py; the controller end to end, test_fencing_controller.)"""

from __future__ import annotations

import uuid

from kubernetes import client

from nodemanager.kube.client import ClientFactory
from nodemanager.kube.fence import fence


def bound_pod(core: client.CoreV1Api, namespace: str, name: str, node: str) -> None:
    """A pod bound to the Kubernetes Node ``node`` (no kubelet here: it stays Pending)."""
    core.create_namespaced_pod(
        namespace,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1PodSpec(
                node_name=node, containers=[client.V1Container(name="c", image="x")]
            ),
        ),
    )


def test_fence_deletes_the_pods_bound_to_the_node_then_the_node_and_nothing_else(
    api_client, kubeconfig, namespace
):
    core = client.CoreV1Api(api_client)
    tag = uuid.uuid4().hex[:6]
    host, other = f"fenced-{tag}", f"other-{tag}"
    for n in (host, other):
        core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=n)))
    for name, node in (("a", host), ("b", host), ("c", other)):
        bound_pod(core, namespace, name, node)
    events: list[tuple[str, str]] = []
    try:
        deleted = fence(ClientFactory(kubeconfig), host, lambda r, m: events.append((r, m)))
        assert sorted(deleted) == [f"{namespace}/a", f"{namespace}/b"]
        assert [r for r, _ in events] == ["FencedPodDeleted"] * 2 + ["FencedNodeDeleted"]
        left = {p.metadata.name for p in core.list_namespaced_pod(namespace).items}
        assert left == {"c"}
        assert host not in {n.metadata.name for n in core.list_node().items}
        # again: nothing left to do, no error
        assert fence(ClientFactory(kubeconfig), host, lambda r, m: None) == []
    finally:
        core.delete_node(other)
