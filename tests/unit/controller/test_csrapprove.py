"""The approver's decision on each request shape (controller/csrapprove.py ``decide``)."""

from __future__ import annotations

import base64

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nodemanager.api import nodecert
from nodemanager.controller.csrapprove import (
    MAX_REQUEST_BYTES,
    decide,
    note,
    reconcile,
    slim,
    superseded,
)
from nodemanager.controller.effects import apply

NS, HOST = "fleet", "web-1"
BOOTSTRAP = f"system:serviceaccount:{NS}:nodemanager-{HOST}"
CERT_USER = f"nodemanager:node:{NS}:{HOST}"


def raw(request: bytes, username: str = BOOTSTRAP, **spec) -> dict:
    return {
        "metadata": {"name": "r", "resourceVersion": "1"},
        "spec": {
            "request": base64.b64encode(request).decode(),
            "signerName": nodecert.SIGNER,
            "usages": list(nodecert.USAGES),
            "expirationSeconds": 3600,
            "username": username,
            **spec,
        },
    }


def node_request(host: str = HOST, namespace: str = NS) -> bytes:
    return nodecert.new_request(namespace, host)[1]


@pytest.mark.parametrize("username", [BOOTSTRAP, f"nodemanager:node:{NS}:{HOST}"])
def test_the_node_or_its_bootstrap_identity_asking_for_exactly_its_certificate(username):
    decision = decide(raw(node_request(), username), NS, nodecert.MAX_SECONDS)
    assert decision is not None and decision.approve and decision.host == HOST


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"username": f"system:serviceaccount:{NS}:nodemanager-web-2"}, "neither node web-1"),
        ({"username": "nodemanager:node:fleet:web-2"}, "neither node web-1"),
        ({"username": "admin"}, "neither node web-1"),
        ({"usages": [*nodecert.USAGES, "server auth"]}, "usages"),
        ({"usages": ["client auth"]}, "usages"),
        ({"expirationSeconds": nodecert.MAX_SECONDS + 1}, "expirationSeconds"),
        ({"expirationSeconds": None}, "expirationSeconds"),
    ],
)
def test_anything_else_is_left_pending_with_the_reason(change, why):
    spec = raw(node_request())
    spec["spec"].update(change)
    decision = decide(spec, NS, nodecert.MAX_SECONDS)
    assert decision is not None and not decision.approve
    assert why in decision.message


def _request(*attributes: x509.NameAttribute, san: bool = False, curve=None) -> bytes:
    key = ec.generate_private_key(curve or ec.SECP256R1())
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(list(attributes)))
    if san:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("evil")]), critical=False
        )
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


CN = x509.NameAttribute(NameOID.COMMON_NAME, f"nodemanager:node:{NS}:{HOST}")
O_NODES = x509.NameAttribute(NameOID.ORGANIZATION_NAME, nodecert.NODES_GROUP)


