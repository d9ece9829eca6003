"""File attributes exactly as Ansible's modules read and set them, for the fast path.

- owner and group: a number is an id, else a name (``AnsibleModule.user_and_group`` order);
- mode: octal digits only; anything else (symbolic, ``preserve``) is Ansible's to interpret;
- set: owner, then group, then mode, each only when different (a chown clears setuid/setgid,
  so the order and the "only when different" both matter);
- a content rewrite keeps the old file's owner, group, mode bits (special bits too), xattrs and
  flags before the declared ones apply, as ``AnsibleModule.atomic_move`` does.
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from nodemanager.playbook.steps import Step

_OCTAL = re.compile(r"[0-7]{1,5}")


class Declined(Exception):
    """The fast path cannot be sure it means what Ansible means here."""


def plain_path(path: str) -> bool:
    """A path the fast path takes as is: absolute, normalised, nothing Ansible would expand
    (``$VAR``, ``~``). Any other spelling is left to Ansible, whose answer is the meaning."""
    return (
        path.startswith("/")
        and os.path.normpath(path) == path
        and not path.startswith("//")
        and "$" not in path
        and "~" not in path
    )


def uid_of(owner: str | None) -> int:
    if owner is None:
        return -1
    try:
        return int(owner)
    except ValueError:
        try:
            return pwd.getpwnam(owner).pw_uid
        except KeyError as e:
            raise Declined(f"unknown user {owner}") from e


def gid_of(group: str | None) -> int:
    if group is None:
        return -1
    try:
        return int(group)
    except ValueError:
        try:
            return grp.getgrnam(group).gr_gid
        except KeyError as e:
            raise Declined(f"unknown group {group}") from e


def mode_of(mode: str | None) -> int | None:
    if mode is None:
        return None
    if not _OCTAL.fullmatch(mode) or int(mode, 8) > 0o7777:
        raise Declined(f"mode {mode!r} is Ansible's to interpret")
    return int(mode, 8)


def matches(st: os.stat_result, step: Step) -> bool:
    """Whether ``st`` already has the step's declared owner, group and mode."""
    uid, gid, mode = uid_of(step.owner), gid_of(step.group), mode_of(step.mode)
    return (
        (uid == -1 or st.st_uid == uid)
        and (gid == -1 or st.st_gid == gid)
        and (mode is None or stat.S_IMODE(st.st_mode) == mode)
    )


def apply(path: Path, step: Step) -> bool:
    """Set the declared attributes where they differ, in Ansible's order; whether any did."""
    uid, gid, mode = uid_of(step.owner), gid_of(step.group), mode_of(step.mode)
    changed = False
    st = path.lstat()
    if uid != -1 and st.st_uid != uid:
        os.lchown(path, uid, -1)
        changed = True
    st = path.lstat()
    if gid != -1 and st.st_gid != gid:
        os.lchown(path, -1, gid)
        changed = True
    st = path.lstat()
    if mode is not None and stat.S_IMODE(st.st_mode) != mode:
        os.chmod(path, mode)
        changed = True
    return changed


_CHUNK = 1 << 20


def chunks(text: str) -> Iterator[bytes]:
    """``text`` as UTF-8, a chunk at a time: a 50 MB content is never encoded whole."""
    for at in range(0, len(text), _CHUNK):
        yield text[at : at + _CHUNK].encode()


def encoded_size(text: str) -> int:
    return len(text) if text.isascii() else sum(len(c) for c in chunks(text))


def same_bytes(path: Path, text: str) -> bool:
    """Whether the file holds exactly ``text`` encoded as UTF-8, compared chunk by chunk."""
    if path.stat().st_size != encoded_size(text):
        return False
    with open(path, "rb") as f:
        for block in chunks(text):
            if f.read(len(block)) != block:
                return False
        return f.read(1) == b""


def default_acl(directory: Path) -> bool:
    """Whether ``directory`` has a default ACL, which a file created in it inherits. Ansible's
    copy writes in its own temporary directory and renames the file into place (no inherited
    ACL on one filesystem, an inherited one across two), so the fast path leaves such writes
    to Ansible rather than guess."""
    try:
        os.getxattr(directory, "system.posix_acl_default")
    except OSError as e:
        if e.errno in (errno.ENODATA, errno.ENOTSUP):
            return False
        raise Declined(f"cannot read the ACL of {directory}: {e.strerror}") from e
    return True


def umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def replace(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically. An existing file's owner, group, mode
    (with its special bits), xattrs and flags carry over, as in Ansible's atomic_move; a new
    file gets 0666 less the umask, as Ansible's copy gives it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            for block in chunks(text):
                f.write(block)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            st = path.stat()
            os.chown(tmp, st.st_uid, st.st_gid)
            shutil.copystat(path, tmp)  # mode bits, xattrs, flags (times are reset below)
            os.utime(tmp)
        else:
            os.chmod(tmp, 0o666 & ~umask())
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
