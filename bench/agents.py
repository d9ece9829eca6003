"""Simulated agents, shared by the fan-out and controller benchmarks.

Each simulated agent does what the real agent does on the wire, without Ansible: it owns a
ManagedNode, lists ConfigSets and watches them (its own connection, bookmarks on), selects
with nodemanager's own selection code, merge-patches ``status.configsets`` when a matching
ConfigSet changes, and renews its Lease every 10 s with one request.

What would run on N different hosts runs here in one asyncio process on the same 2 vCPUs as
the API server, so the bench's own work is kept small where that changes nothing the server
sees: agents send their requests over a shared pool of kept-alive connections (the server sees
the same requests), and a watch event that reaches every agent as the same bytes is decoded
once. The server still serves one watch per agent. Lease renewals have a pool of their own: a
real agent's renewal never waits behind 5,000 other agents' status writes in its own process.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlencode

from nodemanager.api import ConfigSet, InvalidObject
from nodemanager.desired.select import matches

NAMESPACE = "fanout"
BASE = f"/apis/common.nodemanager/v1/namespaces/{NAMESPACE}"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
LEASE_PERIOD = float(os.environ.get("BENCH_LEASE_PERIOD", "10"))  # the real agent: 10 s
POOL_SIZE = 200  # the API server's default limit of mutating requests in flight
NODE_GROUPS = 10  # label nodegroup=g0..g9 (index modulo), for NodePools to select


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} bench {message}", file=sys.stderr, flush=True)


class HTTP:
    """A minimal keep-alive HTTP/1.1 client over one TLS connection (what client-go keeps).

    A connection the server closed while idle (it does, with thousands open) is reopened once.
    """

    def __init__(self, host: str, port: int, ctx: ssl.SSLContext):
        self.host, self.port, self.ctx = host, port, ctx
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.lock = asyncio.Lock()

    async def _send(
        self, method: str, path: str, data: bytes, content_type: str, extra: str = ""
    ) -> None:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(
                self.host, self.port, ssl=self.ctx, limit=2**22
            )
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nAccept: application/json\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n{extra}\r\n"
        )
        self.writer.write(head.encode() + data)
        await self.writer.drain()

    async def _head(self) -> tuple[int, dict[str, str]]:
        assert self.reader is not None
        line = await self.reader.readline()
        if not line:
            raise ConnectionResetError("connection closed by the server")
        status = int(line.split()[1])
        headers = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        return status, headers

    async def _chunk(self) -> bytes | None:
        assert self.reader is not None
        size = int((await self.reader.readline()).strip(), 16)
        if size == 0:
            await self.reader.readline()
            return None
        data = await self.reader.readexactly(size)
        await self.reader.readline()
        return data

    async def _exchange(
        self, method: str, path: str, data: bytes, content_type: str, extra: str = ""
    ) -> tuple[int, dict[str, Any]]:
        await self._send(method, path, data, content_type, extra)
        status, headers = await self._head()
        if headers.get("transfer-encoding") == "chunked":
            raw = b""
            while (part := await self._chunk()) is not None:
                raw += part
        else:
            assert self.reader is not None
            raw = await self.reader.readexactly(int(headers.get("content-length", 0)))
        if headers.get("connection") == "close":
            self.close()
        return status, (json.loads(raw) if raw else {})

    async def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | bytes | None = None,
        content_type: str = "application/json",
        extra: str = "",
    ) -> tuple[int, dict[str, Any]]:
        """``extra``: more header lines, each ending in CRLF (bench/writes.py impersonates)."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode() if body else b""
        async with self.lock:
            # A kept-alive connection the server dropped (idle, or overloaded: a reset or a
            # broken pipe mid-request) is reopened; only a fresh one failing three times fails.
            for attempt in range(3):
                fresh = self.writer is None
                try:
                    return await self._exchange(method, path, data, content_type, extra)
                except (ConnectionError, asyncio.IncompleteReadError, IndexError, ValueError):
                    self.close()
                    if fresh and attempt == 2:
                        raise
                    await asyncio.sleep(0.1 * attempt)
            raise ConnectionError(f"{method} {path}: the server closed the connection each time")

    async def stream(self, path: str) -> AsyncIterator[bytes]:
        """The lines of a watch response, one event each, undecoded."""
        await self._send("GET", path, b"", "application/json")
        status, _ = await self._head()
        if status != 200:
            raise RuntimeError(f"watch {path}: HTTP {status}")
        buffer = b""
        while (part := await self._chunk()) is not None:
            buffer += part
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                yield line

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class Pool:
    """Kept-alive connections shared by all agents for their requests (not their watches)."""

    def __init__(self, host: str, port: int, ctx: ssl.SSLContext, size: int = POOL_SIZE):
        self.idle: asyncio.Queue[HTTP] = asyncio.Queue()
        for _ in range(size):
            self.idle.put_nowait(HTTP(host, port, ctx))
        self.all = list(self.idle._queue)  # type: ignore[attr-defined]
        self.requests = 0

    async def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | bytes | None = None,
        content_type: str = "application/json",
        extra: str = "",
    ) -> tuple[int, dict[str, Any]]:
        conn = await self.idle.get()
        try:
            self.requests += 1
            return await conn.request(method, path, body, content_type, extra)
        finally:
            self.idle.put_nowait(conn)

    def close(self) -> None:
        for conn in self.all:
            conn.close()


