"""Approving nodes' client certificates, and saying why a request is left for an administrator.

The model is kube-controller-manager's kubelet approver (``pkg/controller/certificates/approver/
sarapprove.go``): recognise the one request shape a node makes, then ask the authorizer whether
the requester may have it. Here a request is a node's when its CommonName is
``nodemanager:node:<namespace>:<host>`` for this controller's namespace (api/nodecert.py), and
it is approved only when all of these hold:

- the requester is that node's bootstrap identity (its ServiceAccount, `nodemanager token`) or
  the node itself renewing (the certificate's own user): never another node, never a third
  party, not even an administrator (who can approve by hand);
- the subject is exactly that CommonName and the Organization ``nodemanager:nodes``, with no
  other attribute and no requested extension (no SANs);
- the key is EC P-256, the usages exactly digital signature and client auth, and
  ``expirationSeconds`` is set, between 10 minutes and ``max_seconds``;
- the requester still holds the node's grant (a SubjectAccessReview: may it update that
  ManagedNode's status?), and so does the node's certificate user: `revoke` takes that one
  out of the binding and keeps the ServiceAccount's, so a request the ServiceAccount filed
  before `revoke` is not approved after it.

Bounded (issue 37): the cache holds only requests of this signer made by or for this
namespace's nodes, pending ones with their request (at most ``MAX_REQUEST_BYTES``, which the
admission policy enforces on nodes too) and decided ones without it or their certificate; of a
node's pending requests only the newest is kept, the older are deleted.

Anything else that claims to be a node's stays pending: not denied, since an administrator may
know better, and an Event on the request says why. Requests for other subjects or signers are
none of this controller's business and get no Event.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodemanager.api import nodecert, nodeuser
from nodemanager.controller.effects import Fleet, Outcome
from nodemanager.controller.events import Note

log = logging.getLogger(__name__)
APPROVED_REASON = "NodemanagerAutoApproved"
# What only the admitted node may do: update its ManagedNode's status.
GRANT = ("update", "common.nodemanager", "managednodes", "status")


@dataclass(frozen=True)
class Decision:
    host: str
    approve: bool
    reason: str  # the Event's reason
    message: str


MAX_REQUEST_BYTES = 4096  # a node's PEM request (EC P-256, one name) is about 500 bytes
SA_PREFIX = "system:serviceaccount:"


def requester_host(username: str, namespace: str) -> str | None:
    """The host whose identity (its ServiceAccount or its certificate) ``username`` is, in
    ``namespace``; None for anyone else."""
    account = f"{SA_PREFIX}{namespace}:nodemanager-"
    if username.startswith(account) and len(username) > len(account):
        return username.removeprefix(account)
    node = nodecert.node_of(username)
    return node[1] if node and node[0] == namespace else None


def _subject_host(raw: Mapping[str, Any], namespace: str) -> str | None:
    """The host of ``namespace`` a request's CommonName names, if any (a small one parsed)."""
    req = _request(raw)
    node = nodecert.node_of(req.common_name) if req else None
    return node[1] if node and node[0] == namespace else None


def slim(raw: Mapping[str, Any], namespace: str) -> dict[str, Any] | None:
    """What the controller caches of a CertificateSigningRequest: None unless one of this
    signer whose subject is a node of ``namespace`` or whose requester is one; its request only
    while pending and at most MAX_REQUEST_BYTES, never the certificate. 60 requests of 1.1 MB
    once took the controller from 70 to 138 MB."""
    spec = raw.get("spec") or {}
    if spec.get("signerName") != nodecert.SIGNER:
        return None
    request = str(spec.get("request") or "")
    small = len(request) * 3 // 4 <= MAX_REQUEST_BYTES  # base64: 4 characters per 3 bytes
    by_node = requester_host(str(spec.get("username") or ""), namespace) is not None
    if not by_node and not (small and _subject_host(raw, namespace)):
        return None
    meta = raw.get("metadata") or {}
    kept = {k: v for k, v in spec.items() if k not in ("request", "extra")}
    if not _decided(raw):
        kept["request"] = request if small else None  # None: decide() says it is too large
    status = raw.get("status") or {}
    return {
        "apiVersion": raw.get("apiVersion", "certificates.k8s.io/v1"),
        "kind": raw.get("kind", "CertificateSigningRequest"),
        "metadata": {
            k: meta[k] for k in ("name", "uid", "resourceVersion", "creationTimestamp") if k in meta
        },
        "spec": kept,
        "status": {
            "conditions": list(status.get("conditions") or []),
            # that one was issued (so it is decided), without the certificate itself
            **({"certificate": "issued"} if status.get("certificate") else {}),
        },
    }


