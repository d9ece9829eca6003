"""The differential suite's cases and its comparison of host states and reports.

A case is a few ConfigSet declarations under a root directory of its own (``R`` in its specs
stands for that root) and a prior host state made by ``setup``. Many cases are batched into one
plan (one ConfigSet per case and part, so play order interleaves as declared) and applied once
with and once without the fast path, each on its own identical copy of the prior states.
"""

from __future__ import annotations

import os
import random
import shutil
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.desired.templates import Rendered
from nodemanager.playbook.build import Plan, build

Setup = Callable[[Path], None]


@dataclass
class Case:
    name: str
    parts: list[dict[str, Any]]  # ConfigSet specs, applied in this order
    setup: Setup = lambda root: None
    secrets: dict[str, str] = field(default_factory=dict)  # path (with R) -> Secret-fed text
    native: bool = True  # whether the fast path should do it all (batched first)
    drifts: bool = False  # an execution of it undoes a file of it on every run


def _sub(value: Any, root: str) -> Any:
    if isinstance(value, str):
        return root + value[1:] if value == "R" or value.startswith("R/") else value
    if isinstance(value, list):
        return [_sub(v, root) for v in value]
    if isinstance(value, dict):
        return {k: _sub(v, root) for k, v in value.items()}
    return value


def _every_apply(spec: dict[str, Any]) -> dict[str, Any]:
    """Cases compare how an execution runs: an unsubscribed one is declared to run every apply
    (without ``onEveryApply`` it never runs, as upstream, and there is nothing to compare)."""
    executions = [
        e if e.get("subscribe_files") else {**e, "onEveryApply": True}
        for e in spec.get("executions") or []
    ]
    return {**spec, "executions": executions} if executions else spec


def plan_of(cases: list[Case], side: Path) -> Plan:
    configsets, contents = [], {}
    for case in cases:
        root = str(side / case.name)
        for i, spec in enumerate(case.parts):
            configsets.append(
                ConfigSet.from_dict(
                    {
                        "metadata": {"name": f"{case.name}-{i}"},
                        "spec": _sub(_every_apply(spec), root),
                    }
                )
            )
        for path, text in case.secrets.items():
            contents[_sub(path, root)] = Rendered(text, secret=True)
    return build(merge(configsets), "debian", "n", contents=contents)


def prepare(cases: list[Case], side: Path) -> None:
    side.mkdir(parents=True)
    for case in cases:
        (side / case.name).mkdir()
        case.setup(side / case.name)


def state(side: Path) -> dict[str, tuple[Any, ...]]:
    """Type, bytes, mode, uid/gid, xattrs and link target of everything below ``side``."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirs, files in os.walk(side):
        for name in sorted(dirs + files):
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            kind = stat.S_IFMT(st.st_mode)
            xattrs = {
                k: os.getxattr(full, k, follow_symlinks=False)
                for k in sorted(os.listxattr(full, follow_symlinks=False))
            }
            body: Any = None
            if stat.S_ISREG(st.st_mode):
                body = Path(full).read_bytes()
            elif stat.S_ISLNK(st.st_mode):
                body = os.readlink(full).replace(str(side), "<side>")
            out[os.path.relpath(full, side)] = (
                kind,
                stat.S_IMODE(st.st_mode),
                st.st_uid,
                st.st_gid,
                xattrs,
                body,
            )
    return out


def reports(results: Any, side: Path) -> dict[str, tuple[str, str]]:
    """Status and diff per task, named without the side's directory."""
    out = {}
    for r in results:
        out[r.task.replace(str(side), "<side>")] = (r.status, r.diff.replace(str(side), "<side>"))
    return out


# -- generated cases ---------------------------------------------------------------------------

BIG = "".join(f"line {i} ünï\n" for i in range(12000))  # > Ansible's 104448-byte diff limit
CONTENTS = [
    "",
    "x",
    "x\n",
    "ünïcödé ✓\n",
    "123\n",
    "yes",
    "{{ lookup('pipe', 'id') }}\n",
    "a\x85b\n",
    "one\ntwo",
    "0644\n",
    "trailing space \n",
    BIG,
]
MODES = [None, "0644", "0600", "0640", "0755", "1777", "2775", "4755"]
OWNERS = [(None, None), ("root", "root"), ("daemon", None), (None, "daemon"), ("1", "1")]


