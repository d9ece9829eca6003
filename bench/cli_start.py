"""CLI start (`make bench BENCH=start`): commands that do not talk to the API, each a fresh
process, beside `python -c pass`; interleaved repeats, medians. Goal: 0.2 s or less.
`render -f` and `apply -f` take a one-file ConfigSet without templates (apply: converged after
the first run, so what is measured is the start and the proof that nothing changes).

With `--importtime`, also the ten slowest imports of `nodemanager --version`
(`python -X importtime`), to see what a change would defer."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
REPEATS = int(os.environ.get("BENCH_REPEATS", "11"))
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "nodemanager --version": [str(BIN / "nodemanager"), "--version"],
    "nodemanager render --help": [str(BIN / "nodemanager"), "render", "--help"],
    "nodemanager apply --help": [str(BIN / "nodemanager"), "apply", "--help"],
    "nodemanager completion bash": [str(BIN / "nodemanager"), "completion", "bash"],
}


def once(argv: list[str]) -> tuple[float, float]:
    """Wall seconds, and CPU seconds (user + system) of the command: on a loaded machine the
    CPU time still says what the start costs."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def local_commands(tmp: Path) -> dict[str, list[str]]:
    cs = tmp / "start.yaml"
    body = {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ConfigSet",
        "metadata": {"name": "start"},
        "spec": {"selector": {}, "files": [{"path": str(tmp / "motd"), "content": "hi\n"}]},
    }
    cs.write_text(json.dumps(body))
    nm = str(BIN / "nodemanager")
    return {
        "nodemanager render -f": [nm, "render", "-f", str(cs), "--os", "debian"],
        "nodemanager apply -f": [nm, "apply", "-f", str(cs), "--state-dir", str(tmp / "state")],
    }


def measure() -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="nm-bench-start-") as tmp:
        commands = {**COMMANDS, **local_commands(Path(tmp))}
        once(commands["nodemanager apply -f"])  # converge once, untimed
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(REPEATS):
            for name, argv in commands.items():
                runs[name].append(once(argv))
    return {
        name: {
            "wall": statistics.median(w for w, _ in times),
            "cpu": statistics.median(c for _, c in times),
        }
        for name, times in runs.items()
    }


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


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    medians = measure()
    with open("/proc/loadavg") as f:
        load += "-" + f.read().split()[0]
    for name, m in medians.items():
        print(
            f"{name:<32}{m['wall']:.3f} s, CPU {m['cpu']:.3f} s  (median of {REPEATS}, load {load})"
        )
    if argv and "--importtime" in argv:
        for micros, name in slowest_imports():
            print(f"{micros / 1e6:8.3f} s cumulative  {name}")
    return medians


if __name__ == "__main__":
    main(sys.argv[1:])
