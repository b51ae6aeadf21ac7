"""The policy model of schedule profiles: per target, an ordered list of time windows (a weekly
recurrence in an IANA time zone, or a fixed date range) that override the target's instance
bounds while they hold. What a profile *does* at a moment is scaling/domain/profiles.py; this
module is only the document's shape and its checks (errors name the field), one part of the
model beside policy_rules.py and policy_sources.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AwareDatetime, BeforeValidator, Field, model_validator

from scaling.domain.policy_fields import (
    DOCUMENT_CONFIG,
    MAX_INSTANCES,
    NUMBER,
    Name,
    Text,
    document_keys,
    invalid,
)

DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
Day = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
#: Profiles per target: a week of distinct windows and a few fixed dates.
MAX_PROFILES = 20

TimeOfDay = Annotated[str, Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$",
                                 description="local time of day, HH:MM (24-hour)")]


def _iso_text(value: Any) -> Any:
    """Fixed dates are ISO 8601 text with an offset; a bare number would be read as epoch seconds."""
    if not isinstance(value, str | datetime):
        raise invalid(None, "must be an ISO 8601 time with an offset (e.g. 2026-12-24T00:00:00+01:00), got {0}",
                      repr(value))
    return value


IsoTime = Annotated[AwareDatetime, BeforeValidator(_iso_text)]
ProfileCapacity = Annotated[int | None, Field(ge=1, le=MAX_INSTANCES), NUMBER]


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (``ValueError`` when unknown)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ValueError(f"unknown time zone {name!r}") from error


def clock_time(text: str) -> time:
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))


@dataclass(frozen=True, slots=True)
class Recurrence:
    """A weekly window: on each of ``days``, from ``start`` to ``end`` local time in ``time_zone``.
    An ``end`` earlier than ``start`` crosses midnight (the day is the day the window opens)."""

    __pydantic_config__ = DOCUMENT_CONFIG

    days: Annotated[tuple[Day, ...], Field(max_length=7, description="the days the window opens (monday ... sunday)")]
    start: Annotated[TimeOfDay, Field(description="local time the window opens, HH:MM")]
    end: Annotated[TimeOfDay, Field(description="local time the window closes, HH:MM (earlier than start: the next day)")]
    time_zone: Annotated[Text, Field(description="an IANA time zone, e.g. Europe/Berlin (daylight saving followed)")]

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> Recurrence:
        if not self.days:
            raise invalid("days", "must list at least one day (monday ... sunday)")
        if len(set(self.days)) != len(self.days):
            raise invalid("days", "lists a day twice")
        if self.start == self.end:
            raise invalid("end", "must differ from {0} (a window of no time, or of a whole day, is ambiguous)", "start")
        try:
            zone(self.time_zone)
        except ValueError:
            raise invalid("time_zone", "is not a known IANA time zone: {0}", repr(self.time_zone)) from None
        return self


@dataclass(frozen=True, slots=True)
class FixedWindow:
    """A one-off window between two moments (ISO 8601 with an offset), e.g. a launch or a holiday."""

    __pydantic_config__ = DOCUMENT_CONFIG

    start: Annotated[IsoTime, Field(description="when the window opens, ISO 8601 with an offset")]
    end: Annotated[IsoTime, Field(description="when it closes, ISO 8601 with an offset (after start)")]

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> FixedWindow:
        if self.end <= self.start:
            raise invalid("end", "must be after {0}", "start")
        return self


@dataclass(frozen=True, slots=True)
class Profile:
    """Instance bounds that apply while a window holds; the first profile that holds wins.

    Its ``min_instances`` is asked for one provisioning delay before the window opens, so that
    the instances serve when it opens; at its end the count is let go through the normal
    scale-in logic."""

    __pydantic_config__ = DOCUMENT_CONFIG

    name: Annotated[Name, Field(description="names the profile in decisions (reason profile:NAME)")]
    min_instances: Annotated[ProfileCapacity, Field(description="at least this many instances while it holds "
                                                                "(default: the target's bounds)")] = None
    max_instances: Annotated[ProfileCapacity, Field(description="at most this many instances while it holds "
                                                                "(default: the target's bounds)")] = None
    recurrence: Annotated[Recurrence | None, Field(description="a weekly window (or fixed)")] = None
    fixed: Annotated[FixedWindow | None, Field(description="a one-off window (or recurrence)")] = None

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        if (self.recurrence is None) == (self.fixed is None):
            raise invalid("recurrence", "or {0} is required, not both", "fixed")
        if self.min_instances is None and self.max_instances is None:
            raise invalid("min_instances", "or {0} is required (a profile changes the bounds)", "max_instances")
        if self.min_instances is not None and self.max_instances is not None and self.min_instances > self.max_instances:
            raise invalid("min_instances", "must not be above {0}", "max_instances")
        return self
