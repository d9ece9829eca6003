"""`systemctl reload nodemanager` in a booted systemd whose root has no procps (a minimal Debian,
as the .deb's dependencies leave it): the unit's own ExecReload line (deploy/nodemanager.service)
must deliver SIGHUP to the main process. It ran /bin/kill, which is procps's: the reload
failed with "No such file or directory" there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.helpers import eventually
from tests.integration.machines import Machine

pytestmark = [pytest.mark.ansible, pytest.mark.machine]

UNIT = Path(__file__).resolve().parents[2] / "deploy" / "nodemanager.service"
LOG = "/run/nmreload.log"
# A stand-in main process that records each SIGHUP (the agent reconciles on it).
STAND_IN = (
    f'/bin/sh -c \'trap "echo hup >> {LOG}" HUP; echo up >> {LOG}; '
    "while :; do sleep 1 & wait $!; done'"
)


@pytest.fixture
def machine(tmp_path):
    booted = Machine("systemd", tmp_path).start()
    yield booted
    booted.stop()


def test_reload_signals_the_main_process_without_procps(machine):
    (reload_line,) = [
        line for line in UNIT.read_text().splitlines() if line.startswith("ExecReload=")
    ]
    assert not machine.path("/bin/kill").exists() and not machine.path("/usr/bin/kill").exists()
    unit = f"[Service]\nExecStart={STAND_IN}\n{reload_line}\n"
    machine.path("/etc/systemd/system/nmreload.service").write_text(unit)
    assert machine.run("systemctl", "daemon-reload").returncode == 0
    started = machine.run("systemctl", "start", "nmreload")
    assert started.returncode == 0, started.stderr
    log = machine.path(LOG)
    eventually(lambda: log.exists() and "up" in log.read_text(), 60, message="the stand-in up")

    reloaded = machine.run("systemctl", "reload", "nmreload")
    assert reloaded.returncode == 0, reloaded.stderr
    eventually(
        lambda: log.read_text().split().count("hup") == 1, 60, message="SIGHUP in the main process"
    )
    active = machine.run("systemctl", "is-active", "nmreload").stdout.strip()
    assert active == "active"  # signalled, not killed