def superseded(requests: list[dict[str, Any]], namespace: str) -> list[str]:
    """Pending requests a newer pending one replaced: of a node's own (by its ServiceAccount
    or certificate) only the newest is kept, whatever subjects they name; of anyone else's,
    the newest per node named. A node waits on its newest request only, and each kept
    request costs etcd and the cache (pending ones live 24 h)."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for raw in requests:
        if _decided(raw):
            continue
        user = str((raw.get("spec") or {}).get("username") or "")
        subject = "" if requester_host(user, namespace) else str(_subject_host(raw, namespace))
        groups.setdefault((user, subject), []).append(raw)
    stale = []
    for pending in groups.values():
        pending.sort(key=_age)
        stale += [r["metadata"]["name"] for r in pending[:-1]]
    return sorted(stale)


def _age(raw: Mapping[str, Any]) -> tuple[str, int, str]:
    """Oldest first: creation time (whole seconds), then the version it was created at."""
    meta = raw["metadata"]
    version = str(meta.get("resourceVersion") or "")
    created = str(meta.get("creationTimestamp") or "")
    return created, int(version) if version.isdigit() else 0, str(meta["name"])


def _decided(raw: Mapping[str, Any]) -> bool:
    status = raw.get("status") or {}
    kinds = {c.get("type") for c in status.get("conditions") or []}
    return bool(status.get("certificate")) or bool(kinds & {"Approved", "Denied", "Failed"})


def _request(raw: Mapping[str, Any]) -> nodecert.CertRequest | None:
    try:
        pem = base64.b64decode((raw.get("spec") or {}).get("request") or "")
        return nodecert.CertRequest.from_pem(pem)
    except (ValueError, binascii.Error):
        return None  # the API server validates requests: not one to judge


def problems(
    spec: Mapping[str, Any], req: nodecert.CertRequest, namespace: str, host: str, max_seconds: int
) -> list[str]:
    """Why the request is not exactly what node ``host`` may have; empty when it is."""
    out = []
    requester = str(spec.get("username") or "")
    allowed = (nodecert.bootstrap_user(namespace, host), nodeuser.user_name(namespace, host))
    if requester not in allowed:
        out.append(f"requester {requester!r} is neither node {host}'s ServiceAccount nor the node")
    if req.organizations != (nodecert.NODES_GROUP,) or req.other_subject:
        out.append(f"the subject must be the CommonName and O={nodecert.NODES_GROUP} alone")
    if req.extensions:
        out.append(f"extensions are not allowed: {', '.join(req.extensions)}")
    if req.key_type != nodecert.KEY_TYPE:
        out.append(f"the key is {req.key_type}, not {nodecert.KEY_TYPE}")
    if not req.signature_valid:
        out.append("the request's signature is not valid")
    usages = sorted(spec.get("usages") or [])
    if usages != sorted(nodecert.USAGES):
        out.append(f"usages {usages} are not exactly {sorted(nodecert.USAGES)}")
    seconds = spec.get("expirationSeconds")
    if not isinstance(seconds, int) or not nodecert.MIN_SECONDS <= seconds <= max_seconds:
        out.append(
            f"expirationSeconds {seconds} is not between {nodecert.MIN_SECONDS} and {max_seconds}"
        )
    return out


def decide(raw: Mapping[str, Any], namespace: str, max_seconds: int) -> Decision | None:
    """The decision on one request, before the authorizer is asked; None when it is not a
    pending node request of ``namespace``."""
    spec = raw.get("spec") or {}
    if spec.get("signerName") != nodecert.SIGNER or _decided(raw):
        return None
    if "request" in spec and spec["request"] is None:  # slim(): over the size limit
        host = requester_host(str(spec.get("username") or ""), namespace)
        if host is None:
            return None
        return Decision(
            host, False, "CertificateNotApproved", f"the request is over {MAX_REQUEST_BYTES} bytes"
        )
    req = _request(raw)
    node = nodecert.node_of(req.common_name) if req else None
    if req is None or node is None or node[0] != namespace:
        return None
    host = node[1]
    found = problems(spec, req, namespace, host, max_seconds)
    if found:
        return Decision(host, False, "CertificateNotApproved", "; ".join(found))
    return Decision(host, True, APPROVED_REASON, f"a client certificate for node {host}")


@dataclass(frozen=True)
class Judge:
    """Approve a node's request once the authorizer confirms the requester still holds that
    node's grant, or leave it pending; either way ``report`` says which (an Event)."""

    raw: Mapping[str, Any]
    decision: Decision
    namespace: str
    report: Callable[[Mapping[str, Any], Decision], None] = field(repr=False, compare=False)
    what: str = "csr_judged"

    def apply(self, fleet: Fleet) -> bool:
        decision, spec = self.decision, self.raw["spec"]
        certificate = nodeuser.user_name(self.namespace, decision.host)
        if decision.approve and not (
            fleet.may(spec["username"], spec.get("groups") or [], GRANT, decision.host)
            and fleet.may(certificate, [nodecert.NODES_GROUP], GRANT, decision.host)
        ):
            decision = Decision(
                decision.host,
                False,
                "CertificateNotApproved",
                f"requester {spec['username']!r} no longer holds node {decision.host}'s grant "
                "(revoked, or `rbac --certificate` not applied)",
            )
        if decision.approve:
            fleet.approve_csr(self.raw, decision.reason, decision.message)
        self.report(self.raw, decision)
        return True


def reconcile(
    raw: Mapping[str, Any],
    namespace: str,
    judged_at: str | None,
    report: Callable[[Mapping[str, Any], Decision], None],
    max_seconds: int = nodecert.MAX_SECONDS,
) -> Outcome:
    """One request: judged once per resourceVersion (``judged_at``: the one judged last), so a
    pending one gets one Event, not one per sync."""
    if judged_at == str(raw["metadata"].get("resourceVersion")):
        return Outcome()
    decision = decide(raw, namespace, max_seconds)
    if decision is None:
        return Outcome()
    return Outcome((Judge(raw, decision, namespace, report),))


def note(raw: Mapping[str, Any], decision: Decision) -> tuple[dict[str, str], Note]:
    """The Event a judged request gets: on the request itself."""
    name = raw["metadata"]["name"]
    log.info("CertificateSigningRequest %s: %s: %s", name, decision.reason, decision.message)
    about = {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "name": name,
        "uid": raw["metadata"].get("uid", ""),
    }
    if decision.approve:
        return about, Note("CertificateApproved", decision.message)
    return about, Note(
        decision.reason, f"left for an administrator: {decision.message}", warning=True
    )
