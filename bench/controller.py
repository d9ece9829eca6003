"""Benchmark 6, controller: N simulated agents (bench/fanout.py) plus the real fleet controller.

The controller (`nodemanager controller`, a separate process) watches the N ManagedNodes, their
Leases and the ConfigSets and summarises the ConfigSet's status. The simulated agents report
``generation`` as the real agent does, and ignore status-only changes of the ConfigSet (the
controller's writes), as the real agent's informer does.

Measured after one ConfigSet change: the time until every agent's status write returned, the
time until the ConfigSet's status says all N updated (what `kubectl get configsets` shows), the
controller's CPU seconds and peak RSS over the window, and its API writes per second.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fanout import BASE, HTTP, NAMESPACE, SimAgent, _gather_bounded, _until, log  # noqa: E402
from nodemanager.api import ConfigSet  # noqa: E402
from nodemanager.desired.select import matches  # noqa: E402

AGENTS = int(os.environ.get("BENCH_CONTROLLER_AGENTS", "5000"))
MANAGE_ACCESS = os.environ.get("BENCH_CONTROLLER_ACCESS", "false")
TICKS = os.sysconf("SC_CLK_TCK")


class RetryingHTTP(HTTP):
    """Reconnects once when the server closed the kept-alive connection (5,000 at once)."""

    async def request(self, method, path, body=None, content_type="application/json"):
        try:
            return await super().request(method, path, body, content_type)
        except (IndexError, ConnectionError, asyncio.IncompleteReadError):
            self.close()
            return await super().request(method, path, body, content_type)


class GenerationAgent(SimAgent):
    """Reports the ConfigSet's generation; a status-only change writes nothing."""

    def __init__(self, index: int, host: str, port: int, ctx: ssl.SSLContext):
        super().__init__(index, host, port, ctx)
        self.api = RetryingHTTP(host, port, ctx, self._count)

    async def on_configset(self, obj: dict) -> None:
        configset = ConfigSet.from_dict(obj)
        generation = int(obj["metadata"].get("generation") or 0)
        if not matches(configset, self.labels) or self.applied.get(configset.name) == generation:
            return
        self.applied[configset.name] = generation
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        entries = [
            {"name": n, "generation": g, "resourceVersion": "", "lastApplied": stamp, "error": ""}
            for n, g in sorted(self.applied.items())
        ]
        status, reply = await self.api.request(
            "PATCH",
            f"{BASE}/managednodes/{self.name}/status",
            {"status": {"configsets": entries}},
            "application/merge-patch+json",
        )
        if status != 200:
            raise RuntimeError(f"{self.name}: status write: {status} {reply.get('message')}")
        self.reported[str(generation)] = time.perf_counter()


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
    return out


def writes(counts: dict[str, float]) -> float:
    return sum(v for k, v in counts.items() if k.upper() in ("POST", "PUT", "PATCH", "DELETE"))


async def measure(cp, controller: subprocess.Popen, metrics_port: int) -> dict:
    ctx = ssl.create_default_context(cafile=str(cp.ca))
    ctx.load_cert_chain(cp.pki / "admin.crt", cp.pki / "admin.key")
    host, port = urlsplit(cp.server).hostname, urlsplit(cp.server).port
    admin = HTTP(host, port, ctx)

    async def status() -> dict:
        _, cs = await admin.request("GET", f"{BASE}/configsets/fanout")
        return cs

    agents = [GenerationAgent(i, host, port, ctx) for i in range(AGENTS)]
    started = time.perf_counter()
    await _gather_bounded(a.register() for a in agents)
    await _gather_bounded(a.renew_lease() for a in agents)
    tasks = [asyncio.create_task(a.run()) for a in agents] + [
        asyncio.create_task(a.heartbeat()) for a in agents
    ]
    try:
        first = str((await status())["metadata"]["generation"])
        await _until(lambda: all(first in a.reported for a in agents), 1200, tasks)
        log(f"controller: {AGENTS} agents reported in {time.perf_counter() - started:.1f} s")
        while (s := (await status()).get("status") or {}).get("updated") != AGENTS:
            await asyncio.sleep(0.5)
        log(f"controller: status shows {s.get('updated')} updated; changing the ConfigSet")

        cpu0, req0 = cpu_seconds(controller.pid), requests(metrics_port)
        change_started = time.perf_counter()
        _, changed = await admin.request(
            "PATCH",
            f"{BASE}/configsets/fanout",
            {"spec": {"files": [{"path": "/etc/fanout.conf", "content": f"{time.time()}\n"}]}},
            "application/merge-patch+json",
        )
        new = changed["metadata"]["generation"]
        await _until(lambda: all(str(new) in a.reported for a in agents), 1200, tasks)
        agents_done = max(a.reported[str(new)] for a in agents) - change_started
        while True:
            s = (await status()).get("status") or {}
            if s.get("observedGeneration") == new and s.get("updated") == AGENTS:
                break
            await asyncio.sleep(0.05)
        summary_done = time.perf_counter() - change_started
        cpu1, req1 = cpu_seconds(controller.pid), requests(metrics_port)
        window = summary_done
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for a in agents:
            a.close()
        admin.close()
    return {
        "agents": AGENTS,
        "manage_access": MANAGE_ACCESS,
        "all_agents_reported_seconds": agents_done,
        "configset_status_all_updated_seconds": summary_done,
        "controller_cpu_seconds_in_window": cpu1 - cpu0,
        "controller_cpu_share_in_window": (cpu1 - cpu0) / window,
        "controller_rss_mib": memory_kib(controller.pid, "VmRSS") / 1024,
        "controller_peak_rss_mib": memory_kib(controller.pid, "VmHWM") / 1024,
        "controller_api_writes": writes(req1) - writes(req0),
        "controller_api_writes_per_second": (writes(req1) - writes(req0)) / window,
        "controller_api_requests_by_method": {k: req1[k] - req0.get(k, 0) for k in req1},
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
                input=json.dumps(configset).encode(),
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
