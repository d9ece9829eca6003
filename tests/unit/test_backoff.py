"""Exponential backoff: doubles up to the cap, jittered in the upper half, reset starts over."""

import pytest

from nodemanager.backoff import Backoff


def test_delays_double_up_to_the_cap_and_reset_starts_over():
    top = Backoff(5, 60, rand=lambda low, high: high)
    assert [top.next() for _ in range(6)] == [5, 10, 20, 40, 60, 60]
    top.reset()
    assert top.next() == 5


def test_each_delay_is_drawn_from_the_upper_half():
    seen = []
    b = Backoff(4, 100, rand=lambda low, high: seen.append((low, high)) or low)
    b.next(), b.next()
    assert seen == [(2, 4), (4, 8)]
    real = Backoff(1, 1000)
    assert all(2**i / 2 <= real.next() <= 2**i for i in range(8))


def test_many_failures_stay_at_the_cap():
    b = Backoff(1, 300, rand=lambda low, high: high)
    for _ in range(2000):
        delay = b.next()
    assert delay == 300


def test_nonsense_bounds_are_refused():
    with pytest.raises(ValueError):
        Backoff(0, 10)
