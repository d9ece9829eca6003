"""The plan of an OS upgrade (ManagedNode ``spec.upgrade``): one step, the family's package
manager upgrading everything (``playbook_templates/upgrades.yaml``). No I/O beyond loading the
skeleton; no ConfigSet value reaches it."""

from __future__ import annotations

from nodemanager.desired.merge import DesiredState
from nodemanager.playbook import platforms
from nodemanager.playbook.plan import Plan, TaskOrigin
from nodemanager.playbook.render import module_of
from nodemanager.playbook.steps import Step

RESOURCE = "upgrade:os"
TASK = "upgrade | packages"


def upgrade_plan(family: str, node_name: str) -> Plan:
    module = module_of(platforms.skeletons("upgrades")[family])[0]
    step = Step("upgrade", TASK, TaskOrigin(RESOURCE, (), field="spec.upgrade"), module)
    return Plan((step,), DesiredState((), ()), family, node_name)