def _write(path: Path, data: str, mode: int = 0o644, ids: tuple[int, int] = (0, 0)) -> None:
    path.write_text(data)
    os.chown(path, *ids)
    os.chmod(path, mode)


PRIORS: dict[str, Callable[[Path, str], None]] = {
    "absent": lambda p, c: None,
    "same": lambda p, c: _write(p, c),
    "other": lambda p, c: _write(p, c + "old\n"),
    "mode": lambda p, c: _write(p, c, 0o666),
    "owned": lambda p, c: _write(p, "old\n", 0o640, (1, 1)),
    "special": lambda p, c: _write(p, "old\n", 0o6755),
    "xattr": lambda p, c: (_write(p, "old\n"), os.setxattr(p, "user.kept", b"yes")),
    "sticky-same": lambda p, c: _write(p, c, 0o1644),
}
# Priors the fast path leaves to Ansible (another type in the way).
ANSIBLE_PRIORS: dict[str, Callable[[Path, str], None]] = {
    "dir": lambda p, c: (p.mkdir(), (p / "inner").write_text("i")),
    "link": lambda p, c: (_write(p.parent / "elsewhere", "e\n"), p.symlink_to("elsewhere")),
    "dangling": lambda p, c: p.symlink_to("nowhere"),
}


def _file_case(i: int, rng: random.Random) -> Case:
    content = rng.choice(CONTENTS)
    mode = rng.choice(MODES)
    owner, group = rng.choice(OWNERS)
    in_the_way = rng.random() < 0.15
    priors = ANSIBLE_PRIORS if in_the_way else PRIORS
    prior = rng.choice(sorted(priors))
    spec: dict[str, Any] = {"path": "R/f", "content": content}
    for k, v in (("mode", mode), ("owner", owner), ("group", group)):
        if v is not None:
            spec[k] = v
    return Case(
        f"w{i:03d}-{prior}",
        [{"files": [spec]}],
        lambda root, prior=prior, content=content: priors[prior](root / "f", content),
        native=not in_the_way,
    )


def _mkdir(path: Path, mode: int = 0o755, ids: tuple[int, int] = (0, 0)) -> None:
    path.mkdir()
    os.chown(path, *ids)
    os.chmod(path, mode)


