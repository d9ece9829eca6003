"""Every Kubernetes manifest the project ships applies twice, server-side, on the real API.

The first apply of a manifest with a YAML mistake (such as an unquoted comma inside a flow
mapping, which adds a stray key) can succeed; the second one fails with a strict decoding
error, which breaks CRD upgrades and GitOps tools. So each manifest goes in twice, as
`kubectl apply --server-side` does it, and `make install`'s client-side apply twice too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
NODEMANAGER = str(Path(sys.executable).with_name("nodemanager"))


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def kubernetes_manifests(folder: Path) -> list[Path]:
    """YAML files in `folder` whose documents are Kubernetes objects (apiVersion and kind).
    Prometheus rule files and the like are shipped beside them but are not for the API."""
    found = []
    for path in sorted(folder.rglob("*.y*ml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        if docs and all(isinstance(d, dict) and "apiVersion" in d and "kind" in d for d in docs):
            found.append(path)
    return found


def shipped(kubeconfig: str) -> list[tuple[str, str]]:
    """(name, YAML text) of everything an admin is told to apply, in dependency order."""
    rbac = subprocess.run(
        [NODEMANAGER, "rbac", "--shared", "--hostname", "web-1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    items = [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "crds").glob("*"))]
    items.append(("nodemanager rbac --shared --hostname web-1", rbac))
    for folder in ("deploy", "examples"):
        items += [
            (str(p.relative_to(ROOT)), p.read_text()) for p in kubernetes_manifests(ROOT / folder)
        ]
    return items


def test_every_shipped_manifest_applies_twice_server_side(kubeconfig):
    manifests = shipped(kubeconfig)
    assert any(name.startswith("examples/") for name, _ in manifests)
    for attempt in (1, 2):
        for name, text in manifests:
            out = kubectl(
                kubeconfig,
                "apply",
                "--server-side",
                "--field-manager=nodemanager-test",
                # Other tests of the session applied the shared admission policy client-side;
                # taking those fields over is what a GitOps tool does. A decoding error still fails.
                "--force-conflicts",
                "-f",
                "-",
                stdin=text,
            )
            assert "serverside-applied" in out, f"{name} (apply {attempt}): {out}"


def test_make_install_runs_twice(kubeconfig):
    """`make install` is a client-side `kubectl apply -f crds/`; `replace` is what GitOps
    tools fall back to. Both must keep working after the first install."""
    for _ in (1, 2):
        kubectl(kubeconfig, "apply", "-f", str(ROOT / "crds"))
    kubectl(kubeconfig, "replace", "-f", str(ROOT / "crds"))


def test_kubectl_version_talks_to_the_project_apiserver(kubeconfig):
    version = json.loads(kubectl(kubeconfig, "version", "-o", "json"))
    server = version["serverVersion"]
    assert server["gitVersion"].startswith("v1.") and server["major"] == "1", server


def test_upstream_documented_shapes_are_accepted_by_the_crd(kubeconfig):
    """List-form secretRefs, enable: false, notifies without name (tests/fixtures/upstream)."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nodemanager"}}
    kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=json.dumps(namespace))
    for path in sorted((ROOT / "tests" / "fixtures" / "upstream").glob("*.yaml")):
        text = path.read_text()
        kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=text)
    stored = json.loads(
        kubectl(kubeconfig, "-n", "nodemanager", "get", "configset", "app-secret", "-o", "json")
    )
    assert stored["spec"]["files"][0]["secretRefs"] == ["my-app-secret"]
