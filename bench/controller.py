"""Benchmark 7, controller: N simulated agents (bench/agents.py) plus the real fleet controller.

The controller (`nodemanager controller`, a separate process) watches the N ManagedNodes, their
Leases and the ConfigSets and summarises the ConfigSet's status. The simulated agents report
``generation`` as the real agent does, and ignore status-only changes of the ConfigSet (the
controller's writes), as the real agent's informer does.

Measured after each of REPEATS ConfigSet changes: the time until every agent's status write
returned, the time until the ConfigSet's status says all N updated (what `kubectl get
configsets` shows), the CPU seconds of each process (controller, kube-apiserver, etcd, the
simulated agents) over that window, and the controller's API writes per second; the
controller's peak RSS; and the same CPU shares over a window at rest.

The nodes are in pools as an operator would set them up: POOLS NodePools (default 10, each
selecting one ``nodegroup`` label of bench/agents.py, ``maxUnavailable: 10%``), the rest in
the controller's default pool. The controller places every node (``spec.pool``, at most 200
writes a sync) and keeps each pool's status; the measured windows start once all are placed.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.agents import BASE, HTTP, NAMESPACE, NODE_GROUPS, Fleet, log  # noqa: E402

AGENTS = int(os.environ.get("BENCH_CONTROLLER_AGENTS", "5000"))
REPEATS = int(os.environ.get("BENCH_CONTROLLER_REPEATS", "3"))
REST_SECONDS = float(os.environ.get("BENCH_CONTROLLER_REST", "20"))
MANAGE_ACCESS = os.environ.get("BENCH_CONTROLLER_ACCESS", "false")
POOLS = min(int(os.environ.get("BENCH_CONTROLLER_POOLS", str(NODE_GROUPS))), NODE_GROUPS)
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def memory_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def requests(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("nodemanager_controller_api_requests_total{"):
            method = line.split('method="', 1)[1].split('"', 1)[0]
            out[method] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("nodemanager_controller_writes_total{"):
            kind = line.split('kind="', 1)[1].split('"', 1)[0]
            out[f"writes:{kind}"] = float(line.rsplit(" ", 1)[1])
    return out


def writes(counts: dict[str, float]) -> float:
    return sum(v for k, v in counts.items() if k.upper() in ("POST", "PUT", "PATCH", "DELETE"))


class Meter:
    """CPU seconds of each process of the system, and the controller's requests, over a window."""

    def __init__(self, pids: dict[str, int], metrics_port: int):
        self.pids, self.metrics_port = pids, metrics_port

    def __enter__(self) -> Meter:
        self.cpu0 = {k: cpu_seconds(v) for k, v in self.pids.items()}
        self.req0 = requests(self.metrics_port)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.t0
        self.cpu = {k: cpu_seconds(v) - self.cpu0[k] for k, v in self.pids.items()}
        req1 = requests(self.metrics_port)
        self.requests = {k: v - self.req0.get(k, 0) for k, v in req1.items()}
        self.writes = writes(req1) - writes(self.req0)


