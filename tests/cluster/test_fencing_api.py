"""The controller's fencing on the real API server with Node and pod objects: the decision for
a fenced node whose Lease expired past the timeout, never in maintenance; then its pods are
deleted before its Node, each reported, and pods of other Nodes are left alone."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from kubernetes import client

from nodemanager.controller.fencing import MAINTENANCE, due
from nodemanager.kube.client import ClientFactory
from nodemanager.kube.fence import fence


def test_fence_deletes_bound_pods_then_node_only_when_lease_expired_and_not_in_maintenance(
    api_client, kubeconfig, namespace
):
    core = client.CoreV1Api(api_client)
    tag = uuid.uuid4().hex[:6]
    host, other = f"fenced-{tag}", f"other-{tag}"
    for n in (host, other):
        core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=n)))
    for name, node in (("a", host), ("b", host), ("c", other)):
        core.create_namespaced_pod(
            namespace,
            client.V1Pod(
                metadata=client.V1ObjectMeta(name=name),
                spec=client.V1PodSpec(
                    node_name=node, containers=[client.V1Container(name="c", image="x")]
                ),
            ),
        )
    now = datetime.now(UTC)
    managed = {"metadata": {"name": host}, "spec": {"fencing": {"enabled": True, "timeout": "60s"}}}
    assert not due(managed, now - timedelta(seconds=30), now)  # within the timeout
    assert not due({**managed, "spec": {}}, now - timedelta(hours=1), now)  # not opted in
    in_maintenance = {**managed, "metadata": {"name": host, "annotations": {MAINTENANCE: "x"}}}
    assert not due(in_maintenance, now - timedelta(hours=1), now)
    assert due(managed, now - timedelta(seconds=61), now)

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
