"""Render typed steps as Ansible tasks: the one place a task dict is made.

The builder (build.py) emits steps; ``task`` turns one step into its task, filling the skeleton
of its kind from playbook_templates/ with the step's values, and ``playbook`` makes the play of a
plan. `render`, the whole-plan Ansible run and the part the fast path leaves to Ansible all go
through here, so what Ansible runs is what the steps say. No I/O beyond loading skeletons.

The play is what an Ansible team would write (ansible-lint's production profile): each task a
block whose rescue goes on, literal paths, a file guard as a stat and an assert; `render`'s
copy lacks only the tasks that exist for ansible-runner's censored events (``reporter``).
"""

from __future__ import annotations

import copy
import functools
import hashlib
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from nodemanager.playbook import platforms
from nodemanager.playbook.dump import NOQA, LongUnsafe, Unsafe
from nodemanager.playbook.steps import EXEC_PATH, Batch, Origin, Step, StepKind, exec_argv

if TYPE_CHECKING:
    from nodemanager.playbook.build import Plan

REDACTED = "<redacted: from a Secret; render --show-secrets to see it>"
# The name of the task reporting a no_log task's outcome.
REPORTED = "{task} | reported"
NOTIFY_TASK = "nodemanager: notify the handlers of native changes"
# Still copy's `content`, read back by a lookup: `src:` would mean something else (a directory
# in the way gets a file put inside it, where `content` fails as Ansible says it must). A
# lookup's result is not templated again, so the bytes stay exactly these.
SPILLED = "{{ lookup('ansible.builtin.file', nodemanager_spilled, rstrip=False) }}"

# Values the renderer chooses itself (module state words); everything else came from a ConfigSet.
TRUSTED = frozenset({"state"})
# `ensure: file` over a directory (or a symlink to one) fails saying so before the module runs:
# copy would put a file inside it and touch would change the directory's mode, neither what
# `ensure: file` means. A stat (following links, as copy and touch do) and an assert, in the
# file task's block: the assert failing skips the file task. The agent reports the assert's
# failure as the file task's, and nothing of a passing guard (executor/run.py).
GUARD_STAT = "{task}: stat"
GUARD = "{task}: not a directory"
GUARDED: frozenset[StepKind] = frozenset({"write", "touch"})
GUARD_MESSAGE = " is a directory: ensure: file cannot make it a file"
# One failing task must not stop the others: each task is a block whose rescue does nothing
# (a meta task: no event, no line of output), so Ansible goes on and still reports the failure.
GO_ON = {"name": "Go on with the other resources", "ansible.builtin.meta": "noop"}
# ansible-lint rules a task breaks on purpose, with the reason (dump.py writes each as a
# comment in the task that ansible-lint reads as skipping the rule).
NOQA_MODE = (
    "risky-file-permissions",
    "mode unset in the ConfigSet: a new file gets the umask's mode, an existing one keeps its own",
)
NOQA_LATEST = (
    "package-latest",
    "ensure: latest in the ConfigSet: the newest version is what it asks for",
)
NOQA_HANDLER = (
    "ignore-errors",
    "handlers cannot rescue: one failing handler must not stop the others",
)
# services[].user: the user's runtime directory, where `systemctl --user` finds its manager. The
# name comes in through a task variable holding the Unsafe value, shell-quoted for `id`.
USER_VAR = "nodemanager_user"
USER_PYTHON = "/usr/bin/python3"
USER_RUNTIME_DIR = (
    "/run/user/{{ lookup('ansible.builtin.pipe', 'id -u -- ' ~ (nodemanager_user | quote)) }}"
)
# The skeleton in playbook_templates/files.yaml of each file step kind.
FILE_FORMS: dict[StepKind, str] = {
    "write": "content",
    "touch": "file",
    "directory": "directory",
    "symlink": "symlink",
    "absent": "absent",
    "purge": "purge",
}
# Task keys that are Ansible keywords; the one other key of a task is its module.
TASK_KEYWORDS = frozenset(
    {
        "name",
        "listen",
        "notify",
        "ignore_errors",
        "no_log",
        "diff",
        "when",
        "register",
        "tags",
        "vars",
        "changed_when",
        "become",
        "become_user",
        "become_method",
        "environment",
        NOQA,
    }
)


