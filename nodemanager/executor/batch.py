"""Which package steps may share one module call, and what each of them reports afterwards.

The rendered play has one task per package, each on its own: one failing name does not stop
the others, and a later name finds what an earlier one installed. A list must mean the same.
So the steps of one state (present or absent) are walked in play order against the manager's
dry run of each name alone (managers.effect; for a run of names of one state, one question of
the manager where it answers each name's alone exactly, managers.effects):

- a name whose dry run installs (or removes) that very name joins the list, and what it brings
  about is remembered;
- a later name an earlier member already brings about is ``pulled``: its own task would find
  nothing to do and report ok;
- a name whose dry run fails goes to the module alone (it fails there, saying why). Installing
  it changes nothing, so the list may go on past it; a removal that fails may succeed once
  later removals are done, so the list ends there;
- anything else (a group or virtual name, a pinned version, latest, a pattern) goes to the
  module alone, and every later step too: what it changes is the module's to know.

A list whose members the manager cannot show to change together exactly what they change one
after another (``lists_mean_tasks``: pacman's own dry run of the list; a dependency one name
takes from a provider may come from another name of the list) is each step's own task again.

After the run the manager is asked again (``attribute``): members now converged changed,
pulled ones are ok. A failed list falls back to every step's own task (the rescue of its
block), whose results are the module's, except that a member the failed list did install
before failing is still reported changed: this run changed it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from nodemanager.executor.events import TaskResult, TaskStatus
from nodemanager.executor.managers import Effect, Manager, plain
from nodemanager.playbook.steps import Batch, Step

BATCH_TASK = "nodemanager: {module} {state} list {n}"
Unit = Batch | Step

# Package modules whose names never share a list, and why: each name is its own task (the fast
# path still answers converged names natively). Measured against the real program in
# tests/integration/test_differential_apk.py.
DECLINED: dict[str, str] = {
    "community.general.apk": (
        "an install script that fails leaves its package installed and marked broken, and "
        "every later apk call then fails too: a failed list cannot be taken apart into what "
        "each name's own task reports, and no dry run shows which script will fail"
    ),
}


@dataclass
class _Open:
    state: str
    members: list[Step] = field(default_factory=list)
    pulled: list[Step] = field(default_factory=list)
    effect: set[str] = field(default_factory=set)
    steps: list[Step] = field(default_factory=list)  # members and pulled, in play order


@dataclass(frozen=True)
class Batching:
    units: list[Unit]
    diffs: dict[str, str]  # a member's task -> the diff its module call alone would report


def plan(steps: Sequence[Step], manager: Manager) -> Batching:
    """The units of ``steps`` (one module's, none converged), each batch at its first member;
    every step its own unit where the module's lists are declined (``DECLINED``)."""
    if manager.module in DECLINED:
        return Batching(list(steps), {})
    units: list[Unit | _Open] = []
    diffs: dict[str, str] = {}
    current: _Open | None = None
    alone = False
    known: dict[str, Effect | None] = {}
    asked = 0  # the steps before this one were asked of the manager together
    for i, step in enumerate(steps):
        if alone or step.state not in ("present", "absent") or not plain(step):
            units.append(step)
            alone = True
            continue
        if current is None or current.state != step.state:
            current = _Open(step.state)
            units.append(current)
        if i >= asked:  # a run of one state: its names in one question where the manager can
            run = _run_of(steps[i:], step.state)
            known |= manager.effects(run, step.state)
            asked = i + len(run)
        if step.name in current.effect or manager.settled(step):
            current.pulled.append(step)
            current.steps.append(step)
            continue
        if step.name in known:
            effect = known[step.name]
        else:
            effect = manager.effect(step.name, step.state)
        if effect is None:
            units.append(step)
            if step.state == "absent":
                current = None
            continue
        if step.name not in effect:
            units.append(step)
            alone = True
            continue
        current.members.append(step)
        current.steps.append(step)
        diffs[step.task] = manager.diff(
            step.state, [line for n, line in effect.items() if n not in current.effect]
        )
        current.effect |= set(effect)
    return Batching(_frozen(units, manager), diffs)


def _run_of(steps: Sequence[Step], state: str) -> list[str]:
    """The names of the leading steps of ``state`` that may go in a list."""
    same = itertools.takewhile(lambda s: s.state == state and plain(s), steps)
    return [s.name for s in same]


def _frozen(units: list[Unit | _Open], manager: Manager) -> list[Unit]:
    out: list[Unit] = []
    for u in units:
        if not isinstance(u, _Open):
            out.append(u)
        elif not u.members or (len(u.members) == 1 and not u.pulled):
            out.extend(u.steps)  # each its own task: no list to share
        elif not manager.lists_mean_tasks([s.name for s in u.members], u.state, u.effect):
            out.extend(u.steps)  # one transaction would choose differently (a provider)
        else:
            name = BATCH_TASK.format(module=manager.module, state=u.state, n=len(out))
            pulled = frozenset(s.task for s in u.pulled)
            out.append(Batch(name, tuple(u.steps), pulled, manager.lists_pulled))
    return out


def attribute(
    batching: Batching, results: Sequence[TaskResult], manager: Manager
) -> list[TaskResult]:
    """Each step's result after the run, in unit order (``manager`` asked afresh)."""
    manager.forget()
    by_task = {r.task: r for r in results}
    out: list[TaskResult] = []
    for unit in batching.units:
        if isinstance(unit, Step):
            out.extend([by_task[unit.task]] if unit.task in by_task else [])
            continue
        listed = by_task.get(unit.task)
        if listed is None:
            continue  # Ansible never got to it: the run's own failure says why
        members = unit.members
        for step in unit.steps:
            member = step.task not in unit.pulled
            done = manager.done(step)
            if listed.status == "failed":
                own = by_task.get(step.task)
                if own is not None and own.status == "ok" and done and member:
                    own = replace(own, status="changed")
                out.extend([own] if own else [])
                continue
            status: TaskStatus = "changed" if member else "ok"
            message = f"in one {step.module} call with {len(members)} names"
            if not done:
                status, message = "failed", f"not {step.state} after the list: {listed.message}"
            diff = batching.diffs.get(step.task, "") if status == "changed" else ""
            o = step.origin
            out.append(
                TaskResult(
                    step.task, o.resource, o.configsets, status, message, diff, False, listed.module
                )
            )
    return out
