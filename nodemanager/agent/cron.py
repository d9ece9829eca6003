"""Five-field cron expressions (minute hour day-of-month month day-of-week) for
``spec.upgrade.schedule``: ``*``, ``*/n``, ``a-b``, ``a-b/n``, lists, names of months and days,
and the ``@hourly``/``@daily``/``@weekly``/``@monthly``/``@yearly`` shorthands. As in cron, when
both day fields are restricted a day matching either one matches."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
_DAYS = "sun mon tue wed thu fri sat".split()
# (name, lowest, highest, names)
_FIELDS: tuple[tuple[str, int, int, list[str]], ...] = (
    ("minute", 0, 59, []),
    ("hour", 0, 23, []),
    ("day of month", 1, 31, []),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)


def _value(text: str, low: int, names: list[str]) -> int:
    word = text.lower()
    if word in names:
        return names.index(word) + (low if names is _MONTHS else 0)
    return int(text)


def _field(text: str, name: str, low: int, high: int, names: list[str]) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if body == "*":
            first, last = low, high
        elif "-" in body:
            a, b = body.split("-", 1)
            first, last = _value(a, low, names), _value(b, low, names)
        else:
            first = _value(body, low, names)
            last = high if step_text else first
        if not (low <= first <= last <= high) or step < 1:
            raise ValueError(f"{name} {part!r} is outside {low}-{high}")
        values.update(range(first, last + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, text: str) -> Cron:
        expr = _ALIASES.get(text.strip(), text.strip())
        parts = expr.split()
        if len(parts) != 5:
            raise ValueError(f"{text!r}: a cron schedule has 5 fields, got {len(parts)}")
        try:
            fields = [_field(p, *spec) for p, spec in zip(parts, _FIELDS, strict=True)]
        except ValueError as e:
            raise ValueError(f"{text!r}: {e}") from None
        weekdays = frozenset(d % 7 for d in fields[4])  # 7 is Sunday too
        minutes, hours, days, months = fields[:4]
        return cls(minutes, hours, days, months, weekdays, parts[2] == "*", parts[4] == "*")

    def matches(self, t: dt.datetime) -> bool:
        """Whether the minute of ``t`` is one the schedule names."""
        day_ok = t.day in self.days
        weekday_ok = (t.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            day = day_ok and weekday_ok
        else:
            day = day_ok or weekday_ok
        return t.minute in self.minutes and t.hour in self.hours and t.month in self.months and day
