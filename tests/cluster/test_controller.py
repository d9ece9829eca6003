"""The fleet controller on the real control plane with five real agents (own --hostname and
--state-dir each): ConfigSet status, coalesced writes, stale nodes, per-node Secret access,
leader failover."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch

from tests.cluster.agent import Agent
from tests.cluster.controller import ControllerProcess
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import GROUP, VERSION, condition, put_configset

pytestmark = [pytest.mark.cluster, pytest.mark.ansible]
HOSTS = [f"fleet-{i}" for i in range(5)]
SYNC_PERIOD = 1.0


@pytest.fixture(scope="module")
def fleet_ns(control_plane) -> Iterator[str]:
    api = config.new_client_from_config(str(control_plane.kubeconfig))
    name = f"fleet-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
    )
    yield name
    api.close()


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fleet")


@pytest.fixture(scope="module")
def agents(kubeconfig, fleet_ns, fleet_dir) -> Iterator[dict[str, Agent]]:
    started: dict[str, Agent] = {}
    try:
        for i, host in enumerate(HOSTS):
            labels = "role=web,color=blue" if i else "role=web"  # fleet-0 has no color
            started[host] = Agent(
                kubeconfig, fleet_ns, host, fleet_dir / host, "--node-labels", labels
            )
            started[host].start()
        yield started
    finally:
        for a in started.values():
            a.stop()


@pytest.fixture(scope="module")
def controller(kubeconfig, fleet_ns, fleet_dir, agents) -> Iterator[ControllerProcess]:
    c = ControllerProcess(
        kubeconfig, fleet_ns, fleet_dir, "--sync-period", f"{SYNC_PERIOD:g}s"
    ).start()
    eventually(c.leading, timeout=30, message="controller ready")
    yield c
    assert c.stop() == 0


@pytest.fixture
def api(kubeconfig) -> Iterator[client.ApiClient]:
    a = config.new_client_from_config(kubeconfig)
    yield a
    a.close()


def get(api, ns, plural, name) -> dict[str, Any]:
    return client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, ns, plural, name
    )


def cond(obj, type_):
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), {}
    )


class StatusWatch:
    """Every status a ConfigSet gets, with the time it arrived (a real watch)."""

    def __init__(self, api, ns, name):
        self.seen: list[tuple[float, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._w = watch.Watch()
        self._t = threading.Thread(target=self._run, args=(api, ns, name), daemon=True)
        self._t.start()

    def _run(self, api, ns, name):
        try:
            self._stream(api, ns, name)
        except Exception:
            if not self._stop.is_set():  # after stop(), the closed connection is expected
                raise

    def _stream(self, api, ns, name):
        custom = client.CustomObjectsApi(api)
        for event in self._w.stream(
            custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            ns,
            "configsets",
            field_selector=f"metadata.name={name}",
            timeout_seconds=300,
        ):
            status = event["object"].get("status")
            if status and (not self.seen or self.seen[-1][1] != status):
                self.seen.append((time.monotonic(), status))
            if self._stop.is_set():
                return

    def stop(self):
        self._stop.set()
        self._w.stop()
        self._t.join(timeout=0)


def test_configset_status_counts_updated_failed_and_coalesces_writes(
    api, fleet_ns, fleet_dir, agents, controller
):
    target = fleet_dir / "motd"
    spec = {
        "selector": {"matchLabels": {"role": "web"}},
        "files": [{"path": str(target), "content": "v1\n"}],
    }
    put_configset(api, fleet_ns, "motd", spec)
    watcher = StatusWatch(api, fleet_ns, "motd")
    try:

        def all_updated():
            cs = get(api, fleet_ns, "configsets", "motd")
            s = cs.get("status") or {}
            assert s.get("observedGeneration") == cs["metadata"]["generation"], s
            assert (s["matched"], s["updated"], s["failed"], s["pending"]) == (5, 5, 0, 0), s
            assert cond(cs, "Progressing")["status"] == "False"
            assert cond(cs, "Degraded")["status"] == "False"
            return cs

        eventually(all_updated, timeout=60, message="5 of 5 updated")

        # A change that fails on one node only: its template reads a label fleet-0 lacks.
        spec["files"] = [{"path": str(target), "template": "{{ node.labels['color'] }}\n"}]
        put_configset(api, fleet_ns, "motd", spec)

        def one_failed():
            cs = get(api, fleet_ns, "configsets", "motd")
            s = cs.get("status") or {}
            assert s.get("observedGeneration") == cs["metadata"]["generation"], s
            assert (s["matched"], s["updated"], s["failed"], s["pending"]) == (5, 4, 1, 0), s
            assert s["failedNodes"] == ["fleet-0"]
            assert cond(cs, "Degraded")["status"] == "True"
            assert "fleet-0" in cond(cs, "Degraded")["message"]
            return cs

        eventually(one_failed, timeout=60, message="4 updated, fleet-0 failed")
    finally:
        watcher.stop()
    # Coalesced: five agents reported twice each, and no two status writes came closer than
    # the sync period (a small allowance for watch delivery jitter).
    times = [t for t, _ in watcher.seen]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert len(times) < 10, watcher.seen
    assert all(g > SYNC_PERIOD * 0.8 for g in gaps), gaps


def test_printer_columns_show_matched_updated_failed(kubeconfig, fleet_ns, api, controller):
    import subprocess

    put_configset(api, fleet_ns, "cols", {"selector": {"matchLabels": {"role": "none"}}})
    eventually(
        lambda: (get(api, fleet_ns, "configsets", "cols").get("status") or {}).get("matched") == 0,
        timeout=30,
    )
    out = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "-n", fleet_ns, "get", "configsets", "cols"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    header = out.splitlines()[0].split()
    assert header[:5] == ["NAME", "MATCHED", "UPDATED", "FAILED", "AGE"], out


def test_killed_agent_is_ready_unknown_within_a_minute_and_true_when_back(
    api, kubeconfig, fleet_ns, fleet_dir, agents, controller
):
    host = HOSTS[4]
    eventually(
        lambda: (
            condition(get(api, fleet_ns, "managednodes", host), "Ready").get("status") == "True"
        ),
        timeout=60,
    )
    agents[host].signal(signal.SIGKILL)
    agents[host].proc.wait()
    killed = time.monotonic()
    n = eventually(
        lambda: (
            (m := get(api, fleet_ns, "managednodes", host))
            and condition(m, "Ready").get("status") == "Unknown"
            and m
        ),
        timeout=60,
        interval=0.5,
        message="Ready=Unknown",
    )
    took = time.monotonic() - killed
    ready = condition(n, "Ready")
    assert ready["reason"] == "NodeStatusUnknown" and "Lease" in ready["message"]
    print(f"killed agent -> Ready=Unknown in {took:.1f} s")
    # The other nodes stay Ready.
    for other in HOSTS[:4]:
        assert condition(get(api, fleet_ns, "managednodes", other), "Ready")["status"] != "Unknown"

    agents[host] = Agent(
        kubeconfig, fleet_ns, host, fleet_dir / host, "--node-labels", "role=web,color=blue"
    ).start()
    eventually(
        lambda: (
            condition(get(api, fleet_ns, "managednodes", host), "Ready").get("status") == "True"
        ),
        timeout=60,
        message="Ready=True after the agent came back",
    )
