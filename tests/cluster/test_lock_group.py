"""services[].lock_group on the real control plane: the group Lease's rules, and two agents in
one booted systemd machine whose restarts never overlap, read from the services' own logs."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from kubernetes import client

from nodemanager.agent.grouplocks import GroupLocks
from nodemanager.agent.poolslot import PoolSlots
from nodemanager.kube.client import ClientFactory
from nodemanager.kube.locks import GroupLock
from tests.cluster.helpers import eventually
from tests.cluster.machine_agents import MachineAgent, portable_kubeconfig
from tests.cluster.test_daemon import condition, entry, node, put_configset
from tests.integration.machines import Machine

pytestmark = [pytest.mark.cluster]


def test_group_lease_is_held_by_one_node_expires_and_is_released(kubeconfig, namespace):
    clients = ClientFactory(kubeconfig)
    a, b = GroupLock(clients, namespace, "a"), GroupLock(clients, namespace, "b")
    assert a.try_acquire("web", 60) is None
    assert b.try_acquire("web", 60) == "a"
    assert a.try_acquire("web", 60) is None  # held already: renewed
    a.release("web")
    assert b.try_acquire("web", 1) is None
    lease = client.CoordinationV1Api(clients.get()).read_namespaced_lease("web", namespace)
    assert lease.spec.holder_identity == "b" and lease.spec.lease_transitions == 1
    # b stops renewing (as a crashed node would): after its duration, a may take over.
    eventually(lambda: a.try_acquire("web", 60) is None, timeout=10, interval=0.5)
    b.release("web")  # not b's any more: left alone
    lease = client.CoordinationV1Api(clients.get()).read_namespaced_lease("web", namespace)
    assert lease.spec.holder_identity == "a"
    clients.close()


def test_racing_nodes_never_both_hold_the_lease(kubeconfig, namespace):
    clients = ClientFactory(kubeconfig)
    winners: list[str] = []
    barrier = threading.Barrier(4)

    def race(me: str) -> None:
        barrier.wait()
        if GroupLock(clients, namespace, me).try_acquire("race", 60) is None:
            winners.append(me)

    threads = [threading.Thread(target=race, args=(f"n{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    clients.close()


def test_an_upgrade_group_and_a_lock_group_of_one_name_share_one_lease_per_agent(
    kubeconfig, namespace, tmp_path
):
    """Both give back the Lease named after the group (upstream's name) as the node: the
    first to finish must not free it while the other still works under it."""
    clients = ClientFactory(kubeconfig)
    slots = PoolSlots(
        GroupLock(clients, namespace, "a"), lambda: None, lambda patch: None, tmp_path / "request"
    )
    upgrade = slots.locker("OS upgrade")
    locks = GroupLocks(slots.locker("lock_group"), wait=lambda s: False, timeout=0, poll=0)
    b = GroupLock(clients, namespace, "b")
    try:
        for first, last in (("upgrade", "lock_group"), ("lock_group", "upgrade")):
            assert upgrade.try_acquire("shared", 300) is None
            locks.acquire(["shared"])
            if first == "upgrade":
                upgrade.release("shared")
            else:
                locks.release()
            assert b.try_acquire("shared", 60) == "a", f"{first} gave back what {last} holds"
            if last == "upgrade":
                upgrade.release("shared")
            else:
                locks.release()
            assert b.try_acquire("shared", 60) is None  # the last holder gave it back
            b.release("shared")
    finally:
        locks.release()
        clients.close()


def _unit(name: str, log: str) -> str:
    # The restart takes 3 s (ExecStartPre); begin and end of each start go to the service's log.
    pre = f"echo begin $(date +%%s.%%N) >> {log}; sleep 3; echo end $(date +%%s.%%N) >> {log}"
    return (
        f"[Unit]\nDescription=lock_group test {name}\n\n[Service]\n"
        f"ExecStartPre=/bin/sh -c '{pre}'\nExecStart=/bin/sleep infinity\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )


def _spec(host: str, version: str) -> dict:
    unit, conf, log = (
        f"/etc/systemd/system/{host}.service",
        f"/etc/{host}.conf",
        f"/var/lib/{host}.log",
    )
    return {
        "selector": {"matchLabels": {"kubernetes.io/hostname": host}},
        "files": [{"path": unit, "content": _unit(host, log)}, {"path": conf, "content": version}],
        "services": [
            {"name": host, "ensure": "running", "subscribe_files": [conf], "lock_group": "web"}
        ],
        "executions": [
            {"command": "/bin/systemctl", "args": ["daemon-reload"], "subscribe_files": [unit]}
        ],
    }


def _starts(machine: Machine, host: str) -> list[tuple[float, float]]:
    log = machine.path(f"/var/lib/{host}.log")
    lines = log.read_text().split("\n") if log.exists() else []
    begins = [float(x.split()[1]) for x in lines if x.startswith("begin")]
    ends = [float(x.split()[1]) for x in lines if x.startswith("end")]
    return list(zip(begins, ends, strict=False))


@pytest.mark.machine
@pytest.mark.ansible
def test_two_agents_restart_a_lock_group_one_at_a_time(api_client, kubeconfig, namespace, tmp_path):
    machine = Machine("systemd", tmp_path).start()
    hosts = ("lock-a", "lock-b")
    agents: list[MachineAgent] = []
    try:
        kc = portable_kubeconfig(kubeconfig, tmp_path / "kubeconfig")
        for host in hosts:
            put_configset(api_client, namespace, host, _spec(host, "v1"))
        agents = [MachineAgent(machine, kc, namespace, host).start() for host in hosts]

        def applied(version: str) -> bool:
            for host in hosts:
                n = node(api_client, namespace, host)
                e = entry(n, host)
                assert e and not e["error"] and condition(n, "Applied").get("status") == "True", n
                assert machine.path(f"/etc/{host}.conf").read_text() == version
            return True

        eventually(lambda: applied("v1"), timeout=240, interval=1)
        eventually(lambda: all(len(_starts(machine, h)) == 1 for h in hosts), timeout=60)

        for host in hosts:  # both change at once: both restarts are due together
            put_configset(api_client, namespace, host, _spec(host, "v2"))
        eventually(lambda: applied("v2"), timeout=240, interval=1)
        eventually(lambda: all(len(_starts(machine, h)) == 2 for h in hosts), timeout=60)

        a, b = (_starts(machine, h) for h in hosts)  # the first starts hold the Lease too
        assert all(
            a_end <= b_begin or b_end <= a_begin for a_begin, a_end in a for b_begin, b_end in b
        ), (a, b)
        leases = client.CoordinationV1Api(api_client)

        def released():
            lease = leases.read_namespaced_lease("web", namespace)
            assert lease.spec.holder_identity is None, lease.spec  # given back after each run
            return lease

        lease = eventually(released, timeout=60)
        assert (lease.spec.lease_transitions or 0) >= 2
        assert lease.spec.renew_time < dt.datetime.now(dt.UTC)
    finally:
        machine.stop()  # its end ends the agents
        for agent in agents:
            agent.stop()
