"""Built-in kinds (Secrets, ConfigMaps, Events, ControllerRevisions, TokenRequests) as plain dicts.

The client's typed CoreV1Api and AppsV1Api modules import every model class their methods name
when they are imported: about 280 classes (pods, volumes, ...), 25 MB of an agent's RSS at rest,
for the few kinds it reads and writes as dicts anyway. This sends the same requests through the
client's generic path (its auth, TLS, retries and ApiException), as CustomObjectsApi does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from kubernetes import client
from kubernetes.client.exceptions import ApiException

CORE = "/api/v1"
APPS = "/apis/apps/v1"
# Built-in kinds take a strategic merge patch of a dict, as the typed client sends it.
PATCH = "application/strategic-merge-patch+json"


def _query_name(key: str) -> str:
    """The typed methods' keyword (field_selector, _continue) as the URL's (fieldSelector)."""
    head, *rest = key.lstrip("_").split("_")
    return head + "".join(word.capitalize() for word in rest)


def request(
    api: client.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    *,
    _preload_content: bool = True,
    _request_timeout: Any = None,
    **query: Any,
) -> Any:
    """``method`` on ``path`` (formatted already); the answer as a dict. Keyword arguments are
    query parameters in the typed methods' spelling; ``_preload_content=False`` returns the raw
    response (what Watch.stream reads)."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = PATCH if method == "PATCH" else "application/json"
    params = [(_query_name(k), v) for k, v in query.items() if v is not None]
    serialized = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=params,
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*serialized, _request_timeout=_request_timeout)
    if not _preload_content:
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response.response
    response.read()
    return api.response_deserialize(response, {"2XX": "object"}).data


def namespaced(base: str, namespace: str, plural: str, *rest: str) -> str:
    """The path of ``plural`` (and a name, a subresource) in ``namespace``; parts are escaped."""
    parts = [namespace, plural, *rest]
    return "/".join([base, "namespaces", *(quote(p, safe="") for p in parts)])


def lister(base: str, plural: str) -> Callable[[client.ApiClient], Callable[..., Any]]:
    """For an informer's Kind: the list (and, with watch=True, watch) function of ``plural``."""

    def bind(api: client.ApiClient) -> Callable[..., Any]:
        def list_objects(namespace: str, **kwargs: Any) -> Any:
            return request(api, "GET", namespaced(base, namespace, plural), **kwargs)

        return list_objects

    return bind
