"""The real controller across a hung kube-apiserver (SIGSTOP: connections open, no answers) for
5 minutes, then SIGCONT: it keeps running, logs no traceback, and catches up.

5 minutes on purpose: the informers' watches read with a 330-390 s timeout, the controller's
other requests with 30 s, leader election renews every 2 s and Leases last 40 s, so a shorter
hang would leave the longest wait of a real outage untried. Most of it is waiting, so
tests/parallel.py runs this file as a suite of its own (its own control plane: the hang
freezes every client of it) beside the main suite instead of adding 5 minutes to it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from nodemanager.controller.rollout import revision_name
from tests.cluster.agent import Agent
from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import GROUP, VERSION, condition, for_host, put_configset

pytestmark = [pytest.mark.cluster, pytest.mark.ansible, pytest.mark.timeout(1500)]
HANG = 300.0


@pytest.fixture
def api(kubeconfig) -> Iterator[client.ApiClient]:
    a = config.new_client_from_config(kubeconfig)
    yield a
    a.close()


def configset(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    return client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, ns, "configsets", name
    )


def summarised(api: client.ApiClient, ns: str, name: str, spec: dict[str, Any]) -> None:
    """The ConfigSet's status counts its one node updated at its current generation (and, when
    staged, at the revision of its stored spec, with the schema's defaults)."""

    def check() -> bool:
        cs = configset(api, ns, name)
        status = cs.get("status") or {}
        assert status.get("observedGeneration") == cs["metadata"]["generation"], status
        assert (status.get("matched"), status.get("updated")) == (1, 1), status
        assert cs["spec"]["files"][0]["content"] == spec["files"][0]["content"], cs["spec"]
        if "rollout" in spec:
            assert status.get("updateRevision") == revision_name(name, cs["spec"]), status
        return True

    eventually(check, timeout=180, interval=0.5, message=f"{name} summarised")


def test_controller_survives_a_5_minute_hung_api_server_and_catches_up(
    control_plane, kubeconfig, api, namespace, tmp_path, measured
):
    host = f"hang-{uuid.uuid4().hex[:6]}"
    agent = Agent(kubeconfig, namespace, host, tmp_path / host).start(timeout=180)
    own = shipped_kubeconfig(kubeconfig, namespace, tmp_path)
    controller = ControllerProcess(own, namespace, tmp_path, "--sync-period", "1s").start()
    try:
        eventually(controller.leading, timeout=120, message="controller ready")
        specs = {
            "plain": for_host(host, [{"path": str(tmp_path / "plain"), "content": "1\n"}]),
            "staged": {
                **for_host(host, [{"path": str(tmp_path / "staged"), "content": "1\n"}]),
                "rollout": {"maxUnavailable": 1},
            },
        }
        for name, spec in specs.items():
            put_configset(api, namespace, name, spec)
        for name, spec in specs.items():
            summarised(api, namespace, name, spec)

        ready = condition(node(api, namespace, host), "Ready")
        assert ready.get("status") == "True", ready
        for spec in specs.values():
            spec["files"][0]["content"] = "2\n"
        with control_plane.hung_apiserver():
            # Changes sent during the hang: the requests wait in the server's sockets and are
            # taken when it runs again (nothing can reach etcd while it is stopped).
            changers = [
                threading.Thread(target=change, args=(kubeconfig, namespace, name, spec))
                for name, spec in specs.items()
            ]
            for t in changers:
                t.start()
            hung_at = time.monotonic()
            alive = threading.Event()
            while not alive.wait(10) and time.monotonic() - hung_at < HANG:
                assert controller.proc is not None and controller.proc.poll() is None, "exited"
                assert controller.probe("/healthz") == 200
        resumed = time.monotonic()
        for t in changers:
            t.join(120)
            assert not t.is_alive(), "a change sent during the hang never returned"
        for name, spec in specs.items():
            summarised(api, namespace, name, spec)
        measured(
            "controller caught up after a 5-minute hang (both ConfigSets)",
            time.monotonic() - resumed,
        )
        assert (tmp_path / "plain").read_text() == (tmp_path / "staged").read_text() == "2\n"
        # The agent could not renew its Lease during the hang, and that is no sign it is gone:
        # the controller never marked it Ready=Unknown (the condition never left True).
        after = condition(node(api, namespace, host), "Ready")
        assert after.get("status") == "True", after
        assert after["lastTransitionTime"] == ready["lastTransitionTime"], after
        assert controller.proc is not None and controller.proc.poll() is None
        assert controller.leading()
    finally:
        agent.stop()
        code = controller.stop()
    log = controller.log()
    assert "Traceback" not in log, log[-4000:]
    assert code == 0


def change(kubeconfig: str, namespace: str, name: str, spec: dict[str, Any]) -> None:
    api = config.new_client_from_config(kubeconfig)
    try:
        put_configset(api, namespace, name, spec)
    finally:
        api.close()


def node(api: client.ApiClient, ns: str, host: str) -> dict[str, Any]:
    return client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes", host
    )