async def measure(cp, controller: subprocess.Popen, metrics_port: int) -> dict:
    ctx = ssl.create_default_context(cafile=str(cp.ca))
    ctx.load_cert_chain(cp.pki / "admin.crt", cp.pki / "admin.key")
    host, port = urlsplit(cp.server).hostname, urlsplit(cp.server).port
    admin = HTTP(host, port, ctx)
    pids = {
        "controller": controller.pid,
        "kube-apiserver": cp._apiserver.pid,
        "etcd": cp._etcd.pid,
        "bench (simulated agents)": os.getpid(),
    }

    async def status() -> tuple[int, dict]:
        _, cs = await admin.request("GET", f"{BASE}/configsets/fanout")
        return int(cs["metadata"]["generation"]), cs.get("status") or {}

    async def summarised(generation: int) -> None:
        while True:
            _, s = await status()
            if s.get("observedGeneration") == generation and s.get("updated") == AGENTS:
                return
            await asyncio.sleep(0.05)

    async def with_pool() -> int:
        """How many ManagedNodes show a spec.pool, listed in pages (one list of 5,000 timed
        out on the loaded server); -1 when a page failed."""
        shown, token = 0, ""
        while True:
            query = urlencode({"limit": 500, **({"continue": token} if token else {})})
            status, page = await admin.request("GET", f"{BASE}/managednodes?{query}")
            if status != 200:
                log(f"controller: listing nodes: {status} {page.get('message')}")
                return -1
            shown += sum("pool" in (n.get("spec") or {}) for n in page["items"])
            token = page["metadata"].get("continue") or ""
            if not token:
                return shown

    async def placed() -> tuple[float, float]:
        """(seconds until every node shows its spec.pool and the pools' status counts all of
        them, the controller's spec.pool writes by then). Nodes are listed only once its own
        count says N writes (a list of 5,000 nodes is itself a load): a write repeated before
        its node showed the first makes that count run ahead of the nodes placed."""
        t0 = time.perf_counter()
        while True:
            _, pools = await admin.request("GET", f"{BASE}/nodepools")
            counted = sum((p.get("status") or {}).get("nodes", 0) for p in pools["items"])
            done = requests(metrics_port).get("writes:pool", 0)
            if done >= AGENTS and counted == AGENTS:
                shown = await with_pool()
                if shown == AGENTS:
                    return time.perf_counter() - t0, done
                log(f"controller: {done:g} spec.pool writes, {shown} of {AGENTS} nodes placed")
                await asyncio.sleep(9)
            await asyncio.sleep(1)

    fleet = Fleet(AGENTS, host, port, ctx, by="generation")
    started = time.perf_counter()
    runs = []
    try:
        await fleet.start()
        first, _ = await status()
        await fleet.until_reported(str(first), 1200)
        log(f"controller: {AGENTS} agents reported in {time.perf_counter() - started:.1f} s")
        await summarised(first)
        placing, pool_writes = await placed()
        log(
            f"controller: {AGENTS} nodes in {POOLS + 1} pools after {placing:.1f} s more, "
            f"{pool_writes:g} spec.pool writes"
        )
        log(f"controller: status shows {AGENTS} updated; {REST_SECONDS:g} s at rest")
        with Meter(pids, metrics_port) as rest:
            await asyncio.sleep(REST_SECONDS)
        shares = {k: round(v / rest.seconds, 3) for k, v in rest.cpu.items()}
        log(f"controller: at rest, CPU share by process {shares}, requests {rest.requests}")
        for i in range(REPEATS):
            with Meter(pids, metrics_port) as m:
                _, changed = await admin.request(
                    "PATCH",
                    f"{BASE}/configsets/fanout",
                    {"spec": {"files": [{"path": "/etc/fanout.conf", "content": f"{i}\n"}]}},
                    "application/merge-patch+json",
                )
                new = int(changed["metadata"]["generation"])
                await fleet.until_reported(str(new), 1200)
                latencies = fleet.latencies(str(new), m.t0)
                await summarised(new)
            run = {
                **latencies,
                "configset_status_all_updated_seconds": m.seconds,
                "cpu_seconds_by_process": m.cpu,
                "controller_api_writes": m.writes,
                "controller_api_writes_per_second": m.writes / m.seconds,
                "controller_api_requests": m.requests,
            }
            log(f"controller: run {i + 1}: {json.dumps(run)}")
            runs.append(run)
            await asyncio.sleep(5)  # let the last writes and events settle
    finally:
        await fleet.stop()
        admin.close()

    def median(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    return {
        "agents": AGENTS,
        "manage_access": MANAGE_ACCESS,
        "pools": POOLS + 1,
        "placed_after_reported_seconds": placing,
        "pool_writes_until_placed": pool_writes,  # one per node when none is repeated
        "pool_writes_total": requests(metrics_port).get("writes:pool", 0),
        "repeats": REPEATS,
        "all_agents_reported_seconds_median": median("all_reported_seconds"),
        "configset_status_all_updated_seconds_median": median(
            "configset_status_all_updated_seconds"
        ),
        "controller_cpu_seconds_median": statistics.median(
            r["cpu_seconds_by_process"]["controller"] for r in runs
        ),
        "controller_api_writes_per_second_median": median("controller_api_writes_per_second"),
        "controller_rss_mib": memory_kib(controller.pid, "VmRSS") / 1024,
        "controller_peak_rss_mib": memory_kib(controller.pid, "VmHWM") / 1024,
        "at_rest": {
            "seconds": rest.seconds,
            "cpu_share_by_process": {k: v / rest.seconds for k, v in rest.cpu.items()},
            "controller_api_writes_per_second": rest.writes / rest.seconds,
            "controller_api_requests": rest.requests,
        },
        "runs": runs,
    }


def main() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))

    from bench.run import BIN, ROOT, save
    from tests.controlplane.cluster import ControlPlane, free_port

    with tempfile.TemporaryDirectory(prefix="nm-bench-") as tmp:
        cp = ControlPlane(Path(tmp) / "cp").start()
        controller = None
        try:
            kubectl = ["kubectl", "--kubeconfig", str(cp.kubeconfig)]
            subprocess.run(
                [*kubectl, "apply", "-f", str(ROOT / "crds")], check=True, capture_output=True
            )
            subprocess.run(
                [
                    *kubectl,
                    "wait",
                    "--for=condition=Established",
                    "--timeout=60s",
                    "-f",
                    str(ROOT / "crds"),
                ],
                check=True,
                capture_output=True,
            )
            subprocess.run(
                [*kubectl, "create", "namespace", NAMESPACE], check=True, capture_output=True
            )
            pools = [
                {
                    "apiVersion": "common.nodemanager/v1",
                    "kind": "NodePool",
                    "metadata": {"name": f"group-{g}", "namespace": NAMESPACE},
                    "spec": {
                        "nodeSelector": {"matchLabels": {"nodegroup": f"g{g}"}},
                        "maxUnavailable": "10%",
                    },
                }
                for g in range(POOLS)
            ]
            configset = {
                "apiVersion": "common.nodemanager/v1",
                "kind": "ConfigSet",
                "metadata": {"name": "fanout", "namespace": NAMESPACE},
                "spec": {
                    "selector": {"matchLabels": {"bench": "fanout"}},
                    "files": [{"path": "/etc/fanout.conf", "content": "v1\n"}],
                },
            }
            subprocess.run(
                [*kubectl, "create", "-f", "-"],
                input=json.dumps(
                    {"apiVersion": "v1", "kind": "List", "items": [*pools, configset]}
                ).encode(),
                check=True,
                capture_output=True,
            )
            metrics_port = free_port()
            log_file = open(Path(tmp) / "controller.log", "wb")  # noqa: SIM115
            controller = subprocess.Popen(
                [
                    str(BIN / "nodemanager"),
                    "controller",
                    "--kubeconfig",
                    str(cp.kubeconfig),
                    "--namespace",
                    NAMESPACE,
                    "--manage-access",
                    MANAGE_ACCESS,
                    "--metrics-bind-address",
                    f"127.0.0.1:{metrics_port}",
                    "--health-probe-bind-address",
                    "0",
                    "--log-format",
                    "text",
                ],
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
            result = asyncio.run(measure(cp, controller, metrics_port))
            print(f"controller: {json.dumps(result)}", flush=True)
        finally:
            if controller:
                controller.terminate()
                controller.wait(30)
            cp.stop()
    save("controller", {"results": [result]})


if __name__ == "__main__":
    main()
