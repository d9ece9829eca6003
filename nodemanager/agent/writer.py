"""Status, Events and notifications are written by their own thread, never by the worker.

Enforcing the host must not wait on the API server: a hung server would otherwise hold the
worker in a status write while hand edits stay on disk. The worker hands over what it wants
written and goes on. Status is latest-wins (only the newest one matters; a failed write is
retried with backoff unless a newer one replaced it); Events and notifications queue in order,
bounded, oldest dropped first.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from nodemanager.backoff import Backoff

log = logging.getLogger(__name__)
MAX_QUEUED = 100


class Writer:
    def __init__(
        self,
        patch_status: Callable[[Mapping[str, Any]], object],
        on_written: Callable[[], None] = lambda: None,
    ):
        self._patch_status = patch_status
        self._on_written = on_written
        self._cond = threading.Condition()
        self._status: Mapping[str, Any] | None = None
        self._jobs: collections.deque[Callable[[], None]] = collections.deque(maxlen=MAX_QUEUED)
        self.last_written: Mapping[str, Any] | None = None

    def status(self, status: Mapping[str, Any]) -> None:
        """Write this status soon, replacing any not yet written."""
        with self._cond:
            self._status = status
            self._cond.notify()

    def later(self, job: Callable[[], None]) -> None:
        """Run ``job`` (an Event, a notification) on the writer thread, in order."""
        with self._cond:
            self._jobs.append(job)
            self._cond.notify()

    def idle(self) -> bool:
        with self._cond:
            return self._status is None and not self._jobs

    def run(self, stop: threading.Event) -> None:
        backoff = Backoff(1, 60)
        retry_in: float | None = None
        while not stop.is_set():
            with self._cond:
                if self._status is None and not self._jobs:
                    self._cond.wait(1.0)
                    continue
                if retry_in is not None and not self._jobs:
                    self._cond.wait(retry_in)  # a newer status or a job ends the wait early
                    retry_in = None
                status, self._status = self._status, None
                job = self._jobs.popleft() if self._jobs else None
            if status is not None:
                try:
                    self._patch_status(status)
                    self.last_written = status
                    backoff.reset()
                    self._on_written()
                except Exception as e:
                    log.warning("status write failed: %s", e)
                    retry_in = backoff.next()
                    with self._cond:
                        if self._status is None:
                            self._status = status  # latest wins: keep it unless replaced
            if job is not None:
                try:
                    job()
                except Exception as e:  # a job logs its own failures; this is a backstop
                    log.warning("writer job failed: %s", e)
