"""The agent's fencing against the real test API server, with a FIFO in place of the watchdog
device (this kernel has no softdog, so no host is ever reset here): the keepalive cadence (a
quarter of --watchdog-timeout), keepalives stopping while kube-apiserver is SIGSTOPped (after
spec.fencing.timeoutSeconds without a Lease renewal; the FIFO stays open, as a device stays
armed) and resuming after SIGCONT, magic close 'V' while the maintenance annotation is set and
on SIGTERM, and status.fencing saying each."""

from __future__ import annotations

import signal
import statistics
import time
import uuid
from pathlib import Path

import pytest
from kubernetes import client

from tests.cluster.agent import Agent
from tests.cluster.helpers import eventually
from tests.cluster.test_isolation import GROUP, VERSION, managednode
from tests.watchdog_fifo import FifoWatchdog

pytestmark = pytest.mark.cluster
MAINTENANCE = "nodemanager.io/maintenance"
TIMEOUT = 30  # spec.fencing.timeoutSeconds: the CRD's least


def fenced_node(api_client, namespace: str, host: str) -> None:
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, "managednodes",
        managednode(host, spec={"fencing": {"enabled": True, "timeoutSeconds": TIMEOUT}}),
    )  # fmt: skip


def fencing_status(api_client, namespace: str, host: str) -> dict:
    node = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        GROUP, VERSION, namespace, "managednodes", host
    )
    return (node.get("status") or {}).get("fencing") or {}


def annotate(api_client, namespace: str, host: str, value: str | None) -> None:
    client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, "managednodes", host,
        {"metadata": {"annotations": {MAINTENANCE: value}}},
    )  # fmt: skip


def start(kubeconfig, namespace, tmp_path: Path, host: str, device_timeout: int) -> tuple:
    tmp_path.mkdir(exist_ok=True)
    fifo = FifoWatchdog(tmp_path / "watchdog")
    agent = Agent(
        kubeconfig, namespace, host, tmp_path / "state",
        "--watchdog-device", str(fifo.path), "--watchdog-timeout", str(device_timeout),
    ).start()  # fmt: skip
    return fifo, agent


def test_fifo_keepalive_cadence_stops_while_apiserver_sigstopped_and_resumes_after_sigcont(
    api_client, kubeconfig, namespace, control_plane, tmp_path, measured
):
    host = f"fence-{uuid.uuid4().hex[:6]}"
    fenced_node(api_client, namespace, host)
    fifo, agent = start(kubeconfig, namespace, tmp_path, host, device_timeout=4)  # 1 s cadence
    try:
        eventually(lambda: len(fifo.keepalives()) >= 6, timeout=60, message="keepalives")
        gaps = [b - a for a, b in zip(fifo.keepalives(), fifo.keepalives()[1:], strict=False)]
        cadence = statistics.median(gaps)
        measured("watchdog keepalive interval, median (--watchdog-timeout 4)", cadence)
        assert 0.5 < cadence < 2.5, gaps
        status = eventually(lambda: fencing_status(api_client, namespace, host).get("armed"))
        assert agent.metric("nodemanager_watchdog_armed") == 1
        assert fencing_status(api_client, namespace, host) == {
            "armed": True, "reason": "Armed", "deviceTimeoutSeconds": 0,  # a FIFO has none
        }  # fmt: skip
        assert status

        with control_plane.hung_apiserver():
            stopped_at = time.monotonic()

            def quiet() -> bool:  # no keepalive for four intervals
                return time.monotonic() - fifo.keepalives()[-1] > 4

            eventually(quiet, timeout=TIMEOUT + 30, interval=0.5, message="keepalives stop")
            last = fifo.keepalives()[-1]
            # Petted on while the last renewal (at most 10 s before) was younger than the
            # timeout, then no more.
            measured("SIGSTOP -> last keepalive (timeoutSeconds 30)", last - stopped_at)
            assert last - stopped_at <= TIMEOUT + 2
            assert fifo.keepalives(since=stopped_at + 5), "petting stopped at once"
            assert b"V" not in fifo.data() and not fifo.closes  # still armed: a host resets
        resumed_at = time.monotonic()
        eventually(
            lambda: fifo.keepalives(since=resumed_at), timeout=60, message="keepalives resume"
        )
        measured("SIGCONT -> keepalives resume", fifo.keepalives(since=resumed_at)[0] - resumed_at)
        assert b"V" not in fifo.data()
        assert "watchdog no longer petted" in agent.log()
    finally:
        agent.stop()
        fifo.stop()


def test_fifo_magic_close_while_in_maintenance_and_on_sigterm(
    api_client, kubeconfig, namespace, tmp_path
):
    host = f"fence-{uuid.uuid4().hex[:6]}"
    fenced_node(api_client, namespace, host)
    fifo, agent = start(kubeconfig, namespace, tmp_path, host, device_timeout=4)
    try:
        eventually(lambda: fifo.keepalives(), timeout=60, message="armed")
        annotate(api_client, namespace, host, "kernel update")
        assert fifo.wait_closed(1, timeout=30), "no magic close in maintenance"
        assert fifo.data().endswith(b"V")
        eventually(
            lambda: (
                fencing_status(api_client, namespace, host)
                == {"armed": False, "reason": "Maintenance", "deviceTimeoutSeconds": 0}
            ),
            timeout=30,
            message="status says disarmed in maintenance",
        )
        closed = fifo.closes[0]
        annotate(api_client, namespace, host, None)
        eventually(lambda: fifo.keepalives(since=closed), timeout=30, message="armed again")
        eventually(lambda: fencing_status(api_client, namespace, host).get("armed"), timeout=30)

        agent.signal(signal.SIGTERM)
        assert agent.proc.wait(60) == 0
        assert fifo.wait_closed(2, timeout=10), "no magic close on SIGTERM"
        assert fifo.data().endswith(b"V")
        # It said so before it went: the controller does not fence a host running on.
        assert fencing_status(api_client, namespace, host)["armed"] is False
    finally:
        agent.stop()
        fifo.stop()
