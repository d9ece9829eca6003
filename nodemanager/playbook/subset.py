"""The part of a plan left to Ansible, as a plan: the executor names the steps it leaves.

The fast path decides which steps Ansible must still do, which handlers its native changes
notified, and which handlers must run as tasks; the result is a plan of those steps, rendered
like any other (render.py). No I/O.
"""

from __future__ import annotations

from dataclasses import replace

from nodemanager.playbook.plan import Plan
from nodemanager.playbook.render import NOTIFY_TASK, SPILLED
from nodemanager.playbook.steps import Step

__all__ = ["NOTIFY_TASK", "SPILLED", "rest"]


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
