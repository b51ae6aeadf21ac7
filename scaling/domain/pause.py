"""Pause and pin: an operator stops a target from acting, for a while.

Paused, a target keeps collecting and evaluating and the decision log says what it would have
done, but nothing is sent to ``scale``. Pinned (``pinned_at``), the count is requested once
through the normal idempotent scale path and then held. Every pause ends by itself
(``until``): a forgotten one cannot keep a target frozen, and its end is logged as a decision.
Pure values and checks; storing them (in the state entity, with its ETag) is the storage
layer's, acting on them the evaluate service's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from scaling.domain.samples import format_time, parse_time

DEFAULT_PAUSE = timedelta(hours=4)
MAX_PAUSE = timedelta(days=7)
#: Reason codes of the decision-log rows pauses write.
PAUSED = "paused"
PINNED = "pinned"
PAUSE_EXPIRED = "pause_expired"
RESUMED = "resumed"
#: A field of the stored state could not be read (an out-of-band edit, an older writer).
STATE_UNREADABLE = "state_unreadable"
#: What each unreadable field counts as: the documented rule (docs/reliability.md).
_UNREADABLE_RULES = {
    "pause": "the pause counts as expired: the autoscaler acts again",
    "external_writer": "the external-writer hold counts as ended",
    "external_changes": "no external change is counted in the last hour",
    "desired": "no desired capacity: the next decision sets one",
    "outbox": "no action is kept for a redelivery to re-send",
    "state": "the target starts afresh (capacity and learned throughput unknown)",
    "document": "the target starts afresh (capacity and learned throughput unknown)",
}

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
#: Digits a duration's part may have: far more than 7 days in any unit, few enough that the number
#: stays an ordinary integer (a 5000-digit part would otherwise reach Python's conversion limit).
_MAX_DURATION_DIGITS = 12


class Hold(Protocol):
    """What makes the engine hold and say what it would have done: a pause, or a conflict with
    another controller (``domain/conflict.py``)."""

    @property
    def code(self) -> str: ...

    def describe(self) -> str: ...


class PauseError(ValueError):
    """A pause that cannot be: no expiry in the future, or one too far away."""


@dataclass(frozen=True, slots=True)
class Pause:
    """A pause (or pin) of one target: who asked and why, from when, until when.

    ``pin_requested`` turns true once the pinned count was sent through the outbox, so that it is
    requested once and then held."""

    pause_id: str
    reason: str
    requested_by: str
    requested_at: datetime
    until: datetime
    pinned_at: int | None = None
    pin_requested: bool = False
    logged_would: int | None = None

    def active(self, now: datetime) -> bool:
        return now < self.until

    @property
    def code(self) -> str:
        return PINNED if self.pinned_at is not None else PAUSED

    def describe(self) -> str:
        what = f"pinned at {self.pinned_at}" if self.pinned_at is not None else "paused"
        return f"{what} by {self.requested_by} until {format_time(self.until)}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"pause_id": self.pause_id, "reason": self.reason, "requested_by": self.requested_by,
                "requested_at": format_time(self.requested_at), "until": format_time(self.until),
                "pinned_at": self.pinned_at, "pin_requested": self.pin_requested, "logged_would": self.logged_would}

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> Pause:
        return cls(pause_id=str(document["pause_id"]), reason=str(document.get("reason") or ""),
                   requested_by=str(document.get("requested_by") or "?"),
                   requested_at=parse_time(document["requested_at"], "pause.requested_at"),
                   until=parse_time(document["until"], "pause.until"),
                   pinned_at=None if document.get("pinned_at") is None else int(document["pinned_at"]),
                   pin_requested=bool(document.get("pin_requested")),
                   logged_would=None if document.get("logged_would") is None else int(document["logged_would"]))


def parse_duration(text: str) -> timedelta:
    """``90m``, ``4h``, ``1h30m``, ``2d``: a duration (``PauseError`` when unreadable)."""
    shown = f"{text[:40]!r}{'...' if len(text) > 40 else ''}"
    match = _DURATION.match(text.strip().lower()) if len(text) <= 4 * (_MAX_DURATION_DIGITS + 1) else None
    if not text.strip() or match is None or not any(match.groups()):
        raise PauseError(f"--for {shown} is not a duration (e.g. 90m, 4h, 1h30m, 2d)")
    if any(part is not None and len(part) > _MAX_DURATION_DIGITS for part in match.groups()):
        raise PauseError(f"--for {shown}: a pause lasts at most {MAX_PAUSE.days} days")
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    try:
        return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    except OverflowError:
        raise PauseError(f"--for {shown}: a pause lasts at most {MAX_PAUSE.days} days") from None


def pause_until(now: datetime, *, until: str | datetime | None = None, duration: timedelta | None = None) -> datetime:
    """When a pause asked for at ``now`` ends: ``until``, or ``now + duration``, or the default
    (4 hours); never in the past, never more than 7 days away."""
    if until is not None and duration is not None:
        raise PauseError("give --until or --for, not both")
    if isinstance(until, str):
        try:
            until = parse_time(until, "--until")
        except ValueError as error:
            raise PauseError(f"{error} (ISO 8601 with an offset, e.g. 2026-11-23T18:00:00+01:00)") from None
    if duration is not None and duration > MAX_PAUSE:  # checked before adding: now + 10**9 days overflows
        raise PauseError(f"a pause lasts at most {MAX_PAUSE.days} days (asked for {duration.days} days)")
    end = until if until is not None else now + (duration if duration is not None else DEFAULT_PAUSE)
    if end <= now:
        raise PauseError(f"the pause must end in the future (asked to end at {format_time(end)}, now {format_time(now)})")
    if end - now > MAX_PAUSE:
        raise PauseError(f"a pause lasts at most {MAX_PAUSE.days} days (asked to end at {format_time(end)})")
    return end


def unreadable_reasons(errors: tuple[str, ...]) -> tuple[str, ...]:
    """The decision-log reasons for fields of the stored state that could not be read (each
    ``"field: error"``): what was wrong and what it counts as instead."""
    reasons = []
    for error in errors:
        field = error.split(":", 1)[0]
        rule = _UNREADABLE_RULES.get(field, "it reads as unset")
        reasons.append(f"the stored {field} cannot be read ({error}); {rule}")
    return tuple(reasons)


def paused_reason(pause: Hold, capacity: int, wanted: int) -> str:
    """What the decision log says while paused: ``paused: would scale 8 -> 11``."""
    return f"{pause.code}: would scale {capacity} -> {wanted}"
