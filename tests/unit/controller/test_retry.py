"""Per-object retries: backoff for temporary errors, permanent ones wait for a change."""

from __future__ import annotations

from nodemanager.controller.retry import Gate
from nodemanager.kube.errors import Forbidden, Temporary


def test_temporary_errors_back_off_exponentially_per_object():
    gate = Gate(base=1.0, cap=8.0)
    delays = [gate.failed("web", "1", Temporary("timeout"), 0.0) for _ in range(5)]
    assert all(a <= b * 2 for a, b in zip(delays, delays[1:], strict=False))
    assert 4.0 <= delays[-1] <= 8.0  # capped
    assert not gate.ready("web", "1", 0.0) and gate.ready("db", "1", 0.0)
    assert gate.ready("web", "1", 100.0) and gate.waiting()
    gate.succeeded("web")
    assert gate.ready("web", "1", 0.0) and not gate.waiting()


def test_a_permanent_error_waits_until_the_object_changes():
    gate = Gate()
    assert gate.failed("web", "7", Forbidden("denied"), 0.0) == float("inf")
    assert not gate.ready("web", "7", 1e9)
    assert gate.ready("web", "8", 0.0)  # a new resourceVersion: tried at once
