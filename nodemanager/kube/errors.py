"""API errors translated in one place: a short class per HTTP status the agent acts on."""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException


class KubeError(Exception):
    status = 0

    def __init__(self, message: str, reason: str = ""):
        self.reason = reason
        super().__init__(message)


class NotFound(KubeError):
    status = 404


class Conflict(KubeError):
    status = 409


class Gone(KubeError):
    """The watch's resourceVersion is too old: relist."""

    status = 410


class Forbidden(KubeError):
    status = 403


_BY_STATUS = {c.status: c for c in (NotFound, Conflict, Gone, Forbidden)}


def translate(e: ApiException) -> KubeError:
    """The KubeError for an ApiException, with the server's message (non-JSON bodies truncated)."""
    message, reason = str(e.reason or ""), ""
    try:
        body = json.loads(e.body or "{}")
        message, reason = body.get("message", message), body.get("reason", "")
    except (TypeError, ValueError):
        message = f"{message}: {str(e.body)[:200]}"
    error = _BY_STATUS.get(e.status, KubeError)(f"{e.status} {message}", reason)
    error.status = e.status or 0
    return error