def module_of(task: Mapping[str, Any]) -> tuple[str, Any]:
    """The module a task calls and its parameters."""
    (module,) = [k for k in task if k not in TASK_KEYWORDS]
    return module, task[module]


# A user service's steps besides its state: lingering, then waiting for its manager.
LINGER, MANAGER = "ansible.builtin.command", "ansible.builtin.wait_for"


def fill(skeleton: Any, values: Mapping[str, Any]) -> Any:
    """Replace "$name" strings in a skeleton with ``values[name]``; drop parameters left unset.

    ConfigSet values come back ``Unsafe`` so Ansible never templates them.
    """
    if isinstance(skeleton, dict):
        out = {}
        for k, v in skeleton.items():
            filled = fill(v, values)
            if filled is not None:
                out[k] = filled
        return out
    if isinstance(skeleton, str) and skeleton.startswith("$"):
        key = skeleton[1:]
        return values.get(key) if key in TRUSTED else _unsafe(values.get(key))
    return copy.deepcopy(skeleton)


def _unsafe(value: Any) -> Any:
    if isinstance(value, str):
        # Ansible 2.19 loads an empty `!unsafe ''` as null; an empty string has nothing to template.
        if len(value) > LongUnsafe.ABOVE:
            return LongUnsafe(value)  # not a copy of a file's megabytes
        return Unsafe(value) if value else value
    if isinstance(value, (list, tuple)):
        return [_unsafe(v) for v in value]
    return value


def reported_var(task: str) -> str:
    """The variable a no_log task registers, read by the task reporting it."""
    return "nodemanager_secret_" + hashlib.sha256(task.encode()).hexdigest()[:12]


def started_var(service: str) -> str:
    """The variable a service's start task registers: an identifier whatever the name."""
    return "nodemanager_started_" + hashlib.sha256(service.encode()).hexdigest()[:12]


def skeleton(step: Step, family: str) -> dict[str, Any]:
    """The skeleton a step's module call is filled from."""
    if step.kind in FILE_FORMS:
        return dict(platforms.skeletons("files")[FILE_FORMS[step.kind]])
    if step.kind == "command":
        return dict(platforms.skeletons("executions")["command"])
    if step.kind == "upgrade":
        return dict(platforms.skeletons("upgrades")[family])
    if step.kind == "package":
        return dict(platforms.for_family("packages", family)["task"])
    user = platforms.skeletons("services")["user"]
    services = user if step.user else platforms.for_family("services", family)
    if step.kind == "service" and step.module in (LINGER, MANAGER):
        return dict(user["linger" if step.module == LINGER else "bus"])
    part = {"service": "task", "restart": "restart", "arguments": "arguments"}[step.kind]
    return dict(services[part])


@functools.cache
def module(kind: StepKind, family: str, user: bool = False) -> str:
    """The module a step of ``kind`` calls on ``family`` (a user service's with ``user``);
    a user service's lingering and manager steps call LINGER and MANAGER."""
    sample = Step(kind, "", Origin("", ()), "", user="u" if user else None)
    return module_of(skeleton(sample, family))[0]


def _values(step: Step) -> dict[str, Any]:
    content = SPILLED if step.content_file else step.content
    return {
        "path": step.path,
        "owner": step.owner,
        "group": step.group,
        "target": step.target,
        "mode": step.mode,
        "force": False if step.create_only else None,
        "content": REDACTED if content is None else content,
        "keep": list(step.keep),
        "only": list(step.only) or None,
        "argv": exec_argv(step.argv) if step.kind == "command" else None,
        "name": step.name,
        "state": step.state,
        "enable": step.enabled,
        "variable": f"{step.name.replace('-', '_')}_args",
        "arguments": step.arguments,
    }


def call(step: Step, family: str) -> dict[str, Any]:
    """The module call of ``step`` (the module's key and its parameters, the skeleton's vars)."""
    sk = skeleton(step, family)
    if step.kind == "upgrade":
        return copy.deepcopy(sk)
    if step.module == LINGER and step.kind == "service":
        user = step.user or ""
        linger: dict[str, Any] = fill(
            sk, {"argv": ["loginctl", "enable-linger", user], "linger": _linger(user)}
        )
        return linger
    if step.module == MANAGER:
        bus = copy.deepcopy(sk)
        bus[MANAGER]["path"] = USER_RUNTIME_DIR + "/systemd/private"
        return bus
    filled: dict[str, Any] = fill(sk, _values(step))
    if step.content_file:  # the lookup is the renderer's: templated, not !unsafe
        filled[step.module]["content"] = SPILLED
        filled["vars"] = {"nodemanager_spilled": step.content_file}
    return filled


