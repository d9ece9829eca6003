"""The fast path's second half: make the simple, common changes in plain Python.

A changed file costs Ansible's copy action two module calls plus the playbook start-up, about
1.5 s here; this writes the same bytes atomically in milliseconds, keeping what Ansible's
atomic_move keeps (owner, group, special bits, xattrs) before the declared attributes apply.
Taken: file content (``write``), files without content (``touch``), directories, and executions
(argv, ``chdir /``, the fixed PATH, no expansion: exactly what the rendered task runs). Anything
else, or anything that cannot be done exactly (unknown user, symbolic mode, a missing parent
directory of a file, another type in the way, a parent with a default ACL, a command in check mode),
is declined: Ansible does it.
"""

from __future__ import annotations

import difflib
import os
import stat
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from nodemanager.executor import attrs, config
from nodemanager.executor.attrs import Declined
from nodemanager.executor.events import TaskResult, TaskStatus, headers
from nodemanager.playbook.steps import EXEC_PATH, Step, StepKind, exec_argv
from nodemanager.procutil import die_with_parent

# Ansible's copy leaves the diff out when either side is larger than this (DIFF max size).
MAX_DIFF = 104448
# How much of an existing file Ansible's diff peek reads to tell binary from text.
PEEK = 8192


def _result(step: Step, status: TaskStatus, diff: str = "", message: str = "") -> TaskResult:
    o = step.origin
    return TaskResult(
        step.task,
        o.resource,
        o.configsets,
        status,
        message=message,
        diff="" if o.secret else diff,
        handler=o.handler,
        module="native",
    )


def diff_text(path: str, before: str, after: str) -> str:
    """The unified diff of a content change, as events.py renders Ansible's."""
    old, new = headers(path)
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), old, new))


def _parent_ok(path: Path) -> None:
    if not path.parent.is_dir() or path.parent.is_symlink():
        raise Declined("parent is not a plain directory")


def _write(step: Step, check: bool, want_diff: bool) -> TaskResult:
    if step.content is None:
        raise Declined("content hidden")
    path = Path(step.path)
    _parent_ok(path)
    attrs.uid_of(step.owner), attrs.gid_of(step.group), attrs.mode_of(step.mode)
    if not check and attrs.default_acl(path.parent):
        raise Declined("a default ACL: where Ansible's temporary file lives decides")
    try:
        st = path.lstat()
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise Declined("another type in the way")
    if st is not None and step.create_only:
        return _result(step, "ok")
    same = st is not None and attrs.same_bytes(path, step.content)
    diff = ""
    small = st is None or st.st_size <= MAX_DIFF
    if want_diff and not same and small and attrs.encoded_size(step.content) <= MAX_DIFF:
        old = path.read_bytes() if st is not None else b""
        # Binary as Ansible judges it: a NUL in the old file's first 8 KiB (its peek), or
        # anywhere in the new content; then it shows no diff.
        if b"\0" not in old[:PEEK] and "\0" not in step.content:
            diff = diff_text(step.path, old.decode(errors="replace"), step.content)
    if check:
        changed = not same or st is None or not attrs.matches(st, step)
        return _result(step, "changed" if changed else "ok", diff)
    if not same or st is None:
        attrs.replace(path, step.content)
        attrs.apply(path, step)
        return _result(step, "changed", diff)
    return _result(step, "changed" if attrs.apply(path, step) else "ok")


def _touch(step: Step, check: bool, want_diff: bool) -> TaskResult:
    path = Path(step.path)
    _parent_ok(path)
    attrs.uid_of(step.owner), attrs.gid_of(step.group), attrs.mode_of(step.mode)
    try:
        st = path.lstat()
    except FileNotFoundError:
        if not check:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            os.close(fd)
            attrs.apply(path, step)
        return _result(step, "changed")
    if not stat.S_ISREG(st.st_mode):
        raise Declined("another type in the way")
    if check:
        return _result(step, "ok" if attrs.matches(st, step) else "changed")
    return _result(step, "changed" if attrs.apply(path, step) else "ok")


