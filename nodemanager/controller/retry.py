"""Per-object retry schedule for the controller (pure; the caller passes the clock).

A temporary API error (timeouts, 5xx, 429, a conflict) retries that object with exponential
backoff, not every sync; a permanent one (invalid, forbidden) is not retried until the object
changes (its resourceVersion), as controller-runtime and kopf treat them. Other objects are
unaffected either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nodemanager.backoff import Backoff
from nodemanager.kube.errors import Permanent


@dataclass
class Gate:
    base: float = 1.0
    cap: float = 60.0
    _backoffs: dict[str, Backoff] = field(default_factory=dict)
    _until: dict[str, float] = field(default_factory=dict)
    _blocked: dict[str, str] = field(default_factory=dict)  # name -> resourceVersion it failed at

    def ready(self, name: str, version: str, now: float) -> bool:
        """Whether to try ``name`` now."""
        if name in self._blocked:
            if self._blocked[name] == version:
                return False
            self.succeeded(name)  # changed since: a prompt try, not the old schedule's tail
        return now >= self._until.get(name, float("-inf"))

    def failed(self, name: str, version: str, error: Exception, now: float) -> float:
        """Record a failure; the seconds until the next try (inf: until the object changes).
        Anything but a ``Permanent`` API error (a timeout, a conflict, a bug) backs off."""
        if isinstance(error, Permanent):
            self._blocked[name] = version
            return float("inf")
        delay = self._backoffs.setdefault(name, Backoff(self.base, self.cap)).next()
        self._until[name] = now + delay
        return delay

    def succeeded(self, name: str) -> None:
        self._backoffs.pop(name, None)
        self._until.pop(name, None)
        self._blocked.pop(name, None)

    def waiting(self) -> bool:
        """Whether some object waits for a time (the loop must sync again then)."""
        return bool(self._until)

    def retain(self, live: set[str]) -> None:
        """Forget objects not in ``live`` (deleted: no retry is due for them)."""
        for name in set(self._backoffs) | set(self._until) | set(self._blocked):
            if name not in live:
                self.succeeded(name)

    def next_due(self) -> float | None:
        """When the earliest backoff ends (the caller's clock), None when none waits."""
        return min(self._until.values(), default=None)
