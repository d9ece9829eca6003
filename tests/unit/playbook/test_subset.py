"""The part of a plan left to Ansible: a plan of the steps the executor names, rendered as any."""

from dataclasses import replace

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.desired.templates import Rendered
from nodemanager.executor.run import SPILL_ABOVE, _spill_large_content
from nodemanager.playbook.build import build
from nodemanager.playbook.render import GUARD, GUARD_STAT, SPILLED, leaves
from nodemanager.playbook.subset import NOTIFY_TASK, rest


def _plan():
    spec = {
        "files": [
            {"path": "/a", "content": "a"},
            {"path": "/s", "template": "{{ x }}", "secretRefs": [{"name": "s"}]},
            {"path": "/b", "content": "b"},
        ],
        "executions": [{"command": "/bin/true", "subscribe_files": ["/a"]}],
    }
    cs = ConfigSet.from_dict({"metadata": {"name": "c"}, "spec": spec})
    return build(merge([cs]), "debian", "n", contents={"/s": Rendered("x", secret=True)})


def test_rest_keeps_the_named_steps_and_their_reporters_in_order():
    plan = _plan()
    a, s, b = plan.tasks()
    left = rest(plan, [b, s], {"nodemanager changed /a"}, [])
    # each step a block of its guard, itself and (a no_log one) its reporter
    names = [t["name"] for t in leaves(left.playbook[0]["tasks"])]
    assert names == [
        NOTIFY_TASK,
        *(GUARD_STAT.format(task=s.task), GUARD.format(task=s.task), s.task, s.reported_by),
        *(GUARD_STAT.format(task=b.task), GUARD.format(task=b.task), b.task),
    ]
    assert [h["name"] for h in left.playbook[0]["handlers"]] == [plan.handlers()[0].task]


def test_forced_handlers_become_tasks():
    plan = _plan()
    (handler,) = plan.handlers()
    left = rest(plan, [], set(), [handler])
    (task,) = leaves(left.playbook[0]["tasks"])
    assert task["name"] == handler.task and "listen" not in task
    assert "handlers" not in left.playbook[0]


def test_spilled_content_is_read_back_as_content(tmp_path):
    plan = _plan()
    big = "é" * (SPILL_ABOVE + 1)
    a = plan.tasks()[0]
    plan = replace(plan, steps=(replace(a, content=big), *plan.steps[1:]))
    out = _spill_large_content(plan, tmp_path / "content")
    spilled = [s for s in out.steps if s.content_file]
    assert [s.task for s in spilled] == [a.task]  # the small contents stay in the playbook
    assert (tmp_path / "content" / "0").read_text(encoding="utf-8") == big
    task = out.playbook[0]["tasks"][0]["block"][-1]
    assert task["ansible.builtin.copy"]["content"] == SPILLED
    assert task["vars"]["nodemanager_spilled"] == str(tmp_path / "content" / "0")
    assert task["ansible.builtin.copy"]["dest"] == "/a"  # the path stays literal
    secret = out.playbook[0]["tasks"][1]["block"][2]
    assert secret["ansible.builtin.copy"]["content"] == "x"
    assert plan.playbook[0]["tasks"][0]["block"][-1]["ansible.builtin.copy"]["content"] == big


def test_the_rest_is_a_plan_of_steps_with_its_own_origins():
    plan = _plan()
    a, s, b = plan.tasks()
    left = rest(plan, [s], set(), [])
    assert [x.task for x in left.steps] == [s.task, plan.handlers()[0].task]
    guards = {GUARD_STAT.format(task=s.task), GUARD.format(task=s.task)}
    assert set(left.origins) == {s.task, s.reported_by, plan.handlers()[0].task, *guards}
