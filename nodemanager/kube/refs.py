"""Watches of single objects by name: one informer per referenced Secret or ConfigMap.

Each lists and watches with ``fieldSelector=metadata.name=<name>``. The API server authorises
such a list or watch as a request for that one name, so a Role with ``resourceNames`` (the fleet
controller's per-node Role) is all the access the agent needs: get, list and watch by name,
never the whole namespace. The set follows what the node's ConfigSets reference: new names
start a watch, names no longer referenced stop theirs and leave the cache.

A name the node may not read (403) lists as absent, so the template that needs it reports a
missing Secret and the rest of the node still applies; with no resourceVersion to watch from,
the informer lists again after its backoff (at most 30 s), delivering the object once the
controller grants access.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes.client.exceptions import ApiException

from nodemanager.kube.client import ClientFactory
from nodemanager.kube.informer import Informer, Kind

log = logging.getLogger(__name__)


def _forbidden_is_absent(kind: Kind) -> Kind:
    def lister(api: Any) -> Callable[..., Any]:
        real = kind.lister(api)

        def list_or_absent(namespace: str, **kwargs: Any) -> Any:
            if kwargs.get("watch"):
                return real(namespace, **kwargs)
            try:
                return real(namespace, **kwargs)
            except ApiException as e:
                if e.status != 403:
                    raise
                log.warning(
                    "%s %s: forbidden to this node; treated as missing",
                    kind.name,
                    kwargs.get("field_selector", ""),
                )
                return {"metadata": {"resourceVersion": ""}, "items": []}

        return list_or_absent

    return Kind(kind.name, lister)


class NamedWatches:
    def __init__(
        self,
        kind: Kind,
        clients: ClientFactory,
        namespace: str,
        on_change: Callable[[str], None],
        on_list: Callable[[str], None] | None = None,
    ):
        self.kind, self.clients, self.namespace = _forbidden_is_absent(kind), clients, namespace
        self.on_change, self.on_list = on_change, on_list
        self._watches: dict[str, tuple[Informer, threading.Event]] = {}
        self._lock = threading.Lock()

    def names(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._watches)

    def want(self, names: Iterable[str]) -> None:
        """Watch exactly ``names`` from now on."""
        wanted = set(names)
        with self._lock:
            for name in set(self._watches) - wanted:
                _, stop = self._watches.pop(name)
                stop.set()
            for name in sorted(wanted - set(self._watches)):
                stop = threading.Event()
                informer = Informer(
                    self.kind,
                    self.clients,
                    self.namespace,
                    self._changed(name),
                    field_selector=f"metadata.name={name}",
                    on_list=self.on_list,
                )
                self._watches[name] = (informer, stop)
                threading.Thread(
                    target=informer.run,
                    args=(stop,),
                    name=f"informer-{self.kind.name}-{name}",
                    daemon=True,
                ).start()

    def _changed(self, name: str) -> Callable[[str], None]:
        def changed(kind: str) -> None:
            if name in self.names():  # a stopped watch may still deliver its last event
                self.on_change(kind)

        return changed

    def synced(self) -> bool:
        with self._lock:
            return all(i.synced.is_set() for i, _ in self._watches.values())

    def data(self) -> dict[str, dict[str, Any]]:
        """name -> the object's ``data`` for every watched name that exists."""
        with self._lock:
            informers = [(n, i) for n, (i, _) in self._watches.items()]
        out = {}
        for name, informer in informers:
            obj = informer.get(name)
            if obj is not None:
                out[name] = obj.get("data") or {}
        return out

    def stop(self) -> None:
        self.want(())
