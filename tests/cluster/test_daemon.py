"""The agent on the real control plane: ManagedNode, watches, reconcile, status, metrics."""

from __future__ import annotations

import os
import platform
import signal
import time
import uuid

import pytest
from kubernetes import client

from nodemanager.version import build_info
from tests.cluster.agent import Agent
from tests.cluster.helpers import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.ansible]
GROUP, VERSION = "common.nodemanager", "v1"


@pytest.fixture
def host():
    return f"host-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def agent(kubeconfig, namespace, host, tmp_path):
    a = Agent(kubeconfig, namespace, host, tmp_path / "state").start()
    yield a
    a.stop()


def custom(api_client):
    return client.CustomObjectsApi(api_client)


def node(api_client, namespace, host):
    """The ManagedNode, or {} while the agent has not registered it yet."""
    try:
        return custom(api_client).get_namespaced_custom_object(
            GROUP, VERSION, namespace, "managednodes", host
        )
    except client.ApiException as e:
        if e.status == 404:
            return {}
        raise


def condition(n, type_):
    return next(
        (c for c in (n.get("status") or {}).get("conditions") or [] if c["type"] == type_), {}
    )


def entry(n, name):
    return next(
        (e for e in (n.get("status") or {}).get("configsets") or [] if e["name"] == name), None
    )


def put_configset(api_client, namespace, name, spec, labels=None):
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConfigSet",
        "metadata": {"name": name, **({"labels": labels} if labels else {})},
        "spec": spec,
    }
    api = custom(api_client)
    try:
        current = api.get_namespaced_custom_object(GROUP, VERSION, namespace, "configsets", name)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return api.replace_namespaced_custom_object(
            GROUP, VERSION, namespace, "configsets", name, body
        )
    except client.ApiException as e:
        if e.status != 404:
            raise
        return api.create_namespaced_custom_object(GROUP, VERSION, namespace, "configsets", body)


def for_host(host, files):
    return {"selector": {"matchLabels": {"kubernetes.io/hostname": host}}, "files": files}


def applied(api_client, namespace, host, name, rv=None):
    def check():
        n = node(api_client, namespace, host)
        e = entry(n, name)
        assert e is not None and e["error"] == "", e
        if rv:
            assert e["resourceVersion"] == rv, e
        assert condition(n, "Applied").get("status") == "True"
        return n

    return eventually(check, timeout=60, message=f"{name} applied on {host}")


def test_configset_lifecycle_and_node_registration(api_client, namespace, host, agent, tmp_path):
    target = tmp_path / "motd"
    cs = put_configset(
        api_client, namespace, "motd", for_host(host, [{"path": str(target), "content": "v1\n"}])
    )
    n = applied(api_client, namespace, host, "motd", cs["metadata"]["resourceVersion"])
    assert target.read_text() == "v1\n"

    labels = n["metadata"]["labels"]
    # upstream's values (os-release ID, uname -m), one per key; no nodemanager.io/os
    assert labels["kubernetes.io/hostname"] == host and labels["kubernetes.io/os"] == "debian"
    assert labels["kubernetes.io/arch"] == os.uname().machine and "nodemanager.io/os" not in labels
    status = n["status"]
    # the full version, as `--version` says it (the checkout's: the agent runs from it)
    assert status["agentVersion"] == build_info().version
    assert status["osPrettyName"].startswith("Debian")
    assert status["release"] == platform.release()  # uname -r, as upstream
    assert "lo" not in status["interfaces"]

    # The first status can be written before the agent's cache holds the ManagedNode it has just
    # registered (observedGeneration 0; the ConfigSet comes right after /healthz); the cache's
    # ADDED event brings the next one.
    def observed():
        n = node(api_client, namespace, host)
        assert condition(n, "Applied")["observedGeneration"] == n["metadata"]["generation"], n
        return n

    n = eventually(observed, timeout=30, message="Applied observes the node's generation")
    assert (
        condition(n, "Ready")["status"] == "True" and condition(n, "Degraded")["status"] == "False"
    )
    leases = client.CoordinationV1Api(api_client)
    lease = eventually(
        lambda: (
            leases.list_namespaced_lease(namespace, field_selector=f"metadata.name={host}").items
        ),
        timeout=15,
        message="lease created",
    )
    assert lease[0].spec.holder_identity == host

    cs = put_configset(
        api_client, namespace, "motd", for_host(host, [{"path": str(target), "content": "v2\n"}])
    )
    applied(api_client, namespace, host, "motd", cs["metadata"]["resourceVersion"])
    assert target.read_text() == "v2\n"

    custom(api_client).delete_namespaced_custom_object(
        GROUP, VERSION, namespace, "configsets", "motd"
    )
    eventually(
        lambda: entry(node(api_client, namespace, host), "motd") is None,
        timeout=30,
        message="entry removed",
    )
    assert target.read_text() == "v2\n"  # deleting a ConfigSet stops managing, it does not undo
    events = client.CoreV1Api(api_client).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={host}"
    )
    assert any(e.reason == "Applied" for e in events.items)


