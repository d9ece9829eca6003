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

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.agents import BASE, LEASES, NAMESPACE, Pool, gather_bounded, log  # noqa: E402
from bench.controller import cpu_seconds  # noqa: E402
from nodemanager.api.nodeuser import user_name  # noqa: E402

NODES = int(os.environ.get("BENCH_WRITES_NODES", "1000"))
# Set: each candidate cost of a status write on its own, interleaved with the changed-keys
# write (section 7 of bench/README.md): the same CRD copied into other groups without its CEL
# rules (and without its string patterns), objects without host facts, and server-side apply.
CANDIDATES = os.environ.get("BENCH_WRITES_CANDIDATES", "") not in ("", "0")
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


def _stripped(crd: dict[str, Any], group: str, drop: tuple[str, ...]) -> dict[str, Any]:
    """The CRD served in ``group`` with the schema keys ``drop`` removed everywhere."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in drop}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    copy = strip(crd)
    copy["metadata"] = {"name": f"{crd['spec']['names']['plural']}.{group}"}
    copy["spec"]["group"] = group
    return copy


def variant_crds(crd: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        _stripped(crd, "nocel.bench", ("x-kubernetes-validations",)),
        _stripped(crd, "noregex.bench", ("x-kubernetes-validations", "pattern")),
    ]


def node_access() -> str:
    """The shipped admission policies, and status patches for every authenticated user (the
    impersonated node users), for the candidates' node writes."""
    from nodemanager.bootstrap.policy import admission_policies

    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "bench-status"},
        "rules": [
            {
                "apiGroups": ["common.nodemanager", "nocel.bench", "noregex.bench"],
                "resources": ["managednodes/status"],
                "verbs": ["patch"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "bench-status"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "bench-status",
        },
        "subjects": [
            {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Group",
                "name": "system:authenticated",
            }
        ],
    }
    return yaml.safe_dump_all([*admission_policies(), *policy_parts(), role, binding])


def policy_parts() -> list[dict[str, Any]]:
    """The ManagedNode policy for the variant groups: nocel.bench with no validation but one
    that holds (a policy that matches, nothing else), noregex.bench without its status and text
    rules (the per-item checks over status)."""
    from nodemanager.bootstrap.policy import _status_rules, _text_rules, managednode_policy

    parts = []
    per_item = {_status_rules(), _text_rules()}
    for group, keep in (("nocel.bench", lambda v: False), ("noregex.bench", lambda v: True)):
        policy, binding = yaml.safe_load(yaml.safe_dump(managednode_policy()))
        policy["metadata"]["name"] = binding["metadata"]["name"] = f"bench-{group}"
        binding["spec"]["policyName"] = f"bench-{group}"
        for rule in policy["spec"]["matchConstraints"]["resourceRules"]:
            rule["apiGroups"] = [group]
        kept = [
            v for v in policy["spec"]["validations"] if keep(v) and v["expression"] not in per_item
        ]
        policy["spec"]["validations"] = kept or [{"expression": "true", "reason": "Forbidden"}]
        parts += [policy, binding]
    return parts


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

    async def create(name: str, base: str = BASE) -> tuple[int, dict[str, Any]]:
        group = base.split("/")[2]
        body = {"apiVersion": f"{group}/v1", "kind": "ManagedNode"}
        body["metadata"] = {"name": name}  # type: ignore[assignment]
        status, reply = await pool.request("POST", f"{base}/managednodes", {**body, "spec": {}})
        if base != BASE or not name.startswith("w-"):
            return status, reply
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

    async def status_whole(name: str, base: str = BASE) -> tuple[int, dict[str, Any]]:
        body = {"status": {**whole, **changed_status(generation)}}
        return await pool.request("PATCH", f"{base}/managednodes/{name}/status", body, MERGE)

    def changed_in(base: str, prefix: str = "w-", as_node: bool = False) -> Any:
        async def write(name: str) -> tuple[int, dict[str, Any]]:
            body = {"status": changed_status(generation)}
            path = f"{base}/managednodes/{prefix}{name[2:]}/status"
            # As the node's own user: the admission policies' matchConditions select it.
            extra = f"Impersonate-User: {user_name(NAMESPACE, name)}\r\n" if as_node else ""
            return await pool.request("PATCH", path, body, MERGE, extra)

        return write

    async def status_apply(name: str) -> tuple[int, dict[str, Any]]:
        # The changed key by server-side apply: its own field manager, managedFields per entry.
        body = {"apiVersion": "common.nodemanager/v1", "kind": "ManagedNode"}
        body |= {"metadata": {"name": name}, "status": changed_status(generation)}
        path = f"{BASE}/managednodes/{name}/status?fieldManager=bench&force=true"
        return await pool.request("PATCH", path, body, "application/apply-patch+yaml")

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
    if CANDIDATES:
        bases = {g: BASE.replace("common.nodemanager", g) for g in ("nocel.bench", "noregex.bench")}
        kinds = {
            "status, changed keys": status_changed,
            "status, changed keys, no CEL rules": changed_in(bases["nocel.bench"]),
            "status, changed keys, no CEL rules, no patterns": changed_in(bases["noregex.bench"]),
            "status, changed keys, object without host facts": changed_in(BASE, "s-"),
            "status, changed keys, server-side apply": status_apply,
            "status, changed keys, as the node (policies)": changed_in(BASE, as_node=True),
            "as the node, no CEL rules, policy of no check": changed_in(
                bases["nocel.bench"], as_node=True
            ),
            "as the node, no CEL rules, policy w/o status+text rules": changed_in(
                bases["noregex.bench"], as_node=True
            ),
            "Lease renewal (PUT)": lease_put,
        }
        for base in bases.values():
            await burst(pool, names, lambda n, b=base: create(n, b))
            await burst(pool, names, lambda n, b=base: status_whole(n, b))
        small = [f"s-{n[2:]}" for n in names]
        await burst(pool, small, create)
        await burst(pool, small, changed_in(BASE, "s-"))
    if os.environ.get("BENCH_WRITES_CANDIDATES") == "keys":
        # Which part of the stored status makes a one-key patch cost: objects without it.
        kinds = {"status, changed keys": status_changed}
        for i, key in enumerate(("conditions", "pressure", "interfaces", "configsets")):
            prefix = f"k{i}-"
            part = {k: v for k, v in whole.items() if k != key}
            some = [f"{prefix}{n[2:]}" for n in names]

            async def partial(name: str, part: dict[str, Any] = part) -> tuple[int, dict[str, Any]]:
                path = f"{BASE}/managednodes/{name}/status"
                return await pool.request("PATCH", path, {"status": part}, MERGE)

            await burst(pool, some, create)
            await burst(pool, some, partial)
            kinds[f"status, changed keys, object without {key}"] = changed_in(BASE, prefix)
        kinds["status, changed keys, object without host facts"] = changed_in(BASE, "s-")
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
            crds = ["-f", str(ROOT / "crds")]
            subprocess.run([*kubectl, "apply", *crds], check=True, capture_output=True)
            if CANDIDATES:
                crd = yaml.safe_load((ROOT / "crds" / "managednodes.yaml").read_text())
                variants = Path(tmp) / "variants"
                variants.mkdir()
                for i, doc in enumerate(variant_crds(crd)):
                    (variants / f"{i}.yaml").write_text(yaml.safe_dump(doc))
                crds += ["-f", str(variants)]
                subprocess.run([*kubectl, "apply", *crds], check=True, capture_output=True)
            subprocess.run(
                [*kubectl, "wait", "--for=condition=Established", "--timeout=60s", *crds],
                check=True,
                capture_output=True,
            )
            subprocess.run(
                [*kubectl, "create", "namespace", NAMESPACE], check=True, capture_output=True
            )
            if CANDIDATES:
                access = Path(tmp) / "access.yaml"
                access.write_text(node_access())
                subprocess.run(
                    [*kubectl, "apply", "-f", str(access)], check=True, capture_output=True
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
