"""apt for real, on Debian: install, re-apply, upgrade (latest) and removal of a package from a
local repository built by the test, through `nodemanager apply` (ansible.builtin.apt) inside a
booted Debian machine whose only apt source is that repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.apt_repo import build_deb
from tests.integration.helpers import NODEMANAGER, write_configsets
from tests.integration.machines import Machine

pytestmark = [pytest.mark.ansible, pytest.mark.machine]
PACKAGE = "nmtest-hello"


@pytest.fixture
def debian(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    build_deb(repo, "1.0")
    m = Machine("systemd", tmp_path).start()
    try:
        m.path("/etc/apt/sources.list").write_text(f"deb [trusted=yes] file:{repo} ./\n")
        updated = m.run("apt-get", "update")
        assert updated.returncode == 0, updated.stdout + updated.stderr
        yield m, repo
    finally:
        m.stop()


def apply(m: Machine, tmp_path: Path, package: dict) -> str:
    cs = write_configsets(
        tmp_path / "pkgs.yaml", {"name": "pkgs", "spec": {"selector": {}, "packages": [package]}}
    )
    result = m.run(NODEMANAGER, "apply", "-f", str(cs))
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def status(m: Machine) -> str:
    """dpkg's word for the package: installed, config-files, or not-installed."""
    return (
        m.run("dpkg-query", "-W", "-f", "${db:Status-Status}", PACKAGE).stdout.strip()
        or "not-installed"
    )


def test_install_reapply_upgrade_remove_reinstall(debian, tmp_path):
    m, repo = debian
    assert "1 changed" in apply(m, tmp_path, {"name": PACKAGE})
    assert (
        status(m) == "installed"
        and m.path("/opt/nmtest/nmtest-hello/VERSION").read_text() == "1.0\n"
    )
    assert "0 changed" in apply(m, tmp_path, {"name": PACKAGE})

    build_deb(repo, "1.1")
    assert m.run("apt-get", "update").returncode == 0
    assert "0 changed" in apply(
        m, tmp_path, {"name": PACKAGE}
    )  # installed: a newer one is not wanted
    assert "1 changed" in apply(m, tmp_path, {"name": PACKAGE, "ensure": "latest"})
    assert m.path("/opt/nmtest/nmtest-hello/VERSION").read_text() == "1.1\n"

    # Removed, its conffile stays: dpkg still lists it (config-files), yet it is not installed.
    assert "1 changed" in apply(m, tmp_path, {"name": PACKAGE, "ensure": "absent"})
    assert status(m) == "config-files" and not m.path("/opt/nmtest/nmtest-hello/VERSION").exists()
    assert "0 changed" in apply(m, tmp_path, {"name": PACKAGE, "ensure": "absent"})
    assert "1 changed" in apply(m, tmp_path, {"name": PACKAGE})
    assert status(m) == "installed" and m.path("/opt/nmtest/nmtest-hello/VERSION").exists()
