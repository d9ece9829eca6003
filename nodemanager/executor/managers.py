"""The package managers, asked natively: what is installed, and what one name would change.

Every Ansible package module call costs about 0.7 s of CPU here, most of it the module reading
the manager's whole database. A manager answers the same questions in milliseconds:

- ``converged(step)``: would the module report ok for this one name? True, False, or None when
  only the module can say (a group, a virtual name, a pinned or globbed name, a latest state).
- ``effect(name, state)``: the packages installing (or removing) this one name alone would
  install (or remove), from the manager's own dry run, each name with the line the module's
  diff shows for it; None when the dry run fails or the manager cannot tell.
- ``effects(names, state)``: ``effect`` of each name alone, for as many of the names as one
  question of the manager answers exactly (pacman's: one dry run for the list); the others are
  asked one by one.
- ``lists_mean_tasks(names, state, effect)``: one call with ``names`` changes exactly what their
  own tasks would, one after another.
- ``diff(state, lines)``: the diff the module reports unasked for such a change (pacman's),
  or "".

The fast path reports converged names natively and hands the rest to the module as one list
(executor/batch.py decides which names may share it). Each manager mirrors the query its module
makes where the module makes one (apk's ``apk -v info --installed`` and its world file); pacman,
apt and pkg read their database once per run.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
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

    def done(self, step: Step) -> bool:
        """After a list ran (``forget`` first): the listed step is in its declared state."""
        return self.converged(step) is True

    def effect(self, name: str, state: str) -> Effect | None:
        return None

    def effects(self, names: Sequence[str], state: str) -> dict[str, Effect | None]:
        return {}

    def lists_mean_tasks(self, names: Sequence[str], state: str, effect: set[str]) -> bool:
        return True  # what the members' own dry runs show is all a manager without more can tell

    def settled(self, step: Step) -> bool:
        """Already in the declared state, though the module still acts on it (a mark)."""
        return False

    def diff(self, state: str, lines: list[str]) -> str:
        return ""


DRY_LINE = r"(\S+) (\S+) \S+$"  # the dry run's "%n %n-%v %r": a name, its line in the diff
# pacman's "error: target not found: NAME" for each name the repositories lack.
NOT_FOUND = re.compile(r"^error: target not found: (\S+)$", re.MULTILINE)


def _dry_run(state: str, names: list[str]) -> list[str]:
    # The module's own dry runs (`--needed` as it installs, `--remove` as it removes).
    verb = ["-S", "--needed"] if state == "present" else ["-R"]
    return ["pacman", *verb, "--print-format", "%n %n-%v %r", *names]


def _info_fields(lines: list[str]) -> list[dict[str, str]]:
    """``pacman -Si``'s blocks as fields (a long value goes on in indented lines)."""
    blocks: list[dict[str, str]] = []
    key = ""
    for line in lines:
        if not line.strip():
            key = ""
        elif line[0].isspace() and key:
            blocks[-1][key] += " " + line.strip()
        else:
            key, _, value = (part.strip() for part in line.partition(":"))
            if key == "Repository" or not blocks:
                blocks.append({})
            blocks[-1][key] = value
    return blocks


def _words(value: str) -> set[str]:
    return set() if value == "None" else set(value.split())


