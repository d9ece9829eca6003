"""The package managers, asked natively: what is installed, and what one name would change.

Every Ansible package module call costs about 0.7 s of CPU here, most of it the module reading
the manager's whole database. A manager answers the same questions in milliseconds:

- ``converged(step)``: would the module report ok for this one name? True, False, or None when
  only the module can say (a group, a virtual name, a pinned or globbed name, a latest state).
- ``effect(name, state)``: the packages installing (or removing) this one name alone would
  install (or remove), from the manager's own dry run, each name with the line the module's
  diff shows for it; None when the dry run fails or the manager cannot tell.
- ``diff(state, lines)``: the diff the module reports unasked for such a change (pacman's),
  or "".

The fast path reports converged names natively and hands the rest to the module as one list
(executor/batch.py decides which names may share it). Each manager mirrors the query its module
makes where the module makes one (pkgng's ``pkg info -e``, apk's ``apk -v info --installed`` and
its world file); pacman and apt read their database once per run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from nodemanager.executor.events import module_diff
from nodemanager.playbook.steps import Step

Verdict = bool | None
# A plain package name: no version operator, glob, path, URL, repository or architecture part.
# Anything else is the module's to read.
PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9@._+-]*")
_C = {**os.environ, "LC_ALL": "C", "LANG": "C"}


def _run(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    if not shutil.which(argv[0]):
        return None
    return subprocess.run(argv, capture_output=True, text=True, env=_C, stdin=subprocess.DEVNULL)


def _lines(argv: list[str]) -> list[str] | None:
    proc = _run(argv)
    return proc.stdout.splitlines() if proc is not None and proc.returncode == 0 else None


def plain(step: Step) -> bool:
    """The step names one package as declared: no pinned version joined to it, nothing the
    module would read as a pattern."""
    return PLAIN.fullmatch(step.name) is not None and step.origin.resource == f"package:{step.name}"


Effect = dict[str, str]  # package name -> its line in the module's diff, in the dry run's order


def _matched(pattern: str, lines: list[str] | None) -> Effect | None:
    """Names (the pattern's first group) and lines (its second, else the name)."""
    if lines is None:
        return None
    rx = re.compile(pattern)
    found = [m for m in map(rx.match, lines) if m]
    return {m.group(1): (m.group(2) if rx.groups > 1 else m.group(1)) for m in found}


class Manager:
    """One run's answers (read once; ``forget`` after anything changed packages)."""

    module = ""
    # Whether the module, given a name already installed, still changes something about it
    # (apt marks every name it is given as installed manually): such names go in the list.
    lists_pulled = False

    def __init__(self) -> None:
        self._read: dict[str, set[str]] = {}

    def forget(self) -> None:
        self._read.clear()

    def once(self, what: str, read: Callable[[], set[str]]) -> set[str]:
        """``read()``, asked of the manager once until ``forget``."""
        if what not in self._read:
            self._read[what] = read()
        return self._read[what]

    def list_installed(self) -> set[str]:
        return set()

    def installed(self) -> set[str]:
        return self.once("installed", self.list_installed)

    def converged(self, step: Step) -> Verdict:
        if step.state not in ("present", "absent") or not plain(step):
            return None  # latest and pinned versions need the module's own answer
        return (step.name in self.installed()) == (step.state == "present")

    def effect(self, name: str, state: str) -> Effect | None:
        return None

    def settled(self, step: Step) -> bool:
        """Already in the declared state, though the module still acts on it (a mark)."""
        return False

    def diff(self, state: str, lines: list[str]) -> str:
        return ""


class Pacman(Manager):
    module = "community.general.pacman"

    def list_installed(self) -> set[str]:
        return set(_lines(["pacman", "-Qq"]) or [])

    def groups(self) -> set[str]:
        """Group names, in the repositories and installed: the module expands them."""

        def read() -> set[str]:
            synced = [g.strip() for g in _lines(["pacman", "-Sg"]) or []]
            local = [line.split()[0] for line in _lines(["pacman", "-Qg"]) or [] if line.strip()]
            return {g for g in synced if g} | set(local)

        return self.once("groups", read)

    def converged(self, step: Step) -> Verdict:
        if plain(step) and step.name in self.groups():
            return None
        return super().converged(step)

    def effect(self, name: str, state: str) -> Effect | None:
        # The module's own dry runs (`--needed` as it installs, `--remove` as it removes).
        verb = ["-S", "--needed"] if state == "present" else ["-R"]
        argv = ["pacman", *verb, "--print-format", "%n %n-%v", name]
        return _matched(r"(\S+) (\S+)$", _lines(argv))

    def diff(self, state: str, lines: list[str]) -> str:
        """The module's diff: before and after as ``name-version`` lines (sorted when it
        installs, in pacman's order when it removes)."""
        text = "".join(f"{n}\n" for n in (sorted(lines) if state == "present" else lines))
        before, after = ("", text) if state == "present" else (text, "")
        return module_diff({"diff": {"before": before, "after": after}}, "")


class Apt(Manager):
    """ansible.builtin.apt marks every name it is given as installed manually, even one that
    is installed already (it then reports ok): a package installed only as a dependency is not
    converged when it is declared, and goes in the list."""

    module = "ansible.builtin.apt"
    lists_pulled = True

    def list_installed(self) -> set[str]:
        # dpkg also lists packages removed with their conffiles kept ("config-files").
        lines = _lines(["dpkg-query", "-W", "-f", "${db:Status-Status} ${Package}\\n"]) or []
        return {n for s, _, n in (line.partition(" ") for line in lines) if s == "installed"}

    def auto(self) -> set[str]:
        return self.once("auto", lambda: set(_lines(["apt-mark", "showauto"]) or []))

    def converged(self, step: Step) -> Verdict:
        verdict = super().converged(step)
        if verdict and step.state == "present" and step.name in self.auto():
            return False
        return verdict

    def settled(self, step: Step) -> bool:
        return step.state == "present" and plain(step) and step.name in self.installed()

    def effect(self, name: str, state: str) -> Effect | None:
        verb, word = ("install", "Inst") if state == "present" else ("remove", "Remv")
        return _matched(rf"{word} ([^\s:]+)", _lines(["apt-get", "-s", "-q", verb, name]))


# `apk add --simulate` / `apk del --purge --simulate`: "(1/2) Installing foo (1.0-r0)".
APK_EFFECT = r"\(\d+/\d+\) (?:Installing|Purging|Deleting) (\S+) \("
# `pkg install -n` / `pkg delete -n`: a tab, then "foo: 1.0 [FreeBSD]" under its heading.
PKG_EFFECT = r"\t(\S+): "


class Apk(Manager):
    """community.general.apk: present means named in /etc/apk/world (its query_toplevel);
    absent asks ``apk -v info --installed`` as the module does."""

    module = "community.general.apk"
    WORLD = Path("/etc/apk/world")

    def list_installed(self) -> set[str]:
        try:
            words = self.WORLD.read_text().split()
        except OSError:
            return set()
        return {re.split(r"[=<>~@]", w, maxsplit=1)[0] for w in words}

    def converged(self, step: Step) -> Verdict:
        if step.state == "absent" and plain(step):
            proc = _run(["apk", "-v", "info", "--installed", step.name])
            return None if proc is None else proc.returncode != 0
        return super().converged(step)

    def effect(self, name: str, state: str) -> Effect | None:
        argv = ["apk", "add", "--simulate", name]
        if state != "present":
            argv = ["apk", "del", "--purge", "--simulate", name]
        return _matched(APK_EFFECT, _lines(argv))


class Pkgng(Manager):
    """community.general.pkgng asks ``pkg info -e`` per name; so does this."""

    module = "community.general.pkgng"

    def converged(self, step: Step) -> Verdict:
        if step.state not in ("present", "absent") or not plain(step):
            return None
        proc = _run(["pkg", "info", "-e", step.name])
        return None if proc is None else (proc.returncode == 0) == (step.state == "present")

    def effect(self, name: str, state: str) -> Effect | None:
        argv = ["pkg", "install", "-n", "-U", name]
        if state != "present":
            argv = ["pkg", "delete", "-n", name]
        return _matched(PKG_EFFECT, _lines(argv))


class Dnf(Manager):
    """rpm's exact names. A name that is not installed may still be provided by one that is
    (dnf reads provides): absent is the module's to decide then, and present goes to it."""

    module = "ansible.builtin.dnf"

    def list_installed(self) -> set[str]:
        return set(_lines(["rpm", "-qa", "--qf", "%{NAME}\\n"]) or [])

    def converged(self, step: Step) -> Verdict:
        verdict = super().converged(step)
        return None if step.state == "absent" and verdict else verdict

    def effect(self, name: str, state: str) -> Effect | None:
        verb = "install" if state == "present" else "remove"
        proc = _run(["dnf", "--assumeno", verb, name])
        if proc is None or "No match for argument" in proc.stdout + proc.stderr:
            return None
        return dnf_transaction(proc.stdout)


def dnf_transaction(text: str) -> Effect:
    """Package names in the Installing/Removing sections of dnf's transaction table."""
    names: dict[str, str] = {}
    inside = False
    for line in text.splitlines():
        if re.fullmatch(r"(Installing|Removing)[a-z ]*:", line.strip()) and line[0] != " ":
            inside = True
        elif not line.startswith(" "):
            inside = False
        elif inside and line.split():
            names[line.split()[0]] = line.split()[0]
    return names


MANAGERS: dict[str, Callable[[], Manager]] = {m.module: m for m in (Pacman, Apt, Apk, Pkgng, Dnf)}
