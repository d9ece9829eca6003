"""maxUnavailable: one rule for NodePool ``spec.maxUnavailable`` and ConfigSet
``spec.rollout.maxUnavailable``.

A count of at least 1 (an integer, or a string of ASCII digits, which the CRD has always let
through), or "N%" with N from 1 to 100: that share of the nodes concerned, rounded down and
never below 1 (a budget that may change no node would never finish). Zero is refused in every
form (0, "0", "0%"): Kubernetes takes a Deployment's 0 only beside a surge, which a host has
not got, and here it would hold every change for ever without saying so; ``spec.paused``
says that on purpose. The CRD schemas hold the same rule (a pattern for strings, a CEL rule
for integers); this parser is the one for objects stored before them and files read locally.
Digits are ASCII only: ``str.isdigit`` also takes "²", which ``int`` then refuses.
"""

from __future__ import annotations

import math
import re
from typing import Any

_COUNT = re.compile(r"[0-9]+")
_PERCENT = re.compile(r"([0-9]+)%")
# The CRDs' pattern for the string form (RE2, ASCII): the same rule as ``_parse``.
PATTERN = r"^(0*[1-9][0-9]*|0*([1-9][0-9]?|100)%)$"


def _parse(value: Any) -> tuple[int, bool] | str:
    """(the number, whether it is a percentage), or why ``value`` is refused."""
    if isinstance(value, int) and not isinstance(value, bool):
        number, percent = value, False
    elif isinstance(value, str) and _COUNT.fullmatch(value):
        number, percent = int(value), False
    elif isinstance(value, str) and (found := _PERCENT.fullmatch(value)):
        number, percent = int(found[1]), True
    else:
        return f'must be a count or "N%", not {value!r}'
    if number < 1:
        return f"must be at least 1, not {value!r} (spec.paused holds every change)"
    if percent and number > 100:
        return f"must be at most 100%, not {value!r}"
    return number, percent


def problem(value: Any) -> str | None:
    """Why ``value`` is not a maxUnavailable, or None when it is one."""
    parsed = _parse(value)
    return parsed if isinstance(parsed, str) else None


def budget(value: Any, nodes: int) -> int:
    """``value`` as a count of ``nodes``: "N%" rounds down; at least 1. A refused value counts
    as 1 (its parser has reported it; the rollout goes on at the default)."""
    parsed = _parse(value)
    if isinstance(parsed, str):
        return 1
    number, percent = parsed
    return max(1, math.floor(nodes * number / 100) if percent else number)
