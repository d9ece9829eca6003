"""Where and how ansible-runner runs: a fresh 0700 private data dir per run, and its settings.

A fresh directory per run matters: ansible-runner keeps ``env/cmdline`` in the private dir and
silently reuses it on the next run, and job events may hold module results that must not
outlive the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from nodemanager.executor.errors import AnsibleMissing, MissingModules
from nodemanager.playbook.steps import Step
from nodemanager.procutil import RUN_MARK
from nodemanager.resources import data_path

# NODEMANAGER_COLLECTIONS_PATH (colon-separated) replaces the search path. Otherwise the
# project's own collections come first, then Ansible's default places, where a pip-installed
# nodemanager's users put community.general (`ansible-galaxy collection install`).
COLLECTIONS_PATHS = [
    Path(p)
    for p in (
        os.environ.get("NODEMANAGER_COLLECTIONS_PATH")
        or os.pathsep.join(
            [
                str(data_path("collections")),
                str(Path.home() / ".ansible" / "collections"),
                "/usr/share/ansible/collections",
            ]
        )
    ).split(os.pathsep)
]
COLLECTIONS_PATH = COLLECTIONS_PATHS[0]


def private_dir(parent: str | None = None) -> Path:
    """A new private data dir (mkdtemp creates it 0700)."""
    if parent:
        Path(parent).mkdir(parents=True, exist_ok=True, mode=0o700)
    return Path(tempfile.mkdtemp(prefix="nodemanager-run-", dir=parent))


# A locale every supported system has (glibc 2.35+, Debian's, musl, FreeBSD).
FALLBACK_LOCALE = "C.UTF-8"
_LOCALE_CHECK = (
    "import locale, sys\n"
    "locale.setlocale(locale.LC_ALL, '')\n"
    "e = locale.getlocale()[1]\n"
    "sys.exit(0 if e and e.lower() in ('utf-8', 'utf8') else 1)\n"
)
_locale_checked: dict[tuple[str, ...], dict[str, str]] = {}


def locale_env() -> dict[str, str]:
    """What ansible-playbook needs to start in the agent's environment: nothing when the
    agent's locale is installed and UTF-8 (Ansible's own start-up check, run the same way),
    else LC_ALL=C.UTF-8. Without it ansible-playbook refuses to start, and a run whose native
    steps went first would be half-applied. Executions get the same in both paths. Checked
    once per locale setting: one Python start, without site (it cannot change the answer,
    and costs ~10 ms of CPU)."""
    key = tuple(os.environ.get(k, "") for k in ("LC_ALL", "LC_CTYPE", "LANG"))
    if key not in _locale_checked:
        proc = subprocess.run(
            [sys.executable, "-S", "-c", _LOCALE_CHECK], capture_output=True, env=dict(os.environ)
        )
        _locale_checked[key] = {} if proc.returncode == 0 else {"LC_ALL": FALLBACK_LOCALE}
    return _locale_checked[key]


def envvars(private: Path) -> dict[str, str]:
    return {
        **locale_env(),
        # ansible-runner finds ansible-playbook on PATH: use the one installed beside nodemanager.
        "PATH": os.pathsep.join([ansible_bin_dir(), os.environ.get("PATH", os.defpath)]),
        "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(str(p) for p in COLLECTIONS_PATHS),
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "False",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_GATHERING": "explicit",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_LOCAL_TEMP": str(private / "tmp"),
        "ANSIBLE_REMOTE_TMP": str(private / "tmp"),
        "ANSIBLE_NOCOLOR": "True",
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
        "ANSIBLE_LOCALHOST_WARNING": "False",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
        # Module results never go to syslog/journal: they may carry file contents.
        "ANSIBLE_NO_TARGET_SYSLOG": "True",
        # Marks every process of this run, so none outlives a killed agent (executor/child.py).
        RUN_MARK: str(private),
    }


def ansible_bin_dir() -> str:
    """ansible-playbook lives beside the interpreter running nodemanager (its venv), or where
    the single-file build unpacked its own."""
    return os.environ.get("NODEMANAGER_ANSIBLE_BIN") or str(Path(sys.executable).parent)


def modules_of(steps: Iterable[Step]) -> set[str]:
    """The collection modules ``steps`` call (``namespace.collection.module``)."""
    return {s.module for s in steps if s.module.count(".") == 2}


def preflight(steps: Iterable[Step]) -> None:
    """What ansible-playbook checks before its first task, checked before the fast path's first
    native step: a playbook naming a module that is not installed, or an ansible-playbook that
    is missing, runs nothing at all under Ansible, so it must not half-apply here either."""
    steps = list(steps)
    check_modules(modules_of(steps))
    if not (Path(ansible_bin_dir()) / "ansible-playbook").exists():
        raise AnsibleMissing(ansible_bin_dir())


def check_modules(modules: Iterable[str]) -> None:
    """Fail early and clearly when a collection module the plan needs is not installed."""
    missing = []
    for module in sorted(modules):
        namespace, collection, name = module.split(".")
        if namespace == "ansible" and collection == "builtin":
            continue
        relative = Path("ansible_collections", namespace, collection, "plugins", "modules")
        if not any((p / relative / f"{name}.py").exists() for p in COLLECTIONS_PATHS):
            missing.append(module)
    if missing:
        raise MissingModules(missing, os.pathsep.join(str(p) for p in COLLECTIONS_PATHS))
