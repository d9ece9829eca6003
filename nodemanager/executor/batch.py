"""Which package steps may share one module call, and what each of them reports afterwards.

The rendered play has one task per package, each on its own: one failing name does not stop
the others, and a later name finds what an earlier one installed. A list must mean the same.
So the steps of one state (present or absent) are walked in play order against the manager's
dry run of each name alone (managers.effect):

- a name whose dry run installs (or removes) that very name joins the list, and what it brings
  about is remembered;
- a later name an earlier member already brings about is ``pulled``: its own task would find
  nothing to do and report ok;
- a name whose dry run fails goes to the module alone (it fails there, saying why). Installing
  it changes nothing, so the list may go on past it; a removal that fails may succeed once
  later removals are done, so the list ends there;
- anything else (a group or virtual name, a pinned version, latest, a pattern) goes to the
  module alone, and every later step too: what it changes is the module's to know.

After the run the manager is asked again (``attribute``): members now converged changed,
pulled ones are ok. A failed list falls back to every step's own task (the rescue of its
block), whose results are the module's, except that a member the failed list did install
before failing is still reported changed: this run changed it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from nodemanager.executor.events import TaskResult, TaskStatus
from nodemanager.executor.managers import Manager, plain
from nodemanager.playbook.steps import Batch, Step

BATCH_TASK = "nodemanager: {module} {state} list {n}"
Unit = Batch | Step


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
    """The units of ``steps`` (one module's, none converged), each batch at its first member."""
    units: list[Unit | _Open] = []
    diffs: dict[str, str] = {}
    current: _Open | None = None
    alone = False
    for step in steps:
        if alone or step.state not in ("present", "absent") or not plain(step):
            units.append(step)
            alone = True
            continue
        if current is None or current.state != step.state:
            current = _Open(step.state)
            units.append(current)
        if step.name in current.effect or manager.settled(step):
            current.pulled.append(step)
            current.steps.append(step)
            continue
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


def _frozen(units: list[Unit | _Open], manager: Manager) -> list[Unit]:
    out: list[Unit] = []
    for u in units:
        if not isinstance(u, _Open):
            out.append(u)
        elif not u.members or (len(u.members) == 1 and not u.pulled):
            out.extend(u.steps)  # each its own task: no list to share
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
            done = manager.converged(step) is True
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
