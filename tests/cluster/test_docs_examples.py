"""The docs' examples against the real API server.

- Every YAML block of docs/ goes to kube-apiserver as a server-side dry run: the CRDs' schema,
  CEL rules and defaults judge it exactly as `kubectl apply` would. Fragments marked
  `docs-test: wrap KIND` are completed into a KIND object first (tests/docs_blocks.py).
- Getting started's cluster block runs as written, its first line (`make dev-cluster`) being
  the session's control plane: the admin kubeconfig is where that line would have put it, and
  the reader's checkout is a directory holding examples/. It ends with the host's ManagedNode
  reporting the demo ConfigSet applied, which this test then reads back.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.docs_blocks import ROOT, every_block, run_block

pytestmark = pytest.mark.cluster
NAMESPACE = "nodemanager"


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def objects(block_text: str, wrap: str, name: str) -> list[dict[str, Any]]:
    """The objects a block stands for: as written, or its fragment completed into `wrap`."""
    docs = [d for d in yaml.safe_load_all(block_text) if d is not None]
    if not wrap:
        return docs
    kind, _, part = wrap.partition(".")
    skeleton: dict[str, Any] = {
        "apiVersion": "common.nodemanager/v1",
        "kind": kind,
        "metadata": {"name": name},
    }
    if part == "spec":
        return [dict(skeleton, spec=docs[0])]
    return [merge(skeleton, docs[0])]


def test_every_yaml_example_passes_a_server_side_dry_run(kubeconfig):
    ns = kubectl(kubeconfig, "create", "namespace", NAMESPACE, "--dry-run=client", "-o", "yaml")
    kubectl(kubeconfig, "apply", "-f", "-", stdin=ns.stdout)  # may exist (other tests, guards)
    checked, refused = [], []
    for index, block in enumerate(b for b in every_block() if b.lang == "yaml"):
        if block.marker == "illustrative":
            continue
        wrap = block.argument if block.marker == "wrap" else ""
        for obj in objects(block.text, wrap, f"docs-example-{index}"):
            proc = kubectl(
                kubeconfig,
                "apply",
                "--dry-run=server",
                "-n",
                obj.get("metadata", {}).get("namespace", NAMESPACE),
                "-f",
                "-",
                stdin=yaml.safe_dump(obj),
            )
            if proc.returncode != 0 or "(server dry run)" not in proc.stdout:
                refused.append(f"{block.where()}: {proc.stderr.strip() or proc.stdout.strip()}")
            checked.append(f"{obj['kind']}/{obj['metadata']['name']}")
    assert not refused, "\n".join(refused)
    # the pages hold ConfigSets, ManagedNodes and NodePools, whole and as fragments
    assert {c.split("/")[0] for c in checked} == {"ConfigSet", "ManagedNode", "NodePool"}, checked


def test_getting_started_reaches_a_host_applying_a_configset(control_plane, tmp_path):
    block = run_block("cluster")
    first, _, rest = block.text.partition("\n")
    assert first == "make dev-cluster", f"{block.where()} no longer starts with make dev-cluster"
    home = tmp_path / "home"
    admin = home / ".cache/nodemanager/dev-cluster/admin.kubeconfig"
    admin.parent.mkdir(parents=True)
    shutil.copy(control_plane.kubeconfig, admin)  # where `make dev-cluster` writes it
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "examples").symlink_to(ROOT / "examples")
    venv_bin = Path(sys.executable).parent  # the `. .venv/bin/activate` of the page's first part
    env = dict(os.environ, HOME=str(home), PATH=f"{venv_bin}{os.pathsep}{os.environ['PATH']}")
    env.pop("KUBECONFIG", None)
    proc = subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", rest],
        cwd=checkout,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the agent it starts in the background goes with the group
    )
    try:
        output, _ = proc.communicate(timeout=540)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, f"{block.where()} failed:\n{output}"
    host = socket.gethostname()
    node = kubectl(str(admin), "-n", NAMESPACE, "get", "managednode", host, "-o", "yaml")
    assert node.returncode == 0, node.stderr
    status = yaml.safe_load(node.stdout)["status"]
    entries = {c["name"]: c for c in status.get("configsets", [])}
    assert "demo" in entries and not entries["demo"].get("error"), status
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions.get("Applied") == "True", status["conditions"]
    assert host in output  # `kubectl get managednodes` listed it
    assert Path("/tmp/nodemanager-demo/motd").exists()
