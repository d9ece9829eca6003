"""The one place a reconcile's outcome becomes writes, Events and that object's retry schedule
(controller-runtime's ``reconcileHandler``), over an injected ``Fleet`` and clock so it is
unit-tested with fakes; manager.py adds metrics and wake-ups around it.

Memory follows the API: ``done`` is told which writes the server took (``Applied.done``)
whether or not a later one failed, and only those; a failed write backs that object off
(retry.py) and is planned again from the cache when its turn comes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nodemanager.controller import effects
from nodemanager.controller.effects import Applied, Fleet, Outcome
from nodemanager.controller.events import Note
from nodemanager.controller.retry import Gate

log = logging.getLogger(__name__)
Record = Callable[[Mapping[str, Any], Note], None]
Done = Callable[[Outcome, Applied], None]


@dataclass(frozen=True)
class Handled:
    outcome: Outcome
    result: Applied


def handle(
    key: str,
    version: str,
    reconcile: Outcome | Callable[[], Outcome],
    fleet: Fleet,
    gate: Gate,
    now: float,
    record: Record | None = None,
    done: Done | None = None,
) -> Handled | None:
    """Reconcile ``key`` unless it backs off, perform its writes, tell ``done`` which the
    server took, and schedule its retry; None when it was not tried or the reconcile raised.
    ``version`` is the object's resourceVersion: a Permanent error waits until it changes."""
    if not gate.ready(key, version, now):
        return None  # backing off (or a permanent error until the object changes)
    try:
        outcome = reconcile if isinstance(reconcile, Outcome) else reconcile()
    except Exception as e:
        # A bug or data nobody expected: the other objects go on, this one backs off.
        log.exception("%s: reconcile failed", key)
        gate.failed(key, version, e, now)
        return None
    result = effects.apply(outcome, fleet, record)
    if done is not None:
        done(outcome, result)
    if result.error is None:
        gate.succeeded(key)
        return Handled(outcome, result)
    delay = gate.failed(key, version, result.error, now)
    failed = outcome.effects[len(result.done) + len(result.skipped)]
    when = "when it changes" if delay == float("inf") else f"in {delay:.1f} s"
    log.warning("%s: %s failed (retry %s): %s", key, failed.what, when, result.error)
    return Handled(outcome, result)
