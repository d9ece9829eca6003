"""Package lists mean what one task per package means, with real apt: the same cases as the
pacman differential (tests/integration/package_cases.py), a virtual name in place of a group,
each side a booted Debian machine whose only apt source is the test's repository. The fast
path against every task through Ansible and against plain ansible-playbook on the render
output: packages, versions, dpkg states, automatic marks, payload and every task's status."""

from __future__ import annotations

import pytest

from nodemanager.executor import config
from nodemanager.playbook.dump import to_yaml
from tests.integration.apt_repo import build_deb
from tests.integration.machines import Machine
from tests.integration.package_cases import APT_CASES, DEBS, apply_in, configsets, plan_of

pytestmark = [pytest.mark.ansible, pytest.mark.machine, pytest.mark.timeout(2400)]


def _state(m: Machine) -> dict:
    def out(*argv: str) -> list[str]:
        return sorted(m.run(*argv).stdout.splitlines())

    listed = out("dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Status}\\n", "nmt-*")
    return {
        "packages": listed,
        "auto": out("apt-mark", "showauto"),
        "payload": out("find", "/opt/nmtest"),
    }


def _ok(proc) -> None:
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_apt_lists_mean_the_same_with_and_without_the_fast_path(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    for name, (depends, provides) in DEBS.items():
        build_deb(repo, "1.0", name=name, depends=depends, provides=provides)
    machines = {}
    try:
        for side in ("fast", "slow", "plain"):
            (tmp_path / side).mkdir()
            m = machines[side] = Machine("systemd", tmp_path).start()
            m.path("/etc/apt/sources.list").write_text(f"deb [trusted=yes] file:{repo} ./\n")
            _ok(m.run("apt-get", "update"))
            before = [n for c in APT_CASES for n in c.before]
            _ok(m.run("apt-get", "install", "-y", "-q", *before))
        build_deb(repo, "1.1", name="nmt-l1")  # latest has something to do
        for m in machines.values():
            _ok(m.run("apt-get", "update"))
        sets = {s: configsets(APT_CASES, tmp_path / s) for s in machines}
        fast = apply_in(machines["fast"].run, sets["fast"], True, "debian")
        slow = apply_in(machines["slow"].run, sets["slow"], False, "debian")

        assert _state(machines["fast"]) == _state(machines["slow"])

        def reports(results, side):
            root = str(tmp_path / side)
            return {r["task"].replace(root, "<root>"): r["status"] for r in results}

        assert reports(fast, "fast") == reports(slow, "slow")
        by_task = {r["task"].split(" | ")[-1]: r for r in fast}
        assert by_task["package nmt-i1"]["module"] == "probe"
        assert by_task["package nmt-nope"]["status"] == "failed"
        assert by_task["package nmt-d2"]["status"] == "ok"  # came with nmt-d1
        assert by_task["package nmt-q1"]["status"] == "ok"  # went with nmt-q2
        assert by_task["file " + str(tmp_path / "fast" / "after")]["module"] == "native"

        m = machines["plain"]
        private = config.private_dir(str(tmp_path / "run"))
        (private / "main.yml").write_text(to_yaml(plan_of(sets["plain"], "debian").playbook))
        env = [f"{k}={v}" for k, v in config.envvars(private).items()]
        playbook = [f"{config.ansible_bin_dir()}/ansible-playbook", "-i", "localhost,"]
        _ok(m.run("env", *env, *playbook, str(private / "main.yml"), timeout=900))
        assert _state(m) == _state(machines["fast"])
    finally:
        for m in machines.values():
            m.stop()
