"""CertificateSigningRequests: a node submits one and waits for its certificate; the fleet
controller lists them, approves, and asks whether a requester still holds a node's grant.

Requests are read as plain dicts (the generic client), as the controller's other caches are.
A node may create and get CSRs, never list them (they name every other node), so waiting is a
``get`` by name once a second: a renewal happens once a day or so.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes import client

from nodemanager.kube.errors import KUBE_ERRORS, KubeError, Permanent, translate
from nodemanager.kube.informer import Kind

GROUP, VERSION, PLURAL = "certificates.k8s.io", "v1", "certificatesigningrequests"


def _lister(api: client.ApiClient) -> Any:
    custom = client.CustomObjectsApi(api)

    def list_objects(namespace: str = "", **kwargs: Any) -> Any:  # cluster-scoped
        return custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, **kwargs)

    return list_objects


CSRS = Kind("certificatesigningrequests", _lister)


class NotIssued(Permanent):
    """The request was denied or failed, or no certificate came in time."""


def submit(
    api: client.ApiClient,
    prefix: str,
    request_pem: bytes,
    signer: str,
    usages: Sequence[str],
    seconds: int,
) -> str:
    """Create a CSR named ``prefix`` + a random suffix; its name."""
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CertificateSigningRequest",
        "metadata": {"generateName": prefix},
        "spec": {
            "request": base64.b64encode(request_pem).decode(),
            "signerName": signer,
            "usages": list(usages),
            "expirationSeconds": seconds,
        },
    }
    try:
        made: Any = client.CustomObjectsApi(api).create_cluster_custom_object(
            GROUP, VERSION, PLURAL, body
        )
    except KUBE_ERRORS as e:
        raise translate(e) from e
    return str(made["metadata"]["name"])


def failure(csr: Mapping[str, Any]) -> str | None:
    """Why the CSR will never be signed (Denied or Failed, with the message); else None."""
    for c in (csr.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Denied", "Failed") and c.get("status", "True") == "True":
            return f"{c['type']}: {c.get('reason', '')} {c.get('message', '')}".strip()
    return None


def wait_certificate(
    api: client.ApiClient,
    name: str,
    timeout: float,
    stop: threading.Event | None = None,
    period: float = 1.0,
) -> bytes:
    """The PEM certificate once the signer wrote it; NotIssued when denied, failed or late."""
    stop = stop or threading.Event()
    custom = client.CustomObjectsApi(api)
    deadline = time.monotonic() + timeout
    while True:
        csr: Any
        try:
            csr = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except KUBE_ERRORS as e:
            err = translate(e)
            if not err.temporary:
                raise err from e
            csr = {}
        cert = (csr.get("status") or {}).get("certificate")
        if cert:
            return base64.b64decode(cert)
        why = failure(csr)
        if why:
            raise NotIssued(f"CertificateSigningRequest {name}: {why}")
        if time.monotonic() >= deadline or stop.wait(period):
            raise NotIssued(
                f"CertificateSigningRequest {name} was not signed within {timeout:.0f} s "
                f"(an administrator can approve it: kubectl certificate approve {name})"
            )


def approve(api: client.ApiClient, csr: Mapping[str, Any], reason: str, message: str) -> None:
    """Add the Approved condition (the approval subresource; the signer then signs)."""
    status = dict(csr.get("status") or {})
    status["conditions"] = [
        *(status.get("conditions") or []),
        {"type": "Approved", "status": "True", "reason": reason, "message": message},
    ]
    body: Any = {**csr, "status": status}
    try:
        client.CertificatesV1Api(api).replace_certificate_signing_request_approval(
            csr["metadata"]["name"], body
        )
    except KUBE_ERRORS as e:
        raise translate(e) from e


def delete(api: client.ApiClient, name: str) -> None:
    """Delete a CSR (one a newer request of the same node replaced)."""
    try:
        client.CertificatesV1Api(api).delete_certificate_signing_request(name)
    except KUBE_ERRORS as e:
        raise translate(e) from e


Grant = tuple[str, str, str, str]  # verb, API group, resource, subresource


def may(
    api: client.ApiClient,
    user: str,
    groups: Sequence[str],
    verb: str,
    resource: tuple[str, str, str],
    namespace: str,
    name: str,
) -> bool:
    """Whether ``user`` in ``groups`` may ``verb`` the (group, resource, subresource) ``name``
    in ``namespace`` (a SubjectAccessReview: RBAC answers, as it would for the user)."""
    group, plural, subresource = resource
    body: Any = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": list(groups),
            "resourceAttributes": {
                "group": group,
                "resource": plural,
                "subresource": subresource,
                "verb": verb,
                "namespace": namespace,
                "name": name,
            },
        },
    }
    try:
        review = client.AuthorizationV1Api(api).create_subject_access_review(body)
    except KUBE_ERRORS as e:
        raise translate(e) from e
    return bool(review.status and review.status.allowed)


__all__ = ["CSRS", "KubeError", "NotIssued", "approve", "delete", "failure", "may", "submit"]
