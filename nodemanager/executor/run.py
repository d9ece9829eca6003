"""Run a plan through ansible-runner, once, in a fresh private data dir that is removed after."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from nodemanager.executor import config, native, probe
from nodemanager.executor.errors import ExecutorError
from nodemanager.executor.events import TaskResult, to_result
from nodemanager.playbook.build import Plan
from nodemanager.playbook.dump import to_yaml

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
    """Apply ``plan`` with the fast path: tasks proven converged are reported ok, changed file
    content and directories are written natively, executions run natively while nothing before
    them is left to Ansible, and only the rest, with the handlers the native writes notified,
    go to Ansible (in play order). ``fast=False`` sends every task to Ansible.

    ``before_change`` sees the resources of every task not proven converged, once, before the
    native writes and Ansible touch anything (the agent backs up the files they may replace)."""
    if not fast:
        if before_change and not check:
            before_change(_resources(plan, set()))
        return execute(plan, check=check, diff=diff, on_result=on_result, **kwargs)
    local: list[TaskResult] = []

    def report(result: TaskResult) -> None:
        local.append(result)
        if on_result:
            on_result(result)

    handled = probe.converged_tasks(plan)
    if before_change and not check:
        before_change(_resources(plan, handled))
    for name in sorted(handled):
        origin = plan.origins[name]
        report(TaskResult(name, origin.resource, origin.configsets, "ok", module="probe"))
    notified: set[str] = set()
    left_to_ansible = False  # once a task is, later executions must wait for it: order matters

    def natively(task: dict[str, Any]) -> bool:
        try:
            done = native.try_native(
                task,
                plan.origins[task["name"]],
                check=check,
                diff=diff,
                commands=not left_to_ansible,
            )
        except OSError as e:
            log.info("native write of %s left to Ansible: %s", task["name"], e)
            done = None
        if done:
            handled.add(task["name"])
            report(done.result)
            notified.update(done.notify)
        return bool(done)

    for play in plan.playbook:
        for task in play["tasks"]:
            if task["name"] not in handled and not natively(task):
                left_to_ansible = True
        # Handlers of natively changed files run after every task, in their own order.
        for handler in play.get("handlers", []):
            if notified & set(handler.get("listen", ())) and not natively(handler):
                left_to_ansible = True

    plays = []
    for play in plan.playbook:
        handlers = play.get("handlers", [])
        forced = [h for h in handlers if notified & set(h.get("listen", ()))]
        tasks = [t for t in play["tasks"] if t["name"] not in handled]
        tasks += [
            {k: v for k, v in h.items() if k != "listen"}
            for h in forced
            if h["name"] not in handled
        ]
        rest = {**play, "tasks": tasks, "handlers": [h for h in handlers if h not in forced]}
        if not rest["handlers"]:
            del rest["handlers"]
        plays.append(rest)
    if not any(play["tasks"] for play in plays):
        return RunResult("successful", 0, tuple(local), ansible=False)
    ran = execute(
        replace(plan, playbook=plays), check=check, diff=diff, on_result=on_result, **kwargs
    )
    return replace(ran, results=tuple(local) + ran.results)


# Called with the ids of resources about to be changed (``file:/etc/x``), before any change.
BeforeChange = Callable[[list[str]], None]


def _resources(plan: Plan, converged: set[str]) -> list[str]:
    return sorted(
        {
            plan.origins[t["name"]].resource
            for play in plan.playbook
            for t in play["tasks"]
            if t["name"] not in converged
        }
    )


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

    config.check_modules(config.modules_of(plan.playbook))
    private = config.private_dir(work_dir)
    results: list[TaskResult] = []

    def handle(event: dict[str, Any]) -> bool:
        result = to_result(event, plan.origins)
        if result is not None:
            results.append(result)
            if on_result:
                on_result(result)
        # Returning False keeps the event out of the private dir: results may hold file contents.
        return False

    try:
        (private / "project").mkdir()
        (private / "project" / "main.yml").write_text(to_yaml(plan.playbook))
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
        if keep_dir:
            log.info("private data dir kept at %s", private)
        else:
            shutil.rmtree(private, ignore_errors=True)


def _startup_error(runner: Any) -> str:
    """Ansible's own words when it failed before any task ran: no task output exists yet, so
    nothing of the host's files can be in them."""
    try:
        lines = [line.strip() for line in runner.stdout.read().splitlines() if line.strip()]
    except (OSError, AttributeError):
        return ""
    errors = [line for line in lines if "ERROR" in line]
    return " ".join(errors or lines[-3:])[:500]
