"""When the agent's loop wakes and whether a reconcile checks everything (pure: the caller
passes the clock and the jitter), after MCO's daemon, whose drift check is its own component.

Three things wake the loop: a change marked dirty (the own node, a ConfigSet, a Secret, ...),
the drift check (every ``period`` seconds after the last full reconcile, times a jitter of
0.9-1.1 so a fleet does not check in step; never with a period of 0), and a reconcile's own
requeue. Changes of *other* nodes (``nodes[]`` in templates) are held off for
``peer_min_interval`` after the last reconcile: a fleet's status churn must not become a
reconcile per event. While the caches are not synced the drift check waits for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def drift_at(since: float, period: float, jitter: float) -> float:
    return since + period * jitter if period > 0 else math.inf


@dataclass
class Schedule:
    period: float  # the drift check's period (spec.reconcilePeriod or the default)
    peer_min_interval: float
    last_full: float
    next_drift: float
    peers_due: float
    jitter: float = 1.0
    requeue_at: float | None = None
    peers_pending: bool = False
    waiting_for_cache: bool = False

    @classmethod
    def start(cls, now: float, period: float, peer_min_interval: float) -> Schedule:
        """The first reconcile checks everything, at once."""
        return cls(period, peer_min_interval, last_full=now, next_drift=now, peers_due=now)

    def set_period(self, period: float) -> None:
        """spec.reconcilePeriod changed: the next drift check counts from the last one."""
        if period != self.period:
            self.period = period
            self.next_drift = drift_at(self.last_full, period, self.jitter)

    def timeout(self, now: float) -> float | None:
        """Seconds to wait for a change before waking anyway; None: only a change wakes."""
        deadlines = [self.requeue_at] if self.requeue_at is not None else []
        if not self.waiting_for_cache and self.next_drift != math.inf:
            deadlines.append(self.next_drift)
        if self.peers_pending:
            deadlines.append(self.peers_due)
        return max(0.0, min(deadlines) - now) if deadlines else None

    def wake(self, now: float, asked_full: bool, only_peers: bool) -> bool | None:
        """Woken at ``now``: whether to reconcile everything (True), only what changed
        (False), or nothing yet (None: only other nodes changed, within the hold-off)."""
        full = asked_full or now >= self.next_drift
        requeued = self.requeue_at is not None and now >= self.requeue_at
        if only_peers and not full and not requeued and now < self.peers_due:
            self.peers_pending = True  # other nodes changed: wait out the minimum interval
            return None
        self.peers_pending, self.peers_due = False, now + self.peer_min_interval
        return full

    def ran(
        self,
        woke: float,
        now: float,
        *,
        full: bool,
        done: bool,
        requeue: float | None,
        period: float,
        jitter: float,
    ) -> None:
        """A reconcile woken at ``woke`` returned at ``now``: ``done`` False when it waited
        for the caches (they mark dirty once synced; the peers' first list is what it waits
        for, so no hold-off); ``requeue`` seconds asked for, if any; ``period`` and ``jitter``
        of the next drift check after a full one."""
        self.waiting_for_cache = not done
        if not done:
            self.peers_due = woke
            return
        if full:
            self.last_full, self.period, self.jitter = now, period, jitter
            self.next_drift = drift_at(now, period, jitter)
        self.requeue_at = now + requeue if requeue else None