def _missing_parents(path: Path) -> list[Path]:
    """The ancestors of ``path`` to create, outermost first, below its nearest existing one,
    which must be a plain directory (a link or a file there is Ansible's to report)."""
    missing = []
    parent = path.parent
    while True:
        try:
            st = parent.lstat()
        except FileNotFoundError:
            missing.append(parent)
            parent = parent.parent
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise Declined("an ancestor is not a plain directory")
        return missing[::-1]


def _directory(step: Step, check: bool, want_diff: bool) -> TaskResult:
    path = Path(step.path)
    missing = _missing_parents(path)
    attrs.uid_of(step.owner), attrs.gid_of(step.group), attrs.mode_of(step.mode)
    try:
        st = path.lstat()
    except FileNotFoundError:
        if not check:
            # As Ansible's file module does: every directory it creates, missing parents
            # included, gets the declared owner, group and mode (mkdir -p with attributes).
            for new in [*missing, path]:
                new.mkdir()
                attrs.apply(new, step)
        return _result(step, "changed")
    if not stat.S_ISDIR(st.st_mode):
        raise Declined("another type in the way")
    if check:
        return _result(step, "ok" if attrs.matches(st, step) else "changed")
    return _result(step, "changed" if attrs.apply(path, step) else "ok")


def command_env() -> dict[str, str]:
    """What an execution sees, the same as through Ansible: the agent's environment with
    PATH fixed to EXEC_PATH (the rendered task's `environment:`), the locale Ansible is given
    (config.locale_env: C.UTF-8 when the agent's is not installed), and EXEC_UNSET dropped by
    the same ``env`` both paths run."""
    return {**os.environ, **config.locale_env(), "PATH": EXEC_PATH}


def _command(step: Step, check: bool, want_diff: bool) -> TaskResult:
    if check:
        raise Declined("check mode: Ansible reports what a command would do")
    argv = list(step.argv)
    # Output goes to files, not pipes: a background child that keeps them open must not keep
    # the step waiting (Ansible returns when the command exits, too). Its own session keeps
    # signals meant for the agent's terminal or group away from what it starts.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                exec_argv(argv),
                cwd="/",
                env=command_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                preexec_fn=die_with_parent,  # a kill -9 of the agent takes the command with it
            )
        except OSError as e:  # no env: the same failure Ansible reports
            return _result(step, "failed", message=f"{argv[0]}: {e.strerror}")
        returncode = proc.wait()
        if returncode == 0:
            return _result(step, "changed")
        detail = _tail(err) or _tail(out)
    message = f"{' '.join(argv)} exited {returncode}" + (f": {detail}" if detail else "")
    return _result(step, "failed", message=message)


def _tail(f: IO[bytes]) -> str:
    """The last 500 characters a command wrote to ``f``, stripped."""
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - 2000))
    return f.read().decode(errors="replace").strip()[-500:]


ACTS: dict[tuple[StepKind, str], Callable[[Step, bool, bool], TaskResult]] = {
    ("write", "ansible.builtin.copy"): _write,
    ("touch", "ansible.builtin.file"): _touch,
    ("directory", "ansible.builtin.file"): _directory,
    ("command", "ansible.builtin.command"): _command,
}
# Everything else is Ansible's to do, for these reasons.
DECLINED: dict[StepKind, str] = {
    "symlink": "link replacement rules (force, a directory in the way) are Ansible's",
    "absent": "recursive removal is Ansible's",
    "purge": "the purge module decides what to remove",
    "package": "package managers",
    "service": "init systems",
    "arguments": "rc.conf",
    "restart": "init systems",
    "upgrade": "package managers",
}


def act(step: Step, *, check: bool, diff: bool = False) -> TaskResult | None:
    """Apply one step natively (or, in check mode, say what would change), or None to leave it
    to Ansible."""
    do = ACTS.get((step.kind, step.module))
    if do is None or (step.path and not attrs.plain_path(step.path)):
        return None
    try:
        return do(step, check, diff)
    except (Declined, OSError, ValueError):
        return None