def _linger(user: str) -> str:
    return f"/var/lib/systemd/linger/{user}"


def task(step: Step, family: str) -> dict[str, Any]:
    """The Ansible task of ``step``."""
    if step.kind == "upgrade":
        return {"name": step.task, **call(step, family)}
    made = call(step, family)
    out: dict[str, Any] = {"name": Unsafe(step.task)}
    if _mode_left(step, made):
        out[NOQA] = NOQA_MODE  # a comment beside the name, where a reviewer reads first
    elif step.kind == "package" and step.state == "latest":
        out[NOQA] = NOQA_LATEST
    out.update(made)
    if step.listen:
        out["listen"] = [Unsafe(t) for t in step.listen]
    if step.notify:
        out["notify"] = [Unsafe(t) for t in step.notify]
    if step.registers_start:
        out["register"] = started_var(step.name)
    if step.conditional:
        started = started_var(step.name)
        out["when"] = f"not ({started} is defined and {started} is changed)"
    if step.kind == "command":
        out["changed_when"] = True  # a command that ran changed something: its module says so too
    if step.origin.secret:
        out["no_log"] = True
        out["diff"] = False
    if step.literal:  # `$HOME` and `~` mean themselves: the module's environment keeps them so
        out["environment"] = {k: Unsafe(v) for k, v in step.literal}
    if step.kind == "command":
        out["environment"] = {"PATH": EXEC_PATH}
    if step.module == MANAGER:
        out["vars"] = {USER_VAR: Unsafe(step.user or "")}
    elif step.user and step.module != LINGER:
        out = as_user(out, step.user)
    return out


def _mode_left(step: Step, task: Mapping[str, Any]) -> bool:
    """Whether the task may create a file or directory without saying its mode."""
    if step.kind not in ("write", "touch", "directory"):
        return False
    return "mode" not in module_of(task)[1]


def as_user(task: dict[str, Any], user: str) -> dict[str, Any]:
    """``task`` run as ``user`` with that user's runtime directory (services[].user)."""
    return {
        **task,
        "become": True,
        "become_user": Unsafe(user),
        "become_method": "ansible.builtin.su",
        "environment": {"XDG_RUNTIME_DIR": USER_RUNTIME_DIR},
        # The agent's own interpreter may sit where the user cannot read (a root-only
        # venv, found first on the agent's PATH); the module needs only the standard
        # library, so the host's python runs it.
        "vars": {USER_VAR: Unsafe(user), "ansible_python_interpreter": USER_PYTHON},
    }


def reporter(step: Step) -> dict[str, Any]:
    """The task that reports what the no_log task of ``step`` did to the agent: ansible-runner
    censors its whole result in events (`changed` too; ansible-playbook's own output keeps
    it), not what it registers. Only whether it changed is read, never its content. Only the
    agent's playbook has it (``playbook(exported=False)``)."""
    return {
        "name": Unsafe(step.reported_by),
        "ansible.builtin.debug": {"msg": "what the task before did (no_log hides it)"},
        "changed_when": f"{reported_var(step.task)} is changed",
    }


def guard_var(step: Step) -> str:
    """The variable the guard's stat of ``step``'s path registers."""
    return "nodemanager_stat_" + hashlib.sha256(step.task.encode()).hexdigest()[:12]


def guards(step: Step) -> list[dict[str, Any]]:
    """The stat and assert before a file step that must not meet a directory (GUARD)."""
    if step.kind not in GUARDED:
        return []
    stat: dict[str, Any] = {
        "name": Unsafe(GUARD_STAT.format(task=step.task)),
        "ansible.builtin.stat": {
            "path": Unsafe(step.path),
            "follow": True,  # as copy and touch follow a symlink
            "get_checksum": False,
            "get_mime": False,
            "get_attributes": False,
        },
        "register": guard_var(step),
    }
    if step.literal:
        stat["environment"] = {k: Unsafe(v) for k, v in step.literal}
    var = guard_var(step)
    check: dict[str, Any] = {
        "name": Unsafe(GUARD.format(task=step.task)),
        "ansible.builtin.assert": {
            "that": [f"not ({var}.stat.isdir | default(false))"],
            "fail_msg": Unsafe(step.path + GUARD_MESSAGE),
            "quiet": True,
        },
    }
    return [stat, check]


