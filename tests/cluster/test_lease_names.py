"""A group Lease named like another host proves nothing about that host (issue 37).

`rbac --hostname web-1 --lease-groups db-1` is accepted (rbac cannot know which hosts exist),
and web-1 then renews Lease ``db-1`` as its group lock. A silent db-1 stayed Ready for 100 s
and more; now only a Lease its node holds counts for the node.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from kubernetes import client, config

from nodemanager.kube.client import ClientFactory
from nodemanager.kube.locks import GroupLock
from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually
from tests.cluster.test_certificates import kubectl_apply, nm
from tests.cluster.test_daemon import GROUP, VERSION, condition

pytestmark = pytest.mark.cluster


def test_a_group_lease_named_like_a_silent_host_does_not_keep_it_ready(kubeconfig, tmp_path):
    ns = f"nm-lease-{uuid.uuid4().hex[:6]}"
    kubectl_apply(kubeconfig, nm("rbac", "--shared", "--namespace", ns).stdout)
    web, db = f"web-{uuid.uuid4().hex[:4]}", f"db-{uuid.uuid4().hex[:4]}"
    out = nm("rbac", "--hostname", web, "--namespace", ns, "--lease-groups", db)
    assert out.returncode == 0, out.stderr
    kubectl_apply(kubeconfig, out.stdout)
    token = tmp_path / "web.kubeconfig"
    issued = nm(
        "token", "--hostname", web, "--kubeconfig", kubeconfig,
        "--namespace", ns, "--ttl", "10m", "--out", str(token),
    )  # fmt: skip
    assert issued.returncode == 0, issued.stderr
    admin = config.new_client_from_config(kubeconfig)
    stop = threading.Event()
    clients = ClientFactory(str(token))
    lock = GroupLock(clients, ns, web)

    def hold() -> None:  # web-1's lock_group, renewed as a long restart would
        while not stop.is_set():
            assert lock.try_acquire(db, 15) is None
            stop.wait(2)

    holder = threading.Thread(target=hold, daemon=True)
    controller = None
    try:
        client.CustomObjectsApi(admin).create_namespaced_custom_object(
            GROUP, VERSION, ns, "managednodes",
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ManagedNode",
             "metadata": {"name": db, "labels": {"kubernetes.io/hostname": db}}},
        )  # fmt: skip
        holder.start()
        eventually(
            lambda: (
                client.CoordinationV1Api(admin).read_namespaced_lease(db, ns).spec.holder_identity
                == web
            ),
            timeout=30,
            message=f"{web} holds Lease {db}",
        )
        controller = ControllerProcess(
            shipped_kubeconfig(kubeconfig, ns, tmp_path), ns, tmp_path, "--sync-period", "1s"
        ).start()
        eventually(controller.leading, timeout=120, message="controller ready")

        def unknown():
            node = client.CustomObjectsApi(admin).get_namespaced_custom_object(
                GROUP, VERSION, ns, "managednodes", db
            )
            return condition(node, "Ready").get("status") == "Unknown"

        eventually(unknown, timeout=150, message=f"{db} Ready=Unknown though {web} renews {db}")
        assert holder.is_alive()  # web-1 renewed it all along
    finally:
        stop.set()
        holder.join(timeout=10)
        clients.close()
        if controller is not None:
            assert controller.stop() == 0
        admin.close()


def test_cluster_scoped_names_of_two_namespaces_nodes_never_meet(kubeconfig):
    """Node ``web`` of ``<p>-eu`` and node ``eu-web`` of ``<p>`` once shared four
    ClusterRole/Binding/policy names: the second `rbac` rebound the first's."""
    prefix = f"nm-{uuid.uuid4().hex[:4]}"
    pairs = [(f"{prefix}-eu", "web"), (prefix, "eu-web")]
    for ns, host in pairs:
        out = nm("rbac", "--hostname", host, "--namespace", ns, "--certificate", "--drain")
        assert out.returncode == 0, out.stderr
        kubectl_apply(kubeconfig, out.stdout)
    admin = config.new_client_from_config(kubeconfig)
    try:
        rbac = client.RbacAuthorizationV1Api(admin)
        for ns, host in pairs:
            for role in ("nodemanager-csr", "nodemanager-drain"):
                bound = rbac.read_cluster_role_binding(f"{role}-{ns}.{host}")
                accounts = {s.name for s in bound.subjects if s.kind == "ServiceAccount"}
                namespaces = {s.namespace for s in bound.subjects if s.kind == "ServiceAccount"}
                assert accounts == {f"nodemanager-{host}"} and namespaces == {ns}
            guard = client.AdmissionregistrationV1Api(admin).read_validating_admission_policy(
                f"nodemanager-guard-{ns}.{host}"
            )
            assert ns in guard.spec.validations[0].message
    finally:
        admin.close()
