"""The agent is never stuck: runaway templates, a hung API server, peer churn, kill -9.

Each scenario prints what it measured (``MEASURED ...``; run with ``-s`` to see them).
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest
from kubernetes import client

from tests.cluster.agent import Agent
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import (
    GROUP,
    VERSION,
    applied,
    custom,
    entry,
    for_host,
    node,
    put_configset,
)

pytestmark = [pytest.mark.cluster, pytest.mark.ansible]
FREEZE = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"


@pytest.fixture
def host():
    return f"host-{uuid.uuid4().hex[:6]}"


def measured(what: str, value: float, unit: str = "s") -> None:
    print(f"MEASURED {what}: {value:.2f} {unit}")


def children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found |= {int(p) for p in (task / "children").read_text().split()}
        except OSError:
            pass
    return found


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def processes_with(marker: str) -> list[int]:
    found = []
    for entry_ in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry_ / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline and running(int(entry_.name)):
            found.append(int(entry_.name))
    return found


def events_of(api_client, namespace, host):
    return (
        client.CoreV1Api(api_client)
        .list_namespaced_event(namespace, field_selector=f"involvedObject.name={host}")
        .items
    )


FOLDED = "{{ 'x' * (15 * 10 ** 8) }}"


def test_a_freezing_template_stops_nothing_and_sigterm_exits_in_10s(
    kubeconfig, api_client, namespace, host, tmp_path
):
    agent = Agent(kubeconfig, namespace, host, tmp_path / "state").start()
    try:
        put_configset(
            api_client,
            namespace,
            "freeze",
            for_host(host, [{"path": str(tmp_path / "frozen"), "template": FREEZE}]),
        )
        put_configset(
            api_client,
            namespace,
            "big",
            for_host(host, [{"path": str(tmp_path / "big"), "template": "{{ 'x' * 100000000 }}"}]),
        )
        put_configset(  # folded while compiled, it once took the agent itself to 4.3 GB
            api_client,
            namespace,
            "folded",
            for_host(host, [{"path": str(tmp_path / "folded"), "template": FOLDED}]),
        )
        started = time.monotonic()
        good = tmp_path / "good"
        put_configset(
            api_client,
            namespace,
            "good",
            for_host(host, [{"path": str(good), "content": "good\n"}]),
        )
        # Within a minute on a quiet machine (measured); the bound leaves room for a busy one.
        eventually(lambda: good.exists() and good.read_text() == "good\n", timeout=90)
        measured(
            "good ConfigSet applied beside a freezing template after", time.monotonic() - started
        )

        peak = [rss_mb(agent.proc.pid)]

        def reported():
            peak.append(rss_mb(agent.proc.pid))  # the agent's own, sampled throughout
            assert agent.get("/healthz", agent.health_port) == 200
            n = node(api_client, namespace, host)
            folded = entry(n, "folded")
            assert folded and "output over the limit" in folded["error"], folded
            frozen, big = entry(n, "freeze"), entry(n, "big")
            assert frozen and "TemplateError: spec.files[0].template:" in frozen["error"], frozen
            assert big and ("limit" in big["error"] or "longer than" in big["error"]), big
            return frozen["error"], big["error"]

        frozen_error, big_error = eventually(reported, timeout=60, message="limits reported")
        assert "CPU time limit" in frozen_error or "took longer than" in frozen_error
        assert any(w in big_error for w in ("output over the limit", "memory limit", "longer than"))
        assert not (tmp_path / "frozen").exists() and not (tmp_path / "big").exists()
        assert agent.get("/healthz", agent.health_port) == 200
        measured("agent RSS after a 100 MB template", rss_mb(agent.proc.pid), "MB")
        measured("agent peak RSS sampled while hostile templates rendered", max(peak), "MB")
        assert max(peak) < 400, peak  # 1.5 GB had it folded the constant itself

        # SIGTERM while the worker waits on a spinning render (a changed text renders again).
        put_configset(
            api_client,
            namespace,
            "freeze",
            for_host(host, [{"path": str(tmp_path / "frozen"), "template": FREEZE + "{# 2 #}"}]),
        )
        renderers = eventually(lambda: children(agent.proc.pid), timeout=30, message="a render")
        started = time.monotonic()
        agent.signal(signal.SIGTERM)
        agent.proc.wait(30)
        took = time.monotonic() - started
        measured("SIGTERM to exit while a template spins", took)
        assert took <= 10
        eventually(lambda: not any(running(p) for p in renderers), timeout=5, message="no child")
    finally:
        agent.stop()


def test_a_hung_api_server_does_not_stop_drift_correction(
    control_plane, kubeconfig, api_client, namespace, host, tmp_path
):
    agent = Agent(
        kubeconfig, namespace, host, tmp_path / "state", "--drift-check-interval", "5s"
    ).start()
    try:
        target = tmp_path / "kept"
        put_configset(
            api_client, namespace, "kept", for_host(host, [{"path": str(target), "content": "1\n"}])
        )
        applied(api_client, namespace, host, "kept")
        with control_plane.hung_apiserver():
            target.write_text("edited by hand\n")
            started = time.monotonic()
            eventually(lambda: target.read_text() == "1\n", timeout=30, message="reverted")
            measured(
                "hand edit reverted with kube-apiserver stopped (5 s drift)",
                time.monotonic() - started,
            )
            assert agent.get("/healthz", agent.health_port) == 200
            target.write_text("edited again\n")
            eventually(lambda: target.read_text() == "1\n", timeout=30, message="and again")
        # Once the server answers again, the agent follows changes and reports them.
        cs = put_configset(
            api_client, namespace, "kept", for_host(host, [{"path": str(target), "content": "2\n"}])
        )
        applied(api_client, namespace, host, "kept", cs["metadata"]["resourceVersion"])
        assert target.read_text() == "2\n"
    finally:
        agent.stop()


def test_peer_churn_runs_subscribed_executions_only_on_real_changes(
    kubeconfig, api_client, namespace, host, tmp_path
):
    api = custom(api_client)
    peer = f"peer-{uuid.uuid4().hex[:6]}"
    api.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "managednodes",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ManagedNode", "metadata": {"name": peer}},
    )
    api.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "managednodes", peer, {"status": {"release": "initial"}}
    )
    agent = Agent(kubeconfig, namespace, host, tmp_path / "state").start()
    hosts, counter = tmp_path / "hosts", tmp_path / "executions"
    try:
        put_configset(
            api_client,
            namespace,
            "peers",
            {
                **for_host(
                    host,
                    [
                        {
                            "path": str(hosts),
                            # The peer's release only: this node's own status changes
                            # once after its first write, which is not churn.
                            "template": "{% for n in nodes %}{{ n.name }}"
                            f"{{% if n.name == '{peer}' %}} {{{{ n.status.release }}}}"
                            "{% endif %}\n{% endfor %}",
                        }
                    ],
                ),
                "executions": [
                    {
                        "command": "/bin/sh",
                        "args": ["-c", f"echo ran >> {counter}"],
                        "subscribe_files": [str(hosts)],
                    }
                ],
            },
        )
        eventually(lambda: hosts.exists() and peer in hosts.read_text(), timeout=60)
        eventually(lambda: counter.exists(), timeout=30, message="first execution")

        def churn(field: str, seconds: float) -> int:
            patches, end = 0, time.monotonic() + seconds
            while time.monotonic() < end:
                api.patch_namespaced_custom_object_status(
                    GROUP,
                    VERSION,
                    namespace,
                    "managednodes",
                    peer,
                    {"status": {field: f"v{patches}"}},
                )
                patches += 1
            return patches

        def executions() -> int:
            return len(counter.read_text().splitlines())

        before = executions()
        reconciles = agent.metric("nodemanager_reconcile_total")
        events = len(events_of(api_client, namespace, host))
        # A field the template does not render: the file never changes, nothing runs.
        patches = churn("agentVersion", 10)
        time.sleep(1)  # let the last coalesced reconcile start; counted below, not asserted by time
        quiet_reconciles = agent.metric("nodemanager_reconcile_total") - reconciles
        measured("peer status patches (unrendered field, 10 s)", patches, "patches")
        measured("reconciles during them", quiet_reconciles, "reconciles")
        assert executions() == before
        # A rendered field: the file changes, the execution runs once per coalesced reconcile.
        reconciles = agent.metric("nodemanager_reconcile_total")
        patches = churn("release", 20)
        eventually(lambda: f"v{patches - 1}" in hosts.read_text(), timeout=30, message="caught up")
        ran = executions() - before
        churn_reconciles = agent.metric("nodemanager_reconcile_total") - reconciles
        new_events = len(events_of(api_client, namespace, host)) - events
        measured("peer status patches (rendered field, 20 s)", patches, "patches")
        measured("reconciles during them", churn_reconciles, "reconciles")
        measured("subscribed executions during them", ran, "executions")
        measured("new Event objects during them", new_events, "events")
        assert 1 <= ran <= 5  # 20 s at one reconcile per 10 s, plus the catch-up
        assert quiet_reconciles <= 3 and churn_reconciles <= 6
    finally:
        agent.stop()


def test_kill_9_during_an_ansible_run_leaves_nothing_after_restart(
    kubeconfig, api_client, namespace, host, tmp_path
):
    state = tmp_path / "state"
    steady = tmp_path / "steady.conf"
    marker = f"nm-slow-{uuid.uuid4().hex[:8]}"
    agent = Agent(kubeconfig, namespace, host, state).start()
    try:
        put_configset(
            api_client,
            namespace,
            "steady",
            for_host(host, [{"path": str(steady), "content": "steady\n"}]),
        )
        applied(api_client, namespace, host, "steady")
        # A symlink goes to Ansible, so the execution after it runs inside ansible-playbook.
        put_configset(
            api_client,
            namespace,
            "slow",
            {
                **for_host(
                    host,
                    [
                        {
                            "path": str(tmp_path / "link"),
                            "ensure": "symlink",
                            "target": str(steady),
                        }
                    ],
                ),
                "executions": [
                    {
                        "command": "/bin/sh",
                        "args": ["-c", f"sleep 300; echo {marker}"],
                        "onEveryApply": True,
                    }
                ],
            },
        )
        shells = eventually(lambda: processes_with(marker), timeout=60, message="the slow run")
        playbooks = [p for p in processes_with("ansible-playbook") if str(state) in _cwd(p)]
        assert playbooks, "ansible-playbook runs in the agent's run dir"
        assert any((state / "runs").iterdir())
        started = time.monotonic()
        agent.proc.kill()
        agent.proc.wait()
        eventually(
            lambda: not any(running(p) for p in playbooks + shells),
            timeout=10,
            message="ansible-playbook and its command die with the agent",
        )
        measured("kill -9 to no ansible-playbook or command left", time.monotonic() - started)
        # What a killed native write leaves: a temporary file beside a declared file.
        leftover = steady.parent / f".{steady.name}.nm-tmp-abcd1234"
        leftover.write_text("half")
        assert any((state / "runs").iterdir()), "the killed run left its directory"
        custom(api_client).delete_namespaced_custom_object(
            GROUP, VERSION, namespace, "configsets", "slow"
        )
        started = time.monotonic()
        agent = Agent(kubeconfig, namespace, host, state).start()
        eventually(
            lambda: not any((state / "runs").iterdir()) and not leftover.exists(),
            timeout=30,
            message="leftovers removed at start",
        )
        measured("restart to leftovers removed", time.monotonic() - started)
        assert not processes_with(marker)
        assert "removed 1 run directories a previous agent left behind" in agent.log()
    finally:
        agent.stop()


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def test_event_driven_period_and_failure_backoff_make_no_storm(
    kubeconfig, api_client, namespace, host, tmp_path
):
    agent = Agent(
        kubeconfig, namespace, host, tmp_path / "state", "--drift-check-interval", "0"
    ).start()
    counter = tmp_path / "attempts"
    try:
        eventually(lambda: node(api_client, namespace, host), timeout=30, message="registered")
        custom(api_client).patch_namespaced_custom_object(
            GROUP, VERSION, namespace, "managednodes", host, {"spec": {"reconcilePeriod": "0s"}}
        )
        put_configset(
            api_client,
            namespace,
            "failing",
            {
                **for_host(host, []),
                "executions": [
                    {
                        "command": "/bin/sh",
                        "args": ["-c", f"echo x >> {counter}; exit 3"],
                        "onEveryApply": True,  # unsubscribed executions never run otherwise
                    }
                ],
            },
        )
        eventually(lambda: counter.exists(), timeout=60, message="first attempt")
        reconciles = agent.metric("nodemanager_reconcile_total")
        window = 40
        time.sleep(window)  # the measurement is what happens in this window
        attempts = len(counter.read_text().splitlines())
        reconciled = agent.metric("nodemanager_reconcile_total") - reconciles
        failed = [e for e in events_of(api_client, namespace, host) if e.reason == "ApplyFailed"]
        measured(f"attempts of a failing execution in {window} s (0s period)", attempts, "runs")
        measured(f"reconciles in {window} s", reconciled, "reconciles")
        measured("ApplyFailed Event objects", len(failed), "events")
        measured("their count", sum(e.count or 0 for e in failed), "repeats")
        assert 2 <= attempts <= 7  # backed off (2.5-5 s, 5-10 s, 10-20 s …), not every few seconds
        assert reconciled <= 10
        assert len(failed) == 1  # one Event, counted (its last patch may still be on its way)
        assert attempts - 1 <= failed[0].count <= attempts
        assert "exited 3" in entry(node(api_client, namespace, host), "failing")["error"]
    finally:
        agent.stop()


def test_a_stuck_worker_fails_healthz_and_stops_renewing_its_lease(
    kubeconfig, api_client, namespace, host, tmp_path
):
    agent = Agent(
        kubeconfig, namespace, host, tmp_path / "state", "--reconcile-timeout", "3s"
    ).start()
    leases = client.CoordinationV1Api(api_client)

    def renewed():
        items = leases.list_namespaced_lease(namespace, field_selector=f"metadata.name={host}")
        return items.items and items.items[0].spec.renew_time

    try:
        first = eventually(renewed, timeout=30, message="lease renewed")
        assert agent.get("/healthz", agent.health_port) == 200
        # A command that runs long keeps the worker in one reconcile (natively: no Ansible).
        put_configset(
            api_client,
            namespace,
            "long",
            {
                **for_host(host, []),
                "executions": [{"command": "/bin/sleep", "args": ["40"], "onEveryApply": True}],
            },
        )
        started = time.monotonic()
        eventually(
            lambda: agent.get("/healthz", agent.health_port) == 500,
            timeout=30,
            message="/healthz fails while the reconcile runs past the limit",
        )
        measured(
            "/healthz failing after the reconcile started (3 s limit)", time.monotonic() - started
        )
        stuck_at = renewed()
        time.sleep(12)  # more than one Lease period (10 s): it must not move meanwhile
        assert renewed() == stuck_at and stuck_at >= first
        assert "not renewing the Lease" in agent.log()
        command = children(agent.proc.pid)
        assert command, "the long command runs as the agent's child"
        started = time.monotonic()
        agent.signal(signal.SIGTERM)
        agent.proc.wait(30)
        took = time.monotonic() - started
        measured("SIGTERM to exit while a command runs in the worker", took)
        assert took <= 10
        eventually(lambda: not any(running(p) for p in command), timeout=5, message="no command")
    finally:
        agent.stop()
