"""The fast path's first half: is a step already converged, answered in plain Python?

Each Ansible module call costs about half a second of CPU here, so checking 50 unchanged files
through Ansible takes half a minute. ``converged(step)`` answers True (Ansible would report ok
and change nothing), False (it would change something) or None (not sure: Ansible decides).
Every step kind and module has an entry in ``RULES`` or in ``DECLINED``; a step without a rule
is declined explicitly, never guessed (tests/unit/executor/test_contract.py checks the table
against every skeleton in playbook_templates/).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

from nodemanager.executor.attrs import Declined, matches, plain_path, same_bytes
from nodemanager.executor.managers import MANAGERS
from nodemanager.playbook.build import Plan
from nodemanager.playbook.steps import Step, StepKind

Verdict = bool | None


def _write(step: Step) -> Verdict:
    if step.content is None:
        return None  # content hidden by render: nothing to compare
    path = Path(step.path)
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return None  # a link, directory or device in the way: Ansible's rules apply
    if step.create_only:
        return True  # force: false on an existing file: copy changes nothing at all
    if not same_bytes(path, step.content):
        return False
    return matches(st, step)


def _touch(step: Step) -> Verdict:
    try:
        st = Path(step.path).lstat()
    except FileNotFoundError:
        return False
    return matches(st, step) if stat.S_ISREG(st.st_mode) else None


def _directory(step: Step) -> Verdict:
    try:
        st = Path(step.path).lstat()
    except FileNotFoundError:
        return False
    return matches(st, step) if stat.S_ISDIR(st.st_mode) else None


def _symlink(step: Step) -> Verdict:
    if step.owner is not None or step.group is not None or step.target is None:
        return None
    if "$" in step.target or step.target.startswith("~"):
        return None
    try:
        st = Path(step.path).lstat()
    except FileNotFoundError:
        return False
    return stat.S_ISLNK(st.st_mode) and os.readlink(step.path) == step.target


def _absent(step: Step) -> Verdict:
    return not os.path.lexists(step.path)


def _purge(step: Step) -> Verdict:
    """No undeclared non-directory entry directly in the directory (nodemanager.core.purge's
    rule, upstream's: subdirectories are never purged)."""
    if not all(plain_path(k) for k in (*step.keep, *step.only)):
        return None
    if os.path.islink(step.path):
        return None
    if not os.path.isdir(step.path):
        return True  # the module, too, reports no change for a missing directory
    keep = set(step.keep)
    with os.scandir(step.path) as entries:
        return all(
            e.is_dir(follow_symlinks=False)
            or e.path in keep
            or (step.only and e.path not in step.only)
            for e in entries
        )


def _systemd_service(step: Step) -> Verdict:
    if not os.path.isdir("/run/systemd/system") or not shutil.which("systemctl"):
        return None
    if step.state is not None:
        active = subprocess.run(["systemctl", "is-active", "--quiet", step.name]).returncode == 0
        if active != (step.state == "started"):
            return False
    if step.enabled is not None:
        out = subprocess.run(
            ["systemctl", "is-enabled", step.name], capture_output=True, text=True
        ).stdout.strip()
        if (out == "enabled") != step.enabled:
            return False
    return True if step.state is not None or step.enabled is not None else None


def _never(step: Step) -> Verdict:
    return False  # an execution always runs when it is reached


class Prober:
    """One run's probes (package lists are read once per run)."""

    def __init__(self) -> None:
        # Package lists are read once per run, one manager call each (executor/managers.py).
        self.managers = {module: make() for module, make in MANAGERS.items()}
        self.rules: dict[tuple[StepKind, str], Callable[[Step], Verdict]] = {
            ("write", "ansible.builtin.copy"): _write,
            ("touch", "ansible.builtin.file"): _touch,
            ("directory", "ansible.builtin.file"): _directory,
            ("symlink", "ansible.builtin.file"): _symlink,
            ("absent", "ansible.builtin.file"): _absent,
            ("purge", "nodemanager.core.purge"): _purge,
            **{("package", m): manager.converged for m, manager in self.managers.items()},
            ("service", "ansible.builtin.service"): _systemd_service,
            ("command", "ansible.builtin.command"): _never,
        }

    def forget(self) -> None:
        """Read package lists again: a command or a package step that ran changed them."""
        for manager in self.managers.values():
            manager.forget()

    def converged(self, step: Step) -> Verdict:
        rule = self.rules.get((step.kind, step.module))
        if rule is None or step.origin.handler:
            return None  # declined: see DECLINED
        if step.path and not plain_path(step.path):
            return None  # Ansible's spelling rules (trailing "/", "$VAR") decide
        try:
            return rule(step)
        except (OSError, ValueError, Declined):
            return None


RULES = frozenset(Prober().rules)
# Step kinds and modules the probe never answers for, and why.
DECLINED: dict[tuple[StepKind, str], str] = {
    ("arguments", "community.general.sysrc"): "rc.conf is FreeBSD's",
    ("restart", "ansible.builtin.service"): "a handler: runs only when notified",
    # services[].user: the user's own manager, reached only as that user.
    ("service", "ansible.builtin.systemd_service"): "a user's systemd, reached as that user",
    ("service", "ansible.builtin.command"): "lingering: loginctl, with creates",
    ("service", "ansible.builtin.wait_for"): "waits for the user's manager",
    ("restart", "ansible.builtin.systemd_service"): "a handler: runs only when notified",
    **{
        ("upgrade", module): "an OS upgrade: only the package manager knows what is newer"
        for module in (
            "community.general.pacman",
            "community.general.apk",
            "community.general.pkgng",
            "ansible.builtin.apt",
            "ansible.builtin.dnf",
        )
    },
}


def converged_tasks(plan: Plan) -> set[str]:
    """Names of the plan's tasks proven converged on the host as it is now (no step runs)."""
    prober = Prober()
    return {s.task for s in plan.tasks() if prober.converged(s) is True}
