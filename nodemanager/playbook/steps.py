"""Typed steps: what the plan does, one value per task or handler, in play order.

The builder emits a step for every task and handler; the steps are the plan. render.py turns a
step into its Ansible task (the only place a task dict is made), and the executor reads, splits
and hands over steps, never task dicts. A step carries its origin: the resource id, the
ConfigSets declaring it and the field path in the first of them (``spec.files[2]``), so every
report can name what a user wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

StepKind = Literal[
    "write",  # a file's content (copy)
    "touch",  # a file that exists, bytes left alone
    "directory",
    "symlink",
    "absent",
    "purge",  # undeclared entries below a directory removed
    "package",
    "service",  # a service's run state and/or enablement
    "arguments",  # a service's rc.conf arguments (FreeBSD)
    "command",  # an execution, as a task or as a handler
    "restart",  # a service restart handler
    "upgrade",  # the OS upgrade (ManagedNode spec.upgrade): everything the package manager has
]
KINDS: tuple[StepKind, ...] = (
    "write",
    "touch",
    "directory",
    "symlink",
    "absent",
    "purge",
    "package",
    "service",
    "arguments",
    "command",
    "restart",
    "upgrade",
)
FILE_KINDS = frozenset({"write", "touch", "directory", "symlink", "absent", "purge"})


@dataclass(frozen=True)
class Origin:
    resource: str  # Resource.id, "kind:key"
    configsets: tuple[str, ...]
    field: str = ""  # e.g. "spec.files[2]" in the first ConfigSet
    handler: bool = False
    secret: bool = False


@dataclass(frozen=True)
class Step:
    kind: StepKind
    task: str  # the task's name in the rendered playbook (the key of Plan.origins)
    origin: Origin
    module: str  # the Ansible module the renderer calls for it
    path: str = ""
    content: str | None = None  # None for Secret-fed content hidden by render
    owner: str | None = None
    group: str | None = None
    mode: str | None = None
    target: str | None = None
    create_only: bool = False
    keep: tuple[str, ...] = ()
    only: tuple[str, ...] = ()  # a purge of these entries alone (empty: every entry)
    argv: tuple[str, ...] = ()
    name: str = ""  # package or service name
    state: str | None = None  # the module's state word
    enabled: bool | None = None
    user: str | None = None  # services[].user: a systemd user service of this user
    arguments: str | None = None  # a service's rc.conf arguments
    notify: tuple[str, ...] = ()
    listen: tuple[str, ...] = ()
    conditional: bool = False  # rendered with a `when` (a restart skipped after a start)
    registers_start: bool = False  # a start its restart handler reads (started apart)
    # The module's environment under which Ansible's `$NAME`/`~` expansion of path, target and
    # kept paths leaves them as written (playbook/literal.py).
    literal: tuple[tuple[str, str], ...] = ()
    # The executor's spill of large content: Ansible reads it from this file, not the playbook.
    content_file: str | None = None
    # A no_log (Secret-fed) task's outcome is censored in Ansible's events, `changed` included:
    # this task after it reports it (render.REPORTED).
    reported_by: str = ""


@dataclass(frozen=True)
class Batch:
    """Package steps of one module and state handed to the module as one list: one task, one
    transaction. The ``pulled`` ones are later steps that installing (or removing) the members
    brings about: the module, called for them one by one after the members, would find nothing
    to do. Should the list fail, every step runs as its own task instead (the rescue of the
    list's block), in play order."""

    task: str  # the name of the list's task
    steps: tuple[Step, ...]  # members and pulled, in play order
    pulled: frozenset[str] = frozenset()  # task names
    list_pulled: bool = False  # the pulled names go in the list too (the module marks them)

    @property
    def members(self) -> list[Step]:
        return [s for s in self.steps if s.task not in self.pulled]

    @property
    def listed(self) -> list[Step]:
        """The steps whose names the list task passes to the module."""
        return list(self.steps) if self.list_pulled else self.members


# The PATH every execution runs with, under Ansible (the task's `environment:`) and natively
# alike, whatever the agent's own PATH (a venv's bin first under ansible-runner, say).
EXEC_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Variables the executor (executor/config.py envvars) and ansible-runner set for
# ansible-playbook, which its modules pass on to the commands they run: an execution sees none
# of them, through Ansible or natively (README "Executions"). Some hold the run's private paths.
EXEC_UNSET = (
    # the executor's
    "ANSIBLE_COLLECTIONS_PATH",
    "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH",
    "ANSIBLE_DEPRECATION_WARNINGS",
    "ANSIBLE_GATHERING",
    "ANSIBLE_INVENTORY_UNPARSED_WARNING",
    "ANSIBLE_LOCALHOST_WARNING",
    "ANSIBLE_LOCAL_TEMP",
    "ANSIBLE_NOCOLOR",
    "ANSIBLE_NO_TARGET_SYSLOG",
    "ANSIBLE_PIPELINING",
    "ANSIBLE_REMOTE_TMP",
    "ANSIBLE_RETRY_FILES_ENABLED",
    "NODEMANAGER_RUN_DIR",  # procutil.RUN_MARK
    # ansible-runner's (ansible_runner/config/_base.py, runner.py)
    "AD_HOC_COMMAND_ID",
    "ANSIBLE_CACHE_PLUGIN",
    "ANSIBLE_CACHE_PLUGIN_CONNECTION",
    "ANSIBLE_CALLBACK_PLUGINS",
    "ANSIBLE_HOST_KEY_CHECKING",
    "ANSIBLE_LOAD_CALLBACK_PLUGINS",
    "ANSIBLE_ROLES_PATH",
    "ANSIBLE_STDOUT_CALLBACK",
    "ANSIBLE_UNSAFE_WRITES",
    "AWX_ISOLATED_DATA_DIR",
    "ORIGINAL_STDOUT_CALLBACK",
    "RUNNER_OMIT_EVENTS",
    "RUNNER_ONLY_FAILED_EVENTS",
)


def exec_argv(argv: tuple[str, ...] | list[str]) -> list[str]:
    """What runs for an execution's ``argv``, the same words in both paths: ``env`` (POSIX, at
    /usr/bin/env on every supported platform) drops EXEC_UNSET, then execs the command with
    EXEC_PATH. Ansible's `environment:` can set variables but not remove them; this can."""
    unset = [word for name in EXEC_UNSET for word in ("-u", name)]
    return ["/usr/bin/env", *unset, "--", *argv]


def user_argv(words: list[str]) -> list[str]:
    """The execution's own argv in what ``exec_argv`` made of it (for messages)."""
    prefix = exec_argv([])
    return words[len(prefix) :] if words[: len(prefix)] == prefix else words
