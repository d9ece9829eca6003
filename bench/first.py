"""First apply (`make bench BENCH=first`): a fresh host converging, side by side.

Three workloads, each on a tree that does not exist yet and a fresh pacman root (a local
repository, a private database in a mount namespace: tests/integration/pacman_repo.py): 100
resources (files, directories, subscribed executions), 10 packages, and both together.
`nodemanager apply` against plain `ansible-playbook` on nodemanager's own `render` output,
interleaved repeats (`BENCH_REPEATS`, default 5), medians, the load average beside them.

`BENCH_FIRST_WORKLOADS` (comma-separated, default all three) picks workloads: on a loaded machine
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
from pathlib import Path

import yaml

from bench.scenarios import FIRST_PACKAGES, first

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {
    "100 resources": {"files": True, "packages": False},
    "10 packages": {"files": False, "packages": True},
    "both": {"files": True, "packages": True},
}
_CHOSEN = os.environ.get("BENCH_FIRST_WORKLOADS", ",".join(WORKLOADS))
CHOSEN = [w.strip() for w in _CHOSEN.split(",")]


def _load() -> float:
    return os.getloadavg()[0]


def main(bin_dir: Path, repeats: int) -> dict:
    from tests.integration.pacman_repo import make_env, make_repo

    baseline = os.environ.get("BENCH_BASELINE")
    sides = ["nodemanager", "ansible-playbook", *(["nodemanager (baseline)"] if baseline else [])]
    unknown = set(CHOSEN) - set(WORKLOADS)
    if unknown:
        raise SystemExit(f"BENCH_FIRST_WORKLOADS: no workload {', '.join(sorted(unknown))}")
    runs: dict[str, dict[str, list[float]]] = {w: {s: [] for s in sides} for w in CHOSEN}
    cpus: dict[str, dict[str, list[float]]] = {w: {s: [] for s in sides} for w in CHOSEN}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="nm-bench-first-") as tmp:
        base = Path(tmp)
        repo = make_repo(base, FIRST_PACKAGES)
        ansible_env = {
            "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"),
            "ANSIBLE_GATHERING": "explicit",
        }
        for n in range(repeats):  # interleaved: drift of the machine hits every side alike
            for workload in CHOSEN:
                shape = WORKLOADS[workload]
                for side in sides:
                    work = base / f"r{n}-{workload.replace(' ', '-')}-{side.split()[-1]}"
                    work.mkdir()
                    env = make_env(work, repo)  # a fresh package root, untimed
                    cs = work / "cs.yaml"
                    cs.write_text(yaml.safe_dump(first(work / "tree", **shape)))
                    argv, extra = _side(side, bin_dir, cs, work, baseline)
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
    side: str, bin_dir: Path, cs: Path, work: Path, baseline: str | None
) -> tuple[list[str], dict[str, str]]:
    nm = str(bin_dir / "nodemanager")
    if side == "ansible-playbook":
        rendered = subprocess.run(
            [nm, "render", "--os", "arch", "-f", str(cs)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (work / "site.yml").write_text(rendered)
        return [str(bin_dir / "ansible-playbook"), str(work / "site.yml")], {}
    if side == "nodemanager (baseline)":
        assert baseline
        env = {"PYTHONPATH": baseline, "NODEMANAGER_COLLECTIONS_PATH": str(ROOT / "collections")}
        return [nm, "apply", "--os", "arch", "-f", str(cs)], env
    return [nm, "apply", "--os", "arch", "-f", str(cs)], {}


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
