"""apk for real: `nodemanager apply` on a host whose os-release says alpine, through
community.general.apk and apk-tools 2.14 (built from ../shared/vendor), each host its own root
in a private mount namespace (tests/integration/apk_repo.py): install, re-apply, upgrade,
removal, a dependency chain, a provider, a missing package and a failing install script."""

from __future__ import annotations

import pytest

from tests.integration.apk_repo import FAILING, PACKAGE, ApkEnv, ApkRepo
from tests.integration.helpers import nm, write_configsets

pytestmark = pytest.mark.ansible


def apply(tmp_path, env: ApkEnv, *sets: tuple[str, list[dict]], fast: bool = True):
    """Apply one ConfigSet per (name, packages); the CLI's stdout, its exit status."""
    cfg = write_configsets(
        tmp_path / "pkgs.yaml",
        *(
            {"name": name, "spec": {"selector": {}, "packages": packages}}
            for name, packages in sets
        ),
    )
    argv = ["apply", "-f", str(cfg), "--state-dir", str(tmp_path / "state")]
    result = nm(*argv, *([] if fast else ["--no-fast-path"]), prefix=env.prefix)
    return result.stdout + result.stderr, result.returncode


def test_install_reapply_upgrade_remove(tmp_path, apk_repo: ApkRepo, apk_env: ApkEnv):
    out, rc = apply(tmp_path, apk_env, ("pkgs", [{"name": PACKAGE}]))
    assert rc == 0 and "pkgs: 0 ok, 1 changed, 0 failed" in out, out
    assert apk_env.query() == "1.0-r0" and apk_env.payload() == "1.0"
    assert PACKAGE in apk_env.world()

    out, rc = apply(tmp_path, apk_env, ("pkgs", [{"name": PACKAGE}]))
    assert rc == 0 and "pkgs: 1 ok, 0 changed, 0 failed" in out, out

    apk_repo.publish("1.1-r0")
    out, rc = apply(tmp_path, apk_env, ("pkgs", [{"name": PACKAGE}]))
    assert "pkgs: 1 ok, 0 changed" in out, out  # installed: a newer one is not wanted
    assert apk_env.query() == "1.0-r0"
    out, rc = apply(tmp_path, apk_env, ("pkgs", [{"name": PACKAGE, "ensure": "latest"}]))
    assert rc == 0 and "pkgs: 0 ok, 1 changed" in out, out
    assert apk_env.query() == "1.1-r0" and apk_env.payload() == "1.1"
    out, rc = apply(tmp_path, apk_env, ("pkgs", [{"name": PACKAGE, "ensure": "latest"}]))
    assert rc == 0 and "pkgs: 1 ok, 0 changed" in out, out

    out, rc = apply(tmp_path, apk_env, ("pkgs", [{"name": PACKAGE, "ensure": "absent"}]))
    assert rc == 0 and "pkgs: 0 ok, 1 changed" in out, out
    assert apk_env.query() is None and apk_env.payload() is None
    assert PACKAGE not in apk_env.world()


def test_dependencies_provider_missing_and_failing_script(tmp_path, apk_repo, apk_env):
    apk_repo.publish("1.0-r0", name="nmt-c1", depends=("nmt-c2",))
    apk_repo.publish("1.0-r0", name="nmt-c2", depends=("nmt-c3",))
    apk_repo.publish("1.0-r0", name="nmt-c3")
    apk_repo.publish("1.0-r0", name="nmt-p1", provides=("nmt-virt=1.0",))
    apk_repo.publish("1.0-r0", name="nmt-pa", depends=("nmt-virt",))
    apk_repo.publish("1.0-r0", name="nmt-bad", scripts={"pre-install": FAILING})

    out, rc = apply(
        tmp_path,
        apk_env,
        ("chain", [{"name": "nmt-c1"}]),
        ("provider", [{"name": "nmt-pa"}, {"name": "nmt-virt"}]),
        ("missing", [{"name": "nmt-nope"}]),
        ("after", [{"name": PACKAGE}]),
    )
    assert rc == 1, out
    # The chain comes with its head; only the head is in the world.
    assert {"nmt-c1", "nmt-c2", "nmt-c3"} <= set(apk_env.installed())
    assert "nmt-c2" not in apk_env.world()
    # A name only provided: the provider is installed, and the world keeps the name asked for.
    assert "nmt-p1" in apk_env.installed() and "nmt-virt" in apk_env.world()
    assert "chain: 0 ok, 1 changed, 0 failed" in out
    assert "provider: 0 ok, 2 changed, 0 failed" in out
    # The missing name fails with apk's own words; the names around it are in.
    assert "missing: 0 ok, 0 changed, 1 failed" in out
    assert "failed package:nmt-nope: failed to install ['nmt-nope']" in out
    assert "after: 0 ok, 1 changed, 0 failed" in out
    assert apk_env.query("nmt-nope") is None and apk_env.query() == "1.0-r0"

    out, rc = apply(tmp_path, apk_env, ("chain", [{"name": "nmt-c1"}, {"name": "nmt-virt"}]))
    assert rc == 0 and "chain: 2 ok, 0 changed" in out, out

    # An install script that fails: apk installs the files, marks the package broken and
    # fails; so does the module, saying so.
    out, rc = apply(tmp_path, apk_env, ("bad", [{"name": "nmt-bad"}]))
    assert rc == 1 and "bad: 0 ok, 0 changed, 1 failed" in out, out
    assert "failed package:nmt-bad: failed to install ['nmt-bad']" in out