def leaves(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tasks of ``items`` with every block opened (its rescue's too), in order, without
    the rescues that only go on (GO_ON)."""
    out: list[dict[str, Any]] = []
    for item in items:
        if "block" in item:
            out += leaves([*item["block"], *item.get("rescue", [])])
        elif item != GO_ON:
            out.append(item)
    return out


def _notify(topics: tuple[str, ...]) -> dict[str, Any]:
    return {
        "name": NOTIFY_TASK,
        "ansible.builtin.debug": {"msg": "native changes notify their handlers"},
        "changed_when": True,
        "notify": sorted(Unsafe(t) for t in topics),
    }


def tasks(steps: list[Step], family: str, *, agent: bool = True) -> list[dict[str, Any]]:
    """The play tasks of ``steps`` in order: each a block of its guard and itself (and, for
    the agent, a no_log task's reporter) whose rescue goes on with the next."""
    out = []
    for step in steps:
        made = task(step, family)
        body = [*guards(step), made]
        if agent and step.reported_by:
            made["register"] = reported_var(step.task)
            body.append(reporter(step))
        out.append({"name": Unsafe(step.task), "block": body, "rescue": [dict(GO_ON)]})
    return out


def handlers(steps: list[Step], family: str) -> list[dict[str, Any]]:
    """The handlers of ``steps``: Ansible runs a handler outside any block's rescue, so
    ignore_errors keeps one failing handler from stopping the others (NOQA_HANDLER)."""
    out = []
    for step in steps:
        h = task(step, family)
        out.append({"name": h.pop("name"), NOQA: NOQA_HANDLER, **h, "ignore_errors": True})
    return out


def batched(
    steps: list[Step], batches: tuple[Batch, ...], family: str, *, agent: bool = True
) -> list[dict[str, Any]]:
    """The tasks of ``steps``, a batch's steps as one block where its first step stands: the
    list's task (the first member's module call with every listed name), its steps' own tasks
    as the rescue."""
    first = {b.steps[0].task: b for b in batches}
    covered = {s.task for b in batches for s in b.steps}
    out: list[dict[str, Any]] = []
    for step in steps:
        b = first.get(step.task)
        if b is not None:
            module, params = module_of(call(b.members[0], family))
            names = [module_of(call(s, family))[1]["name"] for s in b.listed]
            listed = {"name": Unsafe(b.task), module: {**params, "name": names}}
            rescue = tasks(list(b.steps), family, agent=agent)
            out.append({"name": Unsafe(b.task), "block": [listed], "rescue": rescue})
        elif step.task not in covered:
            out.extend(tasks([step], family, agent=agent))
    return out


def playbook(plan: Plan, *, agent: bool = True) -> list[dict[str, Any]]:
    """The plan as a playbook of one play: a first task notifying the handlers of native
    changes, the tasks, then the handlers (as tasks, in order, when the plan forces them).
    ``agent=False`` is what `render` exports: the same tasks without the reporters that only
    ansible-runner's censored events need."""
    play_tasks = [_notify(plan.notified)] if plan.notified else []
    play_tasks += batched(plan.tasks(), plan.batches, plan.family, agent=agent)
    play_handlers = handlers(plan.handlers(), plan.family)
    if plan.forced:
        # nothing is left to notify them: each runs as a task, in handler order
        forced = [replace(h, listen=()) for h in plan.handlers()]
        play_tasks += tasks(forced, plan.family, agent=agent)
        play_handlers = []
    upgrade = any(s.kind == "upgrade" for s in plan.steps)
    play: dict[str, Any] = {
        "name": Unsafe(f"{'Upgrade' if upgrade else 'Apply the ConfigSets of'} {plan.node}"),
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
    }
    if not upgrade:
        # Restart what changed even when another resource failed.
        play["force_handlers"] = True
    play["vars"] = {"ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    play["tasks"] = play_tasks
    if play_handlers:
        play["handlers"] = play_handlers
    return [play]
