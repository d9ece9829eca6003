"""Cordon and drain before an upgrade, and group Lease renewal, on the real control plane, with
the node's own credential (`rbac --drain`).

No kubelet or controller-manager runs, so the test plays them: a "kubelet" thread marks the pods
Running and Ready, and removes a pod once it is terminating (as a kubelet does after the grace
period: here at once); a PodDisruptionBudget's status, which the disruption controller would
keep, is written by the test: first no disruption allowed, later one. The upgrade itself is a
recorded run (the real one: tests/cluster/test_upgrade.py); what it records is what the API
server showed at that moment.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from kubernetes import client, config

import nodemanager.agent.upgrade as upgrade_module
from nodemanager.agent.grouplocks import GroupLocks
from nodemanager.agent.metrics import Metrics
from nodemanager.agent.upgrade import Upgrader
from nodemanager.executor.events import TaskResult
from nodemanager.executor.run import RunResult
from nodemanager.kube.client import ClientFactory
from nodemanager.kube.drain import NodeDrainer
from nodemanager.kube.locks import GroupLock
from nodemanager.kube.nodes import NodeClient
from tests.cluster.helpers import eventually
from tests.cluster.test_isolation import (
    GROUP,
    VERSION,
    credential,
    kubectl,
    managednode,
    nm,
    refused,
)

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def fleet(kubeconfig, tmp_path_factory):
    """Namespace, policies, hosts ``a`` (with --drain), ``b`` (with) and ``c`` (without), each
    with a Kubernetes Node of its name; names are unique since Nodes are cluster-wide."""
    ns = f"drain-{uuid.uuid4().hex[:6]}"
    shared = kubectl(kubeconfig, "apply", nm("rbac", "--shared", "--namespace", ns).stdout)
    assert shared.returncode == 0, shared.stderr
    directory = tmp_path_factory.mktemp("drain")
    tag = uuid.uuid4().hex[:6]
    names = {k: f"{k}-{tag}" for k in "abc"}
    admin = config.new_client_from_config(kubeconfig)
    core = client.CoreV1Api(admin)
    paths = {}
    for k, host in names.items():
        extra = ("--drain", "--lease-groups", "upgrades") if k != "c" else ()
        paths[k] = credential(kubeconfig, ns, host, directory, *extra)
        core.create_node(
            client.V1Node(
                metadata=client.V1ObjectMeta(name=host, labels={"kubernetes.io/hostname": host})
            )
        )
        api = config.new_client_from_config(str(paths[k]))
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP, VERSION, ns, "managednodes", managednode(host)
        )
        api.close()
    # Policies compile asynchronously: wait until the Node policy bites.
    a = config.new_client_from_config(str(paths["a"]))
    label = {"metadata": {"labels": {"evil": "yes"}}}
    eventually(
        lambda: refused(lambda: client.CoreV1Api(a).patch_node(names["a"], label)), timeout=30
    )
    yield ns, names, paths, admin, a
    for host in names.values():
        core.delete_node(host)
    a.close()
    admin.close()


# -- the node's own credential, tried as an attacker would --------------------------------------


def test_a_node_may_cordon_and_uncordon_its_own_node(fleet):
    _, names, _, _, a = fleet
    core = client.CoreV1Api(a)
    assert core.patch_node(names["a"], {"spec": {"unschedulable": True}}).spec.unschedulable
    assert not core.patch_node(names["a"], {"spec": {"unschedulable": None}}).spec.unschedulable


def test_cordoning_another_node_is_refused(fleet):
    _, names, _, _, a = fleet
    assert refused(
        lambda: client.CoreV1Api(a).patch_node(names["b"], {"spec": {"unschedulable": True}})
    )


@pytest.mark.parametrize(
    "patch",
    [
        {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}},
        {"metadata": {"annotations": {"x": "y"}}},
        {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}},
        {"spec": {"providerID": "aws:///i-0"}},
        {"spec": {"unschedulable": True, "podCIDR": "10.0.0.0/24"}},
    ],
)
def test_changing_anything_else_of_its_own_node_is_refused(fleet, patch):
    _, names, _, _, a = fleet
    assert refused(
        lambda: client.CoreV1Api(a).patch_node(names["a"], patch),
        "a node may only change spec.unschedulable",
    )


def test_deleting_or_creating_nodes_is_refused(fleet):
    _, names, _, _, a = fleet
    core = client.CoreV1Api(a)
    assert refused(lambda: core.delete_node(names["a"]))
    fake = client.V1Node(metadata=client.V1ObjectMeta(name=f"x-{names['a']}"))
    assert refused(lambda: core.create_node(fake))


def test_without_the_drain_grant_the_node_is_invisible_and_nothing_is_drained(fleet):
    _, names, paths, admin, _ = fleet
    c = ClientFactory(str(paths["c"]))
    assert NodeDrainer(c, names["c"]).cordon() is None
    assert not client.CoreV1Api(admin).read_node(names["c"]).spec.unschedulable
    c.close()


# -- an upgrade: cordon, evictions through a PodDisruptionBudget, uncordon, renewed Lease -------


def pod(name: str, node: str, labels=None, owner=None, annotations=None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=name, labels=labels, annotations=annotations, owner_references=owner
        ),
        spec=client.V1PodSpec(
            node_name=node,
            termination_grace_period_seconds=30,  # only a kubelet could honour it
            containers=[client.V1Container(name="c", image="example.invalid/c")],
        ),
    )


def kubelet(core: client.CoreV1Api, ns: str, node: str, stop: threading.Event, gone: dict):
    """What the Node's kubelet would do: run the pods, finish the ones being deleted."""
    while not stop.is_set():
        for p in core.list_namespaced_pod(ns, field_selector=f"spec.nodeName={node}").items:
            name = p.metadata.name
            if p.metadata.deletion_timestamp is not None:
                core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
                gone.setdefault(name, time.time())
            elif (p.status.phase or "Pending") == "Pending":
                ready = client.V1PodCondition(type="Ready", status="True")
                p.status = client.V1PodStatus(phase="Running", conditions=[ready])
                core.replace_namespaced_pod_status(name, ns, p)
        stop.wait(0.2)


