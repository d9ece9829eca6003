"""Node client certificates on the real API server: `bootstrap --certificate`, the fleet
controller's approver (controller/csrapprove.py) and kube-controller-manager signing with the
cluster CA (the ``csr_signer`` fixture). The controller runs with deploy/controller.yaml's
permissions, nodes with the credentials the README flow gives them."""

from __future__ import annotations

import base64
import stat
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes import client, config

from nodemanager.api import nodecert
from nodemanager.kube import csr
from tests.cluster.agent import NODEMANAGER
from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually

pytestmark = pytest.mark.cluster


def nm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([NODEMANAGER, *args], capture_output=True, text=True, timeout=120)


def kubectl_apply(kubeconfig: str, text: str) -> None:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "apply", "-f", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@dataclass
class Fleet:
    admin: str  # admin kubeconfig
    namespace: str
    directory: Path
    controller: ControllerProcess

    def admit(self, host: str) -> Path:
        """`rbac --certificate` applied and a 10-minute bootstrap token (`token`) for ``host``."""
        out = nm("rbac", "--hostname", host, "--namespace", self.namespace, "--certificate")
        assert out.returncode == 0, out.stderr
        kubectl_apply(self.admin, out.stdout)
        boot = self.directory / f"{host}-bootstrap.kubeconfig"
        issued = nm(
            "token", "--hostname", host, "--kubeconfig", self.admin,
            "--namespace", self.namespace, "--ttl", "10m", "--out", str(boot),
        )  # fmt: skip
        assert issued.returncode == 0, issued.stderr
        return boot

    def bootstrap(self, host: str, boot: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        return nm(
            "bootstrap", "--certificate", "--bootstrap-kubeconfig", str(boot),
            "--kubeconfig", str(self.directory / f"{host}.kubeconfig"),
            "--namespace", self.namespace, "--hostname", host, *extra,
        )  # fmt: skip


@pytest.fixture(scope="module")
def fleet(csr_signer, kubeconfig, tmp_path_factory) -> Iterator[Fleet]:
    directory = tmp_path_factory.mktemp("certificates")
    namespace = f"nm-cert-{uuid.uuid4().hex[:6]}"
    shared = nm("rbac", "--shared", "--namespace", namespace)
    kubectl_apply(kubeconfig, shared.stdout)
    own = shipped_kubeconfig(kubeconfig, namespace, directory)
    controller = ControllerProcess(
        own, namespace, directory, "--sync-period", "1s", "--approve-node-certificates"
    ).start()
    eventually(controller.leading, timeout=120, message="controller ready")
    yield Fleet(kubeconfig, namespace, directory, controller)
    assert controller.stop() == 0


def requests(api_client) -> list[dict]:
    return client.CustomObjectsApi(api_client).list_cluster_custom_object(
        csr.GROUP, csr.VERSION, csr.PLURAL
    )["items"]


def conditions(raw: dict) -> dict[str, str]:
    return {
        c["type"]: c.get("reason", "") for c in (raw.get("status") or {}).get("conditions") or []
    }


def events_about(api_client, namespace: str, name: str) -> list[client.CoreV1Event]:
    found = client.CoreV1Api(api_client).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    )
    return found.items


def whoami(kubeconfig: str) -> str:
    api = config.new_client_from_config(kubeconfig)
    try:
        review = client.AuthenticationV1Api(api).create_self_subject_review(
            client.V1SelfSubjectReview()
        )
        return review.status.user_info.username
    finally:
        api.close()


def test_an_approved_node_request_is_signed_by_the_cluster_ca(csr_signer, api_client):
    _key, request = nodecert.new_request("fleet", "signed-1")
    name = csr.submit(api_client, "signed-1-", request, nodecert.SIGNER, nodecert.USAGES, 600)
    raw = client.CustomObjectsApi(api_client).get_cluster_custom_object(
        csr.GROUP, csr.VERSION, csr.PLURAL, name
    )
    csr.approve(api_client, raw, "Test", "approved by the test")
    cert = csr.wait_certificate(api_client, name, 60)
    issued = nodecert.Issued.from_pem(cert)
    assert issued.common_name == "nodemanager:node:fleet:signed-1"
    assert issued.requested() == 600  # kube-controller-manager backdates notBefore 5 minutes
    ca = x509.load_pem_x509_certificate(csr_signer.ca.read_bytes())
    x509.load_pem_x509_certificate(cert).verify_directly_issued_by(ca)


def test_bootstrap_certificate_writes_a_kubeconfig_with_a_key_made_here(fleet, api_client):
    host = f"cert-{uuid.uuid4().hex[:6]}"
    boot = fleet.admit(host)
    done = fleet.bootstrap(host, boot, "--cert-ttl", "2h")
    assert done.returncode == 0, done.stderr
    path = fleet.directory / f"{host}.kubeconfig"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not [p for p in path.parent.iterdir() if ".nm-tmp-" in p.name]  # no half-written file
    user = yaml.safe_load(path.read_text())["users"][0]["user"]
    key = serialization.load_pem_private_key(base64.b64decode(user["client-key-data"]), None)
    cert = x509.load_pem_x509_certificate(base64.b64decode(user["client-certificate-data"]))
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()
    me = f"nodemanager:node:{fleet.namespace}:{host}"
    assert whoami(str(path)) == me
    assert 2 * 3600 <= (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds()
    # The key never left the host: the request holds its public half only.
    [mine] = [r for r in requests(api_client) if r["spec"]["username"].endswith(host)]
    assert mine["spec"]["username"] == f"system:serviceaccount:{fleet.namespace}:nodemanager-{host}"
    assert conditions(mine)["Approved"] == "NodemanagerAutoApproved"
    assert b"PRIVATE" not in base64.b64decode(mine["spec"]["request"])
    assert [
        e.reason for e in events_about(api_client, fleet.namespace, mine["metadata"]["name"])
    ] == ["CertificateApproved"]
    # What the node may do, it may do as its certificate: write its own ManagedNode.
    node = client.CustomObjectsApi(config.new_client_from_config(str(path)))
    node.create_namespaced_custom_object(
        "common.nodemanager", "v1", fleet.namespace, "managednodes",
        {"apiVersion": "common.nodemanager/v1", "kind": "ManagedNode", "metadata": {"name": host}},
    )  # fmt: skip
    with pytest.raises(client.ApiException) as denied:
        node.create_namespaced_custom_object(
            "common.nodemanager", "v1", fleet.namespace, "managednodes",
            {"apiVersion": "common.nodemanager/v1", "kind": "ManagedNode",
             "metadata": {"name": f"{host}-impostor"}},
        )  # fmt: skip
    assert "only write the ManagedNode named after it" in denied.value.body
