"""No host that has applied something is new to the fleet again (issue 35): on the real control
plane with the real controller (shipped RBAC) and three real agents whose hosts carry nothing
but the one staged ConfigSet under test, so no other ConfigSet's entry hides a host that looks
new. Every count of hosts changing at once comes from a watch of the ManagedNodes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.cluster.agent import Agent
from tests.cluster.controller import ControllerProcess
from tests.cluster.fleet import make_namespace, start_agents, start_controller
from tests.cluster.helpers import eventually
from tests.cluster.test_controller import BetweenWatch, get
from tests.cluster.test_daemon import GROUP, VERSION, condition, put_configset

pytestmark = [pytest.mark.cluster, pytest.mark.ansible]
HOSTS = [f"solo-{i}" for i in range(3)]
SELECTOR = {
    "matchLabels": {"role": "solo"},
    "matchExpressions": [{"key": "maint", "operator": "DoesNotExist"}],
}


@pytest.fixture(scope="module")
def solo_ns(control_plane) -> str:
    return make_namespace(str(control_plane.kubeconfig), "solo")


@pytest.fixture(scope="module")
def solo_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("solo")


@pytest.fixture(scope="module")
def agents(kubeconfig, solo_ns, solo_dir) -> Iterator[dict[str, Agent]]:
    started: dict[str, Agent] = {}
    try:
        start_agents(kubeconfig, solo_ns, solo_dir, dict.fromkeys(HOSTS, "role=solo"), started)
        yield started
    finally:
        for a in started.values():
            a.stop()


@pytest.fixture(scope="module")
def controller(kubeconfig, solo_ns, solo_dir, agents) -> Iterator[ControllerProcess]:
    c = start_controller(kubeconfig, solo_ns, solo_dir)
    yield c
    assert c.stop() == 0


@pytest.fixture
def api(kubeconfig) -> Iterator[client.ApiClient]:
    a = config.new_client_from_config(kubeconfig)
    yield a
    a.close()


def spec_of(path: Path, content: str, min_ready: int = 0) -> dict:
    return {
        "selector": SELECTOR,
        "rollout": {"maxUnavailable": 1, "minReadySeconds": min_ready},
        "files": [{"path": str(path), "content": content}],
    }


def node(api, ns, host) -> dict:
    return get(api, ns, "managednodes", host)


def status(api, ns, name) -> dict:
    return get(api, ns, "configsets", name).get("status") or {}


def settled(api, ns, name, count=len(HOSTS)):
    def check():
        cs = get(api, ns, "configsets", name)
        s = cs.get("status") or {}
        assert s.get("observedGeneration") == cs["metadata"]["generation"], s
        assert s.get("updated") == count and not s.get("unavailable"), s
        return s

    return check


def delete(api, ns, name) -> None:
    try:
        client.CustomObjectsApi(api).delete_namespaced_custom_object(
            GROUP, VERSION, ns, "configsets", name
        )
    except client.ApiException as e:
        if e.status != 404:
            raise


def empty(api, ns, hosts):
    """Every host in ``hosts`` shows nothing applied and nothing admitted: the state in which
    the controller used to take a host for new to the fleet."""

    def check():
        for h in hosts:
            n = node(api, ns, h)
            assert not (n.get("status") or {}).get("configsets"), (h, n.get("status"))
            assert not (n.get("spec") or {}).get("configsetRevisions"), (h, n["spec"])
        return True

    return check


def label(api, ns, host, value) -> None:
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes", host, {"metadata": {"labels": {"maint": value}}}
    )


def test_a_configset_deleted_mid_rollout_and_recreated_goes_through_the_budget(
    api, solo_ns, solo_dir, agents, controller, measured
):
    name, path = "solo", solo_dir / "solo"
    put_configset(api, solo_ns, name, spec_of(path, "v1\n"))
    eventually(settled(api, solo_ns, name), timeout=150, message="v1 on every host")
    # v2 waits 60 s after its first host: the rollout is caught in the middle.
    put_configset(api, solo_ns, name, spec_of(path, "v2\n", min_ready=60))
    rolling = BetweenWatch(api, solo_ns, name)
    try:
        eventually(
            lambda: (
                status(api, solo_ns, name).get("revision") == 2
                and status(api, solo_ns, name).get("updated") == 1
            ),
            timeout=120,
            message="v2 on one host, the others waiting",
        )
        eventually(says_why(api, solo_ns, name), message="Progressing names the hosts and why")
    finally:
        rolling.stop()
    assert rolling.most == 1, rolling.log

    # Deleted mid-rollout: the hosts' entries and admissions go (the files stay).
    delete(api, solo_ns, name)
    eventually(empty(api, solo_ns, HOSTS), timeout=120, message="entries and admissions gone")
    recorded(api, solo_ns, HOSTS)
    recreated = BetweenWatch(api, solo_ns, name)
    try:
        started = time.monotonic()
        put_configset(api, solo_ns, name, spec_of(path, "v3\n"))
        eventually(settled(api, solo_ns, name), timeout=180, message="v3 on every host")
        measured("re-created staged ConfigSet, 3 hosts one at a time", time.monotonic() - started)
    finally:
        recreated.stop()
        delete(api, solo_ns, name)
    assert recreated.most == 1, recreated.log


def says_why(api, ns, name):
    def check():
        cs = get(api, ns, "configsets", name)
        message = next(
            c["message"] for c in cs["status"]["conditions"] if c["type"] == "Progressing"
        )
        # The condition names each host it waits for, and why: one host updated, the second
        # admitted (being changed, or waiting out minReadySeconds), the third waiting for
        # the budget.
        assert message.startswith("2 of 3 nodes pending: "), message
        assert message.count("(waiting for maxUnavailable)") == 1, message
        assert "(updating)" in message or "(minReadySeconds)" in message, message
        return message

    return check


def recorded(api, ns, hosts) -> None:
    """Each host carries the controller's record of its first apply (firstapplied.py)."""
    for h in hosts:
        assert (node(api, ns, h).get("spec") or {}).get("firstApplied"), h