class Decoded:
    """Watch lines decoded once for all agents: every agent gets the same bytes per event."""

    def __init__(self) -> None:
        self._events: dict[bytes, dict[str, Any]] = {}
        self._configsets: dict[tuple[str, str], ConfigSet | None] = {}

    def event(self, line: bytes) -> dict[str, Any]:
        event = self._events.get(line)
        if event is None:
            if len(self._events) > 256:
                self._events.clear()
            event = self._events[line] = json.loads(line)
        return event

    def configset(self, obj: dict[str, Any]) -> ConfigSet | None:
        meta = obj["metadata"]
        key = (meta["name"], meta["resourceVersion"])
        if key not in self._configsets:
            if len(self._configsets) > 256:
                self._configsets.clear()
            try:
                self._configsets[key] = ConfigSet.from_dict(obj)
            except InvalidObject:
                self._configsets[key] = None
        return self._configsets[key]


class SimAgent:
    """One simulated agent.

    ``by`` is what it reports per ConfigSet and what ``reported`` is keyed by: ``generation``
    (as the real agent reports; a status-only change of the ConfigSet writes nothing) or
    ``resourceVersion``.
    """

    def __init__(
        self,
        index: int,
        pool: Pool,
        leases: Pool,
        watcher: HTTP,
        decoded: Decoded,
        by: str = "generation",
    ):
        self.name = f"sim-{index:04d}"
        self.labels = {
            "kubernetes.io/hostname": self.name,
            "bench": "fanout",
            "nodegroup": f"g{index % NODE_GROUPS}",
        }
        self.pool, self.leases, self.watcher = pool, leases, watcher
        self.decoded, self.by = decoded, by
        self.seen: dict[str, float] = {}  # key -> when the watch event arrived
        self.reported: dict[str, float] = {}  # key -> when the status write returned
        self.lease: dict[str, Any] | None = None
        self.applied: dict[str, str] = {}

    async def register(self) -> None:
        body = {
            "apiVersion": "common.nodemanager/v1",
            "kind": "ManagedNode",
            "metadata": {"name": self.name, "labels": self.labels},
            "spec": {},
        }
        status, reply = await self.pool.request("POST", f"{BASE}/managednodes", body)
        if status not in (201, 409):
            raise RuntimeError(f"{self.name}: create ManagedNode: {status} {reply.get('message')}")

    async def start(self) -> None:
        """Register and take the Lease, as an agent does in its first second."""
        await self.register()
        await self.renew_lease()

    async def renew_lease(self) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        if self.lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name},
                "spec": {
                    "holderIdentity": self.name,
                    "leaseDurationSeconds": int(4 * LEASE_PERIOD),  # as the agent: 40 s for 10 s
                    "acquireTime": now,
                    "renewTime": now,
                },
            }
            status, reply = await self.leases.request("POST", LEASES, body)
        else:
            self.lease["spec"]["renewTime"] = now
            status, reply = await self.leases.request("PUT", f"{LEASES}/{self.name}", self.lease)
        if status in (200, 201):
            self.lease = reply
        elif status == 409:  # created already, or changed since: read it back, as agents do
            status, reply = await self.leases.request("GET", f"{LEASES}/{self.name}")
            self.lease = reply if status == 200 else None

    async def heartbeat(self) -> None:
        # Spread over the period, as the real agents' start times and jitter spread them.
        await asyncio.sleep(LEASE_PERIOD * (int(self.name[4:]) * 7919 % 1000) / 1000)
        while True:
            await self.renew_lease()
            await asyncio.sleep(LEASE_PERIOD)

    async def on_configset(self, obj: dict[str, Any], arrived: float) -> None:
        configset = self.decoded.configset(obj)
        meta = obj["metadata"]
        key = str(meta.get(self.by) or "")
        if configset is None or not matches(configset, self.labels):
            return
        if self.applied.get(configset.name) == key:
            return
        self.applied[configset.name] = key
        self.seen[key] = arrived
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        entries = [
            {"name": n, self.by: int(v) if self.by == "generation" else v, "lastApplied": stamp}
            for n, v in sorted(self.applied.items())
        ]
        status, reply = await self.pool.request(
            "PATCH",
            f"{BASE}/managednodes/{self.name}/status",
            {"status": {"configsets": entries}},
            "application/merge-patch+json",
        )
        if status != 200:
            raise RuntimeError(f"{self.name}: status write: {status} {reply.get('message')}")
        self.reported[key] = time.perf_counter()

    async def run(self) -> None:
        status, listing = await self.pool.request("GET", f"{BASE}/configsets")
        for item in listing["items"]:
            await self.on_configset(item, time.perf_counter())
        rv = listing["metadata"]["resourceVersion"]
        while True:  # the server ends a watch after timeoutSeconds: resume from the last seen
            query = urlencode(
                {
                    "watch": "true",
                    "allowWatchBookmarks": "true",
                    "resourceVersion": rv,
                    "timeoutSeconds": 330,
                }
            )
            try:
                async for line in self.watcher.stream(f"{BASE}/configsets?{query}"):
                    arrived = time.perf_counter()
                    event = self.decoded.event(line)
                    rv = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        await self.on_configset(event["object"], arrived)
            except (ConnectionError, asyncio.IncompleteReadError, ValueError):
                await asyncio.sleep(1.0)  # the server dropped the watch: resume, as client-go
            self.watcher.close()  # each watch on a new connection: the server may close it

    def close(self) -> None:
        self.watcher.close()


