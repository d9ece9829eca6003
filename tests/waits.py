"""Waiting in tests: for a condition, never a fixed time (cluster, integration and unit tests)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
# The most a limit stretches on a loaded machine (seven suites on two cores: load 15).
MOST_STRETCH = 8.0


def stretch() -> float:
    """How much longer than on an idle machine a wait may take now: the 1-minute load per
    core, at least 1. A wait ends on its event, so a longer limit costs nothing when it comes;
    a limit measured on a quiet machine is what failed the full runs (issue 35)."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return min(MOST_STRETCH, max(1.0, load / (os.cpu_count() or 1)))


def eventually(
    check: Callable[[], T], timeout: float = 60, interval: float = 0.1, message: str = ""
) -> T:
    """Call ``check`` until it returns a truthy value without raising AssertionError; return it.

    ``timeout`` is the limit on an idle machine; it stretches with the machine's load
    (``stretch``, looked at again when the limit is reached). The error names what was
    awaited (``message``, else the check) and how long it waited."""
    started = time.monotonic()
    last: BaseException | None = None
    while True:
        try:
            value = check()
            if value:
                return value
        except AssertionError as e:
            last = e
        waited = time.monotonic() - started
        if waited > timeout and waited > timeout * stretch():
            what = message or getattr(check, "__qualname__", repr(check))
            raise AssertionError(
                f"not true within {waited:.0f} s (limit {timeout:g} s, stretched by load): {what}"
            ) from last
        time.sleep(interval)
