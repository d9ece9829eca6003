"""Results reported in step order, whichever path took each step.

The fast path may report a step natively (a probe, a check in ``--check``) after an earlier step
was left to Ansible, whose result comes only when Ansible runs. Such results wait here and go
out just before the first later step's result, so a reader sees the play's order, as
ansible-playbook shows it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nodemanager.executor.events import TaskResult
from nodemanager.playbook.steps import Step

_LAST = 1 << 62  # handlers and tasks not in the play: after every task


class InOrder:
    def __init__(self, tasks: Sequence[Step], sink: Callable[[TaskResult], None] | None):
        self._index = {s.task: i for i, s in enumerate(tasks)}
        self._sink = sink
        self._waiting: list[TaskResult] = []
        self.results: list[TaskResult] = []
        self.holding = False  # set once a step is left to Ansible

    def index(self, result: TaskResult) -> int:
        return self._index.get(result.task, _LAST)

    def native(self, result: TaskResult) -> None:
        """A result the fast path made: out now, unless an earlier step waits for Ansible."""
        if self.holding:
            self._waiting.append(result)
        else:
            self._out(result)

    def ansible(self, result: TaskResult) -> None:
        """A result from Ansible: the native results of earlier steps go out first."""
        self._release(self.index(result))
        self._out(result)

    def close(self) -> list[TaskResult]:
        """Every result, in step order (handlers last, in the order they ran)."""
        self._release(_LAST + 1)
        return self.results

    def _release(self, before: int) -> None:
        ready = [r for r in self._waiting if self.index(r) < before]
        self._waiting = [r for r in self._waiting if self.index(r) >= before]
        for r in ready:
            self._out(r)

    def _out(self, result: TaskResult) -> None:
        self.results.append(result)
        if self._sink:
            self._sink(result)
