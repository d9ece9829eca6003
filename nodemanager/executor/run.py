"""Run a plan through ansible-runner, once, in a fresh private data dir that is removed after."""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field, replace
from typing import Callable

import ansible_runner

from nodemanager.executor import config, probe
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

    @property
    def failed(self) -> bool:
        return self.status != "successful" or any(r.status == "failed" for r in self.results)

    def changed(self) -> list[TaskResult]:
        return [r for r in self.results if r.status == "changed"]


def apply(plan: Plan, *, fast: bool = True, on_result: Callable[[TaskResult], None] | None = None,
          **kwargs) -> RunResult:
    """Apply ``plan``: tasks the fast path proves converged are reported ok without Ansible;
    the rest (and every handler they notify) run through Ansible. ``fast=False`` runs it all."""
    if not fast:
        return execute(plan, on_result=on_result, **kwargs)
    done = probe.converged_tasks(plan)
    skipped = []
    for name in sorted(done):
        origin = plan.origins[name]
        result = TaskResult(name, origin.resource, origin.configsets, "ok", module="probe")
        skipped.append(result)
        if on_result:
            on_result(result)
    rest = replace(plan, playbook=[{**play, "tasks": [t for t in play["tasks"] if t["name"] not in done]}
                                   for play in plan.playbook])
    if not any(play["tasks"] for play in rest.playbook):
        return RunResult("successful", 0, tuple(skipped), ansible=False)
    ran = execute(rest, on_result=on_result, **kwargs)
    return replace(ran, results=tuple(skipped) + ran.results)


def execute(plan: Plan, *, check: bool = False, diff: bool = False, work_dir: str | None = None,
            on_result: Callable[[TaskResult], None] | None = None, keep_dir: bool = False) -> RunResult:
    """Run ``plan`` through ansible-runner. ``on_result`` sees each task outcome as it happens."""
    config.check_modules(config.modules_of(plan.playbook))
    private = config.private_dir(work_dir)
    results: list[TaskResult] = []

    def handle(event: dict) -> bool:
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
        runner = ansible_runner.run(
            private_data_dir=str(private),
            playbook="main.yml",
            envvars=config.envvars(private),
            cmdline=cmdline or None,
            event_handler=handle,
            # An explicit callback keeps ansible-runner from replacing the agent's SIGTERM handler;
            # a run in progress always finishes, so no resource is left half-applied.
            cancel_callback=lambda: False,
            quiet=True,
            suppress_env_files=True,
            settings={"suppress_ansible_output": True},
        )
        return RunResult(runner.status, runner.rc if runner.rc is not None else -1, tuple(results))
    finally:
        if keep_dir:
            log.info("private data dir kept at %s", private)
        else:
            shutil.rmtree(private, ignore_errors=True)
