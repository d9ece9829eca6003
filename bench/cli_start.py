"""CLI start (`make bench BENCH=start`): commands that do not talk to the API, each a fresh
process, beside `python -c pass`; interleaved repeats, medians. Goal: 0.2 s or less.

With `--importtime`, also the ten slowest imports of `nodemanager --version`
(`python -X importtime`), to see what a change would defer."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
REPEATS = int(os.environ.get("BENCH_REPEATS", "11"))
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "nodemanager --version": [str(BIN / "nodemanager"), "--version"],
    "nodemanager render --help": [str(BIN / "nodemanager"), "render", "--help"],
    "nodemanager completion bash": [str(BIN / "nodemanager"), "completion", "bash"],
}


def once(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started


def measure() -> dict[str, float]:
    runs: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(REPEATS):
        for name, argv in COMMANDS.items():
            runs[name].append(once(argv))
    return {name: statistics.median(times) for name, times in runs.items()}


def slowest_imports(n: int = 10) -> list[tuple[int, str]]:
    code = "import sys; sys.argv = ['nodemanager', '--version']; import nodemanager.cli"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True
    )
    rows = []
    for line in proc.stderr.splitlines()[1:]:
        parts = line.split("|")
        if len(parts) == 3:
            rows.append((int(parts[1]), parts[2].rstrip()))
    return sorted(rows, reverse=True)[:n]


def main(argv: list[str] | None = None) -> dict[str, float]:
    medians = measure()
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    for name, seconds in medians.items():
        print(f"{name:<32}{seconds:.3f} s  (median of {REPEATS}, load {load})")
    if argv and "--importtime" in argv:
        for micros, name in slowest_imports():
            print(f"{micros / 1e6:8.3f} s cumulative  {name}")
    return medians


if __name__ == "__main__":
    main(sys.argv[1:])
