"""Which changes take a lock_group's Lease, and waiting for it (the Lease itself is tested on
the real API server in tests/cluster/test_lock_group.py)."""

import pytest

from nodemanager.agent.grouplocks import GroupLockError, GroupLocks, Renewal, groups_to_lock
from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.playbook.build import build


def plan():
    spec = {
        "files": [{"path": "/etc/a.conf", "content": "a"}, {"path": "/etc/b.conf", "content": "b"}],
        "services": [
            {
                "name": "a",
                "ensure": "running",
                "subscribe_files": ["/etc/a.conf"],
                "lock_group": "web",
            },
            {
                "name": "b",
                "ensure": "stopped",
                "subscribe_files": ["/etc/b.conf"],
                "lock_group": "db",
            },
        ],
    }
    return build(
        merge([ConfigSet.from_dict({"metadata": {"name": "cs"}, "spec": spec})]), "debian", "n"
    )


def test_only_a_change_that_restarts_a_grouped_service_takes_its_lease():
    p = plan()
    assert groups_to_lock(p, ["file:/etc/a.conf"]) == ["web"]
    assert groups_to_lock(p, ["file:/etc/b.conf"]) == []  # b is stopped: nothing restarts
    assert groups_to_lock(p, ["service:a"]) == []


class Busy:
    def __init__(self, answers):
        self.answers, self.released = list(answers), []

    def try_acquire(self, name, duration_seconds=300):
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def release(self, name):
        self.released.append(name)


def test_waits_until_the_lease_is_free_then_releases_after_the_run():
    waits = []
    locker = Busy(["other", "other", None])
    locks = GroupLocks(locker, wait=lambda s: waits.append(s), poll=2.0)
    locks.acquire(["web"])
    assert waits == [2.0, 2.0] and locks.held == ["web"]
    locks.release()
    assert locker.released == ["web"] and locks.held == []


def test_gives_up_after_the_timeout_and_says_who_held_it():
    locks = GroupLocks(Busy(["node-b"] * 3), wait=lambda s: None, timeout=0.0)
    with pytest.raises(GroupLockError, match="lock_group web: held by node-b"):
        locks.acquire(["web"])


def test_an_api_refusal_is_an_error_naming_the_field():
    locks = GroupLocks(Busy([PermissionError("403 forbidden")]), wait=lambda s: None)
    with pytest.raises(GroupLockError, match="lock_group web: cannot take the Lease: 403"):
        locks.acquire(["web"])


def test_renewal_renews_every_period_until_stopped():
    import threading

    renewed = threading.Event()
    calls = []

    class Counting:
        def try_acquire(self, name, duration_seconds=300):
            calls.append((name, duration_seconds))
            if len(calls) >= 3:
                renewed.set()
            return None

    r = Renewal(Counting(), ["g"], 30, period=0.01)
    assert renewed.wait(5)
    r.stop()
    n = len(calls)
    assert set(calls) == {("g", 30)}
    idle = Renewal(Counting(), [], 30)
    assert idle.period == 10  # a third of the duration by default
    idle.stop()
    assert len(calls) == n  # stopped: stop() joined the renewal thread, nothing runs after
