"""First apply (`make bench BENCH=first`): a fresh host converging, side by side.

Three workloads, each on a tree that does not exist yet and a fresh pacman root (a local
repository, a private database in a mount namespace: tests/integration/pacman_repo.py): 100
resources (files, directories, subscribed executions), 10 packages, and both together.
`nodemanager apply` against plain `ansible-playbook` on nodemanager's own `render` output,
interleaved repeats (`BENCH_REPEATS`, default 5), medians, the load average beside them.

The 10 packages also run through apk and pkg (issue 33): the same ConfigSet on a fresh Alpine
root (apk --root, tests/integration/apk_repo.py) and a fresh FreeBSD rootdir (pkg -r,
tests/integration/pkg_repo.py), each in a mount namespace whose os-release names the OS; a
manager whose program cannot be built here (tests/thirdparty.py) is left out with one line.

`BENCH_FIRST_WORKLOADS` (comma-separated, default all five) picks workloads: on a loaded machine
one repeat of ansible-playbook on the 100 resources takes minutes, where the packages alone are
the close race that needs the repeats.

`BENCH_BASELINE=DIR` adds a third side: `nodemanager apply` run from another source tree (an
earlier commit, `git archive` unpacked there), so before and after are measured in the same
interleaving.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bench.scenarios import FIRST_PACKAGES, first

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {
    "100 resources": {"files": True, "packages": False},
    "10 packages": {"files": False, "packages": True},
    "10 packages apk": {"files": False, "packages": True},
    "10 packages pkg": {"files": False, "packages": True},
    "both": {"files": True, "packages": True},
}
# The package manager of each workload (os-release ID given to render/apply), pacman otherwise.
MANAGER = {"10 packages apk": "apk", "10 packages pkg": "pkg"}
OS_ID = {"pacman": "arch", "apk": "alpine", "pkg": "freebsd"}
_CHOSEN = os.environ.get("BENCH_FIRST_WORKLOADS", ",".join(WORKLOADS))
CHOSEN = [w.strip() for w in _CHOSEN.split(",")]


def _load() -> float:
    return os.getloadavg()[0]


def _managers(chosen: list[str]) -> dict[str, tuple[Any, Callable[[Path, Any], Any]]]:
    """Each manager the chosen workloads use: its repository maker and its root maker."""
    from tests import thirdparty
    from tests.integration import apk_repo, pacman_repo, pkg_repo

    makers = {
        "pacman": (pacman_repo.make_repo, pacman_repo.make_env, None),
        "apk": (apk_repo.make_repo, apk_repo.make_env, thirdparty.APK),
        "pkg": (pkg_repo.make_repo, pkg_repo.make_env, thirdparty.PKG),
    }
    out = {}
    for manager in sorted({MANAGER.get(w, "pacman") for w in chosen}):
        make_repo, make_env, program = makers[manager]
        reason = thirdparty.missing(program) if program else None
        if reason:
            print(f"first: {manager} left out: {reason}", flush=True)
            continue
        out[manager] = (make_repo, make_env)
    return out


def main(bin_dir: Path, repeats: int) -> dict:
    baseline = os.environ.get("BENCH_BASELINE")
    sides = ["nodemanager", "ansible-playbook", *(["nodemanager (baseline)"] if baseline else [])]
    unknown = set(CHOSEN) - set(WORKLOADS)
    if unknown:
        raise SystemExit(f"BENCH_FIRST_WORKLOADS: no workload {', '.join(sorted(unknown))}")
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="nm-bench-first-") as tmp:
        base = Path(tmp)
        makers = _managers(CHOSEN)
        chosen = [w for w in CHOSEN if MANAGER.get(w, "pacman") in makers]
        runs: dict[str, dict[str, list[float]]] = {w: {s: [] for s in sides} for w in chosen}
        cpus: dict[str, dict[str, list[float]]] = {w: {s: [] for s in sides} for w in chosen}
        repos = {}
        for manager, (make_repo, _) in makers.items():
            (base / manager).mkdir()
            repos[manager] = make_repo(base / manager, FIRST_PACKAGES)
        ansible_env = {
            "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"),
            "ANSIBLE_GATHERING": "explicit",
        }
        for n in range(repeats):  # interleaved: drift of the machine hits every side alike
            for workload in chosen:
                shape = WORKLOADS[workload]
                manager = MANAGER.get(workload, "pacman")
                for side in sides:
                    work = base / f"r{n}-{workload.replace(' ', '-')}-{side.split()[-1]}"
                    work.mkdir()
                    env = makers[manager][1](work, repos[manager])  # a fresh root, untimed
                    cs = work / "cs.yaml"
                    cs.write_text(yaml.safe_dump(first(work / "tree", **shape)))
                    argv, extra = _side(side, bin_dir, cs, work, baseline, OS_ID[manager])
                    loads.append(_load())
                    wall, cpu = _timed(
                        [*env.prefix, *argv],
                        {**extra, **ansible_env} if side == "ansible-playbook" else extra,
                    )
                    runs[workload][side].append(wall)
                    cpus[workload][side].append(cpu)
                    shutil.rmtree(work)
                    print(f"first {workload} {side}: {wall:.2f} s, CPU {cpu:.2f} s", flush=True)
    medians = {w: {s: statistics.median(v) for s, v in r.items()} for w, r in runs.items()}
    cpu = {w: {s: statistics.median(v) for s, v in r.items()} for w, r in cpus.items()}
    return {
        "repeats": repeats,
        "load_average_1m": {
            "min": min(loads),
            "median": statistics.median(loads),
            "max": max(loads),
        },
        "median_seconds": medians,
        "speedup_vs_ansible_playbook": {
            w: m["ansible-playbook"] / m["nodemanager"] for w, m in medians.items()
        },
        "median_cpu_seconds": cpu,
        "cpu_ratio_vs_ansible_playbook": {
            w: m["ansible-playbook"] / m["nodemanager"] for w, m in cpu.items()
        },
        "runs": runs,
        "cpu_runs": cpus,
    }


def _side(
    side: str, bin_dir: Path, cs: Path, work: Path, baseline: str | None, os_id: str
) -> tuple[list[str], dict[str, str]]:
    nm = str(bin_dir / "nodemanager")
    if side == "ansible-playbook":
        rendered = subprocess.run(
            [nm, "render", "--os", os_id, "-f", str(cs)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (work / "site.yml").write_text(rendered)
        return [str(bin_dir / "ansible-playbook"), str(work / "site.yml")], {}
    if side == "nodemanager (baseline)":
        assert baseline
        env = {"PYTHONPATH": baseline, "NODEMANAGER_COLLECTIONS_PATH": str(ROOT / "collections")}
        return [nm, "apply", "--os", os_id, "-f", str(cs)], env
    return [nm, "apply", "--os", os_id, "-f", str(cs)], {}


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds, and CPU seconds of the command and every process it waited for (the
    figure a loaded machine moves least)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env})
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed, cpu
