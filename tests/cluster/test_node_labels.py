"""Custom node labels as kubelet's NodeRestriction treats them: the administrator approves them
at `rbac --node-labels`, the admission policy enforces it, and an agent asking for anything
else stops at start with the fix, instead of retrying forever with /readyz at 503."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from tests.cluster.agent import NODEMANAGER, Agent
from tests.cluster.helpers import eventually

pytestmark = pytest.mark.cluster
GROUP, VERSION = "common.nodemanager", "v1"


def nm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [NODEMANAGER, *args], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.fixture
def node(kubeconfig, tmp_path):
    """A node approved for role=web, with its own credential (rbac -> token)."""
    name, ns = f"web-{uuid.uuid4().hex[:6]}", f"nm-{uuid.uuid4().hex[:6]}"
    rbac = nm("rbac", "--shared", "--hostname", name, "-n", ns, "--node-labels", "role=web")
    assert rbac.returncode == 0, rbac.stderr
    applied = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "apply", "-f", "-"],  # as the README says
        input=rbac.stdout,
        capture_output=True,
        text=True,
    )
    assert applied.returncode == 0, applied.stderr
    credential = tmp_path / "node.kubeconfig"
    token = nm(
        "token", "--hostname", name, "-n", ns, "--ttl", "1h", "--out", str(credential),
        env={"KUBECONFIG": kubeconfig, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert token.returncode == 0, token.stderr  # the admin kubeconfig came from $KUBECONFIG
    return name, ns, str(credential)


def labels_of(kubeconfig: str, ns: str, name: str) -> dict[str, str]:
    from kubernetes import client, config

    api = client.CustomObjectsApi(config.new_client_from_config(kubeconfig))
    node = api.get_namespaced_custom_object(GROUP, VERSION, ns, "managednodes", name)
    return node["metadata"].get("labels") or {}


def test_approved_label_registers(kubeconfig, node, tmp_path):
    name, ns, credential = node
    agent = Agent(credential, ns, name, tmp_path / "state", "--node-labels", "role=web").start()
    try:
        eventually(lambda: agent.get("/readyz", agent.health_port) == 200, timeout=60)
        got = labels_of(kubeconfig, ns, name)
        assert got["role"] == "web" and got["kubernetes.io/hostname"] == name
    finally:
        agent.stop()


def test_unapproved_label_stops_the_agent_with_the_fix(kubeconfig, node, tmp_path):
    name, ns, credential = node
    agent = Agent(credential, ns, name, tmp_path / "state", "--node-labels", "role=db")
    with open(agent.log_path, "ab") as log:
        proc = subprocess.run(agent.argv, stdout=log, stderr=subprocess.STDOUT, timeout=120)
    output = agent.log()
    assert proc.returncode != 0, output
    assert "--node-labels role=db is not approved" in output
    assert f"nodemanager rbac --hostname {name}" in output
    assert labels_of(kubeconfig, ns, name).get("role") == "web"  # unchanged
