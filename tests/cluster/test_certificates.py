"""Node client certificates on the real API server, signed by kube-controller-manager with the
cluster CA (the ``csr_signer`` fixture)."""

from __future__ import annotations

import base64

import pytest
import yaml
from cryptography import x509
from kubernetes import client, config

from nodemanager.api import nodecert
from nodemanager.kube import csr

pytestmark = pytest.mark.cluster


def _cert_kubeconfig(cp, tmp_path, cert: bytes, key: bytes) -> str:
    path = tmp_path / "cert.kubeconfig"
    data = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "node",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": cp.server, "certificate-authority": str(cp.ca)},
            }
        ],
        "users": [
            {
                "name": "node",
                "user": {
                    "client-certificate-data": base64.b64encode(cert).decode(),
                    "client-key-data": base64.b64encode(key).decode(),
                },
            }
        ],
        "contexts": [{"name": "node", "context": {"cluster": "c", "user": "node"}}],
    }
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_an_approved_node_request_is_signed_by_the_cluster_ca(csr_signer, api_client, tmp_path):
    key, request = nodecert.new_request("fleet", "signed-1")
    name = csr.submit(api_client, "signed-1-", request, nodecert.SIGNER, nodecert.USAGES, 600)
    raw = client.CustomObjectsApi(api_client).get_cluster_custom_object(
        csr.GROUP, csr.VERSION, csr.PLURAL, name
    )
    csr.approve(api_client, raw, "Test", "approved by the test")
    cert = csr.wait_certificate(api_client, name, 60)
    issued = nodecert.Issued.from_pem(cert)
    assert issued.common_name == "nodemanager:node:fleet:signed-1"
    assert 600 <= issued.not_after - issued.not_before <= 900  # 5 minutes backdated
    ca = x509.load_pem_x509_certificate(csr_signer.ca.read_bytes())
    x509.load_pem_x509_certificate(cert).verify_directly_issued_by(ca)
    node = config.new_client_from_config(_cert_kubeconfig(csr_signer, tmp_path, cert, key))
    try:
        review = client.AuthenticationV1Api(node).create_self_subject_review(
            client.V1SelfSubjectReview()
        )
    finally:
        node.close()
    assert review.status.user_info.username == "nodemanager:node:fleet:signed-1"
    assert review.status.user_info.groups == ["nodemanager:nodes", "system:authenticated"]
