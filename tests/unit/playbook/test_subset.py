"""The part of a plan left to Ansible, rendered from the steps the executor names."""

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.desired.templates import Rendered
from nodemanager.playbook.build import build
from nodemanager.playbook.subset import NOTIFY_TASK, SPILLED, rest, spilled


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
    names = [t["name"] for t in left.playbook[0]["tasks"]]
    assert names == [NOTIFY_TASK, s.task, s.reported_by, b.task]
    assert [h["name"] for h in left.playbook[0]["handlers"]] == [plan.handlers()[0].task]


def test_forced_handlers_become_tasks():
    plan = _plan()
    (handler,) = plan.handlers()
    left = rest(plan, [], set(), [handler])
    (task,) = left.playbook[0]["tasks"]
    assert task["name"] == handler.task and "listen" not in task
    assert "handlers" not in left.playbook[0]


def test_spilled_content_is_read_back_as_content():
    plan = _plan()
    a = plan.tasks()[0]
    out = spilled(plan, {a.task: "/run/content/0"})
    task = out.playbook[0]["tasks"][0]
    assert task["ansible.builtin.copy"]["content"] == SPILLED
    assert task["vars"]["nodemanager_spilled"] == "/run/content/0"
    assert task["vars"]["nodemanager_path"] == "/a"  # the guard's variable stays
    assert plan.playbook[0]["tasks"][0]["ansible.builtin.copy"]["content"] == "a"
