"""A node's certificate request: the one shape it makes, read back as the approver reads it."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from nodemanager.api import nodecert, nodeuser


def test_a_node_request_names_the_node_and_its_group_and_nothing_else():
    key_pem, csr_pem = nodecert.new_request("fleet", "web-1")
    req = nodecert.CertRequest.from_pem(csr_pem)
    assert req.common_name == "nodemanager:node:fleet:web-1"
    assert req.organizations == ("nodemanager:nodes",)
    assert req.other_subject == () and req.extensions == ()
    assert req.key_type == "EC P-256" and req.signature_valid
    key = serialization.load_pem_private_key(key_pem, None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    # The key is the request's: its public half is what the signer certifies.
    public = x509.load_pem_x509_csr(csr_pem).public_key()
    assert key.public_key().public_numbers() == public.public_numbers()  # type: ignore[union-attr]


def test_each_request_has_a_fresh_key():
    assert nodecert.new_request("ns", "a")[0] != nodecert.new_request("ns", "a")[0]


def _request(subject: list[x509.NameAttribute], key=None, san: bool = False) -> bytes:
    key = key or ec.generate_private_key(ec.SECP256R1())
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(subject))
    if san:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("kubernetes.default")]), critical=False
        )
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def test_wider_requests_show_what_they_add():
    cn = x509.NameAttribute(NameOID.COMMON_NAME, "nodemanager:node:ns:a")
    ou = x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "x")
    req = nodecert.CertRequest.from_pem(_request([cn, ou], san=True))
    assert req.other_subject == ("organizationalUnitName",)
    assert req.extensions == ("subjectAltName",)
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert nodecert.CertRequest.from_pem(_request([cn], key=rsa_key)).key_type == "RSA 2048"
    p384 = ec.generate_private_key(ec.SECP384R1())
    assert nodecert.CertRequest.from_pem(_request([cn], key=p384)).key_type == "EC P-384"


def test_two_common_names_are_no_name():
    cn = x509.NameAttribute(NameOID.COMMON_NAME, "nodemanager:node:ns:a")
    other = x509.NameAttribute(NameOID.COMMON_NAME, "nodemanager:node:ns:b")
    assert nodecert.CertRequest.from_pem(_request([cn, other])).common_name == ""


def test_not_a_request():
    with pytest.raises(ValueError):
        nodecert.CertRequest.from_pem(b"-----BEGIN CERTIFICATE REQUEST-----\nxx\n")


@pytest.mark.parametrize(
    ("user", "node"),
    [
        ("nodemanager:node:fleet:web-1", ("fleet", "web-1")),
        ("nodemanager:node:fleet:", None),
        ("nodemanager:node:fleet:a:b", None),
        ("system:serviceaccount:fleet:nodemanager-web-1", None),
    ],
)
def test_node_of(user, node):
    assert nodecert.node_of(user) == node
    if node:
        assert nodeuser.user_name(*node) == user
