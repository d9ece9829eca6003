"""Package lists mean what one task per package means: real pacman, the fast path (names the
manager reports installed answered natively, the rest in as few module calls as their meaning
allows) against every task through Ansible, and against plain ansible-playbook on the render
output. Installed packages, their versions, install reasons and payload, and every task's
status and diff must be identical; the fast path goes on natively after the packages."""

from __future__ import annotations

import os
import subprocess

import pytest

from nodemanager.executor import config
from nodemanager.playbook.dump import to_yaml
from tests.integration.package_cases import (
    CASES,
    apply_in,
    configsets,
    effects_in,
    plan_of,
    prepare,
    publish,
    state,
)
from tests.integration.pacman_repo import make_env, make_repo

pytestmark = [pytest.mark.ansible, pytest.mark.timeout(1800)]


def _side(tmp_path, repo, name):
    env = make_env(tmp_path / name, repo)
    prepare(env, CASES)
    return env


@pytest.fixture
def repo(tmp_path):
    r = make_repo(tmp_path)
    publish(r)
    return r


def _reports(results, root):
    return {r["task"].replace(str(root), "<root>"): (r["status"], r["diff"]) for r in results}


def test_packages_mean_the_same_with_and_without_the_fast_path(tmp_path, repo):
    sides = {}
    for name in ("fast", "slow", "plain"):
        (tmp_path / name).mkdir()
        sides[name] = _side(tmp_path, repo, name)
    repo.publish("1.1-1", name="nmt-l1")  # installed at 1.0: latest has something to do
    repo.publish("1.1-1", name="nmt-lg")  # its groups only installed now
    sets = {n: configsets(CASES, tmp_path / n) for n in sides}
    fast = apply_in(sides["fast"].run, sets["fast"], fast=True)
    slow = apply_in(sides["slow"].run, sets["slow"], fast=False)

    assert state(sides["fast"]) == state(sides["slow"])
    assert (tmp_path / "fast" / "after").read_text() == (tmp_path / "slow" / "after").read_text()
    assert _reports(fast, tmp_path / "fast") == _reports(slow, tmp_path / "slow")
    by_task = {r["task"].split(" | ")[-1]: r for r in fast}
    # What the manager answers is not asked of the module; what follows runs natively.
    assert by_task["package nmt-i1"]["module"] == "probe"
    assert by_task["package nmt-x1"]["module"] == "probe"
    assert by_task["file " + str(tmp_path / "fast" / "after")]["module"] == "native"
    assert by_task["execution /bin/true"]["module"] == "native"
    # A name that is not in the repository fails on its own, saying why; its neighbours are in.
    assert by_task["package nmt-nope"]["status"] == "failed"
    assert "nmt-nope" in by_task["package nmt-nope"]["message"]
    assert {by_task[f"package nmt-{n}"]["status"] for n in ("f1", "f2", "m1", "x2")} == {"changed"}
    assert by_task["package nmt-d2"]["status"] == "ok"  # came with nmt-d1
    assert by_task["package nmt-c3"]["status"] == "ok"  # came with nmt-c1, through nmt-c2
    assert by_task["package nmt-q2"]["status"] == "failed"  # nmt-q1 still needed it
    assert by_task["package nmt-b1"]["status"] == "failed"  # needs what no repository has
    assert by_task["package nmt-lgrp-a"]["module"] == "probe"  # an installed group: no package
    # Which names failed and why: the module's own words, as each name's own task says them.
    slow_by_task = {r["task"].split(" | ")[-1]: r for r in slow}
    failed = {t: r["message"] for t, r in by_task.items() if r["status"] == "failed"}
    assert failed == {t: slow_by_task[t]["message"] for t in failed}
    assert {by_task[f"package nmt-{n}"]["status"] for n in ("b0", "b2", "e1")} == {"changed"}
    # Lists where they mean the same; a provider choice keeps each name's own task.
    in_lists = {t for t, r in by_task.items() if r["message"].startswith("in one ")}
    assert {"package nmt-m1", "package nmt-d1", "package nmt-c1", "package nmt-b0"} <= in_lists
    assert not in_lists & {f"package nmt-{n}" for n in ("pa", "p2", "p4", "pb")}

    # Plain ansible-playbook on the render output ends in the same state.
    env = sides["plain"]
    private = config.private_dir(str(tmp_path / "run"))
    (private / "main.yml").write_text(to_yaml(plan_of(sets["plain"]).playbook))
    proc = subprocess.run(
        [
            *env.prefix,
            f"{config.ansible_bin_dir()}/ansible-playbook",
            "-i",
            "localhost,",
            str(private / "main.yml"),
        ],
        env={**os.environ, **config.envvars(private)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert state(env) == state(sides["fast"])

    # Again: nothing changes (but nmt-q2, which nmt-q1 no longer needs: as through Ansible),
    # and no package reaches the module but the ones that fail, the group and latest.
    again = apply_in(sides["fast"].run, sets["fast"], fast=True)
    changed = [
        r["task"] for r in again if r["status"] == "changed" and "execution" not in r["task"]
    ]
    assert changed == ["ConfigSet absent-dependency | package nmt-q2"]
    to_module = sorted(
        r["task"].split(" | ")[-1] for r in again if r["module"] not in ("probe", "native")
    )
    failing = ["package nmt-b1", "package nmt-lgrp-p", "package nmt-nope", "package nmt-q2"]
    assert to_module == sorted([*failing, "package nmt-grp", "package nmt-l1"])


# Runs of names of one state as the plan walks them: the first with a missing name among
# installed and missing ones, then dependencies listed after their dependants, then providers.
RUNS = [
    ["nmt-m1", "nmt-x2", "nmt-x3", "nmt-f1", "nmt-nope", "nmt-f2", "nmt-e1"],
    ["nmt-d1", "nmt-d2", "nmt-c1", "nmt-c3"],
    ["nmt-c3", "nmt-c2", "nmt-c1"],
    ["nmt-pa", "nmt-p2", "nmt-p4", "nmt-pb"],
    ["nmt-p3", "nmt-pb"],
    ["nmt-b0", "nmt-b1", "nmt-b2"],
]


def test_one_dry_run_answers_what_each_names_own_does(tmp_path, repo):
    """pacman's one question for a run of names (a dry run of them all, their dependencies
    read once) gives each name exactly its own dry run's answer, or leaves it to it."""
    (tmp_path / "side").mkdir()
    env = _side(tmp_path, repo, "side")
    answered = {}
    for names in RUNS:
        got = effects_in(env.run, names)
        for name, effect in got["batched"].items():
            assert effect == got["alone"][name], name
        answered[names[0]] = sorted(got["batched"])
    # A name the repository lacks is answered (it fails) and so are the others beside it.
    assert answered["nmt-m1"] == sorted(RUNS[0])
    assert answered["nmt-d1"] == sorted(RUNS[1]) and answered["nmt-c3"] == sorted(RUNS[2])
    # A dependency a provider stands for: pacman may choose differently for a list.
    assert answered["nmt-pa"] == [] and answered["nmt-p3"] == []
    # A dependency no repository has: each name's own dry run says which name fails.
    assert answered["nmt-b0"] == []
