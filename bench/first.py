"""First apply (`make bench BENCH=first`): a fresh host converging, side by side.

Three workloads, each on a tree that does not exist yet and a fresh pacman root (a local
repository, a private database in a mount namespace: tests/integration/pacman_repo.py): 100
resources (files, directories, subscribed executions), 10 packages, and both together.
`nodemanager apply` against plain `ansible-playbook` on nodemanager's own `render` output,
interleaved repeats (`BENCH_REPEATS`, default 5), medians, the load average beside them.

`BENCH_BASELINE=DIR` adds a third side: `nodemanager apply` run from another source tree (an
earlier commit, `git archive` unpacked there), so before and after are measured in the same
interleaving.
"""

from __future__ import annotations

import os
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


def _load() -> float:
    return os.getloadavg()[0]


def main(bin_dir: Path, repeats: int) -> dict:
    from tests.integration.pacman_repo import make_env, make_repo

    baseline = os.environ.get("BENCH_BASELINE")
    sides = ["nodemanager", "ansible-playbook", *(["nodemanager (baseline)"] if baseline else [])]
    runs: dict[str, dict[str, list[float]]] = {w: {s: [] for s in sides} for w in WORKLOADS}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="nm-bench-first-") as tmp:
        base = Path(tmp)
        repo = make_repo(base, FIRST_PACKAGES)
        ansible_env = {
            "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"),
            "ANSIBLE_GATHERING": "explicit",
        }
        for n in range(repeats):  # interleaved: drift of the machine hits every side alike
            for workload, shape in WORKLOADS.items():
                for side in sides:
                    work = base / f"r{n}-{workload.replace(' ', '-')}-{side.split()[-1]}"
                    work.mkdir()
                    env = make_env(work, repo)  # a fresh package root, untimed
                    cs = work / "cs.yaml"
                    cs.write_text(yaml.safe_dump(first(work / "tree", **shape)))
                    argv, extra = _side(side, bin_dir, cs, work, baseline)
                    loads.append(_load())
                    runs[workload][side].append(
                        _timed(
                            [*env.prefix, *argv],
                            {**extra, **ansible_env} if side == "ansible-playbook" else extra,
                        )
                    )
                    shutil.rmtree(work)
                    print(f"first {workload} {side}: {runs[workload][side][-1]:.2f} s", flush=True)
    medians = {w: {s: statistics.median(v) for s, v in r.items()} for w, r in runs.items()}
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
        "runs": runs,
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


def _timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env})
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed
