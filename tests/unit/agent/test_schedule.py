"""The agent's schedule (agent/schedule.py): when the loop wakes and whether a reconcile checks
everything, driven with a clock of plain numbers."""

from __future__ import annotations

from nodemanager.agent.schedule import Schedule


def ran(s: Schedule, at: float, *, full: bool, done: bool = True, requeue=None, period=60.0):
    s.ran(at, at, full=full, done=done, requeue=requeue, period=period, jitter=1.0)


def test_the_first_reconcile_checks_everything_at_once_then_the_drift_check_waits_its_period():
    s = Schedule.start(100.0, period=60.0, peer_min_interval=5.0)
    assert s.timeout(100.0) == 0.0 and s.wake(100.0, False, False) is True
    ran(s, 100.0, full=True)
    assert s.timeout(100.0) == 60.0
    assert s.wake(130.0, False, False) is False  # a change: only what changed
    ran(s, 130.0, full=False)
    assert s.timeout(130.0) == 30.0 and s.wake(160.0, False, False) is True


def test_jitter_spreads_the_drift_check_and_a_period_of_zero_never_checks():
    s = Schedule.start(0.0, period=60.0, peer_min_interval=5.0)
    s.ran(0.0, 0.0, full=True, done=True, requeue=None, period=60.0, jitter=1.1)
    assert s.timeout(0.0) == 66.0
    s = Schedule.start(0.0, period=0.0, peer_min_interval=5.0)
    s.wake(0.0, True, False)
    ran(s, 0.0, full=True, period=0.0)
    assert s.timeout(0.0) is None  # only a change wakes it


def test_a_changed_period_counts_from_the_last_full_check():
    s = Schedule.start(0.0, period=1800.0, peer_min_interval=5.0)
    ran(s, 0.0, full=True, period=1800.0)
    s.set_period(2.0)  # spec.reconcilePeriod: 2s
    assert s.timeout(1.0) == 1.0


def test_other_nodes_changes_are_held_off_then_run_once():
    s = Schedule.start(0.0, period=60.0, peer_min_interval=5.0)
    assert s.wake(0.0, True, False) is True
    ran(s, 0.0, full=True)
    assert s.wake(1.0, False, True) is None  # peers only, within 5 s of the last reconcile
    assert s.timeout(1.0) == 4.0  # the hold-off's end wakes it
    assert s.wake(5.0, False, True) is False
    ran(s, 5.0, full=False)
    assert s.timeout(5.0) == 55.0  # nothing pending any more
    assert s.wake(6.0, False, False) is False  # the own node or a ConfigSet: no hold-off


def test_a_requeue_wakes_it_and_waiting_for_the_caches_suspends_the_drift_check():
    s = Schedule.start(0.0, period=60.0, peer_min_interval=5.0)
    s.wake(0.0, True, False)
    ran(s, 0.0, full=True, requeue=2.0)
    assert s.timeout(0.0) == 2.0
    assert s.wake(2.0, False, True) is False  # requeued: peers are not held off either
    ran(s, 2.0, full=False, done=False)  # the caches are not synced yet
    assert s.timeout(3.0) == 0.0  # the requeue already passed: only it stays
    s.requeue_at = None
    assert s.timeout(3.0) is None  # no drift deadline until the caches mark dirty
    assert s.peers_due == 2.0  # the peers' first list is awaited: no hold-off after it
