"""A fleet for controller tests: a namespace, real agents started side by side, and the real
controller with the credential deploy/controller.yaml ships."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from pathlib import Path

from kubernetes import client, config

from tests.cluster.agent import Agent
from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually


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
