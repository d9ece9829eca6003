"""``services[].lock_group``: rolling restarts across the fleet.

A service with a ``lock_group`` is restarted by a handler when a file it subscribes to changes
(or its FreeBSD arguments do). Before the executor changes any of those, the agent takes the
group's Lease (``kube/locks.py``; named after the group, in the agent's namespace) and keeps it
until the run, restart included, is over; a node that finds the Lease held waits for it. So the
change and the restart it causes happen on one node of the group at a time. A node that waited
longer than the timeout changes nothing and reports which node held the Lease; the next
reconcile tries again. Without a cluster (``apply -f``) there is no one to wait for.

A held Lease is renewed every third of its duration (``Renewal``) until it is given back, so a
long run keeps it, while an agent that died holding it loses it one duration later.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from nodemanager.api import Service
from nodemanager.executor.errors import ExecutorError
from nodemanager.playbook.build import Plan

log = logging.getLogger(__name__)


class Locker(Protocol):
    def try_acquire(self, name: str, duration_seconds: int = ...) -> str | None: ...

    def release(self, name: str) -> None: ...


class GroupLockError(ExecutorError):
    """A group Lease could not be taken (held too long by another node, or the API refused);
    nothing was changed."""


def groups_to_lock(plan: Plan, resources: list[str]) -> list[str]:
    """The lock groups whose services this change may restart."""
    changing = set(resources)
    groups = set()
    for r in plan.desired.of_kind("service"):
        s = r.spec
        if not isinstance(s, Service) or not s.lock_group or s.ensure == "stopped":
            continue
        triggers = {f"file:{p}" for p in s.subscribe_files}
        if s.arguments is not None:
            triggers.add(r.id)
        if triggers & changing:
            groups.add(s.lock_group)
    return sorted(groups)


class Renewal:
    """Renew the Leases in ``names`` (a list the owner may grow) every ``period`` seconds,
    a third of their duration unless told, from a thread, until ``stop``."""

    def __init__(
        self, locker: Locker, names: list[str], duration: int, period: float | None = None
    ):
        self.locker, self.names, self.duration = locker, names, duration
        self.period = period if period is not None else max(duration / 3, 1.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-renewal", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            for name in list(self.names):
                try:
                    holder = self.locker.try_acquire(name, self.duration)
                except Exception as e:  # API down: try again next period, before it expires
                    log.warning("could not renew Lease %s: %s", name, e)
                    continue
                if holder is not None:  # it expired before we could renew it
                    log.warning("lost Lease %s to %s", name, holder)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


class GroupLocks:
    def __init__(
        self,
        locker: Locker,
        *,
        wait: Callable[[float], object] = time.sleep,
        timeout: float = 600.0,
        poll: float = 2.0,
        lease_seconds: int = 300,
    ):
        self.locker, self.wait, self.timeout, self.poll = locker, wait, timeout, poll
        self.lease_seconds = lease_seconds
        self.held: list[str] = []
        self.renewal: Renewal | None = None

    def acquire(self, groups: list[str]) -> None:
        """Hold every Lease in ``groups`` (sorted, so two nodes never wait on each other)."""
        for group in groups:
            deadline = time.monotonic() + self.timeout
            announced = False
            while True:
                try:
                    holder = self.locker.try_acquire(group, self.lease_seconds)
                except Exception as e:  # Forbidden (rbac --lease-groups), API down
                    self.release(group)
                    raise GroupLockError(
                        f"spec.services[].lock_group {group}: cannot take the Lease: {e}"
                    ) from e
                if holder is None:
                    self.held.append(group)
                    log.info("holding lock group %s", group)
                    if self.renewal is None:
                        self.renewal = Renewal(self.locker, self.held, self.lease_seconds)
                    break
                if not announced:
                    log.info("lock group %s is held by %s; waiting", group, holder)
                    announced = True
                if time.monotonic() >= deadline:
                    self.release(group)
                    raise GroupLockError(
                        f"spec.services[].lock_group {group}: held by {holder} for more than "
                        f"{self.timeout:.0f} s; nothing was changed, retrying"
                    )
                if self.wait(self.poll):
                    self.release(group)  # the agent is stopping
                    raise GroupLockError(f"lock_group {group}: stopped while waiting")

    def release(self, waiting: str | None = None) -> None:
        """Give back every Lease held, and withdraw ``waiting`` (the one asked for and not
        got: with a pool, its request for a slot would otherwise stay)."""
        if self.renewal is not None:  # first, so no renewal races the release
            self.renewal.stop()
            self.renewal = None
        if waiting is not None and waiting not in self.held:
            try:
                self.locker.release(waiting)
            except Exception as e:
                log.warning("could not withdraw lock group %s: %s", waiting, e)
        for group in self.held:
            try:
                self.locker.release(group)
                log.info("released lock group %s", group)
            except Exception as e:  # it expires on its own; say so and go on
                log.warning("could not release lock group %s: %s", group, e)
        self.held = []