@pytest.mark.parametrize(
    ("request_pem", "why"),
    [
        (_request(CN, O_NODES, x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters")),
         "subject"),
        (_request(CN), "subject"),
        (_request(CN, O_NODES, san=True), "extensions"),
        (_request(CN, O_NODES, curve=ec.SECP384R1()), "EC P-384"),
    ],
)  # fmt: skip
def test_a_wider_request_in_the_nodes_name_is_left_pending(request_pem, why):
    decision = decide(raw(request_pem), NS, nodecert.MAX_SECONDS)
    assert decision is not None and not decision.approve and why in decision.message


def test_requests_of_other_subjects_signers_or_namespaces_are_not_ours():
    other = _request(x509.NameAttribute(NameOID.COMMON_NAME, "alice"))
    assert decide(raw(other, "alice"), NS, nodecert.MAX_SECONDS) is None
    assert decide(raw(node_request(namespace="other")), NS, nodecert.MAX_SECONDS) is None
    kubelet = raw(node_request(), signerName="kubernetes.io/kube-apiserver-client-kubelet")
    assert decide(kubelet, NS, nodecert.MAX_SECONDS) is None


def test_a_decided_request_is_not_judged_again():
    done = raw(node_request())
    done["status"] = {"conditions": [{"type": "Denied", "status": "True"}]}
    assert decide(done, NS, nodecert.MAX_SECONDS) is None


class Authorizer:
    """The API server's side of a judged request: who may, and what was approved."""

    def __init__(self, allowed: bool, revoked: bool = False) -> None:
        self.allowed, self.revoked, self.approved = allowed, revoked, []

    def may(self, user, groups, grant, name):
        # `revoke` takes the certificate user out of the binding and keeps the ServiceAccount's
        users = {BOOTSTRAP} if self.revoked else {BOOTSTRAP, CERT_USER}
        return self.allowed and user in users and name == HOST

    def approve_csr(self, request, reason, message):
        self.approved.append(request["metadata"]["name"])


@pytest.mark.parametrize("allowed", [True, False])
def test_a_request_is_judged_once_per_version_and_only_approved_with_the_grant(allowed):
    said = []
    request = raw(node_request())
    outcome = reconcile(request, NS, None, lambda r, d: said.append(note(r, d)[1]))
    fleet = Authorizer(allowed)
    assert apply(outcome, fleet).error is None  # type: ignore[arg-type]
    assert fleet.approved == (["r"] if allowed else [])
    reason = said[0].reason
    assert reason == ("CertificateApproved" if allowed else "CertificateNotApproved")
    assert reconcile(request, NS, "1", lambda r, d: None).effects == ()  # judged at version 1


def test_a_request_the_service_account_filed_before_revoke_is_not_approved_after_it():
    said = []
    outcome = reconcile(raw(node_request()), NS, None, lambda r, d: said.append(note(r, d)[1]))
    fleet = Authorizer(True, revoked=True)
    assert apply(outcome, fleet).error is None  # type: ignore[arg-type]
    assert fleet.approved == [] and "no longer holds node web-1's grant" in said[0].message


def test_the_cache_keeps_only_nodes_requests_of_the_signer_without_bodies():
    pending = raw(node_request())
    kept = slim(pending, NS)
    assert kept is not None and kept["spec"]["request"] == pending["spec"]["request"]
    assert decide(kept, NS, nodecert.MAX_SECONDS).approve
    assert slim(raw(node_request(), "admin"), NS) is not None  # for a node: judged, said why
    assert slim(raw(node_request(namespace="other"), "admin"), NS) is None  # not ours
    assert slim(raw(b"x" * 5000, "admin"), NS) is None
    other = f"system:serviceaccount:other:nodemanager-{HOST}"
    assert slim(raw(node_request(namespace="other"), other), NS) is None
    assert slim(raw(node_request(), signerName="example.com/x"), NS) is None
    issued = raw(node_request())
    issued["status"] = {"certificate": base64.b64encode(b"x" * 5000).decode(), "conditions": []}
    small = slim(issued, NS)
    assert "request" not in small["spec"] and small["status"]["certificate"] == "issued"
    assert decide(small, NS, nodecert.MAX_SECONDS) is None  # decided still
    huge = slim(raw(b"x" * (MAX_REQUEST_BYTES + 1)), NS)
    assert huge["spec"]["request"] is None and len(repr(huge)) < 1000
    decision = decide(huge, NS, nodecert.MAX_SECONDS)
    assert not decision.approve and f"over {MAX_REQUEST_BYTES} bytes" in decision.message


def test_of_a_nodes_pending_requests_only_the_newest_is_kept():
    def at(name, when, username=BOOTSTRAP, decided=False):
        r = raw(node_request(), username)
        r["metadata"] = {"name": name, "creationTimestamp": when}
        if decided:
            r["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
        return r

    requests = [
        at("a", "2026-01-01T00:00:01Z"),
        at("b", "2026-01-01T00:00:03Z"),
        at("c", "2026-01-01T00:00:02Z"),
        at("d", "2026-01-01T00:00:00Z", decided=True),
        at("e", "2026-01-01T00:00:00Z", CERT_USER),  # the same node by its certificate: apart
        at("f", "2026-01-01T00:00:00Z", "admin"),  # an administrator's: one per node named
    ]
    requests[-1]["spec"]["request"] = raw(node_request("web-2"))["spec"]["request"]
    requests.append(at("g", "2026-01-01T00:00:01Z", "admin"))
    assert superseded(requests, NS) == ["a", "c"]
    requests.append(at("h", "2026-01-01T00:00:02Z", "admin"))
    assert superseded(requests, NS) == ["a", "c", "g"]
