"""NodePools on the real control plane: the real controller (shipped RBAC) and five real agents.
Every count of disrupted nodes is taken from a watch of the ManagedNodes, never from sleeps.

What counts as *disrupted* is tests/cluster/fleet.py ``Disrupted``.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from nodemanager.agent.grouplocks import GroupLocks
from nodemanager.agent.poolslot import PoolSlots
from nodemanager.kube.client import ClientFactory
from nodemanager.kube.locks import GroupLock
from nodemanager.kube.nodes import NodeClient
from tests.cluster.agent import Agent
from tests.cluster.controller import ControllerProcess
from tests.cluster.fleet import Disrupted, make_namespace, start_agents, start_controller
from tests.cluster.helpers import eventually, stretch
from tests.cluster.test_bootstrap import bootstrapped, node_name  # noqa: F401 (fixtures)
from tests.cluster.test_controller import (
    after_more_syncs,
    cond,
    get,
    new_revision,
    nm,
    rollout_status,
)
from tests.cluster.test_controller import set_pool as merge_pool
from tests.cluster.test_daemon import GROUP, VERSION, condition, put_configset

pytestmark = [pytest.mark.cluster, pytest.mark.ansible]
HOSTS = [f"pool-{i}" for i in range(5)]


@pytest.fixture(scope="module")
def pool_ns(control_plane) -> str:
    return make_namespace(str(control_plane.kubeconfig), "pools")


@pytest.fixture(scope="module")
def pool_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pools")


@pytest.fixture(scope="module")
def agents(kubeconfig, pool_ns, pool_dir) -> Iterator[dict[str, Agent]]:
    started: dict[str, Agent] = {}
    try:
        start_agents(kubeconfig, pool_ns, pool_dir, dict.fromkeys(HOSTS, "role=web"), started)
        yield started
    finally:
        for a in started.values():
            a.stop()


@pytest.fixture(scope="module")
def controller(kubeconfig, pool_ns, pool_dir, agents) -> Iterator[ControllerProcess]:
    c = start_controller(kubeconfig, pool_ns, pool_dir)
    yield c
    assert c.stop() == 0


@pytest.fixture
def api(kubeconfig) -> Iterator[client.ApiClient]:
    a = config.new_client_from_config(kubeconfig)
    yield a
    a.close()


def custom(api) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def put_pool(api, ns, name, spec):
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": spec,
    }
    try:
        custom(api).create_namespaced_custom_object(GROUP, VERSION, ns, "nodepools", body)
    except client.ApiException as e:
        if e.status != 409:
            raise
        custom(api).patch_namespaced_custom_object(
            GROUP, VERSION, ns, "nodepools", name, {"spec": spec}
        )


def set_pool(api, ns, name, spec):
    """Merge ``spec`` into a NodePool's spec. Pool web (every node: role=web) is made first
    when this test runs alone: the module's first test makes it otherwise."""
    if name == "web":
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NodePool", "metadata": {"name": name}}
        body["spec"] = {"nodeSelector": {"matchLabels": {"role": "web"}}}
        try:
            custom(api).create_namespaced_custom_object(GROUP, VERSION, ns, "nodepools", body)
        except client.ApiException as e:
            if e.status != 409:
                raise
        else:
            eventually(
                lambda: all(
                    get(api, ns, "managednodes", h)["spec"].get("pool") == "web" for h in HOSTS
                ),
                timeout=120,
                message="every node in pool web",
            )
    merge_pool(api, ns, name, spec)


def label(api, ns, node, labels):
    custom(api).patch_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes", node, {"metadata": {"labels": labels}}
    )


def pool_updated(kubeconfig, ns, name, timeout=150):
    """`kubectl wait --for=condition=Updated`, its limit stretched with the load as every
    wait's (tests/waits.py)."""
    limit = timeout * stretch()
    done = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "-n", ns, "wait", "--for=condition=Updated",
         f"nodepool/{name}", f"--timeout={limit:.0f}s"],
        capture_output=True, text=True, timeout=limit + 60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return get_pool(kubeconfig, ns, name)


def get_pool(kubeconfig, ns, name) -> dict[str, Any]:
    api = config.new_client_from_config(kubeconfig)
    try:
        return get(api, ns, "nodepools", name)
    finally:
        api.close()


def staged(path, content, selector=None, max_unavailable=2):
    return {
        "selector": selector or {"matchLabels": {"role": "web"}},
        "rollout": {"maxUnavailable": max_unavailable},
        "files": [{"path": str(path), "content": content}],
    }


def settled(api, ns, name, count=len(HOSTS)):
    def check():
        cs = get(api, ns, "configsets", name)
        s = cs.get("status") or {}
        assert s.get("observedGeneration") == cs["metadata"]["generation"], s
        assert s.get("updated") == count and not s.get("unavailable"), s
        return s

    return check


def settled_at_v1(api, ns, directory, name, pool_budget):
    """Pool web's maxUnavailable set; ConfigSet ``name`` staged and applied on every node."""
    set_pool(api, ns, "web", {"maxUnavailable": pool_budget})
    spec = staged(directory / name, "v1\n")
    put_configset(api, ns, name, spec)
    eventually(settled(api, ns, name), timeout=150, message=f"{name} v1")
    return spec


def test_default_pool_and_two_configsets_changed_together_share_the_pool_budget(
    api, kubeconfig, pool_ns, pool_dir, agents, controller, measured
):
    # The controller made the default pool; every node is in it.
    default = eventually(lambda: get(api, pool_ns, "nodepools", "default"), timeout=60)
    assert default["spec"]["maxUnavailable"] == 1
    eventually(
        lambda: all(
            get(api, pool_ns, "managednodes", h)["spec"].get("pool") == "default" for h in HOSTS
        ),
        timeout=60,
        message="every node in the default pool",
    )
    put_pool(
        api, pool_ns, "web", {"nodeSelector": {"matchLabels": {"role": "web"}}, "maxUnavailable": 2}
    )
    eventually(
        lambda: all(
            get(api, pool_ns, "managednodes", h)["spec"].get("pool") == "web" for h in HOSTS
        ),
        timeout=60,
        message="every node in pool web",
    )
    specs = {n: staged(pool_dir / n, "v1\n") for n in ("alpha", "beta")}
    for name, spec in specs.items():
        put_configset(api, pool_ns, name, spec)
    for name in specs:
        eventually(settled(api, pool_ns, name), timeout=120, message=f"{name} v1")
    pool_updated(kubeconfig, pool_ns, "web")

    # Both changed in one go, each allowing 2: the pool allows 2 nodes in all, not 4.
    watcher = Disrupted(api, pool_ns, list(specs))
    try:
        started = time.monotonic()
        for name, spec in specs.items():
            put_configset(
                api,
                pool_ns,
                name,
                {**spec, "files": [{"path": str(pool_dir / name), "content": "v2\n"}]},
            )
        eventually(
            lambda: get(api, pool_ns, "configsets", "beta")["status"].get("revision") == 2,
            timeout=60,
        )
        for name in specs:
            eventually(settled(api, pool_ns, name), timeout=240, message=f"{name} v2")
        took = time.monotonic() - started
        pool = pool_updated(kubeconfig, pool_ns, "web")
    finally:
        watcher.stop()
    assert 1 <= watcher.most <= 2, watcher.log
    measured("two staged ConfigSets, 5 nodes, pool maxUnavailable 2", took)
    s = pool["status"]
    assert (s["nodes"], s["ready"], s["updated"], s["unavailable"], s["degraded"]) == (
        5,
        5,
        5,
        0,
        0,
    )
    printed = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "-n", pool_ns, "get", "nodepools"],
        capture_output=True, text=True, timeout=60,
    ).stdout  # fmt: skip
    header = printed.splitlines()[0].split()
    assert header == [
        "NAME",
        "NODES",
        "READY",
        "UPDATED",
        "UPDATING",
        "UNAVAILABLE",
        "DEGRADED",
        "PAUSED",
        "AGE",
    ], printed


