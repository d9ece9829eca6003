"""A node's client certificate: its identity, the one request shape it may make, and reading
requests and certificates back. Pure: keys and requests are made in memory, nothing is read or
written here.

The certificate's subject names the node the way the API server reads it: the CommonName is
the user (``nodemanager:node:<namespace>:<host>``, so the admission policies compare it with
an object's name as they do the ServiceAccount's), the Organization the group
(``nodemanager:nodes``). Nothing else is allowed in a node's request (no SANs, no other subject
attribute, no extension), and its key is EC P-256: the approver (controller/csrapprove.py)
approves exactly this shape and nothing wider.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from nodemanager.api.nodeuser import USER_PREFIX, user_name

SIGNER = "kubernetes.io/kube-apiserver-client"
NODES_GROUP = "nodemanager:nodes"
USAGES = ("digital signature", "client auth")
KEY_TYPE = "EC P-256"
MIN_SECONDS = 600  # the API server's minimum expirationSeconds
MAX_SECONDS = 7 * 86400  # certificates cannot be revoked: a node's lives a week at most
BACKDATE, SHORT = 300, 8 * 3600  # kube-controller-manager's signer (authority/policies.go)


def bootstrap_user(namespace: str, hostname: str) -> str:
    """The node's ServiceAccount (`nodemanager token`): the identity that asks for its first
    certificate."""
    return f"system:serviceaccount:{namespace}:nodemanager-{hostname}"


def node_of(user: str) -> tuple[str, str] | None:
    """(namespace, host) of a node certificate's user name; None for any other name."""
    if not user.startswith(USER_PREFIX):
        return None
    parts = user.removeprefix(USER_PREFIX).split(":")
    if len(parts) != 2 or not all(parts):
        return None
    return parts[0], parts[1]


def _key_type(key: object) -> str:
    if isinstance(key, ec.EllipticCurvePublicKey):
        return {"secp256r1": "EC P-256", "secp384r1": "EC P-384"}.get(
            key.curve.name, f"EC {key.curve.name}"
        )
    if isinstance(key, rsa.RSAPublicKey):
        return f"RSA {key.key_size}"
    return type(key).__name__


@dataclass(frozen=True)
class CertRequest:
    """What a PKCS#10 request asks for, as far as approving it is concerned."""

    common_name: str
    organizations: tuple[str, ...]
    other_subject: tuple[str, ...]  # any other subject attribute (OU, C, ...), by name
    extensions: tuple[str, ...]  # requested extensions (SANs, ...), by name
    key_type: str
    signature_valid: bool

    @classmethod
    def from_pem(cls, pem: bytes) -> CertRequest:
        """ValueError when ``pem`` is no PEM certificate request."""
        csr = x509.load_pem_x509_csr(pem)
        own = (NameOID.COMMON_NAME, NameOID.ORGANIZATION_NAME)
        common_names = _values(csr.subject, NameOID.COMMON_NAME)
        return cls(
            # Two CommonNames are no node's: the empty name fails every comparison.
            common_name=common_names[0] if len(common_names) == 1 else "",
            organizations=tuple(_values(csr.subject, NameOID.ORGANIZATION_NAME)),
            other_subject=tuple(a.oid._name for a in csr.subject if a.oid not in own),
            extensions=tuple(e.oid._name for e in csr.extensions),
            key_type=_key_type(csr.public_key()),
            signature_valid=csr.is_signature_valid,
        )


def _values(name: x509.Name, oid: x509.ObjectIdentifier) -> list[str]:
    return [str(a.value) for a in name.get_attributes_for_oid(oid)]


def new_request(namespace: str, hostname: str) -> tuple[bytes, bytes]:
    """(private key PEM, certificate request PEM) for the node: a fresh EC P-256 key."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, NODES_GROUP),
            x509.NameAttribute(NameOID.COMMON_NAME, user_name(namespace, hostname)),
        ]
    )
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return key_pem, csr.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class Issued:
    """A signed certificate's subject and validity (seconds since the epoch)."""

    common_name: str
    not_before: float
    not_after: float
    serial: int

    @classmethod
    def from_pem(cls, pem: bytes) -> Issued:
        cert = x509.load_pem_x509_certificate(pem)
        names = _values(cert.subject, NameOID.COMMON_NAME)
        return cls(
            common_name=names[0] if names else "",
            not_before=cert.not_valid_before_utc.timestamp(),
            not_after=cert.not_valid_after_utc.timestamp(),
            serial=cert.serial_number,
        )

    def requested(self) -> int:
        """The lifetime that was asked for: kube-controller-manager's signer backdates
        notBefore by five minutes, and notAfter too unless the lifetime is under eight hours."""
        span = int(self.not_after - self.not_before)
        return span - BACKDATE if span < SHORT + BACKDATE else span

    def renew_at(self, fraction: float) -> float:
        """When ``fraction`` of the lifetime has passed (the signer backdates notBefore by
        five minutes, as kubelet's certificate manager counts it too)."""
        return self.not_before + (self.not_after - self.not_before) * fraction
