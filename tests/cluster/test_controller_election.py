"""Two controller replicas with --leader-elect: one leads, the other takes over when it dies."""

from __future__ import annotations

import threading
import time

import pytest

from tests.cluster.controller import ControllerProcess
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import GROUP, VERSION, put_configset

pytestmark = pytest.mark.cluster


def summarised(api_client, namespace, name) -> bool:
    from kubernetes import client

    cs = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        GROUP, VERSION, namespace, "configsets", name
    )
    return (cs.get("status") or {}).get("matched") == 0


def test_leader_failover_after_kill_and_after_clean_stop(
    api_client, kubeconfig, namespace, tmp_path, measured
):
    elect = ("--leader-elect", "true", "--sync-period", "1s")
    replicas = [
        ControllerProcess(kubeconfig, namespace, tmp_path, *elect, name=f"replica-{i}").start()
        for i in range(3)
    ]
    both: list[float] = []
    done = threading.Event()

    def never_two_leaders():
        while not done.is_set():
            if sum(r.leading() for r in replicas if r.proc.poll() is None) > 1:
                both.append(time.monotonic())
            done.wait(0.2)

    checker = threading.Thread(target=never_two_leaders, daemon=True)
    checker.start()
    try:
        leader = eventually(lambda: next((r for r in replicas if r.leading()), None), timeout=60)
        put_configset(api_client, namespace, "one", {"selector": {"matchLabels": {"x": "y"}}})
        eventually(lambda: summarised(api_client, namespace, "one"), timeout=30)

        # kill -9: the Lease is not released, a standby takes over once it expires (15 s).
        leader.kill()
        killed = time.monotonic()
        second = eventually(
            lambda: next((r for r in replicas if r is not leader and r.leading()), None),
            timeout=60,
            interval=0.2,
        )
        after_kill = time.monotonic() - killed
        put_configset(api_client, namespace, "two", {"selector": {"matchLabels": {"x": "y"}}})
        eventually(lambda: summarised(api_client, namespace, "two"), timeout=30)

        # SIGTERM: the leader releases the Lease, the last standby takes over at its next try.
        stopped = time.monotonic()
        assert second.stop() == 0
        third = eventually(
            lambda: next((r for r in replicas if r.proc.poll() is None and r.leading()), None),
            timeout=60,
            interval=0.2,
        )
        after_stop = time.monotonic() - stopped
        put_configset(api_client, namespace, "three", {"selector": {"matchLabels": {"x": "y"}}})
        eventually(lambda: summarised(api_client, namespace, "three"), timeout=30)
        assert third not in (leader, second)
        measured("leader failover after kill -9 (15 s lease)", after_kill)
        measured("leader failover after SIGTERM (Lease released)", after_stop)
        assert after_kill < 30 and after_stop < 10
    finally:
        done.set()
        for r in replicas:
            r.stop()
    assert not both, "two replicas were ready (leading) at once"