def test_selection_follows_node_labels(api_client, namespace, host, agent, tmp_path):
    target = tmp_path / "web.conf"
    put_configset(
        api_client,
        namespace,
        "web",
        {
            "selector": {"matchLabels": {"role": "web"}},
            "files": [{"path": str(target), "content": "web\n"}],
        },
    )
    eventually(lambda: node(api_client, namespace, host), timeout=30)
    assert not target.exists()
    custom(api_client).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, "managednodes", host, {"metadata": {"labels": {"role": "web"}}}
    )
    applied(api_client, namespace, host, "web")
    assert target.read_text() == "web\n"
    custom(api_client).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, "managednodes", host, {"metadata": {"labels": {"role": None}}}
    )
    eventually(
        lambda: entry(node(api_client, namespace, host), "web") is None,
        timeout=30,
        message="no longer selected",
    )


def test_conflicting_configsets_are_both_named(api_client, namespace, host, agent, tmp_path):
    shared, own = tmp_path / "shared.conf", tmp_path / "own.conf"
    put_configset(
        api_client,
        namespace,
        "a",
        for_host(
            host, [{"path": str(shared), "content": "a\n"}, {"path": str(own), "content": "own\n"}]
        ),
    )
    put_configset(
        api_client, namespace, "b", for_host(host, [{"path": str(shared), "content": "b\n"}])
    )

    def conflicted():
        n = node(api_client, namespace, host)
        a, b = entry(n, "a"), entry(n, "b")
        assert (
            a
            and b
            and a["conflicts"] == [f"file:{shared}"]
            and b["conflicts"] == [f"file:{shared}"]
        )
        assert condition(n, "Conflicted")["status"] == "True"
        return True

    eventually(conflicted, timeout=60)
    # "a" may have applied alone before "b" arrived; once they conflict, neither side is applied.
    assert own.read_text() == "own\n" and (not shared.exists() or shared.read_text() == "a\n")


def test_invalid_configset_is_reported_others_apply(api_client, namespace, host, agent, tmp_path):
    good = tmp_path / "good"
    put_configset(
        api_client, namespace, "good", for_host(host, [{"path": str(good), "content": "g"}])
    )
    # Valid for the API (the schema cannot see it), refused by the agent: arguments outside FreeBSD.
    put_configset(
        api_client,
        namespace,
        "bad",
        {**for_host(host, []), "services": [{"name": "x", "arguments": "-v"}]},
    )

    def reported():
        n = node(api_client, namespace, host)
        assert entry(n, "good") and entry(n, "bad")
        assert entry(n, "good")["error"] == ""
        assert "arguments of x are only supported on FreeBSD" in entry(n, "bad")["error"]
        assert (
            condition(n, "Degraded")["status"] == "True"
            and condition(n, "Applied")["status"] == "False"
        )
        return True

    eventually(reported, timeout=60)
    assert good.read_text() == "g"


