"""nodemanager benchmarks (`make bench`). Not tests: they measure and report, never assert.

1. enforce: full enforce run of a 50-resource ConfigSet with nothing to change: nodemanager
   against plain ansible-playbook on nodemanager's own `render` output, side by side, medians.
2. change: one file changed in that ConfigSet -> file on disk, through the daemon on the real
   control plane (median).
3. idle: one reconcile with nothing changed (no Ansible), in process (median).
4. memory: agent RSS at rest, connected to the control plane; API requests per hour at rest.
5. fanout: N simulated agents on one kube-apiserver (see fanout.py).
6. start (`BENCH=start`, not in the default set): CLI start without the API (cli_start.py).
7. agentstart (`BENCH=agentstart`, not in the default set): the agent file's first and later
   starts (agent_start.py).
8. first (`BENCH=first`, not in the default set): a fresh host's first apply, 100 resources,
   10 packages and both, against ansible-playbook on the render output (first.py).
9. upstream (`BENCH=upstream`, not in the default set): upstream's agent and ours, each on a
   booted machine of its own: idle RSS and CPU, a change to disk, a no-change pass, a first
   apply of 10 packages (upstream.py).

Results go to bench/results/<scenario>.json and are summarised on stdout.
"""

from __future__ import annotations

import compileall
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scenarios import PACKAGES, fifty  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
BIN = Path(sys.executable).parent
REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))


def machine() -> dict:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "cpu": next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            "?",
        ),
    }


def save(name: str, data: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps({"machine": machine(), **data}, indent=2))
    print(f"{name}: {json.dumps(data)}")


