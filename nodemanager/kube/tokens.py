"""Service-account tokens through the TokenRequest API, and kubeconfigs that carry them."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any

from kubernetes import client

from nodemanager.kube import kubeconfig as kubeconfig_file
from nodemanager.kube import plain
from nodemanager.kube.errors import KUBE_ERRORS, KubeError, translate


def request_token(
    api: client.ApiClient,
    namespace: str,
    service_account: str,
    seconds: int,
    bound_secret: tuple[str, str | None] | None = None,
) -> tuple[str, dt.datetime]:
    """A new token for ``service_account`` valid for ``seconds``; (token, expiration).

    With ``bound_secret`` (name, uid or None) the token is bound to that Secret: the API server
    rejects it once the Secret is deleted, which is how a node's tokens are revoked."""
    spec: dict[str, Any] = {"audiences": [], "expirationSeconds": seconds}
    if bound_secret:
        name, uid = bound_secret
        ref = {"apiVersion": "v1", "kind": "Secret", "name": name}
        spec["boundObjectRef"] = {**ref, "uid": uid} if uid else ref
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    path = plain.namespaced(plain.CORE, namespace, "serviceaccounts", service_account, "token")
    try:
        result = plain.request(api, "POST", path, body)
    except KUBE_ERRORS as e:
        raise translate(e) from e
    status = result.get("status") or {}
    if not status.get("token") or not status.get("expirationTimestamp"):
        raise KubeError("TokenRequest returned no token")
    expires = dt.datetime.fromisoformat(status["expirationTimestamp"])
    return status["token"], expires


BINDING_TYPE = "nodemanager.io/token-binding"


def renew_binding_secret(
    api: client.ApiClient, namespace: str, name: str, labels: dict[str, str]
) -> str:
    """Delete and re-create the (empty) Secret a node's tokens are bound to; its new uid.

    Deleting it revokes every token bound to the old one. It holds no data, and its type is not
    ``kubernetes.io/service-account-token``, so it never carries a credential itself."""
    core = client.CoreV1Api(api)
    delete_binding_secret(api, namespace, name)
    body = client.V1Secret(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels=labels),
        type=BINDING_TYPE,
    )
    try:
        created = core.create_namespaced_secret(namespace, body)
    except KUBE_ERRORS as e:
        raise translate(e) from e
    return str((created.metadata or client.V1ObjectMeta()).uid)


def binding_secret_uid(
    api: client.ApiClient, namespace: str, name: str, labels: dict[str, str]
) -> str:
    """The uid of the node's binding Secret, created when it has none: tokens bound to it stay
    valid, so issuing another token cuts off no running agent (``renew_binding_secret`` does)."""
    core = client.CoreV1Api(api)
    try:
        existing = core.read_namespaced_secret(name, namespace)
    except KUBE_ERRORS as e:
        if getattr(e, "status", None) != 404:
            raise translate(e) from e
    else:
        if existing.type != BINDING_TYPE:
            raise ValueError(
                f"Secret {namespace}/{name} has type {existing.type!r}, not {BINDING_TYPE}: "
                "not a nodemanager token binding; left alone"
            )
        return str((existing.metadata or client.V1ObjectMeta()).uid)
    body = client.V1Secret(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels=labels),
        type=BINDING_TYPE,
    )
    try:
        created = core.create_namespaced_secret(namespace, body)
    except KUBE_ERRORS as e:
        if getattr(e, "status", None) == 409:  # made meanwhile by another `token`: use it
            return binding_secret_uid(api, namespace, name, labels)
        raise translate(e) from e
    return str((created.metadata or client.V1ObjectMeta()).uid)


def delete_binding_secret(api: client.ApiClient, namespace: str, name: str) -> bool:
    """Delete a node's binding Secret (revoking its tokens); whether there was one.

    Only a Secret of the binding type is deleted: a name clash with a data Secret is an error."""
    core = client.CoreV1Api(api)
    try:
        existing = core.read_namespaced_secret(name, namespace)
    except KUBE_ERRORS as e:
        if getattr(e, "status", None) == 404:
            return False
        raise translate(e) from e
    if existing.type != BINDING_TYPE:
        raise ValueError(
            f"Secret {namespace}/{name} has type {existing.type!r}, not {BINDING_TYPE}: "
            "not a nodemanager token binding; left alone"
        )
    try:
        core.delete_namespaced_secret(
            name,
            namespace,
            body=client.V1DeleteOptions(
                preconditions=client.V1Preconditions(
                    uid=(existing.metadata or client.V1ObjectMeta()).uid
                )
            ),
        )
    except KUBE_ERRORS as e:
        if getattr(e, "status", None) != 404:
            raise translate(e) from e
    return True


def bound_secret(token_claims: dict[str, Any]) -> tuple[str, str] | None:
    """(name, uid) of the Secret a token is bound to, from its claims; None when unbound."""
    secret = (token_claims.get("kubernetes.io") or {}).get("secret") or {}
    if secret.get("name") and secret.get("uid"):
        return str(secret["name"]), str(secret["uid"])
    return None


def cluster_of(kubeconfig: str, context: str | None = None) -> tuple[str, str]:
    """(server, base64 CA data) of a kubeconfig's chosen context."""
    cluster, source = kubeconfig_file.cluster_entry(kubeconfig, context)
    server = cluster["server"]
    if "certificate-authority-data" in cluster:
        ca = cluster["certificate-authority-data"]
    elif "certificate-authority" in cluster:
        path = Path(cluster["certificate-authority"])
        path = path if path.is_absolute() else Path(source).resolve().parent / path
        ca = base64.b64encode(path.read_bytes()).decode()
    else:
        ca = ""
    return server, ca


def client_for(kubeconfig: str, context: str | None = None) -> client.ApiClient:
    """A client whose every request has a connect and read timeout (kube/client.py)."""
    from nodemanager.kube.client import bounded

    return bounded(kubeconfig_file.new_client(kubeconfig, context))


def token_kubeconfig(
    server: str, ca_data: str, namespace: str, user: str, token: str
) -> dict[str, Any]:
    return kubeconfig_file.document(server, ca_data, namespace, user, {"token": token})


def token_of(kubeconfig: str, context: str | None = None) -> str | None:
    """The bearer token of a kubeconfig's current (or chosen) user, if it uses one."""
    return kubeconfig_file.token_of(kubeconfig, context)


def claims(token: str) -> dict[str, Any]:
    """The JWT's claims, unverified: only to read iat/exp/sub of our own token."""
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return decoded
