"""Kubeconfig files read as kubectl reads them.

``kubeconfig`` is a path list (``$KUBECONFIG``, joined with ``os.pathsep``): the files that
exist are merged, the first file naming a cluster, user or context wins, and so does the first
``current-context`` (the client's own merger lets the last one win). ``context`` picks another
context than the current one, as ``kubectl --context``.

Every way a kubeconfig can be unusable (no file, not YAML, no such context, a context naming a
missing cluster) is one ``KubeconfigError`` whose message names the files and what to check,
so that commands print one line instead of the client's traceback.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import KubeConfigLoader, KubeConfigMerger

from nodemanager.kube.errors import Permanent


class KubeconfigError(Permanent):
    """The kubeconfig cannot be used as given: retrying will not help, editing it or the flags
    (``--kubeconfig``, ``--context``, ``$KUBECONFIG``) will."""


def paths(kubeconfig: str) -> list[str]:
    return [os.path.expanduser(p) for p in kubeconfig.split(os.pathsep) if p]


def exists(kubeconfig: str | None) -> bool:
    return bool(kubeconfig) and any(Path(p).is_file() for p in paths(kubeconfig or ""))


def _merged(files: list[str]) -> Any:
    merger = KubeConfigMerger(os.pathsep.join(files))
    if merger.config is None:
        raise KubeconfigError(f"kubeconfig {os.pathsep.join(files)}: no configuration found")
    for path in merger.paths:  # kubectl: the first file that sets it decides
        current = (merger.config_files[path] or {}).get("current-context")
        if current:
            merger.config.value["current-context"] = current
            break
    return merger.config


def loader(kubeconfig: str, context: str | None = None) -> KubeConfigLoader:
    """The client's loader over the merged files, set to ``context`` (default: the current)."""
    files = [p for p in paths(kubeconfig) if Path(p).is_file()]
    where = f"kubeconfig {kubeconfig}"
    if not files:
        raise KubeconfigError(f"{where}: no such file (check --kubeconfig or $KUBECONFIG)")
    try:
        merged = _merged(files)
        names = [c.value.get("name") for c in merged.value.get("contexts") or []]
        chosen = context or merged.value.get("current-context")
        if not chosen:
            raise KubeconfigError(f"{where}: no current-context; pass --context ({names})")
        if chosen not in names:
            flag = "--context" if context else "current-context"
            raise KubeconfigError(f"{where}: {flag} {chosen!r} not found (contexts: {names})")
        # config_base_path None: relative paths resolve against the file that holds them.
        return KubeConfigLoader(config_dict=merged, active_context=chosen, config_base_path=None)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise KubeconfigError(f"{where} is not valid YAML{at}: check the file") from e
    except ConfigException as e:
        raise KubeconfigError(f"{where}: {e}; check the file and --context") from e
    except (AttributeError, TypeError, KeyError) as e:
        # A file that is YAML but not a kubeconfig (a list, a string, entries without names).
        raise KubeconfigError(f"{where} is not a kubeconfig ({e}): check the file") from e


def new_client(kubeconfig: str, context: str | None = None) -> client.ApiClient:
    configuration = client.Configuration()
    chosen = loader(kubeconfig, context)
    try:
        chosen.load_and_set(configuration)
    except (ConfigException, OSError, ValueError, AttributeError, TypeError, KeyError) as e:
        raise KubeconfigError(
            f"kubeconfig {kubeconfig}: cannot use context {chosen.current_context['name']!r}: "
            f"{e}; check its cluster and user entries"
        ) from e
    return client.ApiClient(configuration)


def cluster_entry(kubeconfig: str, context: str | None = None) -> tuple[Any, str]:
    """The chosen context's cluster entry and the file it came from (for relative paths)."""
    cluster = loader(kubeconfig, context)._cluster
    return cluster, str(getattr(cluster, "path", "") or paths(kubeconfig)[0])


def token_of(kubeconfig: str, context: str | None = None) -> str | None:
    """The bearer token of the chosen context's user, if it uses one."""
    user = loader(kubeconfig, context)._user
    token = user.safe_get("token") if user is not None else None
    return str(token) if token else None


def client_certificate_of(kubeconfig: str, context: str | None = None) -> bytes | None:
    """The PEM client certificate of the chosen context's user, if it uses one."""
    user = loader(kubeconfig, context)._user
    if user is None:
        return None
    data = user.safe_get("client-certificate-data")
    if data:
        return base64.b64decode(str(data))
    path = user.safe_get("client-certificate")
    if path:
        where = Path(str(path))
        base = Path(str(getattr(user, "path", "") or paths(kubeconfig)[0])).parent
        return (where if where.is_absolute() else base / where).read_bytes()
    return None


def document(
    server: str, ca_data: str, namespace: str, user: str, credentials: dict[str, Any]
) -> dict[str, Any]:
    """A one-context kubeconfig for a node: ``credentials`` is its user entry (a token, or a
    client certificate and key)."""
    cluster: dict[str, Any] = {"server": server}
    if ca_data:
        cluster["certificate-authority-data"] = ca_data
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": user,
        "clusters": [{"name": "nodemanager", "cluster": cluster}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [
            {
                "name": user,
                "context": {"cluster": "nodemanager", "user": user, "namespace": namespace},
            }
        ],
    }
