"""One agent's holders of a group Lease are counted: an OS upgrade group and a lock_group of the
same name are one Lease, given back only by the last holder (the Lease itself on the real API
server: tests/cluster/test_lock_group.py)."""

from __future__ import annotations

import threading

from nodemanager.agent.grouplocks import GroupLocks
from nodemanager.agent.poolslot import PoolSlots


class Lease:
    """kube/locks.py GroupLock for one node: records the terms asked for; free until released
    by this node (then taken by another, as a waiting node would)."""

    def __init__(self):
        self.holder, self.terms, self.lock = None, [], threading.Lock()

    def try_acquire(self, name, duration_seconds=300):
        with self.lock:
            if self.holder not in (None, "me"):
                return self.holder
            self.holder = "me"
            self.terms.append(duration_seconds)
            return None

    def release(self, name):
        with self.lock:
            if self.holder == "me":
                self.holder = "another node"


def _agent(lease, tmp_path):
    slots = PoolSlots(
        lease, lambda: None, lambda patch: None, tmp_path / "request"
    )  # no pool: only the Lease counts
    locks = GroupLocks(slots.locker("lock_group"), wait=lambda s: False, timeout=0, poll=0)
    return slots.locker("OS upgrade"), locks


def test_a_lock_group_giving_back_keeps_the_lease_the_upgrade_holds(tmp_path):
    lease = Lease()
    upgrade, locks = _agent(lease, tmp_path)
    assert upgrade.try_acquire("web", 86400) is None
    locks.acquire(["web"])
    locks.release()
    assert lease.holder == "me"
    assert lease.terms == [86400, 86400]  # the reconcile's take keeps the reboot's term
    upgrade.release("web")
    assert lease.holder == "another node"


def test_an_upgrade_giving_back_keeps_the_lease_the_reconcile_holds(tmp_path):
    lease = Lease()
    upgrade, locks = _agent(lease, tmp_path)
    locks.acquire(["web"])
    assert upgrade.try_acquire("web", 300) is None
    upgrade.release("web")
    assert lease.holder == "me"
    assert locks.locker.try_acquire("web", 300) is None  # its renewal goes on
    locks.release()
    assert lease.holder == "another node"


def test_withdrawing_a_lease_not_held_here_gives_back_only_when_nobody_holds_it(tmp_path):
    lease = Lease()
    upgrade, locks = _agent(lease, tmp_path)
    assert upgrade.try_acquire("web", 300) is None
    locks.release("web")  # a lock_group that waited for "web" and gave up
    assert lease.holder == "me"
    upgrade.release("web")
    # A Lease taken before a restart (the reboot of an upgrade): nobody here holds it.
    lease.holder = "me"
    upgrade.release("web")
    assert lease.holder == "another node"
