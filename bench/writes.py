"""Write cost (`make bench BENCH=writes`): what one agent write costs the API server and etcd.

The fleet figure (section 7) is the API server's CPU on 2 shared vCPUs: 5,000 status writes
per change plus the Lease renewals of 5,000 agents. This bench takes each kind of write apart:
N ManagedNodes (``BENCH_WRITES_NODES``, default 1000) and their Leases, then bursts of N writes
of one kind, 200 in flight over kept-alive connections (bench/agents.py's pool), measuring the
CPU seconds of kube-apiserver and etcd per burst (a figure a loaded machine moves much less
than wall time). Interleaved repeats (``BENCH_REPEATS``), medians, in ms of CPU per write.

Kinds:
- status, changed keys: ``status.configsets`` only, what changes when a ConfigSet changes
  (the simulated agents' write).
- status, whole: everything the real agent owns (host facts, pressure, conditions, configsets;
  computed with the agent's own ``agent/status.py`` and this host's observed facts), one entry
  changed: what the agent sent for a ConfigSet change before it sent changed keys only.
- Lease renewal (PUT of the Lease last written, as the agent and the simulated agents do).
- Event repeat: the real agent's ``Applied`` Event after an apply that changed something
  (agent/reconcile.py), a merge patch of ``count``, ``message`` and ``lastTimestamp`` of the
  node's Event as kube/recorder.py sends it for a repeat (the first apply created it). The
  simulated agents of section 7 do not send it; the real agent does, after the status write.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.agents import BASE, LEASES, NAMESPACE, Pool, gather_bounded, log  # noqa: E402
from bench.controller import cpu_seconds  # noqa: E402

NODES = int(os.environ.get("BENCH_WRITES_NODES", "1000"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
MERGE = "application/merge-patch+json"
EVENTS = f"/api/v1/namespaces/{NAMESPACE}/events"


def whole_status(generation: int) -> dict[str, Any]:
    """The real agent's status for one ConfigSet at ``generation``, from its own code."""
    from nodemanager.agent.pressure import status_block
    from nodemanager.agent.status import compute
    from nodemanager.executor.summary import ConfigSetResult
    from nodemanager.host.observe import observe
    from nodemanager.host.pressure import read_pressure

    now = "2026-11-25T10:00:00Z"
    outcome = ConfigSetResult("fanout", "1", generation, ok=20, last_applied=now)
    status = compute(
        observed=observe(),
        agent_version="0.1.0",
        outcomes=[outcome],
        previous={},
        generation=1,
        now=now,
    )
    sample = read_pressure()
    if sample:
        status["pressure"] = status_block(sample)
    return status


def changed_status(generation: int) -> dict[str, Any]:
    entry = {"name": "fanout", "generation": generation, "lastApplied": "2026-11-25T10:00:00Z"}
    return {"configsets": [entry]}


async def burst(pool: Pool, names: list[str], write: Any) -> None:
    async def one(name: str) -> None:
        status, reply = await write(name)
        if status not in (200, 201):
            raise RuntimeError(f"{name}: {status} {reply.get('message')}")

    await gather_bounded(one(n) for n in names)


