"""Scheduled OS upgrades for real: two agents in one booted Debian machine whose only apt source
is a local repository that gains a newer version of an installed package. Schedule: every
minute. The hold annotation stops them; without it the package is upgraded with apt's
full-upgrade, the upgrade marks a reboot required, the agent reboots (a reboot command that
records the reboot and stops the agent, since two agents share this volatile machine; the real
reboot is scenario 8 of tests/e2e), comes back, releases the group Lease and reports
lastUpgrade; the Lease's holder history shows the two agents never upgraded at the same time."""

from __future__ import annotations

import threading
import time

import pytest
from kubernetes import client, watch

from tests.cluster.helpers import eventually
from tests.cluster.machine_agents import MachineAgent, portable_kubeconfig
from tests.cluster.test_daemon import GROUP, VERSION, condition, node
from tests.integration.machines import Machine
from tests.integration.test_apt import PACKAGE, build_deb

pytestmark = [pytest.mark.cluster, pytest.mark.ansible, pytest.mark.machine]
HOSTS = ("up-a", "up-b")
HOLD = "upgrade.nodemanager/hold"
# What the test package installs (tests/integration/apt_repo.py: /opt/nmtest/<name>/VERSION).
PAYLOAD = f"/opt/nmtest/{PACKAGE}/VERSION"
# Stands in for `systemctl reboot`: /run is emptied by a reboot, and the agent stops.
FAKE_REBOOT = """#!/bin/sh
echo "$(date +%s) $1" >> /var/lib/nm-reboots
rm -f /run/reboot-required
kill -TERM $PPID
"""


def lease_history(api_client, namespace: str, stop: threading.Event, out: list) -> None:
    """Every (holder, acquireTime) the group Lease shows, in order."""
    api = client.CoordinationV1Api(api_client)
    while not stop.is_set():
        try:
            for event in watch.Watch().stream(
                api.list_namespaced_lease, namespace, timeout_seconds=5
            ):
                lease = event["object"]
                if lease.metadata.name == "upgrades":
                    out.append((time.time(), lease.spec.holder_identity, lease.spec.acquire_time))
        except Exception:  # noqa: BLE001 (a broken watch is re-opened)
            time.sleep(0.5)


def test_scheduled_upgrade_hold_reboot_and_group(api_client, kubeconfig, namespace, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    build_deb(repo, "1.0")
    m = Machine("systemd", tmp_path).start()
    agents: dict[str, MachineAgent] = {}
    stop, history = threading.Event(), []
    watcher = threading.Thread(target=lease_history, args=(api_client, namespace, stop, history))
    watcher.start()
    custom = client.CustomObjectsApi(api_client)
    try:
        m.path("/etc/apt/sources.list").write_text(f"deb [trusted=yes] file:{repo} ./\n")
        assert m.run("apt-get", "update").returncode == 0
        assert m.run("apt-get", "install", "-y", PACKAGE).returncode == 0
        m.path("/usr/local/bin/fake-reboot").write_text(FAKE_REBOOT)
        m.path("/usr/local/bin/fake-reboot").chmod(0o755)
        kc = portable_kubeconfig(kubeconfig, tmp_path / "kubeconfig")

        def start(host: str) -> None:
            extra = ("--reboot-command", f"/usr/local/bin/fake-reboot {host}")
            agents[host] = MachineAgent(m, kc, namespace, host, *extra).start()

        for host in HOSTS:
            start(host)
        eventually(lambda: all(node(api_client, namespace, h) for h in HOSTS), timeout=120)
        upgrade = {"schedule": "* * * * *", "delay": "1h", "group": "upgrades"}
        for host in HOSTS:
            custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                "managednodes",
                host,
                {"metadata": {"annotations": {HOLD: "maintenance"}}, "spec": {"upgrade": upgrade}},
            )

        # 2.0 marks a reboot required, as a kernel package does.
        build_deb(repo, "2.0")
        deb = repo / f"{PACKAGE}_2.0_all.deb"
        assert deb.exists()
        # Every minute is due, and the agents look every 20 s: at least one look sees the hold.
        held_until = time.time() + 25
        while time.time() < held_until:
            assert m.path(PAYLOAD).read_text() == "1.0\n"
            time.sleep(1)
        for host in HOSTS:
            assert "lastUpgrade" not in (node(api_client, namespace, host).get("status") or {})

        m.path("/etc/apt/apt.conf.d/99reboot").write_text(
            'DPkg::Post-Invoke { "touch /run/reboot-required"; };\n'
        )
        for host in HOSTS:
            custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                "managednodes",
                host,
                {"metadata": {"annotations": {HOLD: None}}},
            )

        def rebooted() -> list[str]:
            p = m.path("/var/lib/nm-reboots")
            return [line.split()[1] for line in p.read_text().splitlines()] if p.exists() else []

        def come_back() -> None:
            for host in set(rebooted()):  # a "rebooted" agent starts again, as its service would
                if not agents[host].alive():
                    start(host)

        def reported() -> bool:
            come_back()
            for host in HOSTS:
                n = node(api_client, namespace, host)
                assert (n.get("status") or {}).get("lastUpgrade"), host
                up = condition(n, "Upgrading")
                assert (up.get("status"), up.get("reason")) == ("False", "Succeeded"), up
            return True

        eventually(reported, timeout=480, interval=1, message="both agents report lastUpgrade")
        assert m.path(PAYLOAD).read_text() == "2.0\n"
        # The first upgraded the package and rebooted; the second found nothing left to do.
        assert len(rebooted()) == 1, rebooted()
        leases = client.CoordinationV1Api(api_client)
        eventually(
            lambda: (
                leases.read_namespaced_lease("upgrades", namespace).spec.holder_identity is None
            ),
            timeout=60,
        )
        # The holder history: each agent held the Lease alone, one after the other.
        holders = [h for _, h, _ in history]
        runs = [h for i, h in enumerate(holders) if h and (i == 0 or holders[i - 1] != h)]
        assert sorted(runs) == sorted(HOSTS), history
        for i, h in enumerate(holders[1:], 1):
            assert not (h and holders[i - 1] and h != holders[i - 1]), (
                history
            )  # never handed over while held
    finally:
        stop.set()
        m.stop()
        for agent in agents.values():
            agent.stop()
        watcher.join(timeout=30)
