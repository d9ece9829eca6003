"""The part of a plan left to Ansible, as a plan: the executor names steps, this renders tasks.

The executor's fast path decides which steps Ansible must still do, and which task contents it
hands over through a file; it says so by task name. The task dicts are edited here, beside the
builder that made them, never in the executor. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from nodemanager.playbook.build import Plan
from nodemanager.playbook.dump import Unsafe
from nodemanager.playbook.steps import Step

NOTIFY_TASK = "nodemanager: notify the handlers of native changes"
# Still copy's `content`, read back by a lookup: `src:` would mean something else (a directory
# in the way gets a file put inside it, where `content` fails as Ansible says it must). A
# lookup's result is not templated again, so the bytes stay exactly these.
SPILLED = "{{ lookup('ansible.builtin.file', nodemanager_spilled, rstrip=False) }}"


def rest(plan: Plan, steps: list[Step], notified: set[str], forced: list[Step]) -> Plan:
    """The plan of ``steps`` (with the tasks reporting them), in play order. Handlers notified
    by native changes are notified by a first task of their own (Ansible then runs every
    handler at the end, in order, once); handlers ``forced`` when no task is left become tasks,
    in handler order."""
    names = {s.task for s in steps} | {s.reported_by for s in steps if s.reported_by}
    plays = []
    for play in plan.playbook:
        tasks = [t for t in play["tasks"] if t["name"] in names]
        handlers = play.get("handlers", [])
        if notified:
            tasks.insert(
                0,
                {
                    "name": NOTIFY_TASK,
                    "ansible.builtin.debug": {"msg": "native changes notify their handlers"},
                    "changed_when": True,
                    "notify": sorted(Unsafe(t) for t in notified),
                },
            )
        by_name = {h["name"]: h for h in handlers}
        tasks += [
            {k: v for k, v in by_name[h.task].items() if k != "listen"}
            for h in forced
            if h.task in by_name
        ]
        kept = {**play, "tasks": tasks}
        if forced or not handlers:
            kept.pop("handlers", None)
        plays.append(kept)
    return replace(plan, playbook=plays)


def spilled(plan: Plan, files: Mapping[str, str]) -> Plan:
    """The plan with the content of each task named in ``files`` read from that file (the same
    bytes, the same meaning for copy) instead of carried as a YAML scalar."""
    if not files:
        return plan
    plays = []
    for play in plan.playbook:
        tasks: list[dict[str, Any]] = []
        for task in play["tasks"]:
            src = files.get(task["name"])
            if src is not None:
                params = task["ansible.builtin.copy"]
                task = {
                    **task,
                    "ansible.builtin.copy": {**params, "content": SPILLED},
                    "vars": {**task.get("vars", {}), "nodemanager_spilled": src},
                }
            tasks.append(task)
        plays.append({**play, "tasks": tasks})
    return replace(plan, playbook=plays)
