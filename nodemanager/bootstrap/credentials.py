"""`token` and `bootstrap`: short-lived and long-lived node kubeconfigs, and their rotation.

Both ask the TokenRequest API for a token of the node's ServiceAccount and write a kubeconfig
carrying it with the server and CA of the kubeconfig used to ask. Re-running either rotates.
"""

from __future__ import annotations

import logging
import random
import threading
import time

import yaml

from nodemanager.bootstrap.rbac import service_account
from nodemanager.fsutil import write_atomic
from nodemanager.kube import tokens

log = logging.getLogger(__name__)


def node_kubeconfig(
    kubeconfig: str, hostname: str, namespace: str, seconds: int
) -> tuple[str, float]:
    """A kubeconfig (YAML text) for the node's account, requested with ``kubeconfig``'s
    credentials; and the token's lifetime in seconds as granted."""
    server, ca = tokens.cluster_of(kubeconfig)
    api = tokens.client_for(kubeconfig)
    try:
        token, expires = tokens.request_token(api, namespace, service_account(hostname), seconds)
    finally:
        api.close()
    granted = expires.timestamp() - time.time()
    data = tokens.token_kubeconfig(server, ca, namespace, service_account(hostname), token)
    return yaml.safe_dump(data, sort_keys=False), granted


def write_kubeconfig(path: str, text: str) -> None:
    write_atomic(path, text.encode(), mode=0o600)


class TokenRenewer:
    """Renews the daemon's own token at about 80% of its lifetime, writing the kubeconfig
    atomically; the client factory picks the new file up without a restart."""

    def __init__(self, kubeconfig: str, hostname: str, namespace: str):
        self.kubeconfig, self.hostname, self.namespace = kubeconfig, hostname, namespace

    def due_in(self) -> float | None:
        token = tokens.token_of(self.kubeconfig)
        if not token:
            return None  # client certificates or exec plugins renew themselves
        c = tokens.claims(token)
        if "exp" not in c or "iat" not in c:
            return None
        lifetime = c["exp"] - c["iat"]
        return float(c["iat"] + lifetime * random.uniform(0.75, 0.85) - time.time())

    def renew(self) -> None:
        c = tokens.claims(tokens.token_of(self.kubeconfig) or "")
        text, granted = node_kubeconfig(
            self.kubeconfig, self.hostname, self.namespace, int(c["exp"] - c["iat"])
        )
        write_kubeconfig(self.kubeconfig, text)
        log.info("renewed the node token; new lifetime %.0f s", granted)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                delay = self.due_in()
            except (OSError, ValueError, KeyError) as e:
                log.warning("cannot read the token of %s: %s", self.kubeconfig, e)
                delay = None
            if delay is None:
                return
            if stop.wait(max(0.0, delay)):
                return
            try:
                self.renew()
            except Exception as e:
                log.warning("token renewal failed (%s); retrying in 60 s", e)
                stop.wait(60)
