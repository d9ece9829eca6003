"""`token`, `bootstrap` and `revoke`: node kubeconfigs, their rotation and their revocation.

Every token of a node is bound (TokenRequest ``boundObjectRef``) to one empty Secret named like
its ServiceAccount. Deleting that Secret revokes them all at once; that is `revoke`. An
administrator's credential (`token`, or `bootstrap` run with an admin kubeconfig) re-creates
the Secret first, so each re-run revokes every token issued before. The node's own credential
(`bootstrap` with the short-lived kubeconfig, and the agent renewing its token at ~80% of its
lifetime) binds the new token to the Secret its current token is bound to: it cannot delete
Secrets, and its renewals end when that Secret goes. Lifetimes are capped at MAX_TTL_SECONDS,
by this command and by the admission policy for the node's own requests.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any

import yaml

from nodemanager.bootstrap.policy import MAX_TOKEN_SECONDS
from nodemanager.bootstrap.rbac import LABELS, binding_secret, service_account
from nodemanager.fsutil import write_atomic
from nodemanager.kube import kubeconfig as kubeconfig_file
from nodemanager.kube import tokens

log = logging.getLogger(__name__)
MAX_TTL_SECONDS = MAX_TOKEN_SECONDS
MIN_TTL_SECONDS = 600  # the API server's own minimum


def check_ttl(seconds: float, flag: str) -> int:
    """The lifetime in whole seconds, or ValueError naming the flag."""
    if seconds > MAX_TTL_SECONDS:
        raise ValueError(
            f"{flag}: at most {MAX_TTL_SECONDS // 86400} days ({MAX_TTL_SECONDS // 3600}h)"
        )
    if seconds < MIN_TTL_SECONDS:
        raise ValueError(f"{flag}: at least 10 minutes")
    return int(seconds)


def _own_claims(
    kubeconfig: str, namespace: str, hostname: str, context: str | None = None
) -> dict[str, Any] | None:
    """The claims of ``kubeconfig``'s token when it is the node's own; else None (an admin)."""
    token = tokens.token_of(kubeconfig, context)
    if not token or token.count(".") != 2:
        return None
    try:
        c = tokens.claims(token)
    except ValueError:
        return None
    me = f"system:serviceaccount:{namespace}:{service_account(hostname)}"
    return c if c.get("sub") == me else None


def node_kubeconfig(
    kubeconfig: str,
    hostname: str,
    namespace: str,
    seconds: int,
    context: str | None = None,
    revoke_earlier: bool = False,
) -> tuple[str, float]:
    """A kubeconfig (YAML text) for the node's account, requested with ``kubeconfig``'s
    credentials; and the token's lifetime in seconds as granted.

    With an administrator's credential the token is bound to the node's binding Secret (made
    when missing), so a running agent keeps its credential and `token` is safe to re-run as
    upstream documents; ``revoke_earlier`` re-creates that Secret first, revoking every earlier
    token of the node. With the node's own, the new token shares its binding."""
    server, ca = tokens.cluster_of(kubeconfig, context)
    own = _own_claims(kubeconfig, namespace, hostname, context)
    api = tokens.client_for(kubeconfig, context)
    try:
        if own is None:
            make = tokens.renew_binding_secret if revoke_earlier else tokens.binding_secret_uid
            uid = make(
                api,
                namespace,
                binding_secret(hostname),
                {**LABELS, "nodemanager.io/node": hostname},
            )
            bound: tuple[str, str | None] = (binding_secret(hostname), uid)
        else:
            bound = tokens.bound_secret(own) or (binding_secret(hostname), None)
        token, expires = tokens.request_token(
            api, namespace, service_account(hostname), seconds, bound
        )
    finally:
        api.close()
    granted = expires.timestamp() - time.time()
    data = tokens.token_kubeconfig(server, ca, namespace, service_account(hostname), token)
    return yaml.safe_dump(data, sort_keys=False), granted


def revoke(kubeconfig: str, hostname: str, namespace: str, context: str | None = None) -> bool:
    """Revoke every token of the node (delete its binding Secret); whether there was one."""
    api = tokens.client_for(kubeconfig, context)
    try:
        return tokens.delete_binding_secret(api, namespace, binding_secret(hostname))
    finally:
        api.close()


def write_kubeconfig(path: str, text: str) -> None:
    write_atomic(path, text.encode(), mode=0o600)


class Renewer:
    """Renews the daemon's own credential when ``due_in`` says, rewriting its kubeconfig; a
    failed renewal is retried a minute later, an unreadable one ends the thread in one line."""

    what = "credential"
    kubeconfig = ""

    def due_in(self) -> float | None:
        """Seconds until the renewal; None when the credential is not one to renew."""
        raise NotImplementedError

    def renew(self, stop: threading.Event | None = None) -> None:
        raise NotImplementedError

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                delay = self.due_in()
            except Exception as e:  # any unreadable file: one line, never a thread traceback
                log.warning(
                    "cannot read the %s of %s: %s; not renewing it", self.what, self.kubeconfig, e
                )
                delay = None
            if delay is None:
                return
            if stop.wait(max(0.0, delay)):
                return
            try:
                self.renew(stop)
            except Exception as e:
                log.warning("%s renewal failed (%s); retrying in 60 s", self.what, e)
                stop.wait(60)


class TokenRenewer(Renewer):
    """Renews the daemon's own token at about 80% of its lifetime, writing the kubeconfig
    atomically; the client factory picks the new file up without a restart."""

    what = "token"

    def __init__(self, kubeconfig: str, hostname: str, namespace: str):
        self.kubeconfig, self.hostname, self.namespace = kubeconfig, hostname, namespace

    def due_in(self) -> float | None:
        token = tokens.token_of(self.kubeconfig)
        if not token or token.count(".") != 2:
            return None  # client certificates, exec plugins, static tokens: not ours to renew
        c = tokens.claims(token)
        if "exp" not in c or "iat" not in c:
            return None
        lifetime = c["exp"] - c["iat"]
        return float(c["iat"] + lifetime * random.uniform(0.75, 0.85) - time.time())

    def renew(self, stop: threading.Event | None = None) -> None:
        c = tokens.claims(tokens.token_of(self.kubeconfig) or "")
        lifetime = min(MAX_TTL_SECONDS, max(MIN_TTL_SECONDS, int(c["exp"] - c["iat"])))
        text, granted = node_kubeconfig(self.kubeconfig, self.hostname, self.namespace, lifetime)
        write_kubeconfig(self.kubeconfig, text)
        log.info("renewed the node token; new lifetime %.0f s", granted)


def renewer(kubeconfig: str, hostname: str, namespace: str, fraction: float) -> Renewer:
    """What renews the agent's own credential: its certificate or its token. A kubeconfig
    without a client certificate never loads bootstrap/certificate.py (and cryptography)."""
    try:
        if kubeconfig_file.client_certificate_of(kubeconfig) is not None:
            from nodemanager.bootstrap.certificate import CertRenewer, current

            if current(kubeconfig) is not None:
                return CertRenewer(kubeconfig, hostname, namespace, fraction)
    except Exception as e:  # the token renewer reports an unusable file in one line
        log.debug("no node certificate in %s: %s", kubeconfig, e)
    return TokenRenewer(kubeconfig, hostname, namespace)