def budget(policy: client.PolicyV1Api, ns: str, allowed: int) -> None:
    """The disruption controller's part: the budget's status."""
    pdb = policy.read_namespaced_pod_disruption_budget("web", ns)
    pdb.status = client.V1PodDisruptionBudgetStatus(
        observed_generation=pdb.metadata.generation,
        disruptions_allowed=allowed,
        current_healthy=1,
        desired_healthy=1 - allowed,
        expected_pods=1,
    )
    policy.replace_namespaced_pod_disruption_budget_status("web", ns, pdb)


def test_upgrade_cordons_drains_through_the_budget_uncordons_and_renews_the_lease(
    fleet, monkeypatch, tmp_path
):
    ns, names, paths, admin, _ = fleet
    host = names["a"]
    core, policy = client.CoreV1Api(admin), client.PolicyV1Api(admin)
    ds = [client.V1OwnerReference(api_version="apps/v1", kind="DaemonSet", name="ds", uid="u1")]
    core.create_namespaced_pod(ns, pod("plain", host))
    core.create_namespaced_pod(ns, pod("guarded", host, labels={"app": "web"}))
    core.create_namespaced_pod(ns, pod("daemon", host, owner=ds))
    mirror = {"kubernetes.io/config.mirror": "x"}
    core.create_namespaced_pod(ns, pod("mirror", host, annotations=mirror))
    core.create_namespaced_pod(ns, pod("elsewhere", names["b"]))
    policy.create_namespaced_pod_disruption_budget(
        ns,
        client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1PodDisruptionBudgetSpec(
                min_available=1, selector=client.V1LabelSelector(match_labels={"app": "web"})
            ),
        ),
    )
    budget(policy, ns, 0)
    stop, gone = threading.Event(), {}
    threads = [
        threading.Thread(target=kubelet, args=(core, ns, n, stop, gone)) for n in names.values()
    ]
    for t in threads:
        t.start()
    eventually(
        lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(ns).items),
        timeout=30,
    )

    # The budget opens only once the plain pod is gone and "guarded" was kept a while.
    opened: list[float] = []

    def disruption_controller() -> None:
        while not stop.is_set() and "plain" not in gone:
            time.sleep(0.2)
        stop.wait(3)
        if not stop.is_set():
            budget(policy, ns, 1)
            opened.append(time.time())

    threads.append(threading.Thread(target=disruption_controller))
    threads[-1].start()

    monkeypatch.setattr(upgrade_module, "UPGRADE_LEASE", 3)  # renewed every second
    clients = ClientFactory(str(paths["a"]))
    leases = client.CoordinationV1Api(admin)
    seen: dict[str, object] = {}

    def run(plan):  # the upgrade: what the API server shows while it runs
        seen["unschedulable"] = core.read_node(host).spec.unschedulable
        seen["pods"] = sorted(
            p.metadata.name
            for p in core.list_namespaced_pod(ns, field_selector=f"spec.nodeName={host}").items
        )
        seen["status"] = client.CustomObjectsApi(admin).get_namespaced_custom_object(
            GROUP, VERSION, ns, "managednodes", host
        )["status"]
        renewals = {leases.read_namespaced_lease("upgrades", ns).spec.renew_time}
        for _ in range(5):  # a "long" upgrade: 5 s, beyond the Lease's 3 s
            time.sleep(1)
            lease = leases.read_namespaced_lease("upgrades", ns)
            renewals.add(lease.spec.renew_time)
            assert lease.spec.holder_identity == host
        seen["renewals"] = len(renewals)
        # Another node of the group finds it held, though the first take is 5 s old.
        seen["other"] = GroupLock(ClientFactory(str(paths["b"])), ns, names["b"]).try_acquire(
            "upgrades", 3
        )
        (origin,) = plan.origins
        return RunResult("successful", 0, (TaskResult(origin, "upgrade:os", (), "changed"),))

    me = NodeClient(clients, ns, host)
    drainer = NodeDrainer(clients, host)
    upgrader = Upgrader(
        name=host,
        family="debian",
        state_dir=str(tmp_path),
        metrics=Metrics(node=host),
        locker=GroupLock(clients, ns, host),
        drainer=drainer,
        drain_timeout=60,
        run=run,
        reboot=["true"],
    )
    managed = {
        "metadata": {"name": host},
        "spec": {"upgrade": {"schedule": "* * * * *", "delay": "0", "group": "upgrades"}},
    }
    try:
        started = time.time()
        assert upgrader.tick(managed, on_start=lambda: me.patch_status(upgrader.status()))
        drained = time.time() - started
        me.patch_status(upgrader.status())  # what the agent writes next
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert seen["unschedulable"] is True
    assert seen["pods"] == ["daemon", "mirror"]  # evicted: plain, guarded; skipped: the rest
    assert seen["status"].get("kubernetesNodeCordoned"), seen["status"]
    assert opened and gone["guarded"] >= opened[0] > gone["plain"]  # the budget held it back
    assert seen["renewals"] >= 4, seen  # renewed about every second
    assert seen["other"] == host
    assert not core.read_node(host).spec.unschedulable  # uncordoned
    assert core.read_namespaced_pod("elsewhere", ns).metadata.deletion_timestamp is None
    status = client.CustomObjectsApi(admin).get_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes", host
    )["status"]
    assert "kubernetesNodeCordoned" not in status and status["lastUpgrade"]
    lease = leases.read_namespaced_lease("upgrades", ns)
    assert lease.spec.holder_identity is None  # released
    print(f"drain took {drained - 5:.1f} s beyond the 5 s upgrade")
    clients.close()


