"""What the controller writes for a fleet, counted: 40 ManagedNodes and Leases that the test
writes itself as agents would (the wire behaviour of bench/agents.py, at test size), and the
real controller process on the real control plane.

- Ready=Unknown is written for exactly the nodes whose Lease stopped, never for a renewed one.
- Lease renewals alone cause no sync (only the periodic resync) and no write.
- A burst of node reports is a few ConfigSet status writes (one per sync period), not one per
  node, and the status ends up counting every node; while a rollout progresses its counts are
  written every 5 s at most, its completion at once.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.cluster.controller import ControllerProcess
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import GROUP, VERSION, put_configset

pytestmark = [pytest.mark.cluster]
NODES = [f"scale-{i:02d}" for i in range(40)]
LIVE = NODES[:30]  # their Leases are renewed every second; the other 10 stop
LEASE_SECONDS = 10
SYNC_PERIOD = 1.0
PROGRESS_PERIOD = 5.0  # the controller default


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def metrics(c: ControllerProcess) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{c.metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("nodemanager_controller_") and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


class Renewer:
    """Renews the live nodes' Leases every second, as their agents would (every 10 s)."""

    def __init__(self, api: client.ApiClient, ns: str) -> None:
        self.coordination = client.CoordinationV1Api(api)
        self.ns, self.stop = ns, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(1.0):
            for name in LIVE:
                self.coordination.patch_namespaced_lease(
                    name, self.ns, {"spec": {"renewTime": now()}}
                )


@pytest.fixture(scope="module")
def fleet(control_plane, tmp_path_factory) -> Iterator[tuple[str, client.ApiClient, Renewer]]:
    api = config.new_client_from_config(str(control_plane.kubeconfig))
    ns = f"scale-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=ns))
    )
    custom = client.CustomObjectsApi(api)
    for name in NODES:
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            "managednodes",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ManagedNode",
                "metadata": {"name": name, "labels": {"fleet": "scale"}},
                "spec": {},
            },
        )
        client.CoordinationV1Api(api).create_namespaced_lease(
            ns,
            {
                "metadata": {"name": name},
                "spec": {
                    "holderIdentity": name,
                    "leaseDurationSeconds": LEASE_SECONDS,
                    "renewTime": now(),
                },
            },
        )
    renewer = Renewer(api, ns)
    renewer.thread.start()
    yield ns, api, renewer
    renewer.stop.set()
    renewer.thread.join()
    api.close()


@pytest.fixture(scope="module")
def controller(control_plane, fleet, tmp_path_factory) -> Iterator[ControllerProcess]:
    ns = fleet[0]
    log_dir: Path = tmp_path_factory.mktemp("scale")
    c = ControllerProcess(
        str(control_plane.kubeconfig),
        ns,
        log_dir,
        "--sync-period",
        f"{SYNC_PERIOD:g}s",
        "--manage-access",
        "false",
    ).start()
    eventually(c.leading, timeout=120, message="controller ready")
    yield c
    assert c.stop() == 0


def ready(api: client.ApiClient, ns: str, name: str) -> str:
    node = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes", name
    )
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Ready"), "")


def test_ready_unknown_only_for_stopped_leases_and_renewals_cause_no_writes(fleet, controller):
    ns, api, _ = fleet
    stopped = NODES[len(LIVE) :]
    eventually(
        lambda: all(ready(api, ns, n) == "Unknown" for n in stopped),
        timeout=60,
        message="the 10 stopped nodes are Ready=Unknown",
    )
    assert [n for n in LIVE if ready(api, ns, n) == "Unknown"] == []
    written = metrics(controller)['nodemanager_controller_writes_total{kind="node_ready_unknown"}']
    assert written == len(stopped)

    # At rest, with 30 Leases renewed every second (30 events a second): only the periodic
    # resync (every 5 s), no sync per renewal, and no write. The default pool's status counts
    # the 10 as unavailable first: a count written at most every 5 s may still be due.
    custom = client.CustomObjectsApi(api)

    def pool_at_rest() -> dict:
        pool = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "nodepools", "default")
        status = pool.get("status") or {}
        assert (status.get("nodes"), status.get("unavailable")) == (len(NODES), len(stopped))
        return status

    eventually(pool_at_rest, timeout=60, message="the default pool counts the 10 unavailable")
    time.sleep(2 * SYNC_PERIOD)  # the pool status write's own event settles
    before = metrics(controller)
    time.sleep(6)
    after = metrics(controller)
    syncs = "nodemanager_controller_syncs_total"
    assert after[syncs] - before[syncs] <= 2, (before[syncs], after[syncs])
    patches = 'nodemanager_controller_api_requests_total{method="PATCH"}'
    writes = {k: after[k] - before.get(k, 0) for k in after if "writes_total{" in k}
    assert after.get(patches, 0) == before.get(patches, 0), {k: v for k, v in writes.items() if v}
    assert [n for n in LIVE if ready(api, ns, n) == "Unknown"] == []