def test_an_only_configset_replaced_and_a_host_back_from_maint_go_through_the_budget(
    api, solo_ns, solo_dir, agents, controller
):
    """A host's only ConfigSet deleted and another staged one added; a host that left every
    selector (maint=true, its agent restarted meanwhile) coming back mid-rollout: each waits for
    the budget and for the previous host's minReadySeconds."""
    first, second, ready = "solo-a", "solo-b", 8
    put_configset(api, solo_ns, first, spec_of(solo_dir / first, "v1\n"))
    eventually(settled(api, solo_ns, first), timeout=150, message=f"{first} on every host")
    away = HOSTS[-1]
    label(api, solo_ns, away, "true")
    eventually(empty(api, solo_ns, [away]), timeout=120, message=f"{away} left the selector")
    agents[away].stop()
    agents[away].start(timeout=180)
    delete(api, solo_ns, first)
    eventually(empty(api, solo_ns, HOSTS), timeout=120, message="entries and admissions gone")
    recorded(api, solo_ns, HOSTS)

    watcher = BetweenWatch(api, solo_ns, second)
    try:
        put_configset(api, solo_ns, second, spec_of(solo_dir / second, "v1\n", min_ready=ready))
        eventually(
            lambda: status(api, solo_ns, second).get("updated") == 1,
            timeout=120,
            message=f"{second} on its first host",
        )
        label(api, solo_ns, away, None)  # back, mid-rollout
        eventually(
            lambda: condition(node(api, solo_ns, away), "Ready").get("status") == "True",
            timeout=60,
            message=f"{away} Ready",
        )
        eventually(settled(api, solo_ns, second), timeout=240, message=f"{second} everywhere")
    finally:
        watcher.stop()
        delete(api, solo_ns, second)
    assert watcher.most == 1, watcher.log
    # Each admission waits minReadySeconds after the previous host reported it applied.
    admitted_at: dict[str, float] = {}
    applied_at: dict[str, float] = {}
    for seen, host, admitted, reported, _last, error in watcher.log:
        if admitted:
            admitted_at.setdefault(host, seen)
            if reported == admitted and not error:
                applied_at.setdefault(host, seen)
    order = sorted(admitted_at, key=admitted_at.__getitem__)
    assert len(order) == len(HOSTS), watcher.log
    for previous, nxt in zip(order, order[1:], strict=False):
        gap = admitted_at[nxt] - applied_at[previous]
        assert gap >= ready - 2, (previous, nxt, gap, watcher.log)  # 2 s: watch delivery