async def measure(cp: Any) -> dict[str, Any]:
    ctx = ssl.create_default_context(cafile=str(cp.ca))
    ctx.load_cert_chain(cp.pki / "admin.crt", cp.pki / "admin.key")
    host, port = urlsplit(cp.server).hostname, urlsplit(cp.server).port
    pool = Pool(host, port, ctx)
    names = [f"w-{i:05d}" for i in range(NODES)]
    leases: dict[str, dict[str, Any]] = {}
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())

    async def create(name: str) -> tuple[int, dict[str, Any]]:
        body = {"apiVersion": "common.nodemanager/v1", "kind": "ManagedNode"}
        body["metadata"] = {"name": name}  # type: ignore[assignment]
        status, reply = await pool.request("POST", f"{BASE}/managednodes", {**body, "spec": {}})
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now},
        }
        _, leases[name] = await pool.request("POST", LEASES, lease)
        return status, reply

    await burst(pool, names, create)
    generation = 1
    whole = whole_status(1)

    async def status_changed(name: str) -> tuple[int, dict[str, Any]]:
        body = {"status": changed_status(generation)}
        return await pool.request("PATCH", f"{BASE}/managednodes/{name}/status", body, MERGE)

    async def status_whole(name: str) -> tuple[int, dict[str, Any]]:
        body = {"status": {**whole, **changed_status(generation)}}
        return await pool.request("PATCH", f"{BASE}/managednodes/{name}/status", body, MERGE)

    async def event_create(name: str) -> tuple[int, dict[str, Any]]:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.applied", "namespace": NAMESPACE},
            "involvedObject": {"kind": "ManagedNode", "name": name, "namespace": NAMESPACE},
            "reason": "Applied",
            "message": "1 ConfigSets applied, 1 tasks changed",
            "type": "Normal",
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "source": {"component": "nodemanager-agent", "host": name},
        }
        return await pool.request("POST", f"{EVENTS}", body)

    async def event_repeat(name: str) -> tuple[int, dict[str, Any]]:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {
            "count": generation,
            "message": "1 ConfigSets applied, 1 tasks changed",
            "lastTimestamp": stamp,
        }
        return await pool.request("PATCH", f"{EVENTS}/{name}.applied", body, MERGE)

    async def lease_put(name: str) -> tuple[int, dict[str, Any]]:
        lease = leases[name]
        lease["spec"]["renewTime"] = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        status, reply = await pool.request("PUT", f"{LEASES}/{name}", lease)
        if status == 200:
            leases[name] = reply
        return status, reply

    kinds = {
        "status, changed keys": status_changed,
        "status, whole": status_whole,
        "Lease renewal (PUT)": lease_put,
        "Event repeat (PATCH)": event_repeat,
    }
    await burst(pool, names, status_whole)  # every node has the whole status once, untimed
    await burst(pool, names, event_create)  # and its Applied Event, untimed
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    pids = {"kube-apiserver": cp._apiserver.pid, "etcd": cp._etcd.pid}
    for _ in range(REPEATS):
        for kind, write in kinds.items():
            generation += 1
            cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
            started = time.perf_counter()
            await burst(pool, names, write)
            wall = time.perf_counter() - started
            cpu = {k: cpu_seconds(p) - cpu0[k] for k, p in pids.items()}
            runs[kind].append({"wall": wall, **cpu})
            log(f"writes: {kind}: {wall:.2f} s, CPU {cpu}")
    pool.close()
    per_write = {
        kind: {
            key: round(statistics.median(r[key] for r in rs) / NODES * 1000, 3)
            for key in ("wall", *pids)
        }
        for kind, rs in runs.items()
    }
    return {"nodes": NODES, "repeats": REPEATS, "ms_per_write_median": per_write, "runs": runs}


def main() -> None:
    from bench.run import ROOT, save
    from tests.controlplane.cluster import ControlPlane

    with tempfile.TemporaryDirectory(prefix="nm-bench-") as tmp:
        cp = ControlPlane(Path(tmp) / "cp").start()
        try:
            kubectl = ["kubectl", "--kubeconfig", str(cp.kubeconfig)]
            crds = str(ROOT / "crds")
            subprocess.run([*kubectl, "apply", "-f", crds], check=True, capture_output=True)
            subprocess.run(
                [*kubectl, "wait", "--for=condition=Established", "--timeout=60s", "-f", crds],
                check=True,
                capture_output=True,
            )
            subprocess.run(
                [*kubectl, "create", "namespace", NAMESPACE], check=True, capture_output=True
            )
            with open("/proc/loadavg") as f:
                load = f.read().split()[0]
            result = asyncio.run(measure(cp))
            with open("/proc/loadavg") as f:
                result["load"] = f"{load}-{f.read().split()[0]}"
        finally:
            cp.stop()
    save("writes", result)


if __name__ == "__main__":
    main()