class Fleet:
    """N simulated agents: registered, Leases created, then watching and heartbeating."""

    def __init__(self, n: int, host: str, port: int, ctx: ssl.SSLContext, by: str):
        self.pool = Pool(host, port, ctx)
        self.leases = Pool(host, port, ctx, size=50)
        decoded = Decoded()
        self.agents = [
            SimAgent(i, self.pool, self.leases, HTTP(host, port, ctx), decoded, by)
            for i in range(n)
        ]
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        await gather_bounded(a.start() for a in self.agents)
        self.tasks = [asyncio.create_task(a.run()) for a in self.agents] + [
            asyncio.create_task(a.heartbeat()) for a in self.agents
        ]

    async def until_reported(self, key: str, timeout: float) -> None:
        await until(lambda: all(key in a.reported for a in self.agents), timeout, self.tasks)

    def latencies(self, key: str, since: float) -> dict[str, float]:
        """Seconds from ``since`` until the event arrived / the write returned, over agents."""
        seen = sorted(a.seen[key] - since for a in self.agents)
        done = sorted(a.reported[key] - since for a in self.agents)
        n = len(done)
        return {
            "all_reported_seconds": done[-1],
            "median_seconds": done[n // 2],
            "p99_seconds": done[int(0.99 * (n - 1))],
            "first_reported_seconds": done[0],
            "all_events_arrived_seconds": seen[-1],
            "median_event_arrived_seconds": seen[n // 2],
        }

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for a in self.agents:
            a.close()
        self.pool.close()
        self.leases.close()


async def gather_bounded(coros: Iterable[Awaitable[None]], limit: int = POOL_SIZE) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(c: Awaitable[None]) -> None:
        async with gate:
            await c

    await asyncio.gather(*(one(c) for c in coros))


async def until(done: Callable[[], bool], timeout: float, tasks: list[asyncio.Task[None]]) -> None:
    deadline = time.perf_counter() + timeout
    while not done():
        failed = [t for t in tasks if t.done() and not t.cancelled() and t.exception()]
        if failed:
            raise failed[0].exception()  # type: ignore[misc]
        if time.perf_counter() > deadline:
            raise TimeoutError("agents did not all report in time")
        await asyncio.sleep(0.01)
