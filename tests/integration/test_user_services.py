"""services[].user for real: a systemd user service of a user in a booted systemd machine,
started, enabled and restarted in that user's manager (never the system's), via `nodemanager
apply`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.helpers import NODEMANAGER, write_configsets
from tests.integration.machines import Machine

pytestmark = [pytest.mark.ansible, pytest.mark.machine]

HOME = "/home/nmuser"
UNIT_DIR = f"{HOME}/.config/systemd/user"
CONF = f"{HOME}/app.conf"
STARTS = f"{HOME}/starts"
UNIT = (
    "[Unit]\nDescription=nodemanager user service test\n\n[Service]\n"
    f"ExecStart=/bin/sh -c 'echo started >> {STARTS}; exec sleep infinity'\n\n"
    "[Install]\nWantedBy=default.target\n"
)


def configset(path: Path, conf: str) -> Path:
    owned = {"owner": "nmuser", "group": "nmuser"}
    dirs = [f"{HOME}/.config", f"{HOME}/.config/systemd", UNIT_DIR]
    return write_configsets(
        path,
        {
            "name": "user-svc",
            "spec": {
                "selector": {},
                "files": [
                    *({"path": d, "ensure": "directory", **owned} for d in dirs),
                    {"path": f"{UNIT_DIR}/app.service", "content": UNIT, **owned},
                    {"path": CONF, "content": conf, **owned},
                ],
                "services": [
                    {
                        "name": "app",
                        "user": "nmuser",
                        "ensure": "running",
                        "enable": True,
                        "subscribe_files": [CONF],
                    }
                ],
            },
        },
    )


def systemctl_user(m: Machine, *args: str) -> str:
    uid = m.run("id", "-u", "nmuser").stdout.strip()
    env = f"XDG_RUNTIME_DIR=/run/user/{uid}"
    return m.run("runuser", "-u", "nmuser", "--", "env", env, "systemctl", "--user", *args).stdout


def starts(m: Machine) -> int:
    p = m.path(STARTS)
    return len(p.read_text().splitlines()) if p.exists() else 0


def test_user_service_started_enabled_and_restarted_in_the_users_manager(tmp_path):
    m = Machine("systemd", tmp_path).start()
    try:
        assert m.run("useradd", "-m", "-s", "/bin/sh", "nmuser").returncode == 0
        first = m.run(NODEMANAGER, "apply", "-f", str(configset(tmp_path / "cs.yaml", "v1")))
        assert first.returncode == 0, first.stdout + first.stderr
        assert systemctl_user(m, "is-active", "app").strip() == "active"
        assert systemctl_user(m, "is-enabled", "app").strip() == "enabled"
        assert m.run("systemctl", "is-active", "app").stdout.strip() != "active"  # not system's
        assert m.path("/var/lib/systemd/linger/nmuser").exists()  # runs without a login
        assert starts(m) == 1

        again = m.run(NODEMANAGER, "apply", "-f", str(configset(tmp_path / "cs.yaml", "v1")))
        assert again.returncode == 0, again.stdout + again.stderr
        assert starts(m) == 1  # nothing changed: no restart

        changed = m.run(NODEMANAGER, "apply", "-f", str(configset(tmp_path / "cs.yaml", "v2")))
        assert changed.returncode == 0, changed.stdout + changed.stderr
        assert starts(m) == 2  # the subscribed file changed: restarted in the user's manager
        assert systemctl_user(m, "is-active", "app").strip() == "active"
    finally:
        m.stop()
