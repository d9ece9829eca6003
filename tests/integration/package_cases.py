"""The differential suite's package cases, for real pacman (a local repository, a private
database in a mount namespace per side: tests/integration/pacman_repo.py) and real apt (a
booted Debian machine per side: tests/integration/machines.py).

Each case is one ConfigSet of packages, with packages installed before (``before``); every
case has names of its own, so all of them share one repository and one plan. The plan is
applied inside the side's namespace or machine by running this module there (``python -m``),
which prints each task's result as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.pacman_repo import PacmanEnv, PacmanRepo

# Runs a command in a side (its namespace or machine): PacmanEnv.run, Machine.run.
Run = Callable[..., subprocess.CompletedProcess]
REPO = Path(__file__).resolve().parents[2]


@dataclass
class PackageCase:
    name: str
    packages: list[dict[str, Any]]
    before: list[str] = field(default_factory=list)  # installed (explicitly) before the apply


CASES = [
    PackageCase("installed", [{"name": "nmt-i1"}], before=["nmt-i1"]),
    PackageCase("missing", [{"name": "nmt-m1"}]),
    PackageCase("mix", [{"name": "nmt-x1"}, {"name": "nmt-x2"}, {"name": "nmt-x3"}], ["nmt-x1"]),
    PackageCase(
        "fails-in-the-middle", [{"name": "nmt-f1"}, {"name": "nmt-nope"}, {"name": "nmt-f2"}]
    ),
    # nmt-e1 needs nmtest-base, installed already: e1 alone is installed.
    PackageCase("installed-dependency", [{"name": "nmt-e1"}]),
    PackageCase(
        "absent",
        [{"name": "nmt-r1", "ensure": "absent"}, {"name": "nmt-r2", "ensure": "absent"}],
        before=["nmt-r1"],
    ),
    # nmt-d1 depends on nmt-d2: one at a time, d2 comes as d1's dependency and its own task
    # finds it there (ok, installed as a dependency).
    PackageCase("dependency-later", [{"name": "nmt-d1"}, {"name": "nmt-d2"}]),
    # nmt-c1 needs nmt-c2, which needs nmt-c3: c3, listed after c1, comes with it (ok).
    PackageCase("dependency-chain", [{"name": "nmt-c1"}, {"name": "nmt-c3"}]),
    # nmt-q1 depends on nmt-q2, both installed: q1 goes first, q2 then; the other way round,
    # removing q2 fails while q1 needs it.
    PackageCase(
        "absent-dependency",
        [{"name": "nmt-q2", "ensure": "absent"}, {"name": "nmt-q1", "ensure": "absent"}],
        before=["nmt-q1"],
    ),
    # nmt-p1 and nmt-p2 provide nmt-prov, which nmt-pa needs: pa's own task takes the first
    # provider, p1, and p2's task installs p2; one call for [pa, p2] would take p2 for pa and
    # never install p1. The other way round (nmt-pb needs nmt-prov2 of p3 and p4, listed after
    # p4), pb's own task finds nmt-prov2 provided and installs pb alone.
    PackageCase(
        "provide", [{"name": "nmt-pa"}, {"name": "nmt-p2"}, {"name": "nmt-p4"}, {"name": "nmt-pb"}]
    ),
    # A removal between: the names before and after it are separate runs of the walk.
    PackageCase("absent-again", [{"name": "nmt-r3", "ensure": "absent"}], before=["nmt-r3"]),
    # nmt-b1 needs a package no repository has: it fails on its own, saying so; b0 and b2 are in.
    PackageCase("broken-dependency", [{"name": "nmt-b0"}, {"name": "nmt-b1"}, {"name": "nmt-b2"}]),
    # A group name: the module expands it; what follows it goes to the module name by name.
    PackageCase("group", [{"name": "nmt-g0"}, {"name": "nmt-grp"}, {"name": "nmt-g3"}]),
    PackageCase("latest", [{"name": "nmt-l1", "ensure": "latest"}, {"name": "nmt-l2"}], ["nmt-l1"]),
    # Groups only an installed package carries (nmt-lg 1.0; the repository's 1.1 has none): the
    # module expands only the repositories' groups, so to it these are unknown names.
    PackageCase(
        "local-group",
        [{"name": "nmt-lgrp-a", "ensure": "absent"}, {"name": "nmt-lgrp-p"}],
        before=["nmt-lg"],
    ),
]
# apt: no groups; a virtual name (provided by nmt-v1) instead. Removing nmt-q2 removes nmt-q1,
# which needs it, too: nmt-q1's own task then finds it gone.
PACMAN_ONLY = {
    "group",
    "installed-dependency",
    "dependency-chain",
    "provide",
    "absent-again",
    "broken-dependency",
    "local-group",
}
APT_CASES = [
    *(c for c in CASES if c.name not in PACMAN_ONLY),
    PackageCase("virtual", [{"name": "nmt-v0"}, {"name": "nmt-virt"}, {"name": "nmt-v3"}]),
]
# apk and pkg: no groups; a name only provided (nmt-virt: apk keeps the name asked for in its
# world, pkg has no such names and fails it); a package whose install script fails, last (apk
# fails every later call while a package is broken, as on Alpine).
SCRIPT_CASE = PackageCase("install-script", [{"name": "nmt-s0"}, {"name": "nmt-bad"}])
APK_CASES = [
    *(c for c in CASES if c.name not in {"group", "local-group", "provide"}),
    PackageCase("virtual", [{"name": "nmt-v0"}, {"name": "nmt-virt"}, {"name": "nmt-v3"}]),
    SCRIPT_CASE,
]
PKG_CASES = APK_CASES
# The apk and pkg repositories: name -> (depends, provides, fails its install script).
NATIVE: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]] = {
    **{
        n: ((), (), False)
        for n in "nmt-i1 nmt-m1 nmt-x1 nmt-x2 nmt-x3 nmt-f1 nmt-f2 nmt-r1 nmt-r2 nmt-r3 nmt-l1 "
        "nmt-l2 nmt-d2 nmt-q2 nmt-c3 nmt-v0 nmt-v3 nmt-s0 nmt-b0 nmt-b2".split()
    },
    "nmt-d1": (("nmt-d2",), (), False),
    "nmt-q1": (("nmt-q2",), (), False),
    "nmt-c1": (("nmt-c2",), (), False),
    "nmt-c2": (("nmt-c3",), (), False),
    "nmt-e1": (("nmtest-base",), (), False),
    "nmt-b1": (("nmt-nodep",), (), False),
    "nmt-v1": ((), ("nmt-virt",), False),
    "nmt-bad": ((), (), True),
}
# Built into the repository: name -> (depends, groups).
PACKAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    **{
        n: ((), ("nmtest",))
        for n in "nmt-i1 nmt-m1 nmt-x1 nmt-x2 nmt-x3 nmt-f1 nmt-f2 nmt-r1 nmt-r2 nmt-g0 nmt-g3 "
        "nmt-l1 nmt-l2 nmt-d2 nmt-q2".split()
    },
    "nmt-d1": (("nmt-d2",), ("nmtest",)),
    "nmt-q1": (("nmt-q2",), ("nmtest",)),
    "nmt-g1": ((), ("nmtest", "nmt-grp")),
    "nmt-g2": ((), ("nmtest", "nmt-grp")),
    "nmt-lg": ((), ("nmtest", "nmt-lgrp-a", "nmt-lgrp-p")),
}
# Only in pacman's repository: name -> (depends, provides).
PACMAN_PACKAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    **{n: ((), ()) for n in "nmt-c3 nmt-r3 nmt-b0 nmt-b2".split()},
    "nmt-e1": (("nmtest-base",), ()),
    "nmt-c1": (("nmt-c2",), ()),
    "nmt-c2": (("nmt-c3",), ()),
    "nmt-p1": ((), ("nmt-prov",)),
    "nmt-p2": ((), ("nmt-prov",)),
    "nmt-pa": (("nmt-prov",), ()),
    "nmt-p3": ((), ("nmt-prov2",)),
    "nmt-p4": ((), ("nmt-prov2",)),
    "nmt-pb": (("nmt-prov2",), ()),
    "nmt-b1": (("nmt-nodep",), ()),
}
# apt's repository: name -> (depends, provides).
DEBS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    **{
        n: ((), ())
        for n, (deps, groups) in PACKAGES.items()
        if not deps and "-g" not in n and groups == ("nmtest",)
    },
    "nmt-d1": (("nmt-d2",), ()),
    "nmt-q1": (("nmt-q2",), ()),
    "nmt-v0": ((), ()),
    "nmt-v1": ((), ("nmt-virt",)),
    "nmt-v3": ((), ()),
}


def publish(repo: PacmanRepo, version: str = "1.0-1") -> None:
    for name, (depends, groups) in PACKAGES.items():
        repo.publish(version, name=name, depends=depends, groups=groups)
    for name, (depends, provides) in PACMAN_PACKAGES.items():
        repo.publish(version, name=name, depends=depends, provides=provides)


def prepare(env: PacmanEnv, cases: list[PackageCase]) -> None:
    before = [n for c in cases for n in c.before]
    if before:
        done = env.run("pacman", "-S", "--noconfirm", *before)
        assert done.returncode == 0, done.stderr


def configsets(cases: list[PackageCase], files_root: Path | None = None) -> list[dict[str, Any]]:
    """One ConfigSet per case; with ``files_root``, a last one writes a file and runs a command
    after the packages (the fast path goes on natively after them)."""
    out = [{"metadata": {"name": c.name}, "spec": {"packages": c.packages}} for c in cases]
    if files_root is not None:
        spec = {
            # owner and group named: the sides are Linux whatever their os-release says, and a
            # FreeBSD family's default group (wheel, as upstream) does not exist here
            "files": [
                {
                    "path": f"{files_root}/after",
                    "content": "after the packages\n",
                    "owner": "root",
                    "group": "root",
                }
            ],
            "executions": [{"command": "/bin/true", "onEveryApply": True}],
        }
        out.append({"metadata": {"name": "zz-after"}, "spec": spec})
    return out


def state(env: PacmanEnv) -> dict[str, Any]:
    """Installed packages with their versions and install reasons, and their payload."""

    def lines(*argv: str) -> list[str]:
        return sorted(env.run("pacman", *argv).stdout.splitlines())

    payload = sorted(str(p.relative_to(env.payload_root)) for p in env.payload_root.rglob("*"))
    return {"installed": lines("-Q"), "explicit": lines("-Qqe"), "payload": payload}


def reports(results: list[dict[str, str]], root: Path) -> dict[str, tuple[str, str]]:
    """Each task's status, and a failure's message (the module's own words either way), with
    the side's root made neutral so that two sides compare."""
    return {
        r["task"].replace(str(root), "<root>"): (
            r["status"],
            r["message"] if r["status"] == "failed" else "",
        )
        for r in results
    }


def apply_in(
    run: Run, sets: list[dict[str, Any]], fast: bool, family: str = "arch"
) -> list[dict[str, str]]:
    """Apply ``sets`` in a side; each task's result, in report order."""
    given = json.dumps({"configsets": sets, "fast": fast, "family": family})
    argv = ["env", "-C", str(REPO), sys.executable, "-m", "tests.integration.package_cases"]
    proc = run(*argv, given, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results: list[dict[str, str]] = json.loads(proc.stdout.splitlines()[-1])
    return results


def plan_of(sets: list[dict[str, Any]], family: str = "arch") -> Any:
    from nodemanager.api import ConfigSet
    from nodemanager.desired.merge import merge
    from nodemanager.playbook.build import build

    return build(merge([ConfigSet.from_dict(cs) for cs in sets]), family, "n")


def effects_in(run: Run, names: list[str]) -> dict[str, Any]:
    """In a side: what pacman's one question for ``names`` answers (``batched``: name -> its
    effect, None for a failing name) beside each name's own dry run (``alone``)."""
    given = json.dumps({"effects": names})
    argv = ["env", "-C", str(REPO), sys.executable, "-m", "tests.integration.package_cases"]
    proc = run(*argv, given, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    answers: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return answers


def _effects(names: list[str]) -> dict[str, Any]:
    from nodemanager.executor.managers import Pacman

    batched = Pacman().effects(names, "present")
    return {"batched": batched, "alone": {n: Pacman().effect(n, "present") for n in names}}


def _main(arg: str) -> None:
    from nodemanager.executor.run import apply

    given = json.loads(arg)
    if "effects" in given:
        print(json.dumps(_effects(given["effects"])))
        return
    result = apply(plan_of(given["configsets"], given["family"]), fast=given["fast"])
    keys = ("task", "status", "diff", "module", "message")
    print(json.dumps([{k: getattr(r, k) for k in keys} for r in result.results]))


if __name__ == "__main__":
    _main(sys.argv[1])
