"""NCRONTAB, the timer trigger's six-field schedule (``second minute hour day month day-of-week``),
as the local Functions host (``host.py``) evaluates it on the clock the caller drives."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

_MONTHS = {name: index for index, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_DAYS = {name: index for index, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_FIELDS = (("second", 0, 59, {}), ("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day", 1, 31, {}),
           ("month", 1, 12, _MONTHS), ("day-of-week", 0, 6, _DAYS))


def _field_values(text: str, name: str, low: int, high: int, names: Mapping[str, int]) -> frozenset[int]:
    def number(token: str) -> int:
        value = names.get(token.lower()) if not token.isdigit() else int(token)
        if value is None:
            raise ValueError(f"schedule {name} field: {token!r} is not a number")
        if name == "day-of-week" and value == 7:
            value = 0
        if not low <= value <= high:
            raise ValueError(f"schedule {name} field: {value} is outside {low}-{high}")
        return value

    values: set[int] = set()
    for part in text.split(","):
        span, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"schedule {name} field: step {step_text!r} must be at least 1")
        if span == "*":
            first, last = low, high
        elif "-" in span:
            first_text, last_text = span.split("-", 1)
            first, last = number(first_text), number(last_text)
        else:
            first = number(span)
            last = high if step_text else first
        values.update(range(first, last + 1, step))
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class Schedule:
    """A six-field NCRONTAB expression: ``{second} {minute} {hour} {day} {month} {day-of-week}``."""

    expression: str
    fields: tuple[frozenset[int], ...]

    @classmethod
    def parse(cls, expression: str) -> Schedule:
        parts = expression.split()
        if len(parts) != 6:
            raise ValueError(f"schedule {expression!r} must have six fields (second minute hour day month day-of-week)")
        return cls(expression, tuple(_field_values(part, name, low, high, names)
                                     for part, (name, low, high, names) in zip(parts, _FIELDS, strict=True)))

    def _minute_matches(self, moment: datetime) -> bool:
        _, minutes, hours, days, months, weekdays = self.fields
        return (moment.minute in minutes and moment.hour in hours and moment.day in days
                and moment.month in months and (moment.isoweekday() % 7) in weekdays)

    def occurrences(self, after: datetime, until: datetime, limit: int = 1_000_000) -> int:
        """How many occurrences fall in ``(after, until]`` (counted up to ``limit``)."""
        count = 0
        minute = after.replace(second=0, microsecond=0)
        while minute <= until and count < limit:
            if self._minute_matches(minute):
                for second in self.fields[0]:
                    moment = minute + timedelta(seconds=second)
                    if after < moment <= until:
                        count += 1
            minute += timedelta(minutes=1)
        return count
