"""The agent file (`make build`, from the release the tests share) talks to the real API server
under every CPython minor it serves: 3.11, 3.12 and 3.13 (pyenv's interpreters here).

3.13 verifies certificates with VERIFY_X509_STRICT: a cluster CA without a critical keyUsage
of keyCertSign is refused, which kubectl and 3.12 accept. The test control plane's CA is made as
real CAs are (tests/controlplane/cluster.py), so a refusal here is a defect of the agent, and
an API call under 3.13 is what proves it. Each minor runs the README's node onboarding from the
agent file, `bootstrap` against the admin kubeconfig (TokenRequest and the ServiceAccount's
reads), and the node's own kubeconfig it wrote then reads the namespace's ConfigSets."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
import yaml

from tests import artifacts
from tests.cluster.test_isolation import kubectl, nm, works
from tests.integration.test_build import interpreter

# the first test waits for (or makes) the cached release, as the controller image test does
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def agent_file() -> Path:
    return artifacts.agent_file()


@pytest.fixture(scope="module")
def unpack_dir(tmp_path_factory) -> Path:
    """One unpack directory for the three minors: each has its own tree (keyed by the minor)."""
    return tmp_path_factory.mktemp("unpacked")


@pytest.mark.parametrize("minor", ["11", "12", "13"])
def test_agent_file_bootstraps_a_node_against_the_api_server(
    agent_file, unpack_dir, control_plane, kubeconfig, namespace, tmp_path, minor
):
    python = interpreter(minor)
    host = f"py3{minor}-{uuid.uuid4().hex[:6]}"
    rbac = nm("rbac", "--hostname", host, "--namespace", namespace)
    assert rbac.returncode == 0, rbac.stderr
    applied = kubectl(kubeconfig, "apply", rbac.stdout)
    assert applied.returncode == 0, applied.stderr

    written = tmp_path / "node.kubeconfig"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    env["NODEMANAGER_UNPACK_DIR"] = str(unpack_dir)
    done = subprocess.run(
        [python, "-I", "-S", str(agent_file), "bootstrap", "--bootstrap-kubeconfig", kubeconfig,
         "--kubeconfig", str(written), "--namespace", namespace, "--hostname", host],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, f"CPython 3.{minor}: {done.stderr}"
    assert "certificate rejected" not in done.stderr and f"wrote {written}" in done.stderr
    node = yaml.safe_load(written.read_text())
    assert node["clusters"][0]["cluster"]["server"] == control_plane.server
    assert works(written, namespace)  # the node's own credential, issued under 3.1x, is accepted