def test_nothing_changed_means_no_ansible_run_and_no_status_write(
    api_client, namespace, host, agent, tmp_path
):
    put_configset(
        api_client,
        namespace,
        "steady",
        for_host(host, [{"path": str(tmp_path / "s"), "content": "s"}]),
    )
    applied(api_client, namespace, host, "steady")

    def observed():  # the agent's first status may precede its cache of its own ManagedNode
        n = node(api_client, namespace, host)
        assert condition(n, "Applied")["observedGeneration"] == n["metadata"]["generation"], n
        return n

    eventually(observed, timeout=30, message="Applied observes the node's generation")
    eventually(lambda: agent.metric("nodemanager_status_writes_total") >= 1, timeout=10)
    runs, writes = (
        agent.metric("nodemanager_ansible_runs_total"),
        agent.metric("nodemanager_status_writes_total"),
    )
    reconciles = agent.metric("nodemanager_reconcile_total")
    version = node(api_client, namespace, host)["metadata"]["resourceVersion"]
    for i in range(3):  # events that change nothing for this node
        put_configset(
            api_client,
            namespace,
            f"elsewhere-{i}",
            for_host("some-other-host", [{"path": "/nowhere", "content": "x"}]),
        )
    eventually(
        lambda: agent.metric("nodemanager_reconcile_total") > reconciles,
        timeout=30,
        message="reconciled",
    )
    eventually(
        lambda: agent.metric("nodemanager_reconcile_total", 'outcome="unchanged"') >= 1, timeout=30
    )
    assert agent.metric("nodemanager_ansible_runs_total") == runs
    assert agent.metric("nodemanager_status_writes_total") == writes
    assert node(api_client, namespace, host)["metadata"]["resourceVersion"] == version


def test_sighup_forces_a_full_run(api_client, namespace, host, agent, tmp_path):
    target = tmp_path / "drift"
    put_configset(
        api_client,
        namespace,
        "drift",
        for_host(host, [{"path": str(target), "content": "wanted\n"}]),
    )
    applied(api_client, namespace, host, "drift")
    target.write_text("edited by hand\n")
    agent.signal(signal.SIGHUP)
    eventually(
        lambda: target.read_text() == "wanted\n", timeout=60, message="drift corrected after SIGHUP"
    )


def test_node_reconcile_period_sets_the_drift_check_interval(
    api_client, namespace, host, agent, tmp_path
):
    target = tmp_path / "drift"
    put_configset(
        api_client,
        namespace,
        "drift",
        for_host(host, [{"path": str(target), "content": "wanted\n"}]),
    )
    applied(api_client, namespace, host, "drift")
    target.write_text("edited by hand\n")
    time.sleep(3)
    assert (
        target.read_text() == "edited by hand\n"
    )  # the agent's own interval is 30 m: nothing looks yet
    custom(api_client).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, "managednodes", host, {"spec": {"reconcilePeriod": "2s"}}
    )
    eventually(
        lambda: target.read_text() == "wanted\n",
        timeout=30,
        message="drift corrected by the node's period",
    )
    target.write_text("edited again\n")
    eventually(
        lambda: target.read_text() == "wanted\n", timeout=30, message="and again, every period"
    )


@pytest.fixture
def notifying_agent(kubeconfig, namespace, host, tmp_path):
    a = Agent(kubeconfig, namespace, host, tmp_path / "state", "--notify-on-change").start()
    yield a
    a.stop()


def test_notifies_annotate_targets_as_upstream_and_after_a_change_opt_in(
    api_client, namespace, host, notifying_agent, tmp_path
):
    """Upstream's ``nodemanager.io/notify-<configset>: <generation>`` once per generation; with
    --notify-on-change also ours (notified-at/-by) when the ConfigSet changed the host."""
    agent = notifying_agent
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"app-{host}"))
    )
    target = tmp_path / "app.conf"

    def put(content):
        spec = {
            **for_host(host, [{"path": str(target), "content": content}]),
            "notifies": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": f"app-{host}"},
                {"apiVersion": "example.com/v1", "kind": "Nowhere", "name": "x"},
            ],
        }
        meta = put_configset(api_client, namespace, f"notify-{host}", spec)["metadata"]
        generations.append(str(meta["generation"]))
        return meta["resourceVersion"]

    generations: list[str] = []
    upstream_key = f"nodemanager.io/notify-notify-{host}"

    def annotations():
        return core.read_namespaced_config_map(f"app-{host}", namespace).metadata.annotations or {}

    rv = put("v1\n")
    applied(api_client, namespace, host, f"notify-{host}", rv)
    first = eventually(
        lambda: (
            annotations().get("nodemanager.io/notified-by") == f"{host}/notify-{host}@{rv}"
            and annotations().get(upstream_key) == generations[-1]
            and annotations()
        ),
        timeout=30,
        message="target annotated",
    )
    events = eventually(
        lambda: [
            e
            for e in core.list_namespaced_event(
                namespace, field_selector=f"involvedObject.name={host}"
            ).items
            if e.reason == "NotifyFailed"
        ],
        timeout=30,
        message="NotifyFailed event",
    )
    assert "spec.notifies[1] Nowhere/x" in events[0].message and events[0].type == "Warning"

    unchanged = agent.metric("nodemanager_reconcile_total", 'outcome="unchanged"')
    agent.signal(signal.SIGHUP)  # a full check that changes nothing notifies nobody
    eventually(
        lambda: agent.metric("nodemanager_reconcile_total", 'outcome="unchanged"') > unchanged,
        timeout=30,
    )
    assert annotations() == first

    rv = put("v2\n")
    eventually(
        lambda: (
            annotations().get("nodemanager.io/notified-by") == f"{host}/notify-{host}@{rv}"
            and annotations().get(upstream_key) == generations[-1] != generations[0]
        ),
        timeout=30,
        message="annotated again after the next change",
    )


