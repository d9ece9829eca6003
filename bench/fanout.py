"""Benchmark 5, fan-out: N simulated agents on one real kube-apiserver.

Each simulated agent does what the real agent does on the wire, without Ansible: it owns a
ManagedNode, lists ConfigSets and watches them from that resourceVersion with bookmarks,
selects with nodemanager's own selection code, writes ``status.configsets`` when a matching
ConfigSet changes, and renews its Lease every 10 s with one request. Agents are asyncio tasks
with their own HTTPS connections (one for the watch, one kept alive for requests), so a
thousand of them fit in one process.

Measured: after one ConfigSet change, the time until every agent's status write has returned
(median, p99 and maximum of the per-agent latency), checked against the API afterwards; and the
requests each agent sends per hour at rest.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nodemanager.api import ConfigSet  # noqa: E402
from nodemanager.desired.select import matches  # noqa: E402

NAMESPACE = "fanout"
BASE = f"/apis/common.nodemanager/v1/namespaces/{NAMESPACE}"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
LEASE_PERIOD = 10.0
SIZES = tuple(int(n) for n in os.environ.get("BENCH_FANOUT_SIZES", "100,500,1000").split(","))
REST_SECONDS = float(os.environ.get("BENCH_FANOUT_REST", "60"))


class HTTP:
    """A minimal keep-alive HTTP/1.1 client over one TLS connection (what client-go keeps)."""

    def __init__(self, host: str, port: int, ctx: ssl.SSLContext, on_request=None):
        self.host, self.port, self.ctx, self.on_request = host, port, ctx, on_request
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.lock = asyncio.Lock()

    async def _connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port, ssl=self.ctx, limit=2**22
        )

    async def _send(self, method: str, path: str, body: dict | None, content_type: str) -> None:
        if self.writer is None:
            await self._connect()
        data = json.dumps(body).encode() if body is not None else b""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nAccept: application/json\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        await self.writer.drain()
        if self.on_request:
            self.on_request()

    async def _head(self) -> tuple[int, dict[str, str]]:
        status = int((await self.reader.readline()).split()[1])
        headers = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        return status, headers

    async def _chunk(self) -> bytes | None:
        size = int((await self.reader.readline()).strip(), 16)
        if size == 0:
            await self.reader.readline()
            return None
        data = await self.reader.readexactly(size)
        await self.reader.readline()
        return data

    async def request(
        self,
        method: str,
        path: str,
        body: dict | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, dict]:
        async with self.lock:
            await self._send(method, path, body, content_type)
            status, headers = await self._head()
            if headers.get("transfer-encoding") == "chunked":
                raw = b""
                while (part := await self._chunk()) is not None:
                    raw += part
            else:
                raw = await self.reader.readexactly(int(headers.get("content-length", 0)))
            return status, (json.loads(raw) if raw else {})

    async def stream(self, path: str):
        """The lines of a watch response, one event each."""
        await self._send("GET", path, None, "application/json")
        status, headers = await self._head()
        if status != 200:
            raise RuntimeError(f"watch {path}: HTTP {status}")
        buffer = b""
        while (part := await self._chunk()) is not None:
            buffer += part
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                yield json.loads(line)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class SimAgent:
    def __init__(self, index: int, host: str, port: int, ctx: ssl.SSLContext):
        self.name = f"sim-{index:04d}"
        self.labels = {"kubernetes.io/hostname": self.name, "bench": "fanout"}
        self.requests = 0
        self.api = HTTP(host, port, ctx, self._count)
        self.watcher = HTTP(host, port, ctx, self._count)
        self.reported: dict[
            str, float
        ] = {}  # ConfigSet resourceVersion -> when its status write returned
        self.lease: dict | None = None
        self.applied: dict[str, str] = {}

    def _count(self) -> None:
        self.requests += 1

    async def register(self) -> None:
        body = {
            "apiVersion": "common.nodemanager/v1",
            "kind": "ManagedNode",
            "metadata": {"name": self.name, "labels": self.labels},
            "spec": {},
        }
        status, reply = await self.api.request("POST", f"{BASE}/managednodes", body)
        if status not in (201, 409):
            raise RuntimeError(f"{self.name}: create ManagedNode: {status} {reply.get('message')}")

    async def renew_lease(self) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        if self.lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name},
                "spec": {
                    "holderIdentity": self.name,
                    "leaseDurationSeconds": 40,
                    "acquireTime": now,
                    "renewTime": now,
                },
            }
            status, reply = await self.api.request("POST", LEASES, body)
        else:
            self.lease["spec"]["renewTime"] = now
            status, reply = await self.api.request("PUT", f"{LEASES}/{self.name}", self.lease)
        self.lease = reply if status in (200, 201) else None

    async def heartbeat(self) -> None:
        await asyncio.sleep(
            LEASE_PERIOD * (hash(self.name) % 1000) / 1000
        )  # spread, as jitter does
        while True:
            await self.renew_lease()
            await asyncio.sleep(LEASE_PERIOD)

    async def on_configset(self, obj: dict) -> None:
        configset = ConfigSet.from_dict(obj)
        rv = obj["metadata"]["resourceVersion"]
        if not matches(configset, self.labels) or self.applied.get(configset.name) == rv:
            return
        self.applied[configset.name] = rv
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        entries = [
            {"name": n, "resourceVersion": v, "lastApplied": stamp}
            for n, v in sorted(self.applied.items())
        ]
        status, reply = await self.api.request(
            "PATCH",
            f"{BASE}/managednodes/{self.name}/status",
            {"status": {"configsets": entries}},
            "application/merge-patch+json",
        )
        if status != 200:
            raise RuntimeError(f"{self.name}: status write: {status} {reply.get('message')}")
        self.reported[rv] = time.perf_counter()

    async def run(self) -> None:
        status, listing = await self.api.request("GET", f"{BASE}/configsets")
        for item in listing["items"]:
            await self.on_configset(item)
        rv = listing["metadata"]["resourceVersion"]
        while (
            True
        ):  # the server ends a watch after timeoutSeconds: resume from the last version seen
            query = urlencode(
                {
                    "watch": "true",
                    "allowWatchBookmarks": "true",
                    "resourceVersion": rv,
                    "timeoutSeconds": 330,
                }
            )
            async for event in self.watcher.stream(f"{BASE}/configsets?{query}"):
                rv = event["object"]["metadata"]["resourceVersion"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    await self.on_configset(event["object"])

    def close(self) -> None:
        self.api.close()
        self.watcher.close()


async def _gather_bounded(coros, limit: int = 50) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(c):
        async with gate:
            await c

    await asyncio.gather(*(one(c) for c in coros))


async def measure(n: int, server: str, ctx: ssl.SSLContext, admin: HTTP) -> dict:
    host, port = urlsplit(server).hostname, urlsplit(server).port
    agents = [SimAgent(i, host, port, ctx) for i in range(n)]
    started = time.perf_counter()
    await _gather_bounded(a.register() for a in agents)
    await _gather_bounded(a.renew_lease() for a in agents)
    tasks = [asyncio.create_task(a.run()) for a in agents] + [
        asyncio.create_task(a.heartbeat()) for a in agents
    ]
    try:
        status, cs = await admin.request("GET", f"{BASE}/configsets/fanout")
        first = cs["metadata"]["resourceVersion"]
        await _until(lambda: all(first in a.reported for a in agents), 600, tasks)
        setup = time.perf_counter() - started
        log(f"N={n}: {n} agents registered, watching and reported in {setup:.1f} s")

        # At rest: every agent connected, watching and heartbeating; count what it sends.
        before = sum(a.requests for a in agents)
        await asyncio.sleep(REST_SECONDS)
        per_agent_hour = (sum(a.requests for a in agents) - before) / n * 3600 / REST_SECONDS

        # The change: a new generation of the ConfigSet every agent selects.
        change_started = time.perf_counter()
        status, changed = await admin.request(
            "PATCH",
            f"{BASE}/configsets/fanout",
            {"spec": {"files": [{"path": "/etc/fanout.conf", "content": f"{time.time()}\n"}]}},
            "application/merge-patch+json",
        )
        new = changed["metadata"]["resourceVersion"]
        await _until(lambda: all(new in a.reported for a in agents), 600, tasks)
        latencies = sorted(a.reported[new] - change_started for a in agents)
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
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for a in agents:
            a.close()
    log(f"N={n}: measured, cleaning up")
    await admin.request("DELETE", f"{BASE}/managednodes?labelSelector=bench%3Dfanout")
    await admin.request("DELETE", f"{LEASES}")
    log(f"N={n}: cleaned up")
    return {
        "agents": n,
        "setup_seconds": setup,
        "all_reported_seconds": latencies[-1],
        "median_seconds": statistics.median(latencies),
        "p99_seconds": latencies[int(0.99 * (n - 1))],
        "confirmed_in_api": confirmed,
        "requests_per_agent_per_hour_at_rest": per_agent_hour,
        "rest_window_seconds": REST_SECONDS,
    }


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} fanout {message}", file=sys.stderr, flush=True)


async def _until(done, timeout: float, tasks: list[asyncio.Task]) -> None:
    deadline = time.perf_counter() + timeout
    while not done():
        failed = [t for t in tasks if t.done() and not t.cancelled() and t.exception()]
        if failed:
            raise failed[0].exception()
        if time.perf_counter() > deadline:
            raise TimeoutError("agents did not all report in time")
        await asyncio.sleep(0.01)


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
