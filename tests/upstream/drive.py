"""Driving both sides: API servers with each side's CRDs, the starting host, ConfigSets, passes.

A pass is awaited the same way on both: every case's ConfigSet is touched (an annotation, an
update event: upstream reconciles each ConfigSet on any event), ours also gets SIGHUP (a full
reconcile), then the sentinel ConfigSet, last by name and by creation, writes the pass's
token. Upstream reconciles ConfigSets one at a time in the order their events came; ours
applies its whole cache at once, and the sentinel is in its cache only after every earlier
event. So once the token is on the host, the pass that followed the event is over.
"""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.cluster.helpers import crds_established, eventually
from tests.controlplane.cluster import ControlPlane
from tests.integration.pacman_repo import build_package
from tests.upstream.cases import PHASES, SENTINEL, Case, unit_text
from tests.upstream.hosts import COUNTERS, GROUP, HOSTNAME, NS, VERSION, Side

ROOT = Path(__file__).resolve().parents[2]
CRDS = {"upstream": ROOT / "tests" / "fixtures" / "upstream" / "crds", "ours": ROOT / "crds"}
PASS_TIMEOUT = 420.0  # one pass of every case on a loaded 2-core machine


def start_plane(side: str, directory: Path) -> ControlPlane:
    plane = ControlPlane(directory).start()
    kubeconfig = str(plane.kubeconfig)
    for args in (["apply", "-f", str(CRDS[side])], ["create", "namespace", NS]):
        done = subprocess.run(
            ["kubectl", "--kubeconfig", kubeconfig, *args], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    api = client.ApiextensionsV1Api(plane_client(plane))
    eventually(
        lambda: crds_established(api, ("configsets", "managednodes")),
        timeout=60,
        message=f"{side}'s CRDs established",
    )
    return plane


def plane_client(plane: ControlPlane) -> client.ApiClient:
    from kubernetes import config

    return config.new_client_from_config(str(plane.kubeconfig))


def make_repository(directory: Path, cases: list[Case]) -> Path:
    repo = directory / "repo"
    repo.mkdir(parents=True)
    for name in ("nmtest-base", "nmtest-dep", *(p for c in cases for p in c.packages)):
        build_package(directory, repo, name, "1.0-1")
    return repo


def prepare_host(side: Side, repo: Path, cases: list[Case]) -> None:
    """The starting host: pacman on the local repository with two packages installed (an
    explicit one and a dependency, as on any host), the cases' units and their own setup."""
    conf = (
        "[options]\nArchitecture = auto\nSigLevel = Never\nLocalFileSigLevel = Never\n\n"
        f"[nmtest]\nSigLevel = Never\nServer = file://{repo}\n"
    )
    # the root's /etc/hostname (debootstrap copied the build host's) named the machine
    side.check(f"hostname {HOSTNAME} && echo {HOSTNAME} > /etc/hostname")
    side.check(
        f"cat > /etc/pacman.conf <<'EOF'\n{conf}EOF\n"
        "mkdir -p /opt/nmtest /var/cache/pacman/pkg && pacman -Syy --noconfirm >/dev/null"
        " && pacman -S --noconfirm nmtest-base >/dev/null"
        " && pacman -S --noconfirm --asdeps nmtest-dep >/dev/null"
        f" && mkdir -p {COUNTERS}/runs {COUNTERS}/starts /srv/nmdiff"
    )
    for case in cases:
        for unit in case.units:
            side.check(f"cat > /etc/systemd/system/{unit}.service <<'EOF'\n{unit_text(unit)}EOF\n")
    side.check("systemctl daemon-reload")
    for case in cases:
        side.check(case.script(case.setup))


@dataclass
class Run:
    """What both sides looked like after each phase, and their ManagedNodes and metrics."""

    sides: dict[str, Side]
    states: dict[str, dict[str, dict[str, Any]]]  # side -> phase -> snapshot (+ "node")
    seconds: dict[str, float]


def objects(side: Side) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(side.api())


def put_configset(side: Side, body: dict[str, Any]) -> None:
    api = objects(side)
    name = body["metadata"]["name"]
    try:
        current = api.get_namespaced_custom_object(GROUP, VERSION, NS, "configsets", name)
    except client.ApiException as e:
        if e.status != 404:
            raise
        api.create_namespaced_custom_object(GROUP, VERSION, NS, "configsets", body)
        return
    current["spec"] = body["spec"]
    current["metadata"]["labels"] = body["metadata"].get("labels", {})
    api.replace_namespaced_custom_object(GROUP, VERSION, NS, "configsets", name, current)


def touch_all(side: Side, token: str) -> None:
    api = objects(side)
    listed = api.list_namespaced_custom_object(GROUP, VERSION, NS, "configsets")
    for item in listed["items"]:
        if item["metadata"]["name"] == SENTINEL:
            continue
        patch = {"metadata": {"annotations": {"nmdiff/pass": token}}}
        api.patch_namespaced_custom_object(
            GROUP, VERSION, NS, "configsets", item["metadata"]["name"], patch
        )


def sentinel(token: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConfigSet",
        "metadata": {"name": SENTINEL, "labels": {"kubernetes.io/hostname": HOSTNAME}},
        "spec": {"files": [{"path": f"{COUNTERS}/sentinel", "content": token + "\n"}]},
    }


def await_token(sides: dict[str, Side], token: str) -> None:
    """Until every side has the token on disk and reported the sentinel's current version in
    its ManagedNode status: ours writes status after its whole run (handlers, executions
    included), upstream after each ConfigSet."""

    def reported(side: Side) -> bool:
        api = objects(side)
        current = api.get_namespaced_custom_object(GROUP, VERSION, NS, "configsets", SENTINEL)
        version = current["metadata"]["resourceVersion"]
        entries = (node(side).get("status") or {}).get("configsets") or []
        return any(
            e.get("name") == SENTINEL and e.get("resourceVersion") == version for e in entries
        )

    def arrived() -> bool:
        for side in sides.values():
            path = side.machine.path(f"{COUNTERS}/sentinel")
            if not path.exists() or path.read_text().strip() != token or not reported(side):
                assert side.agent_running(), f"{side.name}'s agent stopped:\n{side.log()}"
                return False
        return True

    try:
        eventually(arrived, timeout=PASS_TIMEOUT, interval=1, message=f"both hosts at {token}")
    except AssertionError as e:
        logs = "\n".join(f"--- {s.name} agent log ---\n{s.log(80)}" for s in sides.values())
        raise AssertionError(f"{e}\n{logs}") from e


def node(side: Side) -> dict[str, Any]:
    try:
        got: dict[str, Any] = objects(side).get_namespaced_custom_object(
            GROUP, VERSION, NS, "managednodes", HOSTNAME
        )
    except client.ApiException:
        return {}
    return got


def snapshot(side: Side, cases: list[Case]) -> dict[str, Any]:
    extra = [p for c in cases for p in c.paths]
    units = [u for c in cases for u in (*c.units, *c.absent_units)]
    state = side.snapshot(extra, units)
    state["node"] = node(side)
    return state


def run_phases(sides: dict[str, Side], cases: list[Case]) -> tuple[dict, dict[str, float]]:
    states: dict[str, dict[str, Any]] = {name: {} for name in sides}
    seconds: dict[str, float] = {}

    def each(fn: Any) -> None:
        with ThreadPoolExecutor(len(sides)) as pool:
            list(pool.map(fn, sides.values()))

    def settle(phase: str, touch: bool) -> None:
        started = time.monotonic()
        if touch:
            each(lambda s: touch_all(s, phase))
            sides["ours"].hup()
        each(lambda s: put_configset(s, sentinel(phase)))
        await_token(sides, phase)
        seconds[phase] = time.monotonic() - started
        for name, side in sides.items():
            states[name][phase] = snapshot(side, cases)

    # registration: both agents have their ManagedNode, labelled, before any case arrives
    each(lambda s: put_configset(s, sentinel("registered")))
    await_token(sides, "registered")
    for phase in PHASES:
        if phase == "first":
            each(lambda s: [put_configset(s, o) for c in cases for o in c.objects("first")])
        elif phase == "drift":
            for case in cases:
                if case.drift:
                    each(lambda s, c=case: s.check(c.script(c.drift)))
        elif phase == "change":
            for case in cases:
                if case.change is not None:
                    each(lambda s, c=case: [put_configset(s, o) for o in c.objects("change")])
        settle(phase, touch=phase in ("second", "drift"))
    return states, seconds
