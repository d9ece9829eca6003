"""Results in step order: native results after a step left to Ansible wait for its result."""

from nodemanager.executor.events import TaskResult
from nodemanager.executor.order import InOrder
from nodemanager.playbook.steps import Origin, Step


def _steps(*names: str) -> list[Step]:
    return [Step("write", n, Origin(f"file:/{n}", ("cs",)), "ansible.builtin.copy") for n in names]


def _r(task: str) -> TaskResult:
    return TaskResult(task, f"file:/{task}", ("cs",), "ok")


def test_native_results_wait_for_the_ansible_results_before_them():
    seen: list[str] = []
    order = InOrder(_steps("a", "b", "c", "d", "e"), lambda r: seen.append(r.task))
    order.native(_r("a"))
    order.holding = True  # b is left to Ansible
    order.native(_r("c"))
    order.native(_r("e"))
    assert seen == ["a"]
    order.ansible(_r("b"))
    order.ansible(_r("d"))
    order.ansible(_r("handler"))
    assert [r.task for r in order.close()] == seen == ["a", "b", "c", "d", "e", "handler"]


def test_what_never_came_from_ansible_goes_out_at_the_end():
    order = InOrder(_steps("a", "b"), None)
    order.holding = True
    order.native(_r("b"))
    assert [r.task for r in order.close()] == ["b"]
