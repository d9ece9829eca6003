"""Run a plan through ansible-runner, once, in a fresh private data dir that is removed after."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from nodemanager.executor import batch, child, config, native, probe
from nodemanager.executor.errors import ExecutorError
from nodemanager.executor.events import TaskResult, TaskStatus, to_result
from nodemanager.executor.order import InOrder
from nodemanager.playbook import render, subset
from nodemanager.playbook.build import Plan
from nodemanager.playbook.dump import to_yaml
from nodemanager.playbook.steps import FILE_KINDS, Step
from nodemanager.playbook.subset import NOTIFY_TASK

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunResult:
    status: str  # ansible-runner's words: successful | failed | timeout | canceled
    rc: int
    results: tuple[TaskResult, ...] = field(default=())
    ansible: bool = True  # whether Ansible ran at all (the fast path may find nothing to do)
    message: str = ""  # why the run failed when no task did (Ansible could not start or parse)

    @property
    def failed(self) -> bool:
        return self.status != "successful" or any(r.status == "failed" for r in self.results)

    def changed(self) -> list[TaskResult]:
        return [r for r in self.results if r.status == "changed"]

    def breakdown(self) -> str:
        """Why the run failed as a whole, for when no single task did."""
        if not self.ansible:
            return self.message
        return f"ansible-runner ended {self.status} (rc {self.rc})" + (
            f": {self.message}" if self.message else ""
        )


# Steps whose effect on the host is known when Ansible makes them: the path, what is below it,
# and (a directory) its missing parents. A later file step elsewhere may still be probed.
_KNOWN_EFFECT = frozenset({"write", "touch", "directory", "absent"})


def _inode(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _related(a: str, b: str) -> bool:
    """Whether a change at ``a`` can change what is found at ``b``: nested paths, through
    symlinks, or one inode under two names (a hard link: a chmod of one is a chmod of both)."""

    def nested(x: str, y: str) -> bool:
        return x == y or x.startswith(y.rstrip("/") + "/") or y.startswith(x.rstrip("/") + "/")

    ra, rb = os.path.realpath(a), os.path.realpath(b)
    if nested(a, b) or nested(ra, rb) or nested(a, rb) or nested(ra, b):
        return True
    ia = _inode(a)
    return ia is not None and ia == _inode(b)


def _unaffected(step: Step, left: list[Step]) -> bool:
    """Whether no step left to Ansible before ``step`` could change what probing it finds."""
    if not left:
        return True
    if step.kind not in FILE_KINDS:
        return False
    return all(s.kind in _KNOWN_EFFECT and not _related(s.path, step.path) for s in left)


def apply(
    plan: Plan,
    *,
    fast: bool = True,
    check: bool = False,
    diff: bool = False,
    on_result: Callable[[TaskResult], None] | None = None,
    before_change: BeforeChange | None = None,
    **kwargs: Any,
) -> RunResult:
    """Apply ``plan`` with the fast path, meaning exactly what Ansible means (README "Speed").

    Steps are taken in play order. While nothing has been left to Ansible, each step is probed
    where it stands (after the native steps before it ran) and, if not converged, done natively
    when the fast path can do it exactly; the first step it cannot do goes to Ansible, and so
    does every later step, except that a later file step may still be reported converged when
    nothing left to Ansible before it could touch its path. Package steps are the exception:
    while nothing else is left, a run of them goes to Ansible there and then, as few module
    calls as their meaning allows (executor/batch.py), and the fast path goes on after them.
    In check mode nothing changes the host, so every step is probed and checked natively
    wherever it stands. Handlers keep Ansible's semantics: when Ansible runs, it runs them all
    (native changes notify them through one first task), at the end, in handler order, once;
    otherwise notified executions run natively in handler order until one cannot.
    ``fast=False`` sends everything to Ansible.

    ``before_change`` sees the resources of every task not proven converged on the host as it
    is before the run, once, before the native writes and Ansible touch anything (the agent
    backs up the files they may replace)."""
    if not fast:
        if before_change and not check:
            before_change(_resources(plan, set()))
        return execute(plan, check=check, diff=diff, on_result=on_result, **kwargs)
    config.preflight(plan.steps)  # what would stop Ansible from starting stops this run first
    run = _FastRun(plan, check, diff, on_result, kwargs)
    if before_change and not check:
        before_change(
            sorted({s.origin.resource for s in plan.tasks() if run.prober.converged(s) is not True})
        )
    return run.all()


class _FastRun:
    """One fast-path apply: the steps left to Ansible, the handlers native changes notified,
    and the Ansible runs made so far."""

    def __init__(
        self,
        plan: Plan,
        check: bool,
        diff: bool,
        on_result: Callable[[TaskResult], None] | None,
        kwargs: dict[str, Any],
    ):
        self.plan, self.check, self.diff, self.kwargs = plan, check, diff, kwargs
        self.reports = InOrder(plan.tasks(), on_result)
        self.prober = probe.Prober()
        self.left: list[Step] = []
        self.notified: set[str] = set()
        self.runs: list[RunResult] = []

    def all(self) -> RunResult:
        tasks = self.plan.tasks()
        at = 0
        while at < len(tasks):
            group = self._package_group(tasks, at)
            if group:
                self.packages(group)
                at += len(group)
            else:
                self.step(tasks[at])
                at += 1
        return self.finish()

    def _package_group(self, tasks: list[Step], at: int) -> list[Step]:
        """The package steps of one module from ``at`` on, when they may go to Ansible now: not
        in check or diff mode (a list reports neither per name), and nothing left before."""
        if self.check or self.diff or self.left or tasks[at].kind != "package":
            return []
        module = tasks[at].module
        end = at
        while end < len(tasks) and tasks[end].kind == "package" and tasks[end].module == module:
            end += 1
        return tasks[at:end]

    def step(self, step: Step) -> None:
        if self.check or _unaffected(step, self.left):
            if self.prober.converged(step) is True:
                self.reports.native(_ok(step))
                return
        if self.check or not self.left:
            done = native.act(step, check=self.check, diff=self.diff)
            if done is not None:
                self.reports.native(done)
                if done.status == "changed":
                    self.notified.update(step.notify)
                if step.kind == "command":
                    self.prober.forget()  # it may have installed or removed packages
                return
        self.left.append(step)
        self.reports.holding = True

    def packages(self, group: list[Step]) -> None:
        """Converged names reported natively; the rest through Ansible now, batched."""
        pending = []
        for step in group:
            if self.prober.converged(step) is True:
                self.reports.native(_ok(step))
            else:
                pending.append(step)
        if not pending:
            return
        manager = self.prober.managers.get(pending[0].module)
        if manager is None:  # a module without a native reader: one task per step
            batching = batch.Batching(list(pending), {})
        else:
            batching = batch.plan(pending, manager)
        ran = execute(subset.segment(self.plan, batching.units), **self.kwargs)
        results = batch.attribute(batching, ran.results, manager) if manager else ran.results
        for result in sorted(results, key=self.reports.index):
            self.reports.native(result)
        self.runs.append(ran)
        self.prober.forget()

    def finish(self) -> RunResult:
        notified_handlers = [h for h in self.plan.handlers() if self.notified & set(h.listen)]
        forced: list[Step] = []
        if not self.left:
            for h in notified_handlers:
                done = native.act(h, check=self.check) if not forced else None
                if done is None:
                    forced.append(h)
                else:
                    self.reports.native(done)
            self.notified = set()
        if self.left or forced:
            rest = subset.rest(self.plan, self.left, self.notified, forced)
            self.runs.append(
                execute(
                    rest,
                    check=self.check,
                    diff=self.diff,
                    on_result=self.reports.ansible,
                    **self.kwargs,
                )
            )
        results = tuple(self.reports.close())
        if not self.runs:
            return RunResult("successful", 0, results, ansible=False)
        worst = next((r for r in self.runs if r.status != "successful"), self.runs[-1])
        return replace(worst, results=results)


# Called with the ids of resources about to be changed (``file:/etc/x``), before any change.
BeforeChange = Callable[[list[str]], None]


def _resources(plan: Plan, converged: set[str]) -> list[str]:
    return sorted({s.origin.resource for s in plan.tasks() if s.task not in converged})


def _ok(step: Step) -> TaskResult:
    o = step.origin
    return TaskResult(step.task, o.resource, o.configsets, "ok", module="probe")


def execute(
    plan: Plan,
    *,
    check: bool = False,
    diff: bool = False,
    work_dir: str | None = None,
    on_result: Callable[[TaskResult], None] | None = None,
    keep_dir: bool = False,
) -> RunResult:
    """Run ``plan`` through ansible-runner. ``on_result`` sees each task outcome as it happens."""
    import ansible_runner  # here, not at the top: an agent the fast path serves never pays for it
    import ansible_runner.runner

    child.install(ansible_runner.runner)  # ansible-playbook dies with the agent (kill -9 too)

    config.check_modules(config.modules_of(plan.steps))
    private = config.private_dir(work_dir)
    results: list[TaskResult] = []
    # Ansible censors a no_log task's whole result, `changed` too: the task after it reports
    # whether it changed (render.REPORTED); a failure is still its own event.
    reported = {s.reported_by: s for s in plan.steps if s.reported_by}
    secret = {s.task for s in reported.values()}
    censored: set[str] = set()
    # A file step's guard (render.guards) is part of the step: nothing of it is reported but
    # its failure, as the step's (the step then does not run).
    guarded = {
        name.format(task=s.task): s
        for s in plan.steps
        if s.kind in render.GUARDED
        for name in (render.GUARD_STAT, render.GUARD)
    }

    def handle(event: dict[str, Any]) -> bool:
        result = to_result(event, plan.origins)
        if result is None or result.task == NOTIFY_TASK:
            return False
        if result.task in guarded:
            if result.status != "failed":
                return False
            step = guarded[result.task]
            result = replace(result, task=step.task, module=step.module)
        elif result.task in reported:
            step = reported.pop(result.task)
            if step.task not in censored:
                return False  # the task failed (reported) or did not run
            status = _reported_status(result)
            result = replace(result, task=step.task, status=status, module=step.module)
        elif result.task in secret and result.status in ("ok", "changed"):
            censored.add(result.task)
            return False
        results.append(result)
        if on_result:
            on_result(result)
        # Returning False keeps the event out of the private dir: results may hold file contents.
        return False

    try:
        (private / "project").mkdir()
        playbook = _spill_large_content(plan, private / "content").playbook
        (private / "project" / "main.yml").write_text(to_yaml(playbook))
        (private / "inventory").mkdir()
        (private / "inventory" / "hosts").write_text("localhost ansible_connection=local\n")
        cmdline = " ".join(flag for flag, on in (("--check", check), ("--diff", diff)) if on)
        try:
            runner = ansible_runner.run(
                private_data_dir=str(private),
                playbook="main.yml",
                envvars=config.envvars(private),
                cmdline=cmdline or None,
                event_handler=handle,
                # An explicit callback keeps ansible-runner from replacing the agent's
                # SIGTERM handler;
                # a run in progress always finishes, so no resource is left half-applied.
                cancel_callback=lambda: False,
                quiet=True,
                suppress_env_files=True,
                settings={"suppress_ansible_output": True},
            )
        except OSError as e:  # no pseudo-terminal, no ansible-playbook: say so, not a traceback
            raise ExecutorError(f"cannot start ansible-playbook: {e}") from e
        message = _startup_error(runner) if runner.status != "successful" and not results else ""
        return RunResult(
            runner.status,
            runner.rc if runner.rc is not None else -1,
            tuple(results),
            message=message,
        )
    finally:
        child.reap_guards()
        if keep_dir:
            log.info("private data dir kept at %s", private)
        else:
            shutil.rmtree(private, ignore_errors=True)


# Content above this goes to Ansible as a file in the private dir instead of a YAML scalar;
# Ansible leaves the diff of such content out either way (its max diff size).
SPILL_ABOVE = 104448


def _spill_large_content(plan: Plan, where: Path) -> Plan:
    """The plan with every large content of a write step in a file below ``where`` (in the
    0700 private dir, removed with it), read back by Ansible as the same ``content``: the same
    bytes without emitting and parsing megabytes of YAML."""
    steps, spilled = [], 0
    for step in plan.steps:
        if step.kind == "write" and step.content is not None and len(step.content) > SPILL_ABOVE:
            where.mkdir(exist_ok=True, mode=0o700)
            src, spilled = where / str(spilled), spilled + 1
            with open(src, "w", encoding="utf-8", newline="") as f:
                f.write(step.content)
            step = replace(step, content_file=str(src))
        steps.append(step)
    return replace(plan, steps=tuple(steps))


def _reported_status(report: TaskResult) -> TaskStatus:
    """A no_log task's status from its reporter's: changed or ok."""
    return "changed" if report.status == "changed" else "ok"


def _startup_error(runner: Any) -> str:
    """Ansible's own words when it failed before any task ran: no task output exists yet, so
    nothing of the host's files can be in them."""
    try:
        lines = [line.strip() for line in runner.stdout.read().splitlines() if line.strip()]
    except (OSError, AttributeError):
        return ""
    errors = [line for line in lines if "ERROR" in line]
    return " ".join(errors or lines[-3:])[:500]
