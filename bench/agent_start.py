"""Agent file start (`make bench BENCH=agentstart`): the file deploy/build.py writes, run as
`--version`: its first start (unpacking into a fresh directory) and later starts (unpacked),
beside `python -c pass` and the venv's `nodemanager --version`; interleaved repeats, medians."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPEATS = int(os.environ.get("BENCH_REPEATS", "7"))


def once(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=env)
    return time.perf_counter() - started


def main() -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="nodemanager-bench-") as tmp:
        binary = Path(tmp) / "nodemanager"
        subprocess.run([sys.executable, str(ROOT / "deploy" / "build.py"), str(binary)], check=True)
        runs: dict[str, list[float]] = {}
        python = [sys.executable, "-I", "-S"]
        for i in range(REPEATS):
            env = {"PATH": "/usr/bin:/bin", "HOME": tmp}
            first = dict(env, NODEMANAGER_UNPACK_DIR=f"{tmp}/unpack-{i}")
            later = dict(env, NODEMANAGER_UNPACK_DIR=f"{tmp}/unpack-0")
            cases = {
                "python -c pass": (python + ["-c", "pass"], env),
                "agent file --version, first start": (python + [str(binary), "--version"], first),
                "agent file --version, later start": (python + [str(binary), "--version"], later),
                "venv nodemanager --version": (
                    [str(Path(sys.executable).parent / "nodemanager"), "--version"],
                    None,
                ),
            }
            for name, (argv, case_env) in cases.items():
                runs.setdefault(name, []).append(once(argv, case_env))
    medians = {name: statistics.median(times) for name, times in runs.items()}
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    for name, seconds in medians.items():
        print(f"{name:<38}{seconds:.3f} s  (median of {REPEATS}, load {load})")
    return medians


if __name__ == "__main__":
    main()