def _slots(kubeconfig, ns, host, record: Path) -> tuple[PoolSlots, ClientFactory]:
    """The agent's own admission path (agent/poolslot.py over kube/locks.py and the node's
    status writer), driven for ``host`` from the test: a real upgrade would reboot this box.
    ``host``'s real agent runs beside it and must leave this request alone (it did not write
    it: its tidy once removed it, and the rollout went past the budget)."""
    clients = ClientFactory(kubeconfig)
    node = NodeClient(clients, ns, host)
    reader = config.new_client_from_config(kubeconfig)
    return (
        PoolSlots(
            GroupLock(clients, ns, host),
            lambda: client.CustomObjectsApi(reader).get_namespaced_custom_object(
                GROUP, VERSION, ns, "managednodes", host
            ),
            node.patch_status,
            record,
        ),
        clients,
    )


def test_os_upgrade_and_lock_group_admission_path_share_the_budget_with_a_rollout(
    api, kubeconfig, pool_ns, pool_dir, agents, controller
):
    name = "cfg"
    spec = settled_at_v1(api, pool_ns, pool_dir, name, pool_budget=1)
    slots, clients = _slots(kubeconfig, pool_ns, HOSTS[0], pool_dir / "test-request")
    upgrade = slots.locker("OS upgrade")
    watcher = Disrupted(api, pool_ns, [name, "alpha", "beta"])
    try:
        # The idle pool grants the OS upgrade its slot.
        eventually(lambda: upgrade.try_acquire("", 300) is None, timeout=60, message="granted")
        # A config change meanwhile: only the node holding the slot may take it (no cost).
        spec["files"] = [{"path": str(pool_dir / name), "content": "v2\n"}]
        put_configset(api, pool_ns, name, spec)
        eventually(lambda: rollout_status(api, pool_ns, name).get("revision") == 2, timeout=60)
        after_more_syncs(controller, 5)
        target = rollout_status(api, pool_ns, name)["updateRevision"]
        admitted = {
            h: get(api, pool_ns, "managednodes", h)["spec"]["configsetRevisions"][name]
            for h in HOSTS
        }
        assert [h for h, r in admitted.items() if r == target] in ([], [HOSTS[0]]), admitted
        pool = get(api, pool_ns, "nodepools", "web")["status"]
        assert pool["disruptions"] == [HOSTS[0]] and pool["unavailable"] == 1, pool
        upgrade.release("")  # the upgrade is over: the rollout goes on
        eventually(settled(api, pool_ns, name), timeout=180, message="cfg v2")

        # A lock_group restart asked for during the next rollout waits for a free slot.
        lock = GroupLocks(slots.locker("lock_group"), timeout=240, poll=0.5)
        spec["files"] = [{"path": str(pool_dir / name), "content": "v3\n"}]
        put_configset(api, pool_ns, name, spec)
        eventually(lambda: rollout_status(api, pool_ns, name).get("unavailable") == 1, timeout=60)
        lock.acquire([f"restart-{uuid.uuid4().hex[:4]}"])  # blocks until granted
        lock.release()
        eventually(settled(api, pool_ns, name), timeout=180, message="cfg v3")
    finally:
        watcher.stop()
        clients.close()
    assert watcher.most == 1, watcher.log
    assert any("granted" in dict(now).values() for _, now in watcher.log)
    assert "disruption" not in (get(api, pool_ns, "managednodes", HOSTS[0]).get("status") or {})


