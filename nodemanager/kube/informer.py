"""One informer per watched kind: list, then watch from the list's resourceVersion.

Bookmarks keep the resourceVersion fresh while nothing changes; ``410 Gone`` (the version was
compacted away) means relist; any other failure reconnects after an exponential backoff with
jitter. The informer only keeps a cache and calls ``on_change``: deciding what to do is the
reconciler's job, which reads the cache (level-triggered).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from nodemanager.backoff import Backoff
from nodemanager.kube.client import CONNECT_TIMEOUT, ClientFactory

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Kind:
    """How to list one kind: ``lister(api_client)`` returns the bound list function."""

    name: str
    lister: Callable[[Any], Callable[..., Any]]


class Informer:
    def __init__(
        self,
        kind: Kind,
        clients: ClientFactory,
        namespace: str,
        on_change: Callable[[str], None],
        *,
        field_selector: str | None = None,
        watch_timeout: int = 300,
        on_list: Callable[[str], None] | None = None,
        label_selector: str | None = None,
        ignore_status: bool = False,
        keep: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
    ):
        self.kind = kind
        self.clients = clients
        self.namespace = namespace
        self.on_change = on_change
        self.field_selector = field_selector
        self.watch_timeout = watch_timeout
        self.on_list = on_list
        self.label_selector = label_selector
        # Drop updates that change only status (and the resourceVersion): the agent must not
        # re-reconcile and re-report each time the controller summarises a ConfigSet.
        self.ignore_status = ignore_status
        # What of each object the cache holds (None: not the object at all): a controller
        # caching CSRs keeps its own requests' small parts, never everyone's bodies.
        self.keep = keep
        self.synced = threading.Event()
        self.lists = 0  # how many full lists were made: tests and metrics read it
        self._items: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._rv = ""
        # When a list or watch last failed (monotonic): a consumer judging by how long nothing
        # changed must not count time the cache could not see (an API outage).
        self.failed_at = 0.0

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._items.values())

    def get(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._items.get(name)

    def _kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.field_selector:
            kwargs["field_selector"] = self.field_selector
        if self.label_selector:
            kwargs["label_selector"] = self.label_selector
        return kwargs

    def _same_but_status(self, old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
        if not self.ignore_status or old is None:
            return False

        def strip(obj: dict[str, Any]) -> dict[str, Any]:
            meta = {
                k: v
                for k, v in (obj.get("metadata") or {}).items()
                if k not in ("resourceVersion", "managedFields")
            }
            return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}

        return strip(old) == strip(new)

    def _list(self) -> None:
        api = self.clients.get()
        result = self.kind.lister(api)(namespace=self.namespace, **self._kwargs())
        result = api.sanitize_for_serialization(result)
        listed = result.get("items", [])
        if self.keep is not None:
            listed = [k for k in map(self.keep, listed) if k is not None]
        items = {i["metadata"]["name"]: i for i in listed}
        with self._lock:
            items = {
                n: self._items[n] if self._same_but_status(self._items.get(n), i) else i
                for n, i in items.items()
            }
            changed = items != self._items or not self.synced.is_set()
            self._items = items
            self._rv = result["metadata"]["resourceVersion"]
        self.lists += 1
        if self.on_list:
            self.on_list(self.kind.name)
        self.synced.set()
        if changed:
            self.on_change(self.kind.name)

    def _watch(self, stop: threading.Event) -> None:
        api = self.clients.get()
        w = watch.Watch()
        timeout = self.watch_timeout + random.randint(0, 60)
        stream = w.stream(
            self.kind.lister(api),
            namespace=self.namespace,
            resource_version=self._rv,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            # The server ends the watch after timeout_seconds; a hung server must not hold this
            # thread longer than that (a stale cache, the worker still enforces from it).
            _request_timeout=(CONNECT_TIMEOUT, timeout + 30),
            **self._kwargs(),
        )
        try:
            for event in stream:
                if stop.is_set():
                    return
                kind, obj = event["type"], api.sanitize_for_serialization(event["object"])
                if kind == "ERROR":  # 410 Gone included: run() relists on it
                    raise ApiException(
                        status=obj.get("code", 500), reason=obj.get("message", "watch error")
                    )
                meta = obj.get("metadata", {})
                self._rv = meta.get("resourceVersion", self._rv)
                if kind == "BOOKMARK":
                    continue
                if self.keep is not None and kind != "DELETED":
                    kept = self.keep(obj)
                    if kept is None:  # not (or no longer) one to cache
                        kind = "DELETED"
                    else:
                        obj = kept
                with self._lock:
                    if kind == "MODIFIED" and self._same_but_status(
                        self._items.get(meta["name"]), obj
                    ):
                        continue
                    if kind == "DELETED":
                        self._items.pop(meta["name"], None)
                    else:
                        self._items[meta["name"]] = obj
                self.on_change(self.kind.name)
        finally:
            w.stop()

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop`` is set. Runs in its own thread."""
        backoff = Backoff(0.5, 30.0)
        need_list = True
        while not stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                if not self._rv:
                    # A listing without a version (a name this node may not read yet, see
                    # kube/refs.py) cannot be watched from: list again after the backoff, so
                    # the object arrives soon after access is granted.
                    need_list = True
                    stop.wait(backoff.next())
                    continue
                self._watch(stop)
                backoff.reset()
            except ApiException as e:
                if e.status == 410:
                    log.info("%s watch expired (410 Gone); relisting", self.kind.name)
                    need_list = True
                    continue
                self.failed_at = time.monotonic()
                delay = backoff.next()
                log.warning(
                    "%s list/watch failed (%s %s); retrying in %.1f s",
                    self.kind.name,
                    e.status,
                    e.reason,
                    delay,
                )
                stop.wait(delay)
            except (
                Exception
            ) as e:  # connection refused, reset, timeouts: the API server may be restarting
                self.failed_at = time.monotonic()
                delay = backoff.next()
                log.warning(
                    "%s list/watch failed (%s); retrying in %.1f s", self.kind.name, e, delay
                )
                stop.wait(delay)