def test_a_burst_of_node_reports_is_a_few_configset_status_writes(fleet, controller):
    ns, api, _ = fleet
    cs = put_configset(
        api,
        ns,
        "scale",
        {
            "selector": {"matchLabels": {"fleet": "scale"}},
            "files": [{"path": "/etc/scale.conf", "content": "v1\n"}],
        },
    )
    generation = cs["metadata"]["generation"]
    custom = client.CustomObjectsApi(api)

    def observed() -> dict:
        s = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "configsets", "scale")
        status = s.get("status") or {}
        assert status.get("observedGeneration") == generation, status
        return status

    # The new generation's first status is written at once and is not what is counted here.
    eventually(observed, timeout=60, message="the new generation observed")
    started = time.monotonic()
    before = metrics(controller)
    for name in NODES:  # every node reports, as fast as one client can write
        custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            ns,
            "managednodes",
            name,
            {
                "status": {
                    "configsets": [
                        {"name": "scale", "generation": generation, "lastApplied": now()[:19] + "Z"}
                    ]
                }
            },
        )

    def counted() -> dict:
        s = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "configsets", "scale")
        status = s.get("status") or {}
        assert status.get("observedGeneration") == generation, status
        assert (status["matched"], status["updated"], status["pending"]) == (40, 40, 0), status
        return status

    eventually(counted, timeout=60, message="40 of 40 updated")
    elapsed = time.monotonic() - started
    after = metrics(controller)
    key = 'nodemanager_controller_writes_total{kind="configset_status"}'
    status_writes = after[key] - before.get(key, 0)
    # 40 node reports: a progress-only write waits PROGRESS_PERIOD after the last write, the
    # completion is written at once (and one progress write may be due when the burst starts).
    assert 1 <= status_writes <= elapsed / PROGRESS_PERIOD + 2, (status_writes, elapsed)
    assert status_writes < len(NODES) / 4, status_writes


def test_counts_of_a_rollout_in_progress_are_written_every_5_s_completion_at_once(
    fleet, controller
):
    ns, api, _ = fleet
    cs = put_configset(
        api,
        ns,
        "scale",
        {
            "selector": {"matchLabels": {"fleet": "scale"}},
            "files": [{"path": "/etc/scale.conf", "content": "v2\n"}],
        },
    )
    generation = cs["metadata"]["generation"]
    custom = client.CustomObjectsApi(api)
    before = metrics(controller)
    started = time.monotonic()
    for name in NODES:  # reports spread over about 10 s: counts change every sync period
        custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            ns,
            "managednodes",
            name,
            {"status": {"configsets": [{"name": "scale", "generation": generation}]}},
        )
        time.sleep(0.25)
    reported = time.monotonic()

    def complete() -> dict:
        s = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "configsets", "scale")
        status = s.get("status") or {}
        assert (status.get("observedGeneration"), status.get("updated")) == (generation, 40)
        return status

    eventually(complete, timeout=60, message="40 of 40 updated")
    done = time.monotonic()
    after = metrics(controller)
    key = 'nodemanager_controller_writes_total{kind="configset_status"}'
    status_writes = after[key] - before.get(key, 0)
    # The new generation and the completion at once; counts in between every 5 s at most
    # (one a second before: about 10 writes).
    assert 2 <= status_writes <= (reported - started) / PROGRESS_PERIOD + 3, status_writes
    assert done - reported < 3 * SYNC_PERIOD + 2, done - reported  # completion is not held back
