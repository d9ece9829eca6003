"""The fast path means what Ansible means: generated cases applied with and without it.

Every case (tests/integration/differential.py) gets two identical copies of its prior host
state; one is applied with the fast path, one with every task through Ansible. End states
(type, bytes, mode, uid/gid, xattrs, link target), per-task results and diffs, and the order of
execution and handler runs (a shared log) must be identical; a second run changes nothing. Cases
are batched, one ConfigSet each, into a few plans so the whole suite costs a few Ansible runs.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from nodemanager.executor import config
from nodemanager.executor.events import TaskResult, to_result
from nodemanager.executor.run import apply
from nodemanager.playbook import render
from nodemanager.playbook.dump import to_yaml
from nodemanager.playbook.plan import Plan
from tests.integration.differential import (
    BIG,
    HAVE_ACL,
    LITERAL_LINKS,
    Case,
    cases,
    plan_of,
    prepare,
    reports,
    state,
)

# Its 170+ cases cost a dozen Ansible runs of up to ~130 tasks each: 7 min 49 s (334 CPU
# seconds) on 2 vCPUs at load average 5-6, so about 6 min on a quiet machine.
pytestmark = [pytest.mark.ansible, pytest.mark.timeout(2400)]

ALL = cases()
CALLBACKS = Path(__file__).parent / "callbacks"


def test_enough_cases():
    assert len(ALL) >= 150


@pytest.mark.skipif(not HAVE_ACL, reason="no setfacl (Debian's acl package): ACL cases left out")
def test_acl_cases_are_in():
    assert sum(c.name.startswith("acl-") for c in ALL) >= 10


def _divergences(fast: dict, slow: dict) -> list[str]:
    keys = sorted(set(fast) | set(slow))
    return [
        f"{k}: fast {fast.get(k)!r} ansible {slow.get(k)!r}"
        for k in keys
        if fast.get(k) != slow.get(k)
    ]


def _run_both(batch: list[Case], base: Path, **kwargs) -> tuple[Path, Path, object, object]:
    fast_side, slow_side = base / "fast", base / "slow"
    prepare(batch, fast_side)
    prepare(batch, slow_side)
    assert state(fast_side) == state(slow_side)
    fast = apply(plan_of(batch, fast_side), **kwargs)
    slow = apply(plan_of(batch, slow_side), fast=False, **kwargs)
    return fast_side, slow_side, fast, slow


@pytest.mark.parametrize("native", [True, False], ids=["fast-path-cases", "ansible-cases"])
def test_apply_means_the_same_with_and_without_the_fast_path(tmp_path, native):
    batch = [c for c in ALL if c.native == native]
    fast_side, slow_side, fast, slow = _run_both(batch, tmp_path)
    assert slow.ansible and not slow.message
    problems = _divergences(state(fast_side), state(slow_side))
    problems += _divergences(reports(fast.results, fast_side), reports(slow.results, slow_side))
    assert problems == []
    # A second run changes nothing on either copy (executions always run; handlers do not),
    # but what an execution drifts on every run.
    drifting = [c for c in batch if c.drifts]
    for side in (fast_side, slow_side):
        before = state(side)
        again = apply(plan_of(batch, side))
        changed = [
            r.task
            for r in again.results
            if r.status == "changed"
            and not r.resource.startswith("execution:")
            and not any(f"/{c.name}/" in r.task for c in drifting)
        ]
        assert changed == []
        after = state(side)
        after.pop("log", None), before.pop("log", None)
        assert after == before


def test_check_and_diff_mean_the_same(tmp_path):
    # A quarter of the cases, plus every createOnly and Secret-fed one (what --check reports
    # for them differs most easily).
    sample = ALL[::4]
    batch = sample + [
        c
        for c in ALL
        if (c.secrets or c.name.startswith(("create-only", "diff-"))) and c not in sample
    ]
    fast_side, slow_side, fast, slow = _run_both(batch, tmp_path, check=True, diff=True)
    problems = _divergences(reports(fast.results, fast_side), reports(slow.results, slow_side))
    problems += _divergences(state(fast_side), state(slow_side))
    assert problems == []


def _spilled(case: Case) -> bool:
    """Content large enough for the executor to hand it to Ansible through a file."""
    return any(f.get("content") == BIG for part in case.parts for f in part.get("files", []))


# The classes of issue #26's held-out batch, each also run through plain ansible-playbook:
# background children, the environment, Secret-fed reporting, hard links, diffs of binary files.
CLASSES = ("x-background", "x-environment", "secret-ansible-", "hardlink-", "diff")


def _plain(plan: Plan, where: Path, *flags: str) -> list[TaskResult]:
    """``plan``'s render output run by plain ansible-playbook (with ``flags``), each task's
    outcome read as the executor reads ansible-runner's events (callbacks/nm_events.py)."""
    private = config.private_dir(str(where))
    (private / "main.yml").write_text(to_yaml(plan.exported, pretty=True))  # what render prints
    (private / "ansible.cfg").write_text(
        f"[defaults]\ncallback_plugins = {CALLBACKS}\ncallbacks_enabled = nm_events\n"
    )
    proc = subprocess.run(
        [f"{config.ansible_bin_dir()}/ansible-playbook", "-i", "localhost,", *flags, "main.yml"],
        cwd=private,
        env={**os.environ, **config.envvars(private)},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    events = [json.loads(line) for line in (private / "events.jsonl").read_text().splitlines()]
    return [r for r in (to_result(e, plan.origins) for e in events) if r is not None]


def _shown(results: Sequence[TaskResult], plan: Plan, side: Path) -> dict[str, tuple[str, str]]:
    """Status and diff per task, a file guard's stat and assert (render.guards) folded into its
    file's task as the agent folds them: the tasks plain ansible-playbook shows beyond the
    agent's are those of guards that passed, and nothing else."""
    guards = {
        name.format(task=s.task): s.task
        for s in plan.steps
        if s.kind in render.GUARDED
        for name in (render.GUARD_STAT, render.GUARD)
    }
    folded = [
        replace(r, task=guards[r.task]) if r.task in guards else r
        for r in results
        if r.task not in guards or r.status == "failed"
    ]
    return reports(folded, side)


def test_render_output_under_plain_ansible_playbook(tmp_path):
    # A sample, plus every large content left to Ansible: render prints it inline, so plain
    # ansible-playbook shows what `content` means where the executor's spill file must agree.
    sample = [c for c in ALL if not c.secrets][::12]
    spilled = [c for c in ALL if _spilled(c) and not c.native and c not in sample]
    classes = [c for c in ALL if c.name.startswith(CLASSES) and c not in sample]
    batch = sample + spilled[-2:] + classes  # a link in the way, and large-dir-in-the-way
    fast_side, plain_side = tmp_path / "fast", tmp_path / "plain"
    prepare(batch, fast_side)
    prepare(batch, plain_side)
    fast_plan, plain_plan = plan_of(batch, fast_side), plan_of(batch, plain_side)
    # --check --diff first (it changes nothing): what each task would do, and its diff text.
    fast = apply(fast_plan, check=True, diff=True)
    plain = _plain(plain_plan, tmp_path / "check", "--check", "--diff")
    shown = _shown(plain, plain_plan, plain_side)
    assert _divergences(_shown(fast.results, fast_plan, fast_side), shown) == []
    # Latin-1 bytes shown as U+FFFD, on both: the callback did read Ansible's diffs.
    assert any("caf\ufffd" in diff for _, diff in shown.values())
    fast = apply(fast_plan)
    plain = _plain(plain_plan, tmp_path / "run")
    problems = _divergences(state(fast_side), state(plain_side))
    problems += _divergences(
        _shown(fast.results, fast_plan, fast_side), _shown(plain, plain_plan, plain_side)
    )
    assert problems == []


def test_a_locale_that_is_not_installed_means_the_same(tmp_path, monkeypatch):
    # ansible-playbook refuses to start in it: the executor gives Ansible (and executions, in
    # both paths) C.UTF-8, so the fast path's native steps are never all that happens.
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_CTYPE", raising=False)
    monkeypatch.setenv("LANG", "xx_YY.UTF-8")
    names = ("h-split", "x-environment", "x-environment-ansible", "secret-ansible-behind-link")
    batch = [c for c in ALL if c.name in names]
    fast_side, slow_side, fast, slow = _run_both(batch, tmp_path)
    assert fast.ansible and not fast.failed and not slow.failed, (fast.message, slow.message)
    problems = _divergences(state(fast_side), state(slow_side))
    problems += _divergences(reports(fast.results, fast_side), reports(slow.results, slow_side))
    assert problems == []
    for name in ("x-environment", "x-environment-ansible"):
        assert "LC_ALL=C.UTF-8" in (fast_side / name / "env").read_text().splitlines()
    # The render output under plain ansible-playbook, in the environment the executor gives it.
    plain_side = tmp_path / "plain"
    prepare(batch, plain_side)
    plain_plan = plan_of(batch, plain_side)
    plain = _plain(plain_plan, tmp_path / "run")
    problems = _divergences(state(fast_side), state(plain_side))
    problems += _divergences(
        _shown(fast.results, plan_of(batch, fast_side), fast_side),
        _shown(plain, plain_plan, plain_side),
    )
    assert problems == []


def test_secret_fed_files_are_reported_as_ansible_did(tmp_path):
    # Censored (no_log) results carry no `changed`: a subscribed execution runs exactly when
    # Ansible changed the file, and the report must say the same, in both paths.
    batch = [c for c in ALL if c.name.startswith("secret-ansible-")]
    for fast in (True, False):
        side = tmp_path / str(fast)
        prepare(batch, side)
        result = apply(plan_of(batch, side), fast=fast)
        ran = (side / "log").read_text().split()
        for case in batch:
            name = case.name.removeprefix("secret-ansible-")
            path = f"file:{side}/{case.name}/s"
            (status,) = [r.status for r in result.results if r.resource == path]
            assert (status == "changed") == (f"{name}-handler" in ran), (case.name, fast)
        assert sorted(ran) == ["behind-link-handler", "changed-earlier-handler"]


def test_a_directory_in_the_way_of_a_file_fails_clearly(tmp_path):
    batch = [c for c in ALL if c.name.startswith("dir-in-the-way-")]
    for fast in (True, False):
        side = tmp_path / str(fast)
        prepare(batch, side)
        before = state(side)
        result = apply(plan_of(batch, side), fast=fast)
        assert [r.status for r in result.results] == ["failed"] * 4
        assert all("is a directory: ensure: file" in r.message for r in result.results)
        assert state(side) == before


def test_paths_and_link_targets_are_literal(tmp_path):
    # Ansible expands `$NAME` and a leading `~` in path parameters; a ConfigSet means them as
    # written, in both paths.
    (case,) = [c for c in ALL if c.name == "literal-paths"]
    for fast in (True, False):
        side = tmp_path / str(fast)
        prepare([case], side)
        result = apply(plan_of([case], side), fast=fast)
        assert not result.failed, [r.message for r in result.results if r.status == "failed"]
        root = side / case.name
        assert {n: os.readlink(root / n) for n in LITERAL_LINKS} == LITERAL_LINKS
        assert sorted(p.name for p in root.iterdir()) == sorted(
            [*LITERAL_LINKS, "$HOME", "${USER}~", "stray"]
        )
        assert (root / "$HOME" / "f").read_text() == "x\n"
