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
    PackageCase(
        "absent",
        [{"name": "nmt-r1", "ensure": "absent"}, {"name": "nmt-r2", "ensure": "absent"}],
        before=["nmt-r1"],
    ),
    # nmt-d1 depends on nmt-d2: one at a time, d2 comes as d1's dependency and its own task
    # finds it there (ok, installed as a dependency).
    PackageCase("dependency-later", [{"name": "nmt-d1"}, {"name": "nmt-d2"}]),
    # nmt-q1 depends on nmt-q2, both installed: q1 goes first, q2 then; the other way round,
    # removing q2 fails while q1 needs it.
    PackageCase(
        "absent-dependency",
        [{"name": "nmt-q2", "ensure": "absent"}, {"name": "nmt-q1", "ensure": "absent"}],
        before=["nmt-q1"],
    ),
    # A group name: the module expands it; what follows it goes to the module name by name.
    PackageCase("group", [{"name": "nmt-g0"}, {"name": "nmt-grp"}, {"name": "nmt-g3"}]),
    PackageCase("latest", [{"name": "nmt-l1", "ensure": "latest"}, {"name": "nmt-l2"}], ["nmt-l1"]),
]
# apt: no groups; a virtual name (provided by nmt-v1) instead. Removing nmt-q2 removes nmt-q1,
# which needs it, too: nmt-q1's own task then finds it gone.
APT_CASES = [
    *(c for c in CASES if c.name != "group"),
    PackageCase("virtual", [{"name": "nmt-v0"}, {"name": "nmt-virt"}, {"name": "nmt-v3"}]),
]
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
}
# apt's repository: name -> (depends, provides).
DEBS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    **{n: ((), ()) for n, (deps, _) in PACKAGES.items() if not deps and "-g" not in n},
    "nmt-d1": (("nmt-d2",), ()),
    "nmt-q1": (("nmt-q2",), ()),
    "nmt-v0": ((), ()),
    "nmt-v1": ((), ("nmt-virt",)),
    "nmt-v3": ((), ()),
}


def publish(repo: PacmanRepo, version: str = "1.0-1") -> None:
    for name, (depends, groups) in PACKAGES.items():
        repo.publish(version, name=name, depends=depends, groups=groups)


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
            "files": [{"path": f"{files_root}/after", "content": "after the packages\n"}],
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


def _main(arg: str) -> None:
    from nodemanager.executor.run import apply

    given = json.loads(arg)
    result = apply(plan_of(given["configsets"], given["family"]), fast=given["fast"])
    keys = ("task", "status", "diff", "module", "message")
    print(json.dumps([{k: getattr(r, k) for k in keys} for r in result.results]))


if __name__ == "__main__":
    _main(sys.argv[1])