def test_a_node_joining_during_a_halt_gets_the_last_good_revision(
    api, kubeconfig, pool_ns, pool_dir, agents, controller
):
    set_pool(api, pool_ns, "web", {"maxUnavailable": 2})
    joining = HOSTS[4]
    # The bad revision fails on pool-0 only (it lacks the label the template reads), so one
    # failure halts the rollout and leaves a slot for the joining node.
    label(api, pool_ns, HOSTS[0], {"tier": "app"})
    for h in HOSTS[1:4]:
        label(api, pool_ns, h, {"tier": "app", "present": "yes"})
    name = "halt"
    selector = {"matchLabels": {"tier": "app"}}
    spec = staged(pool_dir / name, "good\n", selector)
    put_configset(api, pool_ns, name, spec)
    good = eventually(settled(api, pool_ns, name, 4), timeout=150, message="good on 4")[
        "updateRevision"
    ]
    watcher = Disrupted(api, pool_ns, [name])
    try:
        _halt_join_undo(api, kubeconfig, pool_ns, pool_dir, controller, name, spec, good, joining)
    finally:
        watcher.stop()
    # The failed node, the joining one, undo's re-admissions: never more than the pool's 2.
    assert 1 <= watcher.most <= 2, watcher.log


def _halt_join_undo(api, kubeconfig, pool_ns, pool_dir, controller, name, spec, good, joining):
    spec["files"] = [{"path": str(pool_dir / name), "template": "{{ node.labels['present'] }}"}]
    put_configset(api, pool_ns, name, spec)

    def halted():
        cs = get(api, pool_ns, "configsets", name)
        assert (cs.get("status") or {}).get("failed", 0) >= 1, cs.get("status")
        return cs

    bad = eventually(halted, timeout=120, message="halted on failure")["status"]["updateRevision"]
    label(api, pool_ns, joining, {"tier": "app", "present": "yes"})

    def at_last_good():
        node = get(api, pool_ns, "managednodes", joining)
        entry = next((e for e in node["status"].get("configsets") or [] if e["name"] == name), {})
        assert (node["spec"].get("configsetRevisions") or {}).get(name) == good != bad
        assert entry.get("revision") == good and not entry.get("error"), entry
        return entry

    eventually(at_last_good, timeout=120, message="the joining node runs the last good revision")
    after_more_syncs(controller)
    assert get(api, pool_ns, "managednodes", joining)["spec"]["configsetRevisions"][name] == good
    # undo goes back through the budget; the pool is Updated after.
    assert nm(kubeconfig, pool_ns, "undo", f"configset/{name}").returncode == 0
    eventually(settled(api, pool_ns, name), timeout=150, message="undone")
    pool_updated(kubeconfig, pool_ns, "web")


def test_rollout_removed_and_re_added_with_a_change_goes_through_the_pool(
    api, kubeconfig, pool_ns, pool_dir, agents, controller, measured
):
    name = "readd"
    spec = settled_at_v1(api, pool_ns, pool_dir, name, pool_budget=1)
    unstaged = {k: v for k, v in spec.items() if k != "rollout"}
    put_configset(api, pool_ns, name, unstaged)
    eventually(
        lambda: (
            not any(
                (get(api, pool_ns, "managednodes", h)["spec"].get("configsetRevisions") or {}).get(
                    name
                )
                for h in HOSTS
            )
        ),
        timeout=60,
        message="admissions pruned once unstaged",
    )
    watcher = Disrupted(api, pool_ns, [name])
    started = time.monotonic()
    try:
        put_configset(
            api,
            pool_ns,
            name,
            {**spec, "files": [{"path": str(pool_dir / name), "content": "v2\n"}]},
        )
        eventually(settled(api, pool_ns, name), timeout=180, message="v2 staged again")
        measured("one staged ConfigSet, 5 nodes, pool maxUnavailable 1", time.monotonic() - started)
    finally:
        watcher.stop()
    assert watcher.most == 1, watcher.log


