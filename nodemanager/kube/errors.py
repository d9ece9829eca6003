"""API errors translated in one place, by class: temporary (retry as is) or permanent.

The Kubernetes client raises two families: ``ApiException`` for an answer with an error status,
and urllib3's ``HTTPError`` family when no answer came (refused, reset, timed out). Both become a
``KubeError`` here; its class says what a caller can do about it:

- ``Temporary``: no answer, 408, 409 (a newer version exists: re-read and retry), 410 (a watch
  expired: relist), 429 and 5xx. Retry after a backoff (``nodemanager/backoff.py``).
  A TLS handshake whose certificate the client refused is said as such ("certificate
  rejected: ..."), not as an unreachable server: the fix is the CA bundle, not the network.
- ``Permanent``: every other 4xx (bad request, forbidden, not found, invalid). Retrying the same
  request gives the same answer; only a change (RBAC, the object, the input) helps.
"""

from __future__ import annotations

import json
import ssl

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

# What the client raises; catch these by name, then translate.
KUBE_ERRORS: tuple[type[Exception], ...] = (ApiException, urllib3.exceptions.HTTPError)
_TEMPORARY_STATUSES = frozenset({408, 409, 410, 429})


class KubeError(Exception):
    status = 0  # the HTTP status; 0 when no answer came
    temporary = False

    def __init__(self, message: str, reason: str = "", status: int = 0):
        self.reason = reason
        self.status = status
        super().__init__(message)


class Temporary(KubeError):
    """Worth retrying unchanged after a backoff."""

    temporary = True


class Permanent(KubeError):
    """The same request will fail the same way: report it, wait for a change."""


class Forbidden(Permanent):
    """403: RBAC or the admission policy refused it (the agent reports which)."""


def is_temporary(status: int) -> bool:
    return status == 0 or status in _TEMPORARY_STATUSES or status >= 500


def _no_answer(e: Exception) -> str:
    """Where and why no answer came, in one line (urllib3 nests the connection's repr)."""
    if isinstance(e, urllib3.exceptions.MaxRetryError) and e.pool is not None:
        reason = str(e.reason or e)
        if reason.startswith("<") and ">: " in reason:  # urllib3 1.x: <...Connection at 0x..>
            reason = reason.split(">: ", 1)[1]
        elif reason.startswith(("HTTPConnection(", "HTTPSConnection(")) and "): " in reason:
            reason = reason.split("): ", 1)[1]
        pool = e.pool
        return f"{pool.scheme}://{pool.host}:{pool.port}: {reason}"
    return f"{type(e).__name__}: {e}"


def _certificate_rejected(e: BaseException) -> str | None:
    """OpenSSL's reason and the server when e (or what it wraps: urllib3 nests the
    ``ssl.SSLCertVerificationError`` in an SSLError in a MaxRetryError) is a refused
    certificate, else None."""
    seen: BaseException | None = e
    for _ in range(8):  # a bounded walk: reason / args[0] / __cause__ chains
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLCertVerificationError):
            where = ""
            if isinstance(e, urllib3.exceptions.MaxRetryError) and e.pool is not None:
                where = f" ({e.pool.scheme}://{e.pool.host}:{e.pool.port})"
            return f"{seen.verify_message or seen.reason or seen}{where}"
        nested = getattr(seen, "reason", None)
        if not isinstance(nested, BaseException):
            nested = next((a for a in seen.args if isinstance(a, BaseException)), None)
        seen = nested or seen.__cause__ or seen.__context__
    return None


def translate(e: Exception) -> KubeError:
    """The KubeError for an error of the client (``KUBE_ERRORS``), with the server's message
    (non-JSON bodies truncated)."""
    if isinstance(e, KubeError):
        return e
    if not isinstance(e, ApiException):
        if (rejected := _certificate_rejected(e)) is not None:
            return Temporary(f"certificate rejected: {rejected}", "CertificateRejected")
        return Temporary(f"API server unreachable: {_no_answer(e)}", "Unreachable")
    status = int(e.status or 0)
    message, reason = str(e.reason or ""), ""
    try:
        body = json.loads(e.body or "{}")
        message, reason = body.get("message", message), body.get("reason", "")
    except (TypeError, ValueError, AttributeError):
        message = f"{message}: {str(e.body)[:200]}"
    cls = Temporary if is_temporary(status) else Forbidden if status == 403 else Permanent
    return cls(f"{status} {message}", reason, status)
