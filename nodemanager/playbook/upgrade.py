"""The plan of an OS upgrade (ManagedNode ``spec.upgrade``): one task, the family's package
manager upgrading everything (``playbook_templates/upgrades.yaml``). No I/O beyond loading the
skeleton; no ConfigSet value reaches it."""

from __future__ import annotations

import copy

from nodemanager.desired.merge import DesiredState
from nodemanager.playbook import platforms
from nodemanager.playbook.build import Plan, TaskOrigin
from nodemanager.playbook.dump import Unsafe

RESOURCE = "upgrade:os"
TASK = "upgrade | packages"


def upgrade_plan(family: str, node_name: str) -> Plan:
    call = copy.deepcopy(platforms.skeletons("upgrades")[family])
    play = {
        "name": Unsafe(f"nodemanager upgrade: {node_name}"),
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        "tasks": [{"name": TASK, **call}],
    }
    origins = {TASK: TaskOrigin(RESOURCE, ())}
    return Plan([play], origins, DesiredState((), ()), family)
