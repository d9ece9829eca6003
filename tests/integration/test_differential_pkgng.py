"""Package lists mean what one task per package means, with real pkg (FreeBSD's pkg 2.8 from
../shared/vendor, each side a rootdir of its own: tests/integration/pkg_repo.py): the fast path
(names pkg reports installed answered natively, the rest in as few module calls as pkg's dry
runs show to mean the same) against every task through Ansible's community.general.pkgng, and
against plain ansible-playbook on the render output. Installed packages with versions,
automatic marks and dependencies, the payload, and every task's status and failure message
must be identical, on the first apply and on the second."""

from __future__ import annotations

import os
import subprocess

import pytest

from nodemanager.executor import config
from nodemanager.playbook.dump import to_yaml
from tests.integration.package_cases import (
    NATIVE,
    PKG_CASES,
    apply_in,
    configsets,
    plan_of,
    reports,
)
from tests.integration.pkg_repo import FAILING, PkgEnv, make_env, make_repo

pytestmark = [pytest.mark.ansible, pytest.mark.timeout(1800)]


def _side(tmp_path, repo, name) -> PkgEnv:
    (tmp_path / name).mkdir()
    env = make_env(tmp_path / name, repo)
    before = [n for c in PKG_CASES for n in c.before]
    done = env.pkg("install", "-y", *before)
    assert done.returncode == 0, done.stdout + done.stderr
    return env


def test_pkgng_means_the_same_with_and_without_the_fast_path(tmp_path):
    repo = make_repo(tmp_path)
    for name, (depends, provides, fails) in NATIVE.items():
        repo.publish(
            "1.0",
            name=name,
            depends=depends,
            provides=provides,
            scripts={"pre-install": FAILING} if fails else None,
            catalogue=False,
        )
    repo.catalogue()
    sides = {name: _side(tmp_path, repo, name) for name in ("fast", "slow", "plain")}
    repo.publish("1.1", name="nmt-l1")  # installed at 1.0: latest has something to do
    sets = {n: configsets(PKG_CASES, tmp_path / n) for n in sides}
    fast = apply_in(sides["fast"].run, sets["fast"], True, "freebsd")
    slow = apply_in(sides["slow"].run, sets["slow"], False, "freebsd")

    assert sides["fast"].state() == sides["slow"].state()
    assert reports(fast, tmp_path / "fast") == reports(slow, tmp_path / "slow")
    by_task = {r["task"].split(" | ")[-1]: r for r in fast}
    # What `pkg info -e` answers is not asked of the module; what follows runs natively.
    assert by_task["package nmt-i1"]["module"] == "probe"
    assert by_task["file " + str(tmp_path / "fast" / "after")]["module"] == "native"
    # Not in the repository, needing what no repository has, a failing pre-install script
    # (pkg rolls that package back), a name only provided (pkg installs no provider by it):
    for failing in ("nmt-nope", "nmt-b1", "nmt-bad", "nmt-virt"):
        assert by_task[f"package {failing}"]["status"] == "failed", failing
    assert "nmt-bad" not in sides["fast"].installed()
    assert by_task["package nmt-d2"]["status"] == "ok"  # came with nmt-d1
    # Lists where pkg's dry runs show they mean the same: one pkg install for several names.
    in_lists = {t for t, r in by_task.items() if r["message"].startswith("in one ")}
    assert {"package nmt-m1", "package nmt-x2", "package nmt-d1", "package nmt-c1"} <= in_lists
    assert not in_lists & {f"package nmt-{n}" for n in ("nope", "b1", "virt", "l1")}

    # Plain ansible-playbook on the render output ends in the same state.
    env = sides["plain"]
    private = config.private_dir(str(tmp_path / "run"))
    (private / "main.yml").write_text(to_yaml(plan_of(sets["plain"], "freebsd").playbook))
    playbook = f"{config.ansible_bin_dir()}/ansible-playbook"
    proc = subprocess.run(
        [*env.prefix, playbook, "-i", "localhost,", str(private / "main.yml")],
        env={**os.environ, **config.envvars(private)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert env.state() == sides["fast"].state()

    # Again, both ways: the same reports, and no package reaches the module on the fast path
    # but those that fail and latest.
    again = apply_in(sides["fast"].run, sets["fast"], True, "freebsd")
    again_slow = apply_in(sides["slow"].run, sets["slow"], False, "freebsd")
    assert reports(again, tmp_path / "fast") == reports(again_slow, tmp_path / "slow")
    assert sides["fast"].state() == sides["slow"].state()
    to_module = sorted(
        r["task"].split(" | ")[-1] for r in again if r["module"] not in ("probe", "native")
    )
    failing = ["package nmt-b1", "package nmt-bad", "package nmt-nope", "package nmt-virt"]
    assert to_module == sorted([*failing, "package nmt-l1"])
