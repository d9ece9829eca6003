"""Benchmark 5, fan-out: N simulated agents on one real kube-apiserver.

The simulated agents are bench/agents.py's (what the real agent does on the wire, without
Ansible), reporting the ConfigSet's resourceVersion.

Measured: after one ConfigSet change, the time until every agent's status write has returned
(median, p99 and maximum of the per-agent latency), checked against the API afterwards; and the
requests each agent sends per hour at rest.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.agents import BASE, HTTP, LEASES, NAMESPACE, Fleet, log  # noqa: E402

SIZES = tuple(int(n) for n in os.environ.get("BENCH_FANOUT_SIZES", "100,500,1000").split(","))
REST_SECONDS = float(os.environ.get("BENCH_FANOUT_REST", "60"))


async def measure(n: int, server: str, ctx: ssl.SSLContext, admin: HTTP) -> dict:
    fleet = Fleet(n, urlsplit(server).hostname, urlsplit(server).port, ctx, by="resourceVersion")
    started = time.perf_counter()
    await fleet.start()
    try:
        status, cs = await admin.request("GET", f"{BASE}/configsets/fanout")
        await fleet.until_reported(cs["metadata"]["resourceVersion"], 600)
        setup = time.perf_counter() - started
        log(f"N={n}: {n} agents registered, watching and reported in {setup:.1f} s")

        # At rest: every agent connected, watching and heartbeating; count what they send.
        before = fleet.pool.requests + fleet.leases.requests
        await asyncio.sleep(REST_SECONDS)
        per_agent_hour = (
            (fleet.pool.requests + fleet.leases.requests - before) / n * 3600 / REST_SECONDS
        )

        # The change: a new generation of the ConfigSet every agent selects.
        change_started = time.perf_counter()
        status, changed = await admin.request(
            "PATCH",
            f"{BASE}/configsets/fanout",
            {"spec": {"files": [{"path": "/etc/fanout.conf", "content": f"{time.time()}\n"}]}},
            "application/merge-patch+json",
        )
        new = changed["metadata"]["resourceVersion"]
        await fleet.until_reported(new, 600)
        latencies = fleet.latencies(new, change_started)
        status, nodes = await admin.request(
            "GET", f"{BASE}/managednodes?labelSelector=bench%3Dfanout"
        )
        confirmed = sum(
            1
            for node in nodes["items"]
            if any(
                e.get("resourceVersion") == new
                for e in node.get("status", {}).get("configsets", [])
            )
        )
    finally:
        await fleet.stop()
    log(f"N={n}: measured, cleaning up")
    await admin.request("DELETE", f"{BASE}/managednodes?labelSelector=bench%3Dfanout")
    await admin.request("DELETE", f"{LEASES}")
    log(f"N={n}: cleaned up")
    return {
        "agents": n,
        "setup_seconds": setup,
        **latencies,
        "confirmed_in_api": confirmed,
        "requests_per_agent_per_hour_at_rest": per_agent_hour,
        "rest_window_seconds": REST_SECONDS,
    }


async def run_all(cp) -> list[dict]:
    ctx = ssl.create_default_context(cafile=str(cp.ca))
    ctx.load_cert_chain(cp.pki / "admin.crt", cp.pki / "admin.key")
    admin = HTTP(urlsplit(cp.server).hostname, urlsplit(cp.server).port, ctx)
    await admin.request(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
    )
    configset = {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ConfigSet",
        "metadata": {"name": "fanout"},
        "spec": {
            "selector": {"matchLabels": {"bench": "fanout"}},
            "files": [{"path": "/etc/fanout.conf", "content": "v1\n"}],
        },
    }
    status, reply = await admin.request("POST", f"{BASE}/configsets", configset)
    if status != 201:
        raise RuntimeError(f"create ConfigSet: {status} {reply.get('message')}")
    log("control plane ready")
    results = []
    for n in SIZES:
        result = await measure(n, cp.server, ctx, admin)
        print(f"fanout N={n}: {json.dumps(result)}", flush=True)
        results.append(result)
    admin.close()
    return results


def main() -> None:
    import resource
    import subprocess

    # Two connections per agent, on both ends: raise the open-file limit the API server inherits.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))

    from bench.run import ROOT, save
    from tests.controlplane.cluster import ControlPlane

    with tempfile.TemporaryDirectory(prefix="nm-bench-") as tmp:
        cp = ControlPlane(Path(tmp) / "cp").start()
        try:
            subprocess.run(
                ["kubectl", "--kubeconfig", str(cp.kubeconfig), "apply", "-f", str(ROOT / "crds")],
                check=True,
                capture_output=True,
            )
            subprocess.run(
                [
                    "kubectl",
                    "--kubeconfig",
                    str(cp.kubeconfig),
                    "wait",
                    "--for=condition=Established",
                    "--timeout=60s",
                    "-f",
                    str(ROOT / "crds"),
                ],
                check=True,
                capture_output=True,
            )
            results = asyncio.run(run_all(cp))
        finally:
            cp.stop()
    save("fanout", {"results": results})


if __name__ == "__main__":
    main()
