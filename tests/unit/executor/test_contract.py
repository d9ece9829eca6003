"""Contract: every skeleton in playbook_templates/ becomes a typed step, and the fast path has a
rule for every step kind and module or declines it explicitly (never a KeyError)."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.executor import native, probe
from nodemanager.playbook.build import build
from nodemanager.playbook.platforms import FAMILIES, TEMPLATES_DIR
from nodemanager.playbook.render import module_of
from nodemanager.playbook.steps import KINDS
from nodemanager.playbook.upgrade import upgrade_plan

EVERYTHING = {
    "packages": [{"name": "p"}, {"name": "q", "ensure": "latest"}],
    "files": [
        {"path": "/a", "content": "x"},
        {"path": "/b", "createOnly": True},
        {"path": "/d", "ensure": "directory", "purge": True},
        {"path": "/l", "ensure": "symlink", "target": "/a"},
        {"path": "/g", "ensure": "absent"},
    ],
    "services": [
        {"name": "s", "ensure": "running", "enable": True, "subscribe_files": ["/a"]},
        {"name": "t", "ensure": "running", "arguments": "-x"},
        {"name": "u", "user": "al", "ensure": "running", "subscribe_files": ["/a"]},
    ],
    "executions": [{"command": "/bin/true"}, {"command": "/bin/h", "subscribe_files": ["/a"]}],
}


def _steps(family: str):
    cs = ConfigSet.from_dict({"metadata": {"name": "c"}, "spec": EVERYTHING})
    return build(merge([cs]), family, "n").steps + upgrade_plan(family, "n").steps


def _modules(value: Any) -> set[str]:
    found = set()
    if isinstance(value, dict):
        for k, v in value.items():
            if k.count(".") == 2:
                found.add(k)
            found |= _modules(v)
    return found


@pytest.mark.parametrize("family", sorted(set(FAMILIES.values())))
def test_every_step_has_a_rule_or_an_explicit_decline(family):
    for step in _steps(family):
        assert (step.kind, step.module) in probe.RULES | set(probe.DECLINED), step
        assert (step.kind, step.module) in native.ACTS or step.kind in native.DECLINED, step
        assert step.origin.field.startswith("spec."), step


def test_every_skeleton_becomes_a_step_and_every_kind_is_emitted():
    skeleton_modules = set()
    for path in Path(TEMPLATES_DIR).glob("*.yaml"):
        skeleton_modules |= _modules(yaml.safe_load(path.read_text()))
    emitted = {s.module for f in set(FAMILIES.values()) for s in _steps(f)}
    assert skeleton_modules <= emitted
    assert {s.kind for f in set(FAMILIES.values()) for s in _steps(f)} == set(KINDS)


def test_steps_follow_the_play_order_with_origins():
    plan = build(
        merge([ConfigSet.from_dict({"metadata": {"name": "c"}, "spec": EVERYTHING})]), "debian", "n"
    )
    play = plan.playbook[0]
    # a play task is a block per step, named after it, the step's task last but its reporter
    assert [s.task for s in plan.tasks()] == [t["name"] for t in play["tasks"]]
    assert [s.task for s in plan.handlers()] == [h["name"] for h in play["handlers"]]
    mine = [next(x for x in t["block"] if x["name"] == t["name"]) for t in play["tasks"]]
    assert all(module_of(t)[0] == s.module for t, s in zip(mine, plan.tasks(), strict=True))
    write = next(s for s in plan.steps if s.kind == "write")
    assert (write.origin.resource, write.origin.field, write.content) == (
        "file:/a",
        "spec.files[0]",
        "x",
    )
    only = plan.only({"file:/a"})
    assert [s.kind for s in only.tasks()] == ["write"]