def _fixed_cases() -> list[Case]:
    c: list[Case] = []
    # directories
    for prior, setup in {
        "absent": lambda r: None,
        "same": lambda r: _mkdir(r / "d", 0o750),
        "mode": lambda r: _mkdir(r / "d", 0o777),
        "owner": lambda r: _mkdir(r / "d", 0o750, (1, 1)),
        "setgid": lambda r: _mkdir(r / "d", 0o2750),
    }.items():
        for mode in ("0750", "2775", None):
            spec = {"path": "R/d", "ensure": "directory", **({"mode": mode} if mode else {})}
            c.append(Case(f"dir-{prior}-{mode}", [{"files": [spec]}], setup))
    c.append(
        Case(
            "dir-file-in-the-way",
            [{"files": [{"path": "R/d", "ensure": "directory"}]}],
            lambda r: (r / "d").write_text("x"),
            native=False,
        )
    )
    c.append(
        Case(
            "dir-nested-child-first",
            [
                {
                    "files": [
                        {"path": "R/a/b/c", "ensure": "directory", "mode": "0700"},
                        {"path": "R/a", "ensure": "directory", "mode": "0755"},
                        {"path": "R/a/b/c/f", "content": "deep\n"},
                    ]
                }
            ],
        )
    )
    # Missing parents get the child's owner, group and mode, as Ansible's mkdir -p does.
    for name, extra in {
        "plain": {},
        "attrs": {"mode": "0700", "owner": "daemon", "group": "daemon"},
        "setgid": {"mode": "2750"},
    }.items():
        c.append(
            Case(
                f"dir-missing-parents-{name}",
                [{"files": [{"path": "R/x/y/z", "ensure": "directory", **extra}]}],
            )
        )
    c.append(
        Case(
            "dir-missing-parents-file-in-the-way",
            [{"files": [{"path": "R/x/y/z", "ensure": "directory", "mode": "0700"}]}],
            lambda r: (r / "x").write_text("x"),
            native=False,
        )
    )
    c.append(
        Case(
            "dir-nested-parent-first",
            [
                {
                    "files": [
                        {"path": "R/a", "ensure": "directory", "mode": "0700"},
                        {"path": "R/a/b", "ensure": "directory", "owner": "daemon"},
                        {"path": "R/a/b/f", "content": "deep\n", "mode": "0600"},
                    ]
                }
            ],
        )
    )
    # Large content (handed to Ansible through a file) where `content` must fail as Ansible's
    # copy fails it: a directory in the way.
    c.append(
        Case(
            "large-dir-in-the-way",
            [{"files": [{"path": "R/f", "content": BIG}]}],
            lambda r: ANSIBLE_PRIORS["dir"](r / "f", BIG),
            native=False,
        )
    )
    # files without content: createOnly makes them (the touch step); without it, nothing (as
    # upstream), which both paths agree on trivially
    for prior, setup in {
        "absent": lambda r: None,
        "exists": lambda r: _write(r / "t", "keep me\n", 0o640),
        "mode": lambda r: _write(r / "t", "keep me\n", 0o604),
        "special": lambda r: _write(r / "t", "keep me\n", 0o4755),
    }.items():
        touch = {"path": "R/t", "createOnly": True}
        c.append(Case(f"touch-{prior}", [{"files": [{**touch, "mode": "0640"}]}], setup))
        c.append(Case(f"touch-nomode-{prior}", [{"files": [touch]}], setup))
    # symlinks
    links = {
        "absent": lambda r: None,
        "same": lambda r: (r / "l").symlink_to("target"),
        "other": lambda r: (r / "l").symlink_to("other"),
        "file": lambda r: (r / "l").write_text("x"),
        "empty-dir": lambda r: (r / "l").mkdir(),
    }
    for prior, setup in links.items():
        for target in ("target", "R/target", "missing"):
            c.append(
                Case(
                    f"link-{prior}-{target.replace('R/', 'abs-')}",
                    [{"files": [{"path": "R/l", "ensure": "symlink", "target": target}]}],
                    setup,
                    native=False,
                )
            )
    # absent
    for prior, setup in {
        "absent": lambda r: None,
        "file": lambda r: (r / "g").write_text("x"),
        "tree": lambda r: (_mkdir(r / "g"), (r / "g" / "x").write_text("x")),
        "link": lambda r: (r / "g").symlink_to("/etc/hostname"),
    }.items():
        c.append(
            Case(
                f"absent-{prior}",
                [{"files": [{"path": "R/g", "ensure": "absent"}]}],
                setup,
                native=prior == "absent",
            )
        )
    # purge
    for prior, setup in {
        "clean": lambda r: (_mkdir(r / "p"), (r / "p" / "keep").write_text("k\n")),
        "stray": lambda r: (
            _mkdir(r / "p"),
            (r / "p" / "keep").write_text("k\n"),
            (r / "p" / "stray").write_text("s"),
        ),
        "stray-dir": lambda r: (
            _mkdir(r / "p"),
            _mkdir(r / "p" / "sub"),
            (r / "p" / "sub" / "x").write_text("s"),
        ),
    }.items():
        c.append(
            Case(
                f"purge-{prior}",
                [
                    {
                        "files": [
                            {"path": "R/p", "ensure": "directory", "purge": True},
                            {"path": "R/p/keep", "content": "k\n"},
                        ]
                    }
                ],
                setup,
                native=prior == "clean",
            )
        )
    # createOnly, plain and Secret-fed
    for prior, setup in {
        "absent": lambda r: None,
        "exists": lambda r: _write(r / "c", "the host's own\n", 0o640),
    }.items():
        c.append(
            Case(
                f"create-only-{prior}",
                [{"files": [{"path": "R/c", "content": "default\n", "createOnly": True}]}],
                setup,
            )
        )
        c.append(
            Case(
                f"create-only-secret-{prior}",
                [
                    {
                        "files": [
                            {
                                "path": "R/c",
                                "template": "{{ s }}",
                                "secretRefs": [{"name": "s"}],
                                "createOnly": True,
                            }
                        ]
                    }
                ],
                setup,
                secrets={"R/c": "secret default\n"},
            )
        )
    for prior, setup in {
        "absent": lambda r: None,
        "same": lambda r: _write(r / "s", "token=1\n", 0o600),
        "other": lambda r: _write(r / "s", "token=0\n", 0o600),
        "mode": lambda r: _write(r / "s", "token=1\n", 0o644),
    }.items():
        c.append(
            Case(
                f"secret-{prior}",
                [
                    {
                        "files": [
                            {"path": "R/s", "template": "{{ s }}", "secretRefs": [{"name": "s"}]}
                        ]
                    }
                ],
                setup,
                secrets={"R/s": "token=1\n"},
            )
        )
    c += _secret_through_ansible_cases()
    c += _directory_in_the_way_cases()
    c += _diff_text_cases()
    c += _literal_cases()
    return c


