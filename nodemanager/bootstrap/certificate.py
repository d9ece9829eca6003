"""`bootstrap --certificate` and the agent's renewals: a client certificate made on the host.

The key is made here, in memory, and only ever written into one file beside the node's
kubeconfig (``credential_path``, 0600, atomically): it is never sent, never logged. The
CertificateSigningRequest carries the public half (api/nodecert.py says its one shape), for the
kube-apiserver-client signer with a lifetime (``expirationSeconds``). The fleet controller
approves it when the requester is the node's bootstrap ServiceAccount or the node itself
(controller/csrapprove.py); kube-controller-manager signs it with the cluster CA.

A certificate cannot be revoked before it expires. Lifetimes are short (a day by default, a
week at most), the agent renews at about 80% of it, and `revoke` removes the node's bindings so
that a certificate still valid can do nothing.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable

import yaml

from nodemanager.api import nodecert, nodeuser
from nodemanager.bootstrap.credentials import Renewer
from nodemanager.bootstrap.rbac import cluster_role_names, role_names
from nodemanager.fsutil import write_atomic
from nodemanager.kube import bindings, csr, tokens
from nodemanager.kube import kubeconfig as kubeconfig_file

log = logging.getLogger(__name__)
RENEW_FRACTION = 0.8


def check_lifetime(seconds: float, flag: str) -> int:
    """The lifetime in whole seconds, or ValueError naming the flag."""
    if seconds > nodecert.MAX_SECONDS:
        raise ValueError(f"{flag}: at most {nodecert.MAX_SECONDS // 3600}h (certificates "
                         "cannot be revoked, so they are short-lived)")  # fmt: skip
    if seconds < nodecert.MIN_SECONDS:
        raise ValueError(f"{flag}: at least 10 minutes")
    return int(seconds)


def credential_path(kubeconfig: str) -> str:
    """Where the node's certificate and key live: one PEM file beside its kubeconfig, which
    names it as both client-certificate and client-key. A file, not inline data: the client
    library copies inline keys to temporary files that outlive a killed process."""
    return os.path.abspath(kubeconfig) + "-client.pem"


def obtain(
    requester: str,
    kubeconfig: str,
    hostname: str,
    namespace: str,
    seconds: int,
    timeout: float,
    context: str | None = None,
    stop: threading.Event | None = None,
    submitted: Callable[[str], None] | None = None,
) -> nodecert.Issued:
    """Ask for a certificate with ``requester``'s credentials (a new key, a CSR) and, once it
    is signed, write it with its key (0600) and then ``kubeconfig`` naming it, each through a
    temporary file and a rename. NotIssued when the request is denied or not signed within
    ``timeout`` seconds (it stays for an administrator); nothing is written then.
    ``submitted`` is told the request's name."""
    server, ca = tokens.cluster_of(requester, context)
    key, request = nodecert.new_request(namespace, hostname)
    api = tokens.client_for(requester, context)
    try:
        name = csr.submit(
            api, f"nodemanager-{hostname}-", request, nodecert.SIGNER, nodecert.USAGES, seconds
        )
        log.info("submitted CertificateSigningRequest %s; waiting for its certificate", name)
        if submitted:
            submitted(name)
        cert = csr.wait_certificate(api, name, timeout, stop)
    finally:
        api.close()
    issued = nodecert.Issued.from_pem(cert)
    pem = credential_path(kubeconfig)
    # One file holding both, so a connection never pairs the new certificate with the old key.
    write_atomic(pem, cert + key, mode=0o600)
    user = nodeuser.user_name(namespace, hostname)
    data = kubeconfig_file.document(
        server, ca, namespace, user, {"client-certificate": pem, "client-key": pem}
    )
    # Rewritten on each renewal too: its new mtime makes the client factory start a new client.
    write_atomic(kubeconfig, yaml.safe_dump(data, sort_keys=False).encode(), mode=0o600)
    return issued


def current(kubeconfig: str) -> nodecert.Issued | None:
    """The node certificate ``kubeconfig`` authenticates with; None for any other credential."""
    pem = kubeconfig_file.client_certificate_of(kubeconfig)
    if pem is None:
        return None
    issued = nodecert.Issued.from_pem(pem)
    return issued if nodecert.node_of(issued.common_name) else None


class CertRenewer(Renewer):
    """Renews the daemon's certificate at about ``fraction`` of its lifetime (a new key, a CSR
    made with the current certificate), writing the kubeconfig atomically; the client factory
    picks the new file up without a restart (kube/client.py)."""

    what = "certificate"

    def __init__(
        self,
        kubeconfig: str,
        hostname: str,
        namespace: str,
        fraction: float = RENEW_FRACTION,
        timeout: float = 600.0,
    ):
        self.kubeconfig, self.hostname, self.namespace = kubeconfig, hostname, namespace
        self.fraction, self.timeout = fraction, timeout

    def due_in(self) -> float | None:
        issued = current(self.kubeconfig)
        if issued is None:
            return None  # tokens, exec plugins, an administrator's certificate: not ours
        # Jitter, so that a fleet bootstrapped at once does not renew at once.
        return issued.renew_at(self.fraction * random.uniform(0.94, 1.0)) - time.time()

    def renew(self, stop: threading.Event | None = None) -> None:
        issued = current(self.kubeconfig)
        assert issued is not None
        seconds = min(nodecert.MAX_SECONDS, max(nodecert.MIN_SECONDS, issued.requested()))
        new = obtain(
            self.kubeconfig,
            self.kubeconfig,
            self.hostname,
            self.namespace,
            seconds,
            self.timeout,
            stop=stop,
        )
        log.info(
            "renewed the node certificate; valid until %s",
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(new.not_after)),
        )


def revoke(kubeconfig: str, hostname: str, namespace: str, context: str | None = None) -> list[str]:
    """Take the node's certificate user out of every binding of the node (bootstrap/rbac.py's
    and the fleet controller's ``nodemanager-refs-<host>``, controller/access.py): a certificate
    still valid can then do nothing, not even ask for its renewal. The bindings changed."""
    node_role, _token_role = role_names(hostname)
    api = tokens.client_for(kubeconfig, context)
    try:
        return bindings.remove_user(
            api,
            nodeuser.user_name(namespace, hostname),
            namespace,
            [node_role, f"nodemanager-refs-{hostname}"],
            cluster_role_names(hostname, namespace),
        )
    finally:
        api.close()