def test_a_node_two_pools_select_is_held_and_named(api, kubeconfig, pool_ns, agents, controller):
    put_pool(
        api,
        pool_ns,
        "overlap",
        {"nodeSelector": {"matchLabels": {"kubernetes.io/hostname": HOSTS[1]}}},
    )

    def held():
        node = get(api, pool_ns, "managednodes", HOSTS[1])
        assert node["spec"].get("pool") == "", node["spec"]
        conflict = next(
            (c for c in node["status"].get("conditions") or [] if c["type"] == "PoolConflict"), {}
        )
        assert conflict.get("status") == "True", node["status"].get("conditions")
        assert "overlap" in conflict["message"] and "web" in conflict["message"]
        for name in ("web", "overlap"):
            pool = get(api, pool_ns, "nodepools", name)
            assert HOSTS[1] in pool["status"]["conflictingNodes"], pool["status"]
            degraded = next(c for c in pool["status"]["conditions"] if c["type"] == "Degraded")
            assert degraded["reason"] == "NodesInTwoPools" and HOSTS[1] in degraded["message"]
        return node

    eventually(held, timeout=60, message="held, named by both pools")
    events = (
        client.CoreV1Api(api)
        .list_namespaced_event(
            pool_ns,
            field_selector=f"involvedObject.kind=ManagedNode,involvedObject.name={HOSTS[1]}",
        )
        .items
    )
    assert any(
        e.reason == "NodeInTwoPools" and "overlap" in e.message and "web" in e.message
        for e in events
    )
    custom(api).delete_namespaced_custom_object(GROUP, VERSION, pool_ns, "nodepools", "overlap")

    def back():
        node = get(api, pool_ns, "managednodes", HOSTS[1])
        assert node["spec"].get("pool") == "web"
        assert "PoolConflict" not in [c["type"] for c in node["status"]["conditions"]]
        return node

    eventually(back, timeout=60, message="back in web, the condition gone")


def _admitted_to(api, ns, name, revision) -> list[str]:
    return [
        h
        for h in HOSTS
        if (get(api, ns, "managednodes", h)["spec"].get("configsetRevisions") or {}).get(name)
        == revision
    ]


def test_a_paused_pool_admits_nothing_and_a_percent_budget_rounds_down(
    api, kubeconfig, pool_ns, pool_dir, agents, controller
):
    name = "hold"
    spec = settled_at_v1(api, pool_ns, pool_dir, name, pool_budget="40%")  # of 5: 2
    eventually(
        lambda: get(api, pool_ns, "nodepools", "web")["status"]["maxUnavailable"] == 2,
        timeout=60,
        message="40% of 5 nodes is 2",
    )
    set_pool(api, pool_ns, "web", {"paused": True})

    def paused():
        updating = cond(get(api, pool_ns, "nodepools", "web"), "Updating")
        assert (updating["status"], updating["reason"]) == ("False", "Paused"), updating
        return updating

    watcher = Disrupted(api, pool_ns, [name])
    try:
        spec["files"] = [{"path": str(pool_dir / name), "content": "v2\n"}]
        put_configset(api, pool_ns, name, spec)
        target = new_revision(api, pool_ns, name, 2)
        after_more_syncs(controller, 5)
        assert _admitted_to(api, pool_ns, name, target) == []
        eventually(paused, timeout=30, message="pool Updating=False, Paused")
        # The ConfigSet is not paused itself: rollout status names the pool that holds it.
        held = nm(kubeconfig, pool_ns, "status", f"configset/{name}", "--watch", "false")
        assert held.returncode == 3 and "pool web is paused" in held.stdout, held
        set_pool(api, pool_ns, "web", {"paused": False})
        eventually(settled(api, pool_ns, name), timeout=180, message="v2 after the pool resumed")
        pool = pool_updated(kubeconfig, pool_ns, "web")
    finally:
        watcher.stop()
        set_pool(api, pool_ns, "web", {"paused": False})
    assert 1 <= watcher.most <= 2, watcher.log
    assert cond(pool, "Updating")["reason"] == "AllNodesUpdated"


