"""Exponential backoff with jitter, capped, reset by a change.

Used for retrying a failed apply (agent/reconcile.py) and available to every retry loop: the
delay doubles from ``base`` up to ``cap``; each delay is drawn from its upper half so agents that
failed together do not retry in lockstep. ``reset`` starts over (success, or new inputs: a
changed ConfigSet deserves a prompt try, not the tail of the old schedule).
"""

from __future__ import annotations

import random
from collections.abc import Callable


class Backoff:
    def __init__(
        self,
        base: float = 5.0,
        cap: float = 300.0,
        *,
        rand: Callable[[float, float], float] = random.uniform,
    ):
        if base <= 0 or cap < base:
            raise ValueError(f"backoff needs 0 < base <= cap, got base={base}, cap={cap}")
        self.base, self.cap, self.attempt = base, cap, 0
        self._rand = rand

    def next(self) -> float:
        """The delay before the next attempt; each call counts one failure."""
        delay = min(self.cap, self.base * 2.0 ** min(self.attempt, 62))
        self.attempt += 1
        return self._rand(delay / 2, delay)

    def reset(self) -> None:
        self.attempt = 0