def test_notifies_without_opt_in_write_upstreams_key_only(
    api_client, namespace, host, agent, tmp_path
):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"up-{host}"))
    )
    spec = {
        **for_host(host, [{"path": str(tmp_path / "a"), "content": "a\n"}]),
        "notifies": [{"apiVersion": "v1", "kind": "ConfigMap", "name": f"up-{host}"}],
    }
    meta = put_configset(api_client, namespace, f"up-{host}", spec)["metadata"]
    applied(api_client, namespace, host, f"up-{host}", meta["resourceVersion"])
    annotations = eventually(
        lambda: core.read_namespaced_config_map(f"up-{host}", namespace).metadata.annotations,
        timeout=30,
        message="target annotated",
    )
    assert annotations == {f"nodemanager.io/notify-up-{host}": str(meta["generation"])}


def test_apiserver_restart_misses_no_change_and_expired_watch_relists(
    control_plane, api_client, namespace, host, agent, tmp_path
):
    target = tmp_path / "after-restart"
    put_configset(
        api_client, namespace, "r", for_host(host, [{"path": str(target), "content": "1"}])
    )
    applied(api_client, namespace, host, "r")
    lists = agent.metric("nodemanager_informer_lists_total", 'kind="configsets"')
    control_plane.restart_apiserver()
    cs = put_configset(
        api_client, namespace, "r", for_host(host, [{"path": str(target), "content": "2"}])
    )
    applied(api_client, namespace, host, "r", cs["metadata"]["resourceVersion"])
    assert target.read_text() == "2"
    # The restarted server's watch cache starts after the agent's resourceVersion: 410 Gone, relist.
    assert agent.metric("nodemanager_informer_lists_total", 'kind="configsets"') > lists
    assert "watch expired (410 Gone); relisting" in agent.log()


def test_offline_start_enforces_last_applied_state(
    control_plane, kubeconfig, api_client, namespace, host, tmp_path
):
    target, state = tmp_path / "offline", tmp_path / "state"
    put_configset(
        api_client, namespace, "o", for_host(host, [{"path": str(target), "content": "kept\n"}])
    )
    first = Agent(kubeconfig, namespace, host, state).start()
    try:
        applied(api_client, namespace, host, "o")
    finally:
        assert first.stop() == 0
    assert f"ConfigSet o: changed file:{target}" in first.log()  # what changed, at info level
    # A restart with a stored state and the server up says nothing of offline/online (it
    # used to log both at every start).
    again = Agent(kubeconfig, namespace, host, tmp_path / "state").start()
    try:
        eventually(lambda: "reconciled in" in again.log(), timeout=30, message="reconciled")
    finally:
        assert again.stop() == 0
    assert "offline:" not in again.log() and "online:" not in again.log(), again.log()
    target.unlink()
    control_plane.stop_apiserver()
    second = Agent(kubeconfig, namespace, host, state)
    try:
        second.start()
        eventually(
            lambda: target.exists() and target.read_text() == "kept\n",
            timeout=60,
            message="enforced from the state dir while the API server is down",
        )
        assert "offline: API server not reachable" in second.log()
    finally:
        control_plane.restart_apiserver()
    try:
        cs = put_configset(
            api_client,
            namespace,
            "o",
            for_host(host, [{"path": str(target), "content": "caught up\n"}]),
        )
        applied(api_client, namespace, host, "o", cs["metadata"]["resourceVersion"])
        assert target.read_text() == "caught up\n"
        assert "online: API server reachable" in second.log()
    finally:
        second.stop()
