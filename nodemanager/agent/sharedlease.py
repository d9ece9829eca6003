"""One agent's holders of a group Lease, counted.

An OS upgrade's ``spec.upgrade.group`` and a service's ``lock_group`` of the same name are one
Lease (named after the group, as upstream names it) held by one identity, the node. Inside one
agent the upgrade and the reconcile each take it and give it back on their own, so the first to
give it back would free the Lease the other still works under, and another node would go ahead.
Here every holder in this process is counted per Lease name: the Lease is given back when the
last holder gives it back, and each take or renewal asks for the longest term any holder wants
(a reboot's term is not cut short by a lock_group renewal).
"""

from __future__ import annotations

import logging
import threading

from nodemanager.agent.grouplocks import Locker

log = logging.getLogger(__name__)


class SharedLeases:
    """``inner`` (kube/locks.py GroupLock) shared by the named holders of one agent."""

    def __init__(self, inner: Locker) -> None:
        self.inner = inner
        self._lock = threading.Lock()  # guards _order and _held
        # Per Lease name, held over that Lease's API calls: a give-back and a take of one Lease
        # must not interleave (the take renews, then the give-back clears it). Callers of other
        # Leases never wait on it.
        self._order: dict[str, threading.Lock] = {}
        self._held: dict[str, dict[str, int]] = {}  # name -> holder -> the term it asked for

    def _one_at_a_time(self, name: str) -> threading.Lock:
        with self._lock:
            return self._order.setdefault(name, threading.Lock())

    def try_acquire(self, holder: str, name: str, duration_seconds: int) -> str | None:
        """Take (or renew) the Lease ``name`` for ``holder``; None when held, else who has it."""
        with self._one_at_a_time(name):
            with self._lock:
                others = [s for h, s in self._held.get(name, {}).items() if h != holder]
            found = self.inner.try_acquire(name, max([duration_seconds, *others]))
            if found is None:
                with self._lock:
                    self._held.setdefault(name, {})[holder] = duration_seconds
            return found

    def release(self, holder: str, name: str) -> None:
        """``holder`` is done with ``name``: the Lease is given back unless another holder in
        this process still has it (given back also when none had it here: one taken before a
        restart, or a request to withdraw)."""
        with self._one_at_a_time(name):
            with self._lock:
                held = self._held.get(name, {})
                held.pop(holder, None)
                if held:
                    log.info("Lease %s is kept: %s still holds it", name, ", ".join(sorted(held)))
                    return
                self._held.pop(name, None)
            self.inner.release(name)