def test_an_agent_restart_does_not_restart_min_ready_seconds(
    api, kubeconfig, pool_ns, pool_dir, agents, controller
):
    """The ready time is the controller's first sighting, kept in the node's spec: an agent
    restart while a node waits out minReadySeconds keeps it, and the rollout goes on one node
    at a time."""
    name, ready = "steady", 20
    spec = settled_at_v1(api, pool_ns, pool_dir, name, pool_budget=1)
    set_pool(api, pool_ns, "web", {"minReadySeconds": ready})
    # Nodes that applied v1 less than 20 s ago count unavailable now: let them prove ready.
    pool_updated(kubeconfig, pool_ns, "web")
    spec["files"] = [{"path": str(pool_dir / name), "content": "v2\n"}]
    put_configset(api, pool_ns, name, spec)
    target = new_revision(api, pool_ns, name, 2)

    def first_ready():
        admitted = _admitted_to(api, pool_ns, name, target)
        assert len(admitted) == 1, admitted
        spec = get(api, pool_ns, "managednodes", admitted[0])["spec"]
        since = (spec.get("configsetReadySince") or {}).get(name) or {}
        assert since.get("revision") == target, since
        return admitted[0], since["since"]

    watcher = Disrupted(api, pool_ns, [name])
    try:
        host, since = eventually(first_ready, timeout=90, message="the first node applied v2")
        agents[host].stop()
        agents[host].start(timeout=180)
        eventually(
            lambda: condition(get(api, pool_ns, "managednodes", host), "Ready")["status"] == "True",
            timeout=60,
        )
        node = get(api, pool_ns, "managednodes", host)
        assert node["spec"]["configsetReadySince"][name] == {"revision": target, "since": since}
        eventually(settled(api, pool_ns, name), timeout=300, message="v2 paced by minReadySeconds")
    finally:
        watcher.stop()
    assert watcher.most == 1, watcher.log
    for h in HOSTS:
        kept = get(api, pool_ns, "managednodes", h)["spec"]["configsetReadySince"][name]
        assert kept["revision"] == target and (h != host or kept["since"] == since), kept

    set_pool(api, pool_ns, "web", {"minReadySeconds": 0})


def test_a_node_can_ask_for_a_slot_but_not_grant_one_or_touch_pools(
    kubeconfig,
    bootstrapped,  # noqa: F811
    node_name,  # noqa: F811
):
    """With the node's own credential (rbac, token, bootstrap): no NodePool access at all; its
    status.disruption request is its own to write, spec.pool, spec.disruptionGranted and
    spec.poolStageAll not."""
    ns, _, permanent = bootstrapped
    admin, own = (config.new_client_from_config(str(k)) for k in (kubeconfig, permanent))
    try:
        put_pool(admin, ns, "default", {"maxUnavailable": 1})
        node = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ManagedNode"}
        custom(own).create_namespaced_custom_object(
            GROUP, VERSION, ns, "managednodes", {**node, "metadata": {"name": node_name}}
        )
        refused = {
            "create a pool": lambda: put_pool(own, ns, "mine", {"maxUnavailable": 100}),
            "write pool status": lambda: custom(own).patch_namespaced_custom_object_status(
                GROUP, VERSION, ns, "nodepools", "default", {"status": {"nodes": 0}}
            ),
            "grant itself a slot": lambda: custom(own).patch_namespaced_custom_object(
                GROUP,
                VERSION,
                ns,
                "managednodes",
                node_name,
                {"spec": {"disruptionGranted": "x"}},
            ),  # fmt: skip
            "leave its pool": lambda: custom(own).patch_namespaced_custom_object(
                GROUP, VERSION, ns, "managednodes", node_name, {"spec": {"pool": "mine"}}
            ),
            "stop being staged by its pool": lambda: custom(own).patch_namespaced_custom_object(
                GROUP, VERSION, ns, "managednodes", node_name, {"spec": {"poolStageAll": False}}
            ),
        }
        for what, call in refused.items():
            with pytest.raises(client.ApiException) as e:
                call()
            assert e.value.status in (403, 422), (what, e.value.status)
        asked = {
            "disruption": {"id": "abc", "reason": "OS upgrade", "since": "2026-01-01T00:00:00Z"}
        }
        custom(own).patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, "managednodes", node_name, {"status": asked}
        )
        stored = get(admin, ns, "managednodes", node_name)
        assert stored["status"]["disruption"]["id"] == "abc"
        assert "disruptionGranted" not in (stored.get("spec") or {})
    finally:
        admin.close()
        own.close()


