"""The agent's side of the pool budget: a request in status, a grant in spec, Leases after."""

from __future__ import annotations

import threading

import pytest

from nodemanager.agent.grouplocks import GroupLockError, GroupLocks
from nodemanager.agent.poolslot import PoolSlots


class Leases:
    """A stand-in for kube/locks.py GroupLock: records calls, every Lease free."""

    def __init__(self):
        self.calls = []

    def try_acquire(self, name, duration_seconds=300):
        self.calls.append(("acquire", name))
        return None

    def release(self, name):
        self.calls.append(("release", name))


class Node:
    """This node's ManagedNode as the agent's cache shows it; writes merge into status."""

    def __init__(self, spec):
        self.obj = {"spec": spec, "status": {}}
        self.writes = []

    def get(self):
        return self.obj

    def write(self, patch):
        self.writes.append(patch)
        for k, v in patch.items():
            if v is None:
                self.obj["status"].pop(k, None)
            else:
                self.obj["status"][k] = v


class SlowNode(Node):
    """A Node whose first write matching ``hang`` blocks until ``go`` is set: an API call on
    the wire while other threads go on."""

    def __init__(self, spec, hang):
        super().__init__(spec)
        self.hang, self.hung, self.go = hang, threading.Event(), threading.Event()
        self._lock = threading.Lock()

    def write(self, patch):
        if not self.hung.is_set() and self.hang(patch):
            self.hung.set()
            assert self.go.wait(60)
        with self._lock:
            super().write(patch)


def _thread(target, *args):
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def test_a_slow_request_write_holds_no_other_caller_and_one_id_is_asked(tmp_path):
    node = SlowNode({"pool": "db"}, hang=lambda patch: True)
    slots = PoolSlots(Leases(), node.get, node.write, tmp_path / "request")
    first = _thread(slots.locker("OS upgrade").try_acquire, "")
    try:
        assert node.hung.wait(30)
        # While the request is on the wire, the reconcile asks too: it waits for no write
        # and writes no second request.
        done = threading.Event()
        _thread(lambda: (slots.locker("lock_group").try_acquire("web"), done.set()))
        assert done.wait(30), "the second caller waited for the first one's write"
    finally:
        node.go.set()
        first.join(30)
    ids = {w["disruption"]["id"] for w in node.writes}
    assert len(node.writes) == 1 and ids == {node.obj["status"]["disruption"]["id"]}


def test_a_give_back_on_the_wire_does_not_remove_the_request_of_a_new_waiter(tmp_path):
    node = SlowNode({"pool": "db"}, hang=lambda patch: patch["disruption"] is None)
    slots = PoolSlots(Leases(), node.get, node.write, tmp_path / "request")
    upgrade, lock_group = slots.locker("OS upgrade"), slots.locker("lock_group")
    assert upgrade.try_acquire("") == "the budget of pool db"
    giving_back = _thread(upgrade.release, "")
    try:
        assert node.hung.wait(30)
        # The reconcile asks while the upgrade's give-back is being written.
        assert lock_group.try_acquire("web") == "the budget of pool db"
    finally:
        node.go.set()
        giving_back.join(30)
    assert not giving_back.is_alive()
    # The last write is the waiter's request, not the give-back.
    request = node.obj["status"].get("disruption")
    assert request is not None and request["reason"] == "lock_group web", node.writes
    lock_group.release("web")
    assert "disruption" not in node.obj["status"]


def test_without_a_pool_only_the_lease_counts(tmp_path):
    leases, node = Leases(), Node({})
    slots = PoolSlots(leases, node.get, node.write, tmp_path / "request")
    assert slots.locker("lock_group").try_acquire("web") is None
    assert slots.locker("OS upgrade").try_acquire("") is None
    assert node.writes == [] and leases.calls == [("acquire", "web")]


def test_a_pooled_node_asks_waits_for_the_grant_then_takes_the_lease_and_gives_back(tmp_path):
    leases, node = Leases(), Node({"pool": "db"})
    slots = PoolSlots(leases, node.get, node.write, tmp_path / "request")
    view = slots.locker("lock_group")
    assert view.try_acquire("web") == "the budget of pool db"
    request = node.obj["status"]["disruption"]
    assert request["reason"] == "lock_group web" and leases.calls == []
    assert view.try_acquire("web") is not None and len(node.writes) == 1  # asked once
    node.obj["spec"]["disruptionGranted"] = request["id"]
    assert view.try_acquire("web") is None and leases.calls == [("acquire", "web")]
    view.release("web")
    assert "disruption" not in node.obj["status"] and leases.calls[-1] == ("release", "web")


def test_upgrade_and_lock_group_share_one_request(tmp_path):
    leases, node = Leases(), Node({"pool": "default"})
    slots = PoolSlots(leases, node.get, node.write, tmp_path / "request")
    up, lock = slots.locker("OS upgrade"), slots.locker("lock_group")
    up.try_acquire("")
    lock.try_acquire("web")
    assert len(node.writes) == 1
    up.release("")
    assert "disruption" in node.obj["status"]  # lock_group still waits
    lock.release("web")
    assert "disruption" not in node.obj["status"]


def test_a_request_left_by_a_restart_is_adopted_or_tidied(tmp_path):
    record = tmp_path / "request"
    node = Node({"pool": "default"})
    slots = PoolSlots(Leases(), node.get, node.write, record)
    assert slots.locker("OS upgrade").try_acquire("") == "the budget of pool default"
    written = node.obj["status"]["disruption"]["id"]
    assert record.read_text() == written  # recorded, so a restart knows it as its own
    node.obj["spec"]["disruptionGranted"] = written
    # The agent restarts (the reboot of an upgrade): the grant it had is kept.
    after_reboot = PoolSlots(Leases(), node.get, node.write, record)
    assert after_reboot.locker("OS upgrade").try_acquire("") is None
    assert node.obj["status"]["disruption"]["id"] == written
    after_reboot.locker("OS upgrade").release("")
    assert node.obj["status"] == {}
    # A crash left its own request, nobody waits for it: tidied once.
    node.obj["status"]["disruption"] = {"id": written}
    fresh = PoolSlots(Leases(), node.get, node.write, record)
    fresh.tidy()
    assert node.obj["status"] == {}
    # Once only: a request written later (by this process or by hand) is left alone.
    node.obj["status"]["disruption"] = {"id": written}
    fresh.tidy()
    assert node.obj["status"]["disruption"] == {"id": written}


def test_a_request_this_agent_did_not_write_is_never_tidied_or_withdrawn(tmp_path):
    """An operator's request (or one written by another process for this node) may still be
    needed: the agent leaves it, however long after its start it appears."""
    node = Node({"pool": "default", "disruptionGranted": "theirs"})
    node.obj["status"]["disruption"] = {"id": "theirs", "reason": "maintenance"}
    slots = PoolSlots(Leases(), node.get, node.write, tmp_path / "request")
    slots.tidy()
    slots.locker("lock_group").release("web")  # a withdrawal with nothing of its own asked
    assert node.obj["status"]["disruption"] == {"id": "theirs", "reason": "maintenance"}
    assert node.writes == []


def test_a_lock_group_that_times_out_withdraws_its_request(tmp_path):
    node = Node({"pool": "default"})
    slots = PoolSlots(Leases(), node.get, node.write, tmp_path / "request")
    locks = GroupLocks(slots.locker("lock_group"), wait=lambda s: False, timeout=0, poll=0)
    with pytest.raises(GroupLockError, match="budget of pool default"):
        locks.acquire(["web"])
    assert node.obj["status"] == {}
