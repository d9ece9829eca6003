"""The fast path's second half: do the simple, common changes in plain Python.

A changed file costs Ansible's copy action two module calls plus the playbook start-up, about
1.5 s here; this writes the same bytes atomically (temporary file, fsync, rename) with the same
mode, owner and group in milliseconds. Taken: file content (``ansible.builtin.copy`` with
``content``), directories, and executions (``ansible.builtin.command`` with ``argv`` and
``chdir``: no shell, exactly what the module runs). Anything else, or anything that cannot be
done exactly (unknown user, missing parent directory, check mode for a command), is left to
Ansible; so are service restarts.
"""

from __future__ import annotations

import difflib
import grp
import os
import pwd
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodemanager.executor.events import TaskResult
from nodemanager.fsutil import write_atomic
from nodemanager.playbook.build import TaskOrigin


@dataclass(frozen=True)
class Native:
    result: TaskResult
    notify: tuple[str, ...]


def _ids(params: dict[str, Any]) -> tuple[int, int] | None:
    try:
        uid = pwd.getpwnam(str(params["owner"])).pw_uid if params.get("owner") is not None else -1
        gid = grp.getgrnam(str(params["group"])).gr_gid if params.get("group") is not None else -1
    except KeyError:
        return None
    return uid, gid


def _set_attrs(path: Path, params: dict[str, Any], ids: tuple[int, int]) -> None:
    if ids != (-1, -1):
        os.lchown(path, *ids)
    if params.get("mode") is not None:
        os.chmod(path, int(str(params["mode"]), 8))


def _copy(params: dict[str, Any], check: bool, want_diff: bool) -> str | None:
    """Write content; the diff text (or "") when done, None when Ansible must do it."""
    path, ids = Path(str(params["dest"])), _ids(params)
    if ids is None or not path.parent.is_dir() or params.get("force") is False:
        return None
    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode):
            return None  # a symlink or directory in the way: Ansible's rules apply
        before = path.read_bytes()
        mode = stat.S_IMODE(st.st_mode)
    except FileNotFoundError:
        before, mode = None, 0o666 & ~_umask()
    content = str(params["content"]).encode()
    diff = ""
    if want_diff and before is not None:
        diff = "".join(
            difflib.unified_diff(
                before.decode(errors="replace").splitlines(True),
                content.decode(errors="replace").splitlines(True),
                fromfile=f"before: {path}",
                tofile=f"after: {path}",
            )
        )
    if not check:
        if before != content:
            write_atomic(
                path, content, mode=int(str(params["mode"]), 8) if params.get("mode") else mode
            )
        _set_attrs(path, params, ids)
    return diff


def _directory(params: dict[str, Any], check: bool) -> str | None:
    path, ids = Path(str(params["path"])), _ids(params)
    if (
        ids is None
        or not path.parent.is_dir()
        or (path.exists() and not path.is_dir())
        or path.is_symlink()
    ):
        return None
    if not check:
        path.mkdir(exist_ok=True)
        _set_attrs(path, params, ids)
    return ""


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def _command(task: dict[str, Any], origin: TaskOrigin) -> TaskResult:
    params = task["ansible.builtin.command"]
    argv = [str(a) for a in params["argv"]]
    try:
        proc = subprocess.run(
            argv,
            cwd=str(params.get("chdir") or "/"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
        )
    except OSError as e:  # not found, not executable: the same failure Ansible reports
        return TaskResult(
            task["name"],
            origin.resource,
            origin.configsets,
            "failed",
            message=f"{argv[0]}: {e.strerror}",
            handler=origin.handler,
            module="native",
        )
    if proc.returncode != 0:
        detail = proc.stderr.strip()[-500:] or proc.stdout.strip()[-500:]
        return TaskResult(
            task["name"],
            origin.resource,
            origin.configsets,
            "failed",
            handler=origin.handler,
            message=f"{' '.join(argv)} exited {proc.returncode}"
            + (f": {detail}" if detail else ""),
            module="native",
        )
    return TaskResult(
        task["name"],
        origin.resource,
        origin.configsets,
        "changed",
        handler=origin.handler,
        module="native",
    )


def is_command(task: dict[str, Any]) -> bool:
    return (
        "ansible.builtin.command" in task
        and "argv" in task["ansible.builtin.command"]
        and "when" not in task
    )


def try_native(
    task: dict[str, Any], origin: TaskOrigin, *, check: bool, diff: bool, commands: bool
) -> Native | None:
    """Apply one not-converged task natively, or None to leave it to Ansible. ``commands``: whether
    an execution may run here (only when everything before it in the play is already done)."""
    if is_command(task):
        return Native(_command(task, origin), ()) if commands and not check else None
    if "ansible.builtin.copy" in task and "content" in task["ansible.builtin.copy"]:
        done = _copy(task["ansible.builtin.copy"], check, diff and not origin.secret)
    elif (
        "ansible.builtin.file" in task and task["ansible.builtin.file"].get("state") == "directory"
    ):
        done = _directory(task["ansible.builtin.file"], check)
    else:
        return None
    if done is None:
        return None
    result = TaskResult(
        task["name"], origin.resource, origin.configsets, "changed", diff=done, module="native"
    )
    return Native(result, tuple(task.get("notify") or ()))
