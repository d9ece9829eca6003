"""Moving from upstream on a real API server: upstream's CRDs and objects with upstream's status
stored first, then ours installed over them (twice) and our agent started. Nothing is lost,
nothing re-keyed, and an upstream ConfigSet selecting upstream's label values keeps selecting.

A control plane of its own: upstream's CRDs must not prune the shared one's objects.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from nodemanager.host.osinfo import read_os_release
from tests.cluster.agent import Agent
from tests.cluster.helpers import UPSTREAM_KINDS, crds_established, eventually
from tests.controlplane.cluster import ControlPlane
from tests.unit.host.test_wgkeys_adopt import keypair

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
UPSTREAM_CRDS = ROOT / "tests" / "fixtures" / "upstream" / "crds"
GROUP, VERSION, NS = "common.nodemanager", "v1", "nodemanager"
SHA = "5" * 64


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, *args], input=stdin, capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def upstream_cluster(tmp_path_factory):
    try:
        cp = ControlPlane(tmp_path_factory.mktemp("upstream-cp")).start()
    except Exception as e:
        pytest.fail(f"cannot start the test control plane: {e}", pytrace=False)
    try:
        yield cp
    finally:
        cp.stop()


def test_upstream_objects_and_status_survive_our_crds_and_agent(upstream_cluster, tmp_path):
    kc = str(upstream_cluster.kubeconfig)
    api_client = config.new_client_from_config(kc)
    ext, custom = client.ApiextensionsV1Api(api_client), client.CustomObjectsApi(api_client)
    done = kubectl(kc, "apply", "-f", str(UPSTREAM_CRDS))
    assert done.returncode == 0, done.stderr
    eventually(lambda: crds_established(ext, UPSTREAM_KINDS), timeout=30)
    kubectl(kc, "create", "namespace", NS)

    host, os_id = "migrated-host", read_os_release().id
    machine = platform.machine()
    target = tmp_path / "chrony.conf"
    # As upstream's agent left them: its labels (os-release ID, uname machine) and its status.
    node = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ManagedNode",
        "metadata": {
            "name": host,
            "labels": {
                "kubernetes.io/hostname": host,
                "kubernetes.io/os": os_id,
                "kubernetes.io/arch": machine,
            },
        },
        "spec": {
            "upgrade": {"schedule": "0 3 * * *", "delay": "23h", "group": "workers"},
            "wireGuard": {"enabled": True, "interface": "wgmig"},
        },
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, "managednodes", node)
    # The keypair upstream's controller made (ensureWireGuardKeySecret): its name and keys.
    private, public = keypair()
    client.CoreV1Api(api_client).create_namespaced_secret(
        NS,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name=f"wg-wgmig-{host}"),
            string_data={"private-key": private, "public-key": public},
        ),
    )
    status = {
        "release": "6.1.0-upstream",
        "fileBackups": {"/etc/upstream-kept.conf": SHA},
        "lastFileBucketGC": "2026-11-01T00:00:00Z",
        "lastUpgrade": "2026-11-20T03:00:00Z",
        "kubernetesNodeCordoned": "2026-11-20T02:59:00Z",
        "jailed": True,
    }
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, NS, "managednodes", host, {"status": status}
    )
    # Upstream's documented ConfigSet shape (docs/api/configset.md), keyed on its label value.
    configset = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConfigSet",
        "metadata": {"name": "clock", "labels": {"kubernetes.io/os": os_id}},
        "spec": {"files": [{"path": str(target), "ensure": "file", "content": "pool x\n"}]},
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, "configsets", configset)

    for _ in range(2):  # `make install` over upstream's, twice
        done = kubectl(kc, "apply", "-f", str(ROOT / "crds"))
        assert done.returncode == 0, done.stderr
    eventually(lambda: crds_established(ext), timeout=30)
    stored = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "managednodes", host)
    assert {k: stored["status"].get(k) for k in status} == status  # nothing pruned

    # `nodemanager migrate` reads the cluster: a dry run, the report names what changes.
    migrated = subprocess.run(
        [str(Path(os.sys.executable).with_name("nodemanager")), "migrate", "--kubeconfig", kc,
         "-n", NS], capture_output=True, text=True,
    )  # fmt: skip
    assert migrated.returncode == 0, migrated.stderr
    out = list(yaml.safe_load_all(migrated.stdout))
    assert [d["kind"] for d in out] == ["ConfigSet", "ManagedNode"]
    for doc in out:  # nothing the server owns: applied again, it never conflicts
        assert "status" not in doc
        assert not {"resourceVersion", "uid", "managedFields"} & set(doc["metadata"])
    # The ManagedNode keeps no label upstream's agent set on itself; the report names each.
    assert "labels" not in out[1]["metadata"]
    for key in ("kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch"):
        assert f"ManagedNode {host} metadata.labels.{key}: " in migrated.stderr
    assert "upstream's cordon is adopted" in migrated.stderr
    # It applies, and applies again after another writer changed the objects.
    for _ in range(2):
        done = kubectl(kc, "apply", "-n", NS, "-f", "-", stdin=migrated.stdout)
        assert done.returncode == 0, done.stderr
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, NS, "managednodes", host, {"metadata": {"annotations": {"x": str(_)}}}
        )
    stored = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "managednodes", host)
    assert {k: stored["status"].get(k) for k in status} == status  # the apply kept status
    assert stored["metadata"]["labels"]["kubernetes.io/os"] == os_id

    agent = Agent(kc, NS, host, tmp_path / "state").start()
    try:
        eventually(
            lambda: target.exists() and target.read_text() == "pool x\n",
            timeout=60,
            message="upstream's ConfigSet selects the migrated node with no edit",
        )

        def written():
            now = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "managednodes", host)
            assert now["status"].get("agentVersion"), now["status"]
            return now

        now = eventually(written, timeout=60, message="the agent wrote its status")
    finally:
        agent.stop()
    kept = now["status"]
    assert kept["fileBackups"]["/etc/upstream-kept.conf"] == SHA  # read back, not overwritten
    assert kept["lastFileBucketGC"] == status["lastFileBucketGC"]
    assert kept["jailed"] is True
    assert kept["lastUpgrade"] == status["lastUpgrade"]  # adopted, holds the delay
    assert kept["release"] == platform.release()  # uname -r, as upstream
    # Not re-keyed: upstream's key, adopted from its Secret once, now kept on the host.
    assert [w["publicKey"] for w in kept["wireGuard"] if w["name"] == "wgmig"] == [public]
    key_file = tmp_path / "state" / "wireguard" / "wgmig.key"
    assert key_file.read_text().strip() == private
    labels = now["metadata"]["labels"]
    # one value per label, upstream's: the swap changed none of them
    assert labels["kubernetes.io/os"] == os_id and labels["kubernetes.io/arch"] == machine
    assert "nodemanager.io/os" not in labels
