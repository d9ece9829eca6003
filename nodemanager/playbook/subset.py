"""The part of a plan left to Ansible, as a plan: the executor names the steps it leaves.

The fast path decides which steps Ansible must still do, which handlers its native changes
notified, and which handlers must run as tasks; the result is a plan of those steps, rendered
like any other (render.py). No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from nodemanager.playbook.plan import Plan
from nodemanager.playbook.render import NOTIFY_TASK, SPILLED
from nodemanager.playbook.steps import Batch, Step

__all__ = ["NOTIFY_TASK", "SPILLED", "Batch", "rest", "segment"]


def rest(plan: Plan, steps: list[Step], notified: set[str], forced: list[Step]) -> Plan:
    """The plan of ``steps`` (each reported as before), in play order. Handlers notified by
    native changes are notified by a first task of their own (Ansible then runs every handler
    at the end, in order, once); handlers ``forced`` when no task is left become tasks, in
    handler order."""
    left = {s.task for s in steps}
    tasks = [s for s in plan.tasks() if s.task in left]
    if forced:
        return replace(plan, steps=(*tasks, *forced), notified=tuple(notified), forced=True)
    return replace(plan, steps=(*tasks, *plan.handlers()), notified=tuple(notified))


def segment(plan: Plan, units: Sequence[Batch | Step]) -> Plan:
    """A play of ``units`` alone, in order, without handlers (nothing in it notifies one): a
    step is its own task; a batch is a block whose one task calls the module with the listed
    names and whose rescue is its steps' own tasks."""
    steps = [s for u in units for s in (u.steps if isinstance(u, Batch) else (u,))]
    batches = tuple(u for u in units if isinstance(u, Batch))
    return replace(plan, steps=tuple(steps), notified=(), forced=False, batches=batches)