def timed(argv: list[str], env: dict | None = None) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **(env or {})})
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} failed:\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def bench_enforce() -> None:
    from tests.integration.pacman_repo import make_env, make_repo

    with tempfile.TemporaryDirectory(prefix="nm-bench-") as tmp:
        tmp = Path(tmp)
        env = make_env(tmp, make_repo(tmp, PACKAGES))
        cs = tmp / "bench.yaml"
        cs.write_text(yaml.safe_dump(fifty(tmp / "root")))
        nm = [*env.prefix, str(BIN / "nodemanager")]
        rendered = subprocess.run(
            [str(BIN / "nodemanager"), "render", "--os", "arch", "-f", str(cs)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        playbook = tmp / "site.yml"
        playbook.write_text(rendered)
        timed([*nm, "apply", "--os", "arch", "-f", str(cs)])  # converge once, untimed
        ansible_env = {
            "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"),
            "ANSIBLE_GATHERING": "explicit",
        }
        runs: dict[str, list[float]] = {
            "nodemanager": [],
            "ansible-playbook": [],
            "nodemanager --no-fast-path": [],
        }
        for _ in range(REPEATS):  # interleaved, so drift of the machine hits all sides alike
            runs["nodemanager"].append(timed([*nm, "apply", "--os", "arch", "-f", str(cs)]))
            runs["ansible-playbook"].append(
                timed([*env.prefix, str(BIN / "ansible-playbook"), str(playbook)], ansible_env)
            )
            runs["nodemanager --no-fast-path"].append(
                timed([*nm, "apply", "--no-fast-path", "--os", "arch", "-f", str(cs)])
            )
        medians = {k: statistics.median(v) for k, v in runs.items()}
        save(
            "enforce",
            {
                "resources": 50,
                "repeats": REPEATS,
                "median_seconds": medians,
                "runs": runs,
                "speedup_vs_ansible_playbook": medians["ansible-playbook"] / medians["nodemanager"],
            },
        )


def _peak(argv: list[str]) -> tuple[float, float]:
    """Seconds and peak RSS (MB) of one command, the command alone (a fresh process)."""
    probe = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "p = subprocess.run(sys.argv[1:], capture_output=True); e = time.perf_counter() - t; "
        "assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]; "
        "print(e, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[0]), float(out[1])


def bench_large() -> None:
    """A 50 MB file: applied with the fast path (native write) and through Ansible (the content
    goes as a src file), and rendered; seconds and peak RSS of the nodemanager process."""
    size = int(os.environ.get("BENCH_LARGE_MB", "50")) << 20
    line = "0123456789 abcdefghij ABCDEFGHIJ ünïcödé {{ not a template }}\n"
    content = (line * (size // len(line.encode()) + 1))[: size // 2]
    content = content + content  # about `size` bytes, built without a second huge copy
    runs: dict[str, list[tuple[float, float]]] = {
        "apply": [],
        "apply --no-fast-path": [],
        "render": [],
    }
    with tempfile.TemporaryDirectory(prefix="nm-bench-large-") as tmp:
        root = Path(tmp)
        target = root / "big.txt"
        cs = root / "big.yaml"
        cs.write_text(
            yaml.dump(
                {
                    "apiVersion": "common.nodemanager/v1",
                    "kind": "ConfigSet",
                    "metadata": {"name": "big"},
                    "spec": {"selector": {}, "files": [{"path": str(target), "content": content}]},
                },
                Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
                width=1000,
            )
        )
        nm = str(BIN / "nodemanager")
        for _ in range(REPEATS):
            for label, argv in (
                ("apply", [nm, "apply", "-f", str(cs)]),
                ("apply --no-fast-path", [nm, "apply", "--no-fast-path", "-f", str(cs)]),
                ("render", [nm, "render", "-f", str(cs), "--out", str(root / "out.yml")]),
            ):
                if label != "render":
                    target.unlink(missing_ok=True)  # a new file every time: the full write
                runs[label].append(_peak(argv))
                assert target.stat().st_size == len(content.encode())
    save(
        "large",
        {
            "content_mb": round(len(content.encode()) / 2**20, 1),
            "repeats": REPEATS,
            "median_seconds": {k: statistics.median(t for t, _ in v) for k, v in runs.items()},
            "median_peak_rss_mb": {k: statistics.median(m for _, m in v) for k, v in runs.items()},
            "runs": runs,
        },
    )


IDLE_SIZES = [int(n) for n in os.environ.get("BENCH_IDLE_SIZES", "50,2000").split(",")]


def bench_idle() -> None:
    """Per size: N/50 ConfigSets of 50 resources each (50 -> one, 2,000 -> 40)."""
    out = {}
    for size in IDLE_SIZES:
        out[str(size)] = idle_once(size)
        print(
            f"idle {size} resources: median {out[str(size)]['median_ms']:.2f} ms, "
            f"CPU {out[str(size)]['cpu_median_ms']:.2f} ms"
        )
    save("idle", out)


def idle_once(size: int) -> dict:
    from nodemanager.agent.metrics import Metrics
    from nodemanager.agent.reconcile import Reconciler
    from nodemanager.agent.state import Snapshot, StateStore
    from nodemanager.executor.events import TaskResult
    from nodemanager.executor.run import RunResult, apply

    with tempfile.TemporaryDirectory(prefix="nm-bench-") as tmp:
        tmp = Path(tmp)
        calls = {"ansible": 0}

        def counting_apply(plan, **kw):
            result = apply(plan, **kw)
            calls["ansible"] += result.ansible
            return result

        def converged(plan, **kw):
            # Only the idle reconciles are timed: the first one records every task as applied
            # (nothing is written to the host), so 2,000 resources need no first Ansible run.
            results = tuple(
                TaskResult(name, o.resource, o.configsets, "ok") for name, o in plan.origins.items()
            )
            return RunResult("successful", 0, results, ansible=False)

        r = Reconciler(
            name="bench",
            managed_labels={"kubernetes.io/hostname": "bench"},
            family="debian",
            store=StateStore(str(tmp / "state")),
            metrics=Metrics(),
            agent_version="bench",
            observe=lambda: {},
            run=converged,
        )
        configsets = []
        for i in range(max(1, size // 50)):
            cs = fifty(tmp / f"root{i}", packages=False)
            cs["metadata"].update(
                name=f"bench-{i:03d}", namespace="bench", resourceVersion=str(i + 1), generation=1
            )
            cs["metadata"]["uid"] = f"uid-{i}"
            for e in cs["spec"]["executions"]:  # distinct commands: no conflicts between sets
                e["args"] = [*e["args"], f"set-{i}"]
            configsets.append(cs)
        snap = Snapshot(
            node={"metadata": {"name": "bench", "labels": {}, "generation": 1}},
            configsets=configsets,
        )
        r.reconcile(snap, full=True)
        r.run = counting_apply
        before = calls["ansible"]
        times, cpu = [], []
        for _ in range(200):
            started, started_cpu = time.perf_counter(), time.process_time()
            r.reconcile(snap, full=False)
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
        return {
            "resources": size,
            "configsets": len(configsets),
            "iterations": len(times),
            "median_ms": statistics.median(times) * 1000,
            # CPU time of this process: what the reconcile costs, whatever else the machine runs
            "cpu_median_ms": statistics.median(cpu) * 1000,
            "p95_ms": sorted(times)[int(0.95 * len(times))] * 1000,
            "ansible_runs_during_idle_reconciles": calls["ansible"] - before,
        }


def bench_daemon() -> None:
    from kubernetes import client, config

    from tests.cluster.agent import Agent
    from tests.cluster.helpers import eventually
    from tests.controlplane.cluster import ControlPlane

    with tempfile.TemporaryDirectory(prefix="nm-bench-") as tmp:
        tmp = Path(tmp)
        cp = ControlPlane(tmp / "cp").start()
        try:
            subprocess.run(
                ["kubectl", "--kubeconfig", str(cp.kubeconfig), "apply", "-f", str(ROOT / "crds")],
                check=True,
                capture_output=True,
            )
            api = config.new_client_from_config(str(cp.kubeconfig))
            client.CoreV1Api(api).create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name="bench"))
            )
            custom = client.CustomObjectsApi(api)
            eventually(
                lambda: (
                    custom.list_namespaced_custom_object(
                        "common.nodemanager", "v1", "bench", "configsets"
                    )
                    is not None
                ),
                timeout=30,
            )
            root = tmp / "root"
            body = fifty(root, packages=False)
            custom.create_namespaced_custom_object(
                "common.nodemanager", "v1", "bench", "configsets", body
            )
            agent = Agent(str(cp.kubeconfig), "bench", "bench-host", tmp / "state").start()
            try:
                target = root / "dir7" / "file7.conf"
                eventually(lambda: target.exists(), timeout=120, message="first apply")
                eventually(
                    lambda: agent.metric("nodemanager_reconcile_total", 'outcome="applied"') >= 1,
                    timeout=60,
                )
                latencies, reported, runs_before = (
                    [],
                    [],
                    agent.metric("nodemanager_ansible_runs_total"),
                )

                def status_has(rv: str) -> bool:
                    node = custom.get_namespaced_custom_object(
                        "common.nodemanager", "v1", "bench", "managednodes", "bench-host"
                    )
                    return any(
                        e.get("resourceVersion") == rv and not e.get("error")
                        for e in (node.get("status") or {}).get("configsets") or []
                    )

                for i in range(REPEATS):
                    version = f"v{i + 2}"
                    current = custom.get_namespaced_custom_object(
                        "common.nodemanager", "v1", "bench", "configsets", "bench"
                    )
                    rv = current["metadata"]["resourceVersion"]
                    eventually(lambda rv=rv: status_has(rv), timeout=60)  # agent at rest
                    new = fifty(root, packages=False, version=version, changed_file=7)
                    new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                    started = time.perf_counter()
                    written = custom.replace_namespaced_custom_object(
                        "common.nodemanager", "v1", "bench", "configsets", "bench", new
                    )
                    eventually(
                        lambda v=version: f"= {v}" in target.read_text(),
                        timeout=60,
                        interval=0.005,
                    )
                    latencies.append(time.perf_counter() - started)
                    # Then the subscribed execution (through Ansible) and the status write.
                    written_rv = written["metadata"]["resourceVersion"]
                    eventually(
                        lambda rv=written_rv: status_has(rv),
                        timeout=60,
                        interval=0.02,
                    )
                    reported.append(time.perf_counter() - started)
                changes = agent.metric("nodemanager_file_changes_total")
                # At rest: memory, and API requests over one minute.
                time.sleep(15)
                rss_kb = int(
                    next(
                        line.split()[1]
                        for line in Path(f"/proc/{agent.proc.pid}/status").read_text().splitlines()
                        if line.startswith("VmRSS")
                    )
                )
                requests_before = agent.metric("nodemanager_api_requests_total")
                time.sleep(60)
                per_hour = (agent.metric("nodemanager_api_requests_total") - requests_before) * 60
                save(
                    "change",
                    {
                        "resources": 50,
                        "repeats": len(latencies),
                        "median_seconds": statistics.median(latencies),
                        "latencies": latencies,
                        "median_seconds_until_status_reported": statistics.median(reported),
                        "until_status_reported": reported,
                        "ansible_runs": agent.metric("nodemanager_ansible_runs_total")
                        - runs_before,
                        "file_changes_total": changes,
                    },
                )
                save(
                    "memory",
                    {"agent_rss_mb": rss_kb / 1024, "api_requests_per_hour_at_rest": per_hour},
                )
            finally:
                agent.stop()
                api.close()
        finally:
            cp.stop()


def bench_start() -> None:
    """CLI start of commands that do not talk to the API, beside `python -c pass`."""
    from bench.cli_start import main as start

    save("start", {"median_s": start(["--importtime"])})


def bench_agentstart() -> None:
    """The agent file's first start (unpack) and later starts, beside `python -c pass`."""
    from bench.agent_start import main as agent_start

    save("agentstart", {"median_s": agent_start()})


def bench_first() -> None:
    """A fresh host's first apply, side by side with ansible-playbook (bench/first.py)."""
    from bench.first import main as first

    save("first", first(BIN, REPEATS))


def bench_upstream() -> None:
    """Upstream's agent beside ours, each on a machine of its own (bench/upstream.py)."""
    from bench.upstream import main as upstream

    save("upstream", upstream(REPEATS))


def main(argv: list[str]) -> int:
    chosen = argv or ["enforce", "large", "idle", "daemon", "fanout"]
    # Bytecode as an installed wheel has it: with PYTHONDONTWRITEBYTECODE set (as on the shared
    # machine) every nodemanager process compiled the modules it imports again (108 compiles,
    # 0.75 s of a 4.9 s profile of the first apply of 100 resources at load 13).
    compileall.compile_dir(ROOT / "nodemanager", quiet=1)
    for name in chosen:
        if name == "controller":
            from bench.controller import main as controller

            controller()
            continue
        if name == "writes":
            from bench.writes import main as writes

            writes()
            continue
        if name == "fanout":
            from bench.fanout import main as fanout

            fanout()
        else:
            globals()[f"bench_{name}"]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
