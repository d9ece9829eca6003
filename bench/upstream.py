"""Upstream's agent and ours side by side (`make bench BENCH=upstream`).

Each agent runs on a booted machine of its own against an API server of its own, exactly as in
the differential suite (tests/upstream: os-release ``ID=arch``, Debian's systemd and pacman with a
local repository), each with its default timing (upstream: event-driven, its cache resyncing
every 2 minutes; ours: a drift check every 30 minutes). Measured:

- idle RSS and CPU per hour at 50 and 500 resources (directories, files, subscribed
  executions in ConfigSets of 50): the agent's unit (the agent and anything it started) sampled
  over ``BENCH_UPSTREAM_IDLE`` seconds (default 300) on both machines at once; RSS is the sum of
  the unit's processes' VmRSS at the end, CPU its cgroup's ``usage_usec``;
- a ConfigSet change to the file on disk (one file's content; polled every 20 ms);
- a no-change pass (every ConfigSet touched, ours also SIGHUP, until the sentinel's token);
- a first apply of 10 packages (a new ConfigSet until ``pacman -Q`` lists all ten; removed
  again between repeats).

Repeats (``BENCH_REPEATS``, default 5) alternate which side goes first; medians, with the load
average beside them. Nothing here asserts.
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.thirdparty import UPSTREAM, build
from tests.upstream.cases import Case
from tests.upstream.drive import (
    await_token,
    make_repository,
    objects,
    prepare_host,
    put_configset,
    sentinel,
    start_plane,
    touch_all,
)
from tests.upstream.hosts import GROUP, HOSTNAME, NS, UNIT, VERSION, Side, boot

IDLE_SECONDS = float(os.environ.get("BENCH_UPSTREAM_IDLE", "300"))
PACKAGES = tuple(f"nmd-bench-pkg{i}" for i in range(10))
ROOT = "/srv/nmdiff/bench"


def fifty(index: int, version: str = "v1") -> dict[str, Any]:
    """50 resources: 10 directories, 30 files, 10 executions subscribed to files."""
    base = f"{ROOT}/set{index}"
    files: list[dict[str, Any]] = [{"path": base, "ensure": "directory", "mode": "0755"}]
    files += [{"path": f"{base}/dir{d}", "ensure": "directory", "mode": "0755"} for d in range(9)]
    for i in range(30):
        content = f"setting_{i} = {version if i == 0 else 'v1'}\n" * 5
        files.append(
            {"path": f"{base}/dir{i % 9}/file{i}.conf", "content": content, "mode": "0644"}
        )
    executions = [
        {
            "command": "/bin/true",
            "args": [f"reload-{index}-{i}"],
            "subscribe_files": [f"{base}/dir{i % 9}/file{i}.conf"],
        }
        for i in range(10)
    ]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConfigSet",
        "metadata": {
            "name": f"bench-{index:02d}",
            "labels": {"kubernetes.io/hostname": HOSTNAME},
        },
        "spec": {"files": files, "executions": executions},
    }


def packages(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConfigSet",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": HOSTNAME}},
        "spec": {"packages": [{"name": p, "ensure": "installed"} for p in PACKAGES]},
    }


def settle(side: Side, token: str) -> float:
    started = time.perf_counter()
    touch_all(side, token)
    if side.name == "ours":
        side.hup()
    put_configset(side, sentinel(token))
    await_token({side.name: side}, token)
    return time.perf_counter() - started


def usage(side: Side) -> tuple[float, int]:
    """(CPU seconds, RSS KiB) of the agent's unit: the main process's CPU with that of the
    children it waited for (Ansible, pacman, systemctl), its processes' RSS summed."""
    procs = f"/sys/fs/cgroup/systemd/system.slice/{UNIT}.service/cgroup.procs"
    text = side.check(
        f"cat /proc/$(systemctl show -p MainPID --value {UNIT})/stat; "
        f"for p in $(cat {procs}); do grep VmRSS /proc/$p/status || true; done"
    )
    cpu, rss = 0.0, 0
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "VmRSS:":
            rss += int(parts[1])
        elif ")" in line:
            fields = line.rsplit(")", 1)[1].split()
            ticks = os.sysconf("SC_CLK_TCK")
            cpu = sum(int(f) for f in fields[11:15]) / ticks  # utime stime cutime cstime
    return cpu, rss