class Pacman(Manager):
    module = "community.general.pacman"

    def list_installed(self) -> set[str]:
        return set(_lines(["pacman", "-Qq"]) or [])

    def groups(self) -> set[str]:
        """Group names in the repositories: the module expands those (its package_list reads
        ``available_groups``, from ``pacman -Sgg``); a group only installed packages carry is
        a name like any other to it, so it is one here too."""

        def read() -> set[str]:
            return {g.strip() for g in _lines(["pacman", "-Sg"]) or [] if g.strip()}

        return self.once("groups", read)

    def converged(self, step: Step) -> Verdict:
        if plain(step) and step.name in self.groups():
            return None
        return super().converged(step)

    def done(self, step: Step) -> bool:
        # A listed name was no group when it was listed; what the list did to it is all this
        # asks, so the groups are not read again (two pacman starts less per run).
        return (step.name in self.installed()) == (step.state == "present")

    def effect(self, name: str, state: str) -> Effect | None:
        return _matched(DRY_LINE, _lines(_dry_run(state, [name])))

    def effects(self, names: Sequence[str], state: str) -> dict[str, Effect | None]:
        """One dry run of the names up to the first group (the module expands a group), and
        their dependencies read once (``pacman -Si``, ``pacman -T``): each name's effect alone
        is its package and what it needs that is not installed, followed through the
        dependencies. Where pacman may have chosen between providers, or a dependency carries a
        version, the names are left to their own dry runs. A name the repositories lack fails
        alone as in the list."""
        if state != "present":
            return {}
        groups = self.groups()
        wanted = list(dict.fromkeys(itertools.takewhile(lambda n: n not in groups, names)))
        found: dict[str, Effect | None] = {}
        while len(wanted) > 1:
            proc = _run(_dry_run(state, wanted))
            if proc is None:
                return found
            if proc.returncode == 0:
                break
            missing = {m for m in NOT_FOUND.findall(proc.stderr) if m in wanted}
            if not missing or len(missing) != len(proc.stderr.strip().splitlines()):
                return found  # not only unknown names: each name's own dry run says which
            found |= dict.fromkeys(missing)
            wanted = [n for n in wanted if n not in missing]
        else:
            return found
        rows = [line.split() for line in proc.stdout.splitlines()]
        if any(len(r) != 3 for r in rows) or not set(wanted) <= {r[0] for r in rows}:
            return found  # a name pacman resolved to another package (a provider)
        lines = {name: line for name, line, _ in rows}
        needs = self._needs([f"{repo}/{name}" for name, _, repo in rows], set(lines))
        if needs is None:
            return found
        for name in wanted:
            closure, todo = {name}, [name]
            while todo:
                for dep in needs[todo.pop()] - closure:
                    closure.add(dep)
                    todo.append(dep)
            found[name] = {n: line for n, line in lines.items() if n in closure}
        if set().union(*(found[n] or () for n in wanted)) != set(lines):
            return {n: e for n, e in found.items() if e is None}  # pacman added more than asked
        # Every dependency of these is a package of its own name no other package provides: a
        # list of them changes what their own tasks would, whatever the order.
        self.once("exact", set).update(wanted)
        return found

    def _needs(self, qualified: list[str], names: set[str]) -> dict[str, set[str]] | None:
        """Each package's dependencies among ``names`` (the dry run's packages), where every
        dependency is either installed already or one of them by its own name (no version, no
        other package of them providing it); None otherwise."""
        info = _lines(["pacman", "-Si", *qualified])
        if info is None:
            return None
        fields = _info_fields(info)
        keys = ("Name", "Depends On", "Provides", "Conflicts With", "Replaces")
        if any(k not in f for f in fields for k in keys) or {f["Name"] for f in fields} != names:
            return None
        if any(f["Conflicts With"] != "None" or f["Replaces"] != "None" for f in fields):
            return None  # a conflict or replacement removes what a later name may need
        deps = {f["Name"]: _words(f["Depends On"]) for f in fields}
        provided = {
            given
            for f in fields
            for given in (re.split(r"[<>=]", p, maxsplit=1)[0] for p in _words(f["Provides"]))
            if given != f["Name"]  # its own name is no other package's
        }
        asked = sorted(set().union(*deps.values()))
        proc = _run(["pacman", "-T", *asked]) if asked else None
        if asked and (proc is None or proc.returncode not in (0, 127)):
            return None
        missing = set(proc.stdout.split()) if proc is not None else set()
        if not missing <= names or missing & provided:
            return None  # a provider or a version stands for the dependency
        return {name: d & missing for name, d in deps.items()}

    def lists_mean_tasks(self, names: Sequence[str], state: str, effect: set[str]) -> bool:
        """A list of names answered by one dry run together does (``effects``); else the
        list's own dry run must change exactly what the names' own ones do: a dependency one
        name's own task takes from a provider may come from another name of the list."""
        if state == "present" and self.once("exact", set).issuperset(names):
            return True
        together = _matched(DRY_LINE, _lines(_dry_run(state, list(names))))
        return together is not None and set(together) == effect

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


class Apk(Manager):
    """community.general.apk: present means named in /etc/apk/world (its query_toplevel);
    absent asks ``apk -v info --installed`` as the module does. Its names never share a list
    (batch.DECLINED), so no dry run is read."""

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


# `pkg install -n` / `pkg delete -n`: a tab, then "foo: 1.0" (or "foo: 1.0 -> 1.1") under
# its heading ("New packages to be INSTALLED:", "Installed packages to be REMOVED:").
PKG_EFFECT = r"\t(\S+): "


class Pkgng(Manager):
    """community.general.pkgng asks ``pkg info -g -e NAME`` per name: for a plain name (no
    glob character, nothing but a name) that is whether a package of that name is installed,
    read here once per run (``pkg query %n``; a pkg start costs about 30 ms here).

    Lists: the module installs all its names with one ``pkg install``, and pkg commits package
    by package: a pre-install script that fails rolls back its own package and stops the
    rest, so the list's rescue (each name's own task) finds exactly what the names' own tasks
    would have left. Names a member's dry run brings in stay out of the list (named, pkg would
    mark them installed on purpose, not as dependencies) and report ok, as their own tasks do.
    The module refreshes the catalogue (``pkg update``) before it installs; the dry runs are
    read after the same refresh, or a stale catalogue would answer them."""

    module = "community.general.pkgng"

    def list_installed(self) -> set[str]:
        names = _lines(["pkg", "query", "%n"])
        # "?" marks an unanswered query: no name can be answered from it
        return {"?"} if names is None else set(names)

    def converged(self, step: Step) -> Verdict:
        if "?" in self.installed():
            return None
        # `pkg info -g -e foo-1.0` also matches foo at 1.0: such a name is the module's to read
        if re.search(r"-\d", step.name):
            return None
        return super().converged(step)

    def _dry_run(self, state: str, names: Sequence[str]) -> Effect | None:
        if state == "present" and not self.once("catalogue", self._refresh):
            return None
        # -y: without it (and without ASSUME_ALWAYS_YES) a dry run that would install exits 1
        verb = ["install", "-n", "-y", "-U"] if state == "present" else ["delete", "-n"]
        return _matched(PKG_EFFECT, _lines(["pkg", *verb, *names]))

    @staticmethod
    def _refresh() -> set[str]:
        """The module's own first step (``cached: false``); empty when it failed."""
        proc = _run(["pkg", "update"])
        return {"refreshed"} if proc is not None and proc.returncode == 0 else set()

    def effect(self, name: str, state: str) -> Effect | None:
        return self._dry_run(state, [name])

    def lists_mean_tasks(self, names: Sequence[str], state: str, effect: set[str]) -> bool:
        """The list's own dry run changes exactly what the names' own ones do (a package
        required through ``provides`` may come from another provider in one transaction)."""
        together = self._dry_run(state, names)
        return together is not None and set(together) == effect


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