# Paths and link targets with `$NAME` and `~`, meant as written (LITERAL_LINKS: link -> target).
LITERAL_LINKS = {"link": "$HOME/x", "tilde": "~/x", "home": "~", "braces": "${USER}/y"}


def _literal_cases() -> list[Case]:
    return [
        Case(
            "literal-paths",
            [
                {
                    "files": [
                        *(
                            {"path": f"R/{name}", "ensure": "symlink", "target": target}
                            for name, target in LITERAL_LINKS.items()
                        ),
                        {"path": "R/$HOME", "ensure": "directory", "purge": True},
                        {"path": "R/$HOME/f", "content": "x\n"},
                        {"path": "R/${USER}~", "content": "y\n", "mode": "0600"},
                    ]
                }
            ],
            lambda r: _write(r / "stray", "s\n"),
            native=False,
        )
    ]


def _diff_text_cases() -> list[Case]:
    """What --diff shows for old files that are not UTF-8 text: bytes that do not decode, a
    NUL after Ansible's 8 KiB peek (text to it), a NUL before it (binary: no diff)."""
    priors = {
        "latin1": b"caf\xe9\nline\n",
        "nul-late": b"a\n" * 4500 + b"\0\n",
        "nul-early": b"a\0\n",
        "invalid-end": b"ok\n\xff",
    }
    return [
        Case(
            f"diff-{name}",
            [{"files": [{"path": "R/f", "content": "new\n"}]}],
            lambda r, old=old: (r / "f").write_bytes(old),
        )
        for name, old in priors.items()
    ]


def _directory_in_the_way_cases() -> list[Case]:
    """`ensure: file` (with or without content) where a directory, or a symlink to one, is:
    fails saying so, and leaves the directory as it was (no mode change, nothing inside)."""

    def setup(r: Path) -> None:
        _mkdir(r / "d", 0o700)
        os.symlink(r / "d", r / "l")

    return [
        Case(
            f"dir-in-the-way-{name}",
            [{"files": [{"path": f"R/{at}", "mode": "0644", **extra}]}],
            setup,
            native=False,
        )
        for name, at, extra in (
            ("touch", "d", {"createOnly": True}),
            ("touch-link", "l", {"createOnly": True}),
            ("content", "d", {"content": "x\n"}),
            ("content-link", "l", {"content": "x\n"}),
        )
    ]


def _secret_prior(r: Path, prior: str, behind_link: bool) -> None:
    _write(r / ("real" if behind_link else "s"), prior, 0o600)
    if behind_link:
        os.symlink(r / "real", r / "s")


def _secret_through_ansible_cases() -> list[Case]:
    """Secret-fed files left to Ansible (after a symlink) are reported from what Ansible did:
    an earlier execution changes or fixes the file first, and a subscribed execution runs only
    when it changed. And a hard link: a chmod through one name is seen through the other."""
    c: list[Case] = []
    secret = {"path": "R/s", "template": "{{ s }}", "secretRefs": [{"name": "s"}]}
    for name, prior, earlier in (
        ("changed-earlier", "token=1\n", "token=0"),
        ("fixed-earlier", "token=0\n", "token=1"),
        ("behind-link", "token=0\n", None),
    ):
        write = f'printf "{earlier}\\n" > "$1"'
        c.append(
            Case(
                f"secret-ansible-{name}",
                [
                    {
                        "files": [_link_first()],
                        "executions": [{"command": "/bin/sh", "args": ["-c", write, "sh", "R/s"]}]
                        if earlier
                        else [],
                    },
                    {
                        "files": [secret],
                        "executions": [
                            {**_log("R/../log", f"{name}-handler"), "subscribe_files": ["R/s"]}
                        ],
                    },
                ],
                lambda r, prior=prior, name=name: _secret_prior(r, prior, name == "behind-link"),
                secrets={"R/s": "token=1\n"},
                native=False,
                drifts=name == "changed-earlier",
            )
        )

    def linked(r: Path) -> None:
        _write(r / "gone", "x\n")
        _write(r / "a", "x\n", 0o4755)
        os.link(r / "a", r / "b")

    c.append(
        Case(
            "hardlink-mode",
            [
                {
                    # A removal is Ansible's, and its effect is known: a later step on an
                    # unrelated path is still probed, and R/b is R/a under another name. A's
                    # chown clears the setuid bit B declares.
                    "files": [
                        {"path": "R/gone", "ensure": "absent"},
                        {"path": "R/a", "owner": "daemon"},
                        {"path": "R/b", "mode": "4755"},
                    ]
                }
            ],
            linked,
            native=False,
        )
    )
    return c