def test_a_node_cordoned_by_an_administrator_stays_cordoned(fleet, tmp_path):
    ns, names, paths, admin, _ = fleet
    host = names["b"]
    core = client.CoreV1Api(admin)
    core.patch_node(host, {"spec": {"unschedulable": True}})
    clients = ClientFactory(str(paths["b"]))
    upgrader = Upgrader(
        name=host,
        family="debian",
        state_dir=str(tmp_path),
        metrics=Metrics(node=host),
        drainer=NodeDrainer(clients, host),
        run=lambda plan: RunResult("successful", 0, ()),
        reboot=["true"],
    )
    assert upgrader.tick(
        {"metadata": {"name": host}, "spec": {"upgrade": {"schedule": "* * * * *", "delay": "0"}}}
    )
    assert core.read_node(host).spec.unschedulable
    assert upgrader.status()["kubernetesNodeCordoned"] is None
    clients.close()


def test_lock_group_leases_are_renewed_while_held_and_released_after(fleet):
    ns, names, paths, admin, _ = fleet
    clients = ClientFactory(str(paths["a"]))
    locks = GroupLocks(GroupLock(clients, ns, names["a"]), lease_seconds=3)
    locks.acquire(["upgrades"])
    leases = client.CoordinationV1Api(admin)
    first = leases.read_namespaced_lease("upgrades", ns).spec.renew_time
    time.sleep(4.5)  # past the 3 s duration: only a renewal keeps it
    lease = leases.read_namespaced_lease("upgrades", ns)
    assert lease.spec.holder_identity == names["a"] and lease.spec.renew_time > first
    b = ClientFactory(str(paths["b"]))
    assert GroupLock(b, ns, names["b"]).try_acquire("upgrades", 3) == names["a"]
    locks.release()
    released = leases.read_namespaced_lease("upgrades", ns).spec
    assert released.holder_identity is None
    time.sleep(1.5)
    assert leases.read_namespaced_lease("upgrades", ns).spec.renew_time == released.renew_time
    clients.close()
    b.close()
