"""pkg for real: `nodemanager apply` on a host whose os-release says freebsd, through
community.general.pkgng and FreeBSD's pkg 2.8 (built from ../shared/vendor), each host its own
rootdir in a private mount namespace (tests/integration/pkg_repo.py): install, re-apply,
latest (which pkg 2.x and the module never upgrade), removal, reinstall at the newer version,
a dependency chain, a provider, a missing package and a failing install script."""

from __future__ import annotations

import pytest

from tests.integration.helpers import nm, write_configsets
from tests.integration.pkg_repo import FAILING, PACKAGE, PkgEnv, PkgRepo

pytestmark = pytest.mark.ansible


def apply(tmp_path, env: PkgEnv, *sets: tuple[str, list[dict]]):
    """Apply one ConfigSet per (name, packages); the CLI's output, its exit status."""
    cfg = write_configsets(
        tmp_path / "pkgs.yaml",
        *({"name": n, "spec": {"selector": {}, "packages": packages}} for n, packages in sets),
    )
    argv = ["apply", "-f", str(cfg), "--state-dir", str(tmp_path / "state")]
    result = nm(*argv, prefix=env.prefix)
    return result.stdout + result.stderr, result.returncode


def test_install_reapply_upgrade_remove(tmp_path, pkg_repo: PkgRepo, pkg_env: PkgEnv):
    out, rc = apply(tmp_path, pkg_env, ("pkgs", [{"name": PACKAGE}]))
    assert rc == 0 and "pkgs: 0 ok, 1 changed, 0 failed" in out, out
    assert pkg_env.query() == "1.0" and pkg_env.payload() == "1.0"

    out, rc = apply(tmp_path, pkg_env, ("pkgs", [{"name": PACKAGE}]))
    assert rc == 0 and "pkgs: 1 ok, 0 changed, 0 failed" in out, out

    pkg_repo.publish("1.1")
    out, rc = apply(tmp_path, pkg_env, ("pkgs", [{"name": PACKAGE}]))
    assert "pkgs: 1 ok, 0 changed" in out, out  # installed: a newer one is not wanted
    assert pkg_env.query() == "1.0"
    # latest: the module asks `pkg upgrade -n NAME` and expects exit status 1 when an upgrade
    # is there; pkg 2.x exits 0 either way (freebsd/pkg#2753, community.general#11907), so the
    # module, and with it nodemanager, reports ok and upgrades nothing. An upgrade comes
    # through `ensure: absent` and back, or an OS upgrade (spec.upgrade).
    assert pkg_env.pkg("upgrade", "-n", PACKAGE).returncode == 0
    out, rc = apply(tmp_path, pkg_env, ("pkgs", [{"name": PACKAGE, "ensure": "latest"}]))
    assert rc == 0 and "pkgs: 1 ok, 0 changed" in out, out
    assert pkg_env.query() == "1.0"

    out, rc = apply(tmp_path, pkg_env, ("pkgs", [{"name": PACKAGE, "ensure": "absent"}]))
    assert rc == 0 and "pkgs: 0 ok, 1 changed" in out, out
    assert pkg_env.query() is None and pkg_env.payload() is None
    out, rc = apply(tmp_path, pkg_env, ("pkgs", [{"name": PACKAGE}]))
    assert rc == 0 and "pkgs: 0 ok, 1 changed" in out, out
    assert pkg_env.query() == "1.1" and pkg_env.payload() == "1.1"


def test_dependencies_provider_missing_and_failing_script(tmp_path, pkg_repo, pkg_env):
    pkg_repo.publish("1.0", name="nmt-c3", catalogue=False)
    pkg_repo.publish("1.0", name="nmt-c2", depends=("nmt-c3",), catalogue=False)
    pkg_repo.publish("1.0", name="nmt-c1", depends=("nmt-c2",), catalogue=False)
    pkg_repo.publish("1.0", name="nmt-p1", provides=("nmt-virt",), catalogue=False)
    pkg_repo.publish("1.0", name="nmt-pa", requires=("nmt-virt",), catalogue=False)
    pkg_repo.publish("1.0", name="nmt-bad", scripts={"pre-install": FAILING})

    out, rc = apply(
        tmp_path,
        pkg_env,
        ("chain", [{"name": "nmt-c1"}]),
        ("provider", [{"name": "nmt-pa"}]),
        ("missing", [{"name": "nmt-nope"}]),
        ("after", [{"name": PACKAGE}]),
    )
    assert rc == 1, out
    installed = pkg_env.installed()
    # The chain comes with its head, the provider with the name that requires what it provides.
    assert {"nmt-c1", "nmt-c2", "nmt-c3", "nmt-pa", "nmt-p1"} <= set(installed), out
    assert "chain: 0 ok, 1 changed, 0 failed" in out
    assert "provider: 0 ok, 1 changed, 0 failed" in out
    # The missing name fails with the module's own words; the names around it are in.
    assert "missing: 0 ok, 0 changed, 1 failed" in out
    assert "failed package:nmt-nope: failed to install nmt-nope" in out
    assert "after: 0 ok, 1 changed, 0 failed" in out
    assert "nmt-nope" not in installed and installed[PACKAGE] == "1.0"

    out, rc = apply(tmp_path, pkg_env, ("chain", [{"name": "nmt-c1"}, {"name": "nmt-c3"}]))
    assert rc == 0 and "chain: 2 ok, 0 changed" in out, out

    out, rc = apply(tmp_path, pkg_env, ("bad", [{"name": "nmt-bad"}]))
    assert rc == 1 and "bad: 0 ok, 0 changed, 1 failed" in out, out
    assert "failed package:nmt-bad: failed to install nmt-bad" in out
    assert "nmt-bad" not in pkg_env.installed()