def idle(sides: dict[str, Side]) -> dict[str, dict[str, float]]:
    before = {n: usage(s) for n, s in sides.items()}
    started = time.monotonic()
    time.sleep(IDLE_SECONDS)  # the measurement window itself, not a wait for an event
    elapsed = time.monotonic() - started
    out = {}
    for name, side in sides.items():
        cpu, rss = usage(side)
        out[name] = {
            "rss_mib": rss / 1024,
            "cpu_seconds_per_hour": (cpu - before[name][0]) * 3600 / elapsed,
        }
    return out


def interleaved(
    sides: dict[str, Side], repeats: int, once: Callable[[Side, int], float]
) -> dict[str, list[float]]:
    runs: dict[str, list[float]] = {n: [] for n in sides}
    order = list(sides)
    for r in range(repeats):
        for name in order if r % 2 == 0 else reversed(order):
            runs[name].append(once(sides[name], r))
    return runs


def file_change(side: Side, r: int) -> float:
    obj = fifty(0, version=f"r{r}")
    path = side.machine.path(f"{ROOT}/set0/dir0/file0.conf")
    want = f"setting_0 = r{r}\n" * 5
    started = time.perf_counter()
    put_configset(side, obj)
    while path.read_text() != want:
        time.sleep(0.02)
        if time.perf_counter() - started > 600:
            raise TimeoutError(f"{side.name}: the changed file never arrived")
    return time.perf_counter() - started


def first_packages(side: Side, r: int) -> float:
    name = f"bench-packages-{r}"
    local = side.machine.path("/var/lib/pacman/local")
    started = time.perf_counter()
    put_configset(side, packages(name))
    while sum(1 for d in local.iterdir() if d.name.startswith("nmd-bench-pkg")) < len(PACKAGES):
        time.sleep(0.05)
        if time.perf_counter() - started > 900:
            raise TimeoutError(f"{side.name}: the packages never arrived")
    elapsed = time.perf_counter() - started
    objects(side).delete_namespaced_custom_object(GROUP, VERSION, NS, "configsets", name)
    side.check(f"pacman -R --noconfirm {' '.join(PACKAGES)} >/dev/null")
    return elapsed


def summary(runs: dict[str, list[float]]) -> dict[str, Any]:
    return {n: {"median_s": statistics.median(v), "runs_s": v} for n, v in runs.items()}


def main(repeats: int) -> dict[str, Any]:
    # SIGTERM unwinds through the finally below: machines and API servers are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    binary = build(UPSTREAM)
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="nm-bench-upstream-") as tmp:
        base = Path(tmp)
        case = Case("bench", [], packages=PACKAGES)
        repo = make_repository(base, [case])
        planes, sides = {}, {}
        try:
            for name in ("upstream", "ours"):
                planes[name] = start_plane(name, base / f"{name}-cp")
                (base / name).mkdir()
                sides[name] = boot(
                    name,
                    planes[name],
                    base / name,
                    repo,
                    binary if name == "upstream" else None,
                    drift_check="30m",
                )
                prepare_host(sides[name], repo, [case])
                sides[name].start_agent()
                put_configset(sides[name], sentinel("registered"))
                await_token({name: sides[name]}, "registered")
            out: dict[str, Any] = {"idle": {}}
            for size in (50, 500):
                for side in sides.values():
                    for i in range(size // 50):
                        put_configset(side, fifty(i))
                    settle(side, f"idle-{size}")
                    settle(side, f"idle-{size}-again")
                loads.append(os.getloadavg()[0])
                out["idle"][str(size)] = idle(sides)
                print(f"idle {size}: {out['idle'][str(size)]}", flush=True)
            loads.append(os.getloadavg()[0])
            out["file_change"] = summary(interleaved(sides, repeats, file_change))
            print(f"file change: {out['file_change']}", flush=True)
            out["no_change_pass"] = summary(
                interleaved(sides, repeats, lambda s, r: settle(s, f"pass-{r}"))
            )
            print(f"no-change pass: {out['no_change_pass']}", flush=True)
            loads.append(os.getloadavg()[0])
            out["first_10_packages"] = summary(interleaved(sides, repeats, first_packages))
            print(f"first 10 packages: {out['first_10_packages']}", flush=True)
            loads.append(os.getloadavg()[0])
            out["load_average"] = loads
            out["idle_seconds"] = IDLE_SECONDS
            return out
        finally:
            for side in sides.values():
                side.stop_agent()
                side.machine.stop()
                side.close()
            for plane in planes.values():
                plane.stop()
