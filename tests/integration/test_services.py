"""Services for real: `nodemanager apply` inside a booted systemd and a booted OpenRC, no mocks.

ansible.builtin.service on each init (running/stopped, enable), a restart when a subscribed file
changed (and none when this run started the service), an execution subscribed to the service
definition, drift corrected, and unchanged re-applies that change and restart nothing, through
the fast path and through Ansible alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.helpers import NODEMANAGER, write_configsets
from tests.integration.machines import Machine

pytestmark = [pytest.mark.ansible, pytest.mark.machine]

CONF = "/etc/nmtest.conf"
STARTS = "/var/lib/nmtest-starts"
RELOADS = "/var/lib/nmtest-reloads"


@dataclass(frozen=True)
class Init:
    name: str
    definition: str  # where the service is defined

    def define(self, version: str) -> str:
        if self.name == "systemd":
            return (
                f"[Unit]\nDescription=nodemanager test service {version}\n\n[Service]\n"
                f"ExecStart=/bin/sh -c 'echo started >> {STARTS}; exec sleep infinity'\n\n"
                "[Install]\nWantedBy=multi-user.target\n"
            )
        return (
            f"#!/sbin/openrc-run\ndescription='nodemanager test service {version}'\n"
            "command=/bin/sleep\ncommand_args=infinity\ncommand_background=true\npidfile=/run/nmtest.pid\n"
            f"start_pre() {{ echo started >> {STARTS}; }}\n"
        )

    def active(self, m: Machine) -> bool:
        if self.name == "systemd":
            return m.run("systemctl", "is-active", "--quiet", "nmtest").returncode == 0
        return m.run("rc-service", "nmtest", "status").returncode == 0

    def enabled(self, m: Machine) -> bool:
        if self.name == "systemd":
            return m.run("systemctl", "is-enabled", "nmtest").stdout.strip() == "enabled"
        return m.path(
            "/etc/runlevels/default/nmtest"
        ).is_symlink()  # its target is absolute, inside

    def break_it(self, m: Machine) -> None:
        if self.name == "systemd":
            m.run("systemctl", "disable", "--now", "nmtest")
        else:
            m.run("rc-service", "nmtest", "stop")
            m.run("rc-update", "del", "nmtest", "default")


INITS = [
    Init("systemd", "/etc/systemd/system/nmtest.service"),
    Init("openrc", "/etc/init.d/nmtest"),
]


@pytest.fixture(params=INITS, ids=lambda i: i.name)
def booted(request, tmp_path):
    machine = Machine(request.param.name, tmp_path).start()
    yield request.param, machine
    machine.stop()


def configset(
    path: Path,
    init: Init,
    *,
    conf: str,
    version: str = "1",
    ensure: str = "running",
    enable: bool = True,
) -> Path:
    return write_configsets(
        path,
        {
            "name": "svc",
            "spec": {
                "selector": {},
                "files": [
                    {"path": init.definition, "content": init.define(version), "mode": "0755"},
                    {"path": CONF, "content": conf, "mode": "0644"},
                ],
                "services": [
                    {
                        "name": "nmtest",
                        "ensure": ensure,
                        "enable": enable,
                        "subscribe_files": [CONF],
                    },
                ],
                # on systemd this would be daemon-reload; here it records that it ran
                "executions": [
                    {
                        "command": "/bin/sh",
                        "args": ["-c", f"echo reload >> {RELOADS}"],
                        "subscribe_files": [init.definition],
                    },
                ],
            },
        },
    )


def apply(machine: Machine, cs: Path, *extra: str) -> str:
    result = machine.run(NODEMANAGER, "apply", *extra, "-f", str(cs))
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def count(machine: Machine, path: str) -> int:
    return len(machine.path(path).read_text().splitlines()) if machine.path(path).exists() else 0


def test_service_started_enabled_restarted_on_change_and_stopped(booted, tmp_path):
    init, m = booted
    cs = configset(tmp_path / "cs.yaml", init, conf="level = 1\n")
    assert "svc: 0 ok" in apply(m, cs)
    assert init.active(m) and init.enabled(m)
    assert (
        count(m, STARTS) == 1
    )  # started once: the changed file does not restart what this run started
    assert count(m, RELOADS) == 1

    # Nothing changed: nothing restarts, whichever path looks (fast path, then Ansible alone).
    assert "0 changed" in apply(m, cs)
    assert "0 changed" in apply(m, cs, "--no-fast-path")
    assert count(m, STARTS) == 1 and count(m, RELOADS) == 1

    # The subscribed file changed: one restart (two resources changed: the file, the service).
    cs = configset(tmp_path / "cs.yaml", init, conf="level = 2\n")
    assert "2 changed" in apply(m, cs)
    assert m.path(CONF).read_text() == "level = 2\n"
    assert init.active(m) and count(m, STARTS) == 2

    # The definition changed: its subscribed execution runs; nothing asked for a restart.
    cs = configset(tmp_path / "cs.yaml", init, conf="level = 2\n", version="2")
    apply(m, cs)
    assert count(m, RELOADS) == 2 and count(m, STARTS) == 2

    cs = configset(
        tmp_path / "cs.yaml", init, conf="level = 2\n", version="2", ensure="stopped", enable=False
    )
    apply(m, cs)
    assert not init.active(m) and not init.enabled(m)
    assert "0 changed" in apply(m, cs)


def test_service_drift_is_corrected(booted, tmp_path):
    init, m = booted
    cs = configset(tmp_path / "cs.yaml", init, conf="x\n")
    apply(m, cs)
    init.break_it(m)
    assert not init.active(m) and not init.enabled(m)
    assert "0 changed" not in apply(m, cs)
    assert init.active(m) and init.enabled(m) and count(m, STARTS) == 2