def _log(root_expr: str, word: str) -> dict[str, Any]:
    """An execution appending ``word`` to the side's log (order of runs is compared)."""
    return {"command": "/bin/sh", "args": ["-c", f'echo {word} >> "$1"', "sh", root_expr]}


def _link_first() -> dict[str, Any]:
    """A symlink: Ansible's to make, so every step after it goes through Ansible."""
    return {"path": "R/link", "ensure": "symlink", "target": "/nonexistent"}


def _exec_cases() -> list[Case]:
    c: list[Case] = []
    log = "R/../log"
    # A handler notified by a native write, and nothing else.
    c.append(
        Case(
            "h-native",
            [
                {
                    "files": [{"path": "R/a", "content": "v2\n"}],
                    "executions": [{**_log(log, "h-native-handler"), "subscribe_files": ["R/a"]}],
                }
            ],
            lambda r: _write(r / "a", "v1\n"),
        )
    )
    # One handler notified by a native write and by a file left to Ansible: runs once, at the end.
    c.append(
        Case(
            "h-split",
            [
                {
                    "files": [
                        {"path": "R/a", "content": "v2\n"},
                        {"path": "R/b", "content": "v2\n"},
                    ],
                    "executions": [
                        {**_log(log, "h-split-handler"), "subscribe_files": ["R/a", "R/b"]}
                    ],
                }
            ],
            lambda r: (_write(r / "a", "v1\n"), (r / "b").symlink_to("a")),
            native=False,
        )
    )
    # Purge and a file notify the same handler.
    c.append(
        Case(
            "h-purge",
            [
                {
                    "files": [
                        {"path": "R/p", "ensure": "directory", "purge": True},
                        {"path": "R/p/k", "content": "k\n"},
                    ],
                    "executions": [
                        {**_log(log, "h-purge-handler"), "subscribe_files": ["R/p", "R/p/k"]}
                    ],
                }
            ],
            lambda r: (_mkdir(r / "p"), (r / "p" / "stray").write_text("s")),
            native=False,
        )
    )
    # An execution after a task left to Ansible sees that task's effect.
    c.append(
        Case(
            "x-after-link",
            [
                {
                    "files": [{"path": "R/l", "ensure": "symlink", "target": "R/a"}],
                    "executions": [
                        {
                            "command": "/bin/sh",
                            "args": [
                                "-c",
                                'test -L "$2" && echo x-after-link >> "$1"',
                                "sh",
                                log,
                                "R/l",
                            ],
                        }
                    ],
                }
            ],
            native=False,
        )
    )
    # An execution changes a file a later ConfigSet declares: probed after it ran.
    c.append(
        Case(
            "x-then-file",
            [
                {
                    "executions": [
                        {"command": "/bin/sh", "args": ["-c", 'echo drift > "$1"', "sh", "R/f"]}
                    ]
                },
                {"files": [{"path": "R/f", "content": "declared\n"}]},
            ],
            lambda r: _write(r / "f", "declared\n"),
            drifts=True,
        )
    )
    # PATH and $VAR: the same world on both paths.
    c.append(
        Case(
            "x-env",
            [
                {
                    "executions": [
                        {
                            "command": "/bin/sh",
                            "args": ["-c", 'echo "$PATH $2" >> "$1"', "sh", log, "$HOME ~"],
                        },
                        {"command": "sh", "args": ["-c", 'echo relative-argv0 >> "$1"', "sh", log]},
                    ]
                }
            ],
        )
    )
    # A command that leaves a child in the background holding its stdout and stderr: the step
    # returns when the command exits, so the next execution finds the child still running;
    # natively (nothing left to Ansible) and through Ansible (after a symlink).
    alive = 'if kill -0 "$(cat "$1")"; then echo alive; else echo gone; fi >> "$2"'
    for name, first in (("x-background", []), ("x-background-ansible", [_link_first()])):
        c.append(
            Case(
                name,
                [
                    {
                        "files": first,
                        "executions": [
                            {
                                "command": "/bin/sh",
                                "args": ["-c", 'sleep 120 & echo $! > "$1"', "sh", "R/pid"],
                            },
                            {
                                "command": "/bin/sh",
                                "args": [
                                    "-c",
                                    f'{alive}; kill "$(cat "$1")"; rm "$1"',
                                    "sh",
                                    "R/pid",
                                    log,
                                ],
                            },
                        ],
                    }
                ],
                native=not first,
            )
        )
    # The environment an execution sees is the same in both paths: no ANSIBLE_*, RUNNER_* or
    # run directory (playbook.steps.EXEC_UNSET).
    for name, first in (("x-environment", []), ("x-environment-ansible", [_link_first()])):
        dump = {"command": "/bin/sh", "args": ["-c", 'env | sort > "$1"', "sh", "R/env"]}
        c.append(Case(name, [{"files": first, "executions": [dump]}], native=not first))
    # A failing execution, and one that is not there.
    c.append(
        Case(
            "x-fail",
            [
                {
                    "executions": [
                        {"command": "/bin/sh", "args": ["-c", "exit 3"]},
                        {"command": "R/missing-binary"},
                    ]
                }
            ],
        )
    )
    return c