class Dropped(Disrupted):
    """The nodes not running ``configsets`` at once: the entry missing or with an error (a node
    switched to staging without its admission would drop the ConfigSet until admitted)."""

    def why(self, obj) -> str:
        reported = {e["name"]: e for e in (obj.get("status") or {}).get("configsets") or []}
        for name in self.configsets:
            if name not in reported or reported[name].get("error"):
                return name
        return ""


def _applied(agents, hosts) -> float:
    return sum(agents[h].metric("nodemanager_reconcile_total", 'outcome="applied"') for h in hosts)


def test_stage_all_stages_an_unstaged_configset_through_the_pool_budget(
    api, kubeconfig, pool_ns, pool_dir, agents, controller
):
    """stageAll on pool web (4 nodes, maxUnavailable 2): switching it on changes nothing on the
    nodes (each is adopted at the content it runs), a change of a ConfigSet without
    spec.rollout then never disrupts more than 2 of them, while the node of pool other gets it
    at once; switching it off applies at once again."""
    name, other, web = "everything", HOSTS[4], HOSTS[:4]
    path = pool_dir / name
    spec = {"selector": {"matchLabels": {"role": "web"}}, "files": [{"path": str(path)}]}
    label(api, pool_ns, other, {"other": "yes"})
    away = [{"key": "other", "operator": "DoesNotExist"}]
    selector = {"matchLabels": {"role": "web"}, "matchExpressions": away}
    put_pool(api, pool_ns, "web", {"nodeSelector": selector, "maxUnavailable": 2})
    put_pool(api, pool_ns, "other", {"nodeSelector": {"matchLabels": {"other": "yes"}}})
    try:
        eventually(
            lambda: get(api, pool_ns, "managednodes", other)["spec"].get("pool") == "other",
            timeout=60,
            message="the last node in pool other",
        )
        spec["files"][0]["content"] = "v1\n"
        put_configset(api, pool_ns, name, spec)
        eventually(settled(api, pool_ns, name), timeout=120, message="v1 at once everywhere")

        # Switched on: every web node adopted at v1's revision, none dropped it meanwhile.
        dropped = Dropped(api, pool_ns, [name])
        before = _applied(agents, web)
        try:
            set_pool(api, pool_ns, "web", {"stageAll": True})

            def adopted():
                v1 = rollout_status(api, pool_ns, name).get("updateRevision")
                for h in web:
                    node = get(api, pool_ns, "managednodes", h)
                    assert node["spec"].get("poolStageAll") is True, node["spec"]
                    assert (node["spec"].get("configsetRevisions") or {}).get(name) == v1, node[
                        "spec"
                    ]
                    entry = next(e for e in node["status"]["configsets"] if e["name"] == name)
                    assert entry.get("revision") == v1, entry
                assert "poolStageAll" not in get(api, pool_ns, "managednodes", other)["spec"]
                return v1

            v1 = eventually(adopted, timeout=120, message="web adopted at v1")
            pool_updated(kubeconfig, pool_ns, "web")
        finally:
            dropped.stop()
        assert dropped.most == 0, dropped.log
        assert _applied(agents, web) == before  # nothing to apply: the same content
        assert rollout_status(api, pool_ns, name)["revision"] == 1

        # A change while web is paused: pool other's node applies it at once, web's wait.
        set_pool(api, pool_ns, "web", {"paused": True})
        spec["files"][0]["content"] = "v2\n"
        put_configset(api, pool_ns, name, spec)
        v2 = new_revision(api, pool_ns, name, 2)

        def at_once():
            node = get(api, pool_ns, "managednodes", other)
            entry = next(e for e in node["status"]["configsets"] if e["name"] == name)
            generation = get(api, pool_ns, "configsets", name)["metadata"]["generation"]
            assert entry["generation"] == generation and not entry.get("error"), entry
            assert name not in (node["spec"].get("configsetRevisions") or {}), node["spec"]
            return entry

        eventually(at_once, timeout=60, message="pool other's node has v2 at once")
        after_more_syncs(controller, 5)
        assert _admitted_to(api, pool_ns, name, v2) == []
        assert set(_admitted_to(api, pool_ns, name, v1)) == set(web)

        # Web resumed: through its budget, never more than 2 of its nodes at once.
        watcher = Disrupted(api, pool_ns, [name])
        try:
            set_pool(api, pool_ns, "web", {"paused": False})
            eventually(settled(api, pool_ns, name), timeout=180, message="v2 staged on web")
            pool_updated(kubeconfig, pool_ns, "web")
        finally:
            watcher.stop()
        assert 1 <= watcher.most <= 2, watcher.log
        assert set(_admitted_to(api, pool_ns, name, v2)) == set(web)
        assert path.read_text() == "v2\n"

        # Switched off: the flag and the admissions go, and a change applies at once again.
        set_pool(api, pool_ns, "web", {"stageAll": False})
        eventually(
            lambda: (
                not any(
                    "poolStageAll" in (spec := get(api, pool_ns, "managednodes", h)["spec"])
                    or name in (spec.get("configsetRevisions") or {})
                    for h in web
                )
            ),
            timeout=60,
            message="unstaged again",
        )
        set_pool(api, pool_ns, "web", {"paused": True})  # at once means: whatever the pool says
        spec["files"][0]["content"] = "v3\n"
        put_configset(api, pool_ns, name, spec)
        eventually(settled(api, pool_ns, name), timeout=120, message="v3 at once on a paused pool")
    finally:
        set_pool(
            api,
            pool_ns,
            "web",
            {"nodeSelector": {"matchExpressions": None}, "stageAll": False, "paused": False},
        )
        custom(api).delete_namespaced_custom_object(GROUP, VERSION, pool_ns, "nodepools", "other")
        label(api, pool_ns, other, {"other": None})


