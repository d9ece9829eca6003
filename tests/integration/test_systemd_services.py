"""Services for real: `nodemanager apply` inside a booted systemd (systemd-nspawn), no mocks.

Covers ansible.builtin.service on systemd (running/stopped, enable), restart on a subscribed
file change, an execution (daemon-reload) subscribed to the unit file, and the fast path's
systemd probe: an unchanged re-apply changes nothing and restarts nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.helpers import NODEMANAGER, write_configsets
from tests.integration.systemd_machine import Machine

pytestmark = [pytest.mark.ansible, pytest.mark.systemd]

UNIT = "/etc/systemd/system/nmtest.service"
CONF = "/etc/nmtest.conf"
STARTS = "/var/lib/nmtest-starts"


@pytest.fixture
def machine(tmp_path):
    m = Machine(tmp_path).start()
    yield m
    m.stop()


def configset(path: Path, *, conf: str, ensure: str = "running", enable: bool = True, unit_version: str = "1") -> Path:
    unit = ("[Unit]\nDescription=nodemanager test service " + unit_version + "\n\n[Service]\n"
            f"ExecStart=/bin/sh -c 'echo started >> {STARTS}; exec sleep infinity'\n\n"
            "[Install]\nWantedBy=multi-user.target\n")
    return write_configsets(path, {"name": "svc", "spec": {"selector": {}, "files": [
        {"path": UNIT, "content": unit, "mode": "0644"},
        {"path": CONF, "content": conf, "mode": "0644"},
    ], "services": [
        {"name": "nmtest", "ensure": ensure, "enable": enable, "subscribe_files": [CONF]},
    ], "executions": [
        {"command": "/bin/systemctl", "args": ["daemon-reload"], "subscribe_files": [UNIT]},
    ]}})


def apply(machine: Machine, cs: Path, *extra: str) -> str:
    result = machine.run(NODEMANAGER, "apply", *extra, "-f", str(cs))
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def state(machine: Machine) -> tuple[str, str, int]:
    active = machine.run("systemctl", "is-active", "nmtest").stdout.strip()
    enabled = machine.run("systemctl", "is-enabled", "nmtest").stdout.strip()
    starts = machine.path(STARTS)
    return active, enabled, len(starts.read_text().splitlines()) if starts.exists() else 0


def test_service_started_enabled_restarted_on_change_and_stopped(machine, tmp_path):
    cs = configset(tmp_path / "cs.yaml", conf="level = 1\n")
    assert "svc: 0 ok" in apply(machine, cs)
    assert state(machine) == ("active", "enabled", 1)

    # Nothing changed: nothing restarts, whichever path looks (fast path, then Ansible itself).
    assert "0 changed" in apply(machine, cs)
    assert "0 changed" in apply(machine, cs, "--no-fast-path")
    assert state(machine) == ("active", "enabled", 1)

    # The subscribed file changed: the service restarts once (two resources changed: file, service).
    cs = configset(tmp_path / "cs.yaml", conf="level = 2\n")
    assert "2 changed" in apply(machine, cs)
    assert machine.path(CONF).read_text() == "level = 2\n"
    assert state(machine) == ("active", "enabled", 2)

    # The unit changed: daemon-reload runs (systemd sees the new description); no restart is asked for.
    cs = configset(tmp_path / "cs.yaml", conf="level = 2\n", unit_version="2")
    apply(machine, cs)
    shown = machine.run("systemctl", "show", "-p", "Description,NeedDaemonReload", "nmtest").stdout
    assert "Description=nodemanager test service 2" in shown and "NeedDaemonReload=no" in shown
    assert state(machine)[2] == 2

    cs = configset(tmp_path / "cs.yaml", conf="level = 2\n", unit_version="2", ensure="stopped", enable=False)
    apply(machine, cs)
    assert state(machine) == ("inactive", "disabled", 2)
    assert "0 changed" in apply(machine, cs)


def test_service_drift_is_corrected(machine, tmp_path):
    cs = configset(tmp_path / "cs.yaml", conf="x\n")
    apply(machine, cs)
    machine.run("systemctl", "disable", "--now", "nmtest")
    assert state(machine)[:2] == ("inactive", "disabled")
    out = apply(machine, cs)
    assert "0 changed" not in out
    assert state(machine) == ("active", "enabled", 2)