# POSIX ACLs are xattrs (system.posix_acl_*), so ``state`` compares them; setting them needs
# setfacl (Debian's acl package, installed by `make deps`).
HAVE_ACL = shutil.which("setfacl") is not None


def _setfacl(path: Path, *spec: str) -> None:
    subprocess.run(["setfacl", *spec, str(path)], check=True)


def _acl_cases() -> list[Case]:
    def acl_file(r: Path, content: str = "a\n") -> None:
        _write(r / "f", content, 0o640)
        _setfacl(r / "f", "-m", "u:daemon:rw,g:daemon:r")

    def default_acl_dir(r: Path, file: bool = False) -> None:
        _mkdir(r / "d", 0o750)
        if file:
            _write(r / "d" / "f", "old\n")
        _setfacl(r / "d", "-d", "-m", "u:daemon:rwx,g:daemon:rx")

    c: list[Case] = []
    for content in ("a\n", "b\n"):  # the same bytes, then a rewrite that keeps the ACL
        for mode in (None, "0640", "0600", "0664"):
            spec = {"path": "R/f", "content": content, **({"mode": mode} if mode else {})}
            c.append(Case(f"acl-file-{content[0]}-{mode}", [{"files": [spec]}], acl_file))
    touch = {"path": "R/f", "mode": "0600", "createOnly": True}
    c.append(Case("acl-touch", [{"files": [touch]}], acl_file))
    directory = {"path": "R/d", "ensure": "directory"}
    c.append(Case("acl-dir", [{"files": [directory]}], default_acl_dir))
    # New paths below a directory with a default ACL inherit it (or not) as Ansible makes them.
    for what, spec in {
        "file": {"path": "R/d/f", "content": "new\n"},
        "file-mode": {"path": "R/d/f", "content": "new\n", "mode": "0600"},
        "touch": {"path": "R/d/f", "createOnly": True},
        "subdir": {"path": "R/d/s", "ensure": "directory", "mode": "0700"},
    }.items():
        # content written below a default ACL is Ansible's (attrs.default_acl says why)
        native = "content" not in spec
        c.append(Case(f"acl-default-{what}", [{"files": [spec]}], default_acl_dir, native=native))
    c.append(
        Case(
            "acl-default-rewrite",
            [{"files": [{"path": "R/d/f", "content": "new\n"}]}],
            lambda r: default_acl_dir(r, file=True),
            native=False,
        )
    )
    return c


def cases(n_generated: int = 95) -> list[Case]:
    rng = random.Random(20261123)
    generated = [_file_case(i, rng) for i in range(n_generated)]
    acl = _acl_cases() if HAVE_ACL else []
    return generated + _fixed_cases() + _exec_cases() + acl