def test_a_deleted_node_leaves_its_pool(api, pool_ns, agents, controller):
    """A host gone for good (its ManagedNode deleted, as the README's uninstall says) no longer
    counts in its pool's status nor takes a slot of its budget."""
    ghost = f"gone-{uuid.uuid4().hex[:4]}"  # no agent
    put_pool(api, pool_ns, "ghosts", {"nodeSelector": {"matchLabels": {"ghost": "yes"}}})
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ManagedNode",
        "metadata": {"name": ghost, "labels": {"ghost": "yes"}},
    }
    custom(api).create_namespaced_custom_object(GROUP, VERSION, pool_ns, "managednodes", body)

    def status() -> dict[str, Any]:
        return get(api, pool_ns, "nodepools", "ghosts").get("status") or {}

    eventually(lambda: status().get("nodes") == 1, timeout=60, message="the node counted")
    custom(api).delete_namespaced_custom_object(GROUP, VERSION, pool_ns, "managednodes", ghost)

    def gone():
        s = status()
        assert (s.get("nodes"), s.get("unavailable"), s.get("unavailableNodes")) == (0, 0, []), s
        return s

    try:
        eventually(gone, timeout=60, message="the deleted node left its pool")
    finally:
        custom(api).delete_namespaced_custom_object(GROUP, VERSION, pool_ns, "nodepools", "ghosts")

    # The same for a host that ran an agent (its Lease stays behind): the last test here.
    host = HOSTS[-1]
    pool = get(api, pool_ns, "managednodes", host)["spec"]["pool"]
    before = get(api, pool_ns, "nodepools", pool)["status"]["nodes"]
    assert agents[host].stop() == 0
    custom(api).delete_namespaced_custom_object(GROUP, VERSION, pool_ns, "managednodes", host)

    def left():
        s = get(api, pool_ns, "nodepools", pool).get("status") or {}
        assert s.get("nodes") == before - 1 and host not in s.get("unavailableNodes"), s
        return s

    eventually(left, timeout=90, message=f"{host} left pool {pool}")
