"""A fleet for controller tests: a namespace, real agents started side by side, the real
controller with the credential deploy/controller.yaml ships, and a watch counting the nodes
disrupted at once."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from kubernetes import client, config, watch

from tests.cluster.agent import Agent
from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import GROUP, VERSION


def make_namespace(kubeconfig: str, prefix: str) -> str:
    api = config.new_client_from_config(kubeconfig)
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    try:
        client.CoreV1Api(api).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
        )
    finally:
        api.close()
    return name


def start_agents(
    kubeconfig: str, ns: str, directory: Path, labels: Mapping[str, str], started: dict[str, Agent]
) -> None:
    """One agent per host (``--node-labels`` from ``labels``) into ``started``, started side by
    side: on a loaded machine sequential starts take minutes."""
    for host, text in labels.items():
        started[host] = Agent(kubeconfig, ns, host, directory / host, "--node-labels", text)
    threads = [threading.Thread(target=a.start, kwargs={"timeout": 180}) for a in started.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(a.get("/healthz", a.health_port) == 200 for a in started.values())


def start_controller(
    kubeconfig: str, ns: str, directory: Path, sync_period: float = 1.0
) -> ControllerProcess:
    """With the credential deploy/controller.yaml ships: everything must work with exactly
    those permissions."""
    own = shipped_kubeconfig(kubeconfig, ns, directory)
    c = ControllerProcess(own, ns, directory, "--sync-period", f"{sync_period:g}s").start()
    eventually(c.leading, timeout=120, message="controller ready")
    return c


def rewatch(stream: Callable[[], None], stop: threading.Event) -> None:
    """Run a list-and-watch until ``stop``: a watch cache behind the list's resourceVersion
    (504) or a compacted one (410) lists and watches again (the list shows the current state);
    after ``stop`` the closed connection is expected."""
    while not stop.is_set():
        try:
            stream()
        except client.ApiException as e:
            if e.status not in (410, 504) and not stop.is_set():
                raise
        except Exception:
            if not stop.is_set():
                raise
            return


class Disrupted:
    """Watches every ManagedNode; the most nodes ever disrupted at once.

    A node is *disrupted* while it is not live (Ready Unknown: its Lease lapsed), while a staged
    ConfigSet of ``configsets`` admitted it to a revision it does not report applied (or
    reports with an error), or while it holds a slot granted for an OS upgrade or a lock_group
    restart (spec.disruptionGranted names its status.disruption request)."""

    def __init__(self, api, ns, configsets):
        self.configsets, self.most, self.now = configsets, 0, {}
        self.log: list[tuple[str, list[str]]] = []
        self._stop = threading.Event()
        self._w = watch.Watch()
        threading.Thread(target=self._run, args=(api, ns), daemon=True).start()

    def why(self, obj) -> str:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
        if ready.get("status") == "Unknown":
            return "not ready"
        request = (status.get("disruption") or {}).get("id")
        if request and spec.get("disruptionGranted") == request:
            return "granted"
        reported = {e["name"]: e for e in status.get("configsets") or []}
        for name in self.configsets:
            admitted = (spec.get("configsetRevisions") or {}).get(name)
            entry = reported.get(name, {})
            if admitted and (entry.get("revision") != admitted or entry.get("error")):
                return name
        return ""

    def _run(self, api, ns):
        rewatch(lambda: self._stream(api, ns), self._stop)

    def _stream(self, api, ns):
        nodes = client.CustomObjectsApi(api).list_namespaced_custom_object
        for event in self._w.stream(nodes, GROUP, VERSION, ns, "managednodes", timeout_seconds=600):
            obj = event["object"]
            why = self.why(obj)
            if why:
                self.now[obj["metadata"]["name"]] = why
            else:
                self.now.pop(obj["metadata"]["name"], None)
            self.log.append((obj["metadata"]["name"], sorted(self.now.items())))
            self.most = max(self.most, len(self.now))
            if self._stop.is_set():
                return

    def stop(self):
        self._stop.set()
        self._w.stop()
