"""pacman for real: install, re-apply, upgrade (latest) and removal against a local repository,
through `nodemanager apply --os arch` (community.general.pacman), isolated in a mount namespace."""

import pytest

from tests.integration.helpers import nm, write_configsets
from tests.integration.pacman_repo import PACKAGE

pytestmark = pytest.mark.ansible


def apply(tmp_path, env, package):
    cfg = write_configsets(
        tmp_path / "pkgs.yaml", {"name": "pkgs", "spec": {"selector": {}, "packages": [package]}}
    )
    result = nm("apply", "--os", "arch", "-f", str(cfg), prefix=env.prefix)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_install_reapply_upgrade_remove(tmp_path, pacman_repo, pacman_env):
    assert "1 changed" in apply(tmp_path, pacman_env, {"name": PACKAGE})
    assert pacman_env.query() == "1.0-1" and pacman_env.payload() == "1.0"

    assert "0 changed" in apply(tmp_path, pacman_env, {"name": PACKAGE})

    pacman_repo.publish("1.1-1")
    assert "0 changed" in apply(
        tmp_path, pacman_env, {"name": PACKAGE}
    )  # installed: a newer one is not wanted
    assert pacman_env.query() == "1.0-1"
    assert "1 changed" in apply(tmp_path, pacman_env, {"name": PACKAGE, "ensure": "latest"})
    assert pacman_env.query() == "1.1-1" and pacman_env.payload() == "1.1"

    assert "1 changed" in apply(tmp_path, pacman_env, {"name": PACKAGE, "ensure": "absent"})
    assert pacman_env.query() is None and pacman_env.payload() is None


def test_missing_package_fails_with_pacman_message(tmp_path, pacman_repo, pacman_env):
    cfg = write_configsets(
        tmp_path / "pkgs.yaml",
        {"name": "pkgs", "spec": {"selector": {}, "packages": [{"name": "nmtest-nope"}]}},
    )
    result = nm("apply", "--os", "arch", "-f", str(cfg), prefix=pacman_env.prefix)
    assert result.returncode == 1
    assert "failed package:nmtest-nope:" in result.stdout
    assert pacman_env.query("nmtest-nope") is None
