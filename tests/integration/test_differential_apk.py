"""Package steps mean what one task per package means, with real apk (apk-tools 2.14 from
../shared/vendor, each side an Alpine root of its own: tests/integration/apk_repo.py): the fast
path against every task through Ansible's community.general.apk, and against plain
ansible-playbook on the render output. apk's database (every installed package, stanza by
stanza, with its broken-script mark), its world file, the payload and every task's status and
message must be identical, on the first apply and on the second."""

from __future__ import annotations

import os
import subprocess

import pytest

from nodemanager.executor import config
from nodemanager.playbook.dump import to_yaml
from tests.integration.apk_repo import FAILING, ApkEnv, make_env, make_repo
from tests.integration.package_cases import (
    APK_CASES,
    NATIVE,
    apply_in,
    configsets,
    plan_of,
    reports,
)

pytestmark = [pytest.mark.ansible, pytest.mark.timeout(1800)]


def _side(tmp_path, repo, name) -> ApkEnv:
    (tmp_path / name).mkdir()
    env = make_env(tmp_path / name, repo)
    before = [n for c in APK_CASES for n in c.before]
    done = env.run("apk", "add", *before)
    assert done.returncode == 0, done.stdout + done.stderr
    return env


def test_apk_means_the_same_with_and_without_the_fast_path(tmp_path):
    repo = make_repo(tmp_path)
    for name, (depends, provides, fails) in NATIVE.items():
        repo.publish(
            "1.0-r0",
            name=name,
            depends=depends,
            provides=tuple(f"{p}=1.0" for p in provides),  # apk picks a versioned provider
            scripts={"pre-install": FAILING} if fails else None,
        )
    sides = {name: _side(tmp_path, repo, name) for name in ("fast", "slow", "plain")}
    repo.publish("1.1-r0", name="nmt-l1")  # installed at 1.0: latest has something to do
    sets = {n: configsets(APK_CASES, tmp_path / n) for n in sides}
    fast = apply_in(sides["fast"].run, sets["fast"], True, "alpine")
    slow = apply_in(sides["slow"].run, sets["slow"], False, "alpine")

    assert sides["fast"].state() == sides["slow"].state()
    assert reports(fast, tmp_path / "fast") == reports(slow, tmp_path / "slow")
    by_task = {r["task"].split(" | ")[-1]: r for r in fast}
    # What the world file answers is not asked of the module; what follows runs natively.
    assert by_task["package nmt-i1"]["module"] == "probe"
    assert by_task["file " + str(tmp_path / "fast" / "after")]["module"] == "native"
    assert by_task["package nmt-nope"]["status"] == "failed"
    assert by_task["package nmt-b1"]["status"] == "failed"  # needs what no repository has
    assert by_task["package nmt-bad"]["status"] == "failed"  # its install script failed
    # A dependency installed with an earlier name is not in the world: its own task adds it.
    assert by_task["package nmt-d2"]["status"] == "changed"
    assert by_task["package nmt-virt"]["status"] == "changed"
    # Removing a dependency still needed fails (apk keeps it); removing its dependant then
    # takes both away.
    assert by_task["package nmt-q2"]["status"] == "failed"
    assert "nmt-q2" not in sides["fast"].installed()

    # Plain ansible-playbook on the render output ends in the same state.
    env = sides["plain"]
    private = config.private_dir(str(tmp_path / "run"))
    (private / "main.yml").write_text(to_yaml(plan_of(sets["plain"], "alpine").playbook))
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
    again = apply_in(sides["fast"].run, sets["fast"], True, "alpine")
    again_slow = apply_in(sides["slow"].run, sets["slow"], False, "alpine")
    assert reports(again, tmp_path / "fast") == reports(again_slow, tmp_path / "slow")
    assert sides["fast"].state() == sides["slow"].state()
    to_module = sorted(
        r["task"].split(" | ")[-1] for r in again if r["module"] not in ("probe", "native")
    )
    assert to_module == ["package nmt-b1", "package nmt-l1", "package nmt-nope"]
