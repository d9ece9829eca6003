"""API client configuration: a kubeconfig file, or the in-cluster service account in a pod.

The kubeconfig is re-read when its file changes, so a rotated token (written atomically by the
token renewer or `nodemanager bootstrap`) is used without a restart.

No request waits forever: a hung API server (stopped, not down) would otherwise hold the
calling thread for as long as the kernel keeps the connection. Every request gets a connect
and a read timeout unless its caller gave one (watches do: their read timeout follows
``timeout_seconds``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client, config

from nodemanager.kube import kubeconfig as kubeconfig_file

FIELD_MANAGER = "nodemanager"
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 30.0


def in_cluster() -> bool:
    return (
        bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        and Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()
    )


def _retries() -> Any:
    """urllib3's default retries (3), except that a timed-out read ends the request at once: a
    dropped idle connection is still retried, a server that never answers is not waited for
    again and again."""
    import urllib3
    from urllib3.exceptions import MaxRetryError, ReadTimeoutError

    class Retry(urllib3.Retry):
        def increment(  # type: ignore[override]  # urllib3's own signature, untyped extras
            self,
            method: str | None = None,
            url: str | None = None,
            response: Any = None,
            error: Exception | None = None,
            _pool: Any = None,
            _stacktrace: Any = None,
        ) -> urllib3.Retry:
            if isinstance(error, ReadTimeoutError):
                raise MaxRetryError(_pool, url or "", error) from error
            return super().increment(method, url, response, error, _pool, _stacktrace)

    return Retry(3)


def bounded(
    api: client.ApiClient, on_request: Callable[[str], None] | None = None
) -> client.ApiClient:
    """``api`` with a connect and read timeout on each request whose caller gave none, and
    without urllib3's retries of a timed-out read: a command against a server that accepts and
    never answers fails in about CONNECT_TIMEOUT + READ_TIMEOUT, not four times that."""
    api.configuration.retries = _retries()
    pool = api.rest_client.pool_manager
    pool.connection_pool_kw["retries"] = api.configuration.retries
    request: Callable[..., Any] = api.rest_client.request

    def bounded_request(method: str, *args: Any, **kwargs: Any) -> Any:
        if on_request:
            on_request(method)
        if kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = timeouts()
        return request(method, *args, **kwargs)

    api.rest_client.request = bounded_request  # type: ignore[method-assign]
    return api


def timeouts() -> tuple[float, float]:
    """(connect, read) timeouts: ours, or at most $NODEMANAGER_REQUEST_TIMEOUT seconds each
    when it is set (tests; a caller that wants a command to give up sooner)."""
    try:
        limit = float(os.environ.get("NODEMANAGER_REQUEST_TIMEOUT", "0"))
    except ValueError:
        limit = 0.0
    if limit <= 0:
        return CONNECT_TIMEOUT, READ_TIMEOUT
    return min(CONNECT_TIMEOUT, limit), min(READ_TIMEOUT, limit)


class ClientFactory:
    """Hands out an ApiClient for the current credentials; reloads when the kubeconfig changes."""

    def __init__(
        self,
        kubeconfig: str | None,
        on_request: Callable[[str], None] | None = None,
        context: str | None = None,
    ):
        self.kubeconfig, self.context = kubeconfig, context
        self.on_request = on_request
        self._lock = threading.Lock()
        self._mtime: tuple[int | None, ...] | None = None
        self._client: client.ApiClient | None = None

    def _stamp(self) -> tuple[int | None, ...]:
        """The files' change times: a path list ($KUBECONFIG) is merged, so any of them counts."""
        stamps: list[int | None] = []
        for path in kubeconfig_file.paths(self.kubeconfig or ""):
            try:
                stamps.append(os.stat(path).st_mtime_ns)
            except OSError:
                stamps.append(None)
        return tuple(stamps)

    def get(self) -> client.ApiClient:
        with self._lock:
            stamp = self._stamp()
            if self._client is None or stamp != self._mtime:
                if self.kubeconfig and kubeconfig_file.exists(self.kubeconfig):
                    fresh = kubeconfig_file.new_client(self.kubeconfig, self.context)
                elif in_cluster():
                    configuration = client.Configuration()
                    config.load_incluster_config(client_configuration=configuration)
                    fresh = client.ApiClient(configuration)
                else:
                    raise FileNotFoundError(
                        f"kubeconfig {self.kubeconfig}: no such file, and not running in a pod "
                        "(check --kubeconfig or $KUBECONFIG)"
                    )
                bounded(fresh, self.on_request)  # counts and timeouts for every request
                old, self._client, self._mtime = self._client, fresh, stamp
                if old is not None:
                    old.close()
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
