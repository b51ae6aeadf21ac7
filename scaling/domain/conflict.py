"""Never fight: another controller on the same plan makes the target hold, not contest.

Two controllers on one plan undo each other forever: Azure Monitor autoscale resets a capacity
outside its profile on its next run, and reconciliation (adopt or revert) answers. So:

- an **enabled autoscale setting** whose target is the plan (collect lists the settings of the
  plan's resource group every minute and puts the names in the sample) holds the target while
  it exists: level-triggered, the first sample without it lets the target act again;
- without one, a plan resized from outside **more than** ``limit`` times within ``window`` (3
  in an hour by default) is another controller at work: the target holds until an operator
  runs ``resume`` (the changes seen are kept to say when and to what).

While held, the decision log says what the target would have done, nothing is sent to
``scale``, and the desired capacity follows the plan, so that acting again starts from what the
plan has instead of fighting over it. Pure values; the evaluate service acts on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scaling.domain.knobs import SETTING
from scaling.domain.samples import format_time, parse_time

#: Reason codes of the decision-log rows of a held target.
AUTOSCALE_SETTING = "conflict:autoscale-setting"
EXTERNAL_WRITER = "conflict:external-writer"
CONFLICT_PREFIX = "conflict:"
DEFAULT_EXTERNAL_CHANGES_LIMIT = int(SETTING["EXTERNAL_CHANGES_PER_HOUR"].default)
DEFAULT_EXTERNAL_CHANGES_WINDOW = timedelta(hours=1)
#: Enough changes kept to show the pattern; the count that matters is at most ``limit + 1``.
MAX_CHANGES_KEPT = 16


@dataclass(frozen=True, slots=True)
class ExternalChange:
    """The plan seen at ``observed`` by the autoscaler at ``at``, moved there by someone else."""

    at: datetime
    observed: int
    desired: int

    def describe(self) -> str:
        return f"{format_time(self.at)} {self.desired}->{self.observed}"

    def to_dict(self) -> dict[str, Any]:
        return {"at": format_time(self.at), "observed": self.observed, "desired": self.desired}

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> ExternalChange:
        return cls(parse_time(document["at"], "external_changes.at"), int(document["observed"]), int(document["desired"]))


@dataclass(frozen=True, slots=True)
class ExternalWriterHold:
    """The target holds because someone else keeps resizing its plan; ``resume`` ends it."""

    since: datetime
    changes: tuple[ExternalChange, ...]

    def describe(self) -> str:
        seen = ", ".join(change.describe() for change in self.changes)
        return (f"{EXTERNAL_WRITER}: the plan was resized from outside {len(self.changes)} times within the hour "
                f"({seen}); another controller is at work. Holding since {format_time(self.since)}: find it and "
                "disable it, then run 'python -m scaling resume --target NAME'")

    def to_dict(self) -> dict[str, Any]:
        return {"since": format_time(self.since), "changes": [change.to_dict() for change in self.changes]}

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> ExternalWriterHold:
        return cls(parse_time(document["since"], "external_writer.since"),
                   tuple(ExternalChange.from_dict(item) for item in document.get("changes") or ())[-MAX_CHANGES_KEPT:])


def recent_changes(changes: tuple[ExternalChange, ...], change: ExternalChange | None, now: datetime,
                   window: timedelta = DEFAULT_EXTERNAL_CHANGES_WINDOW) -> tuple[ExternalChange, ...]:
    """The external changes within ``window`` before ``now``, ``change`` added (if any)."""
    kept = tuple(item for item in changes if now - item.at < window)
    if change is not None:
        kept = (*kept, change)
    return kept[-MAX_CHANGES_KEPT:]


def external_writer(changes: tuple[ExternalChange, ...], now: datetime,
                    limit: int = DEFAULT_EXTERNAL_CHANGES_LIMIT) -> ExternalWriterHold | None:
    """A hold when more than ``limit`` changes are in ``changes`` (already limited to the window);
    ``limit`` 0 turns the check off."""
    if limit <= 0 or len(changes) <= limit:
        return None
    return ExternalWriterHold(now, changes)


@dataclass(frozen=True, slots=True)
class ConflictHold:
    """Why a target holds now (a ``pause.Hold`` for the engine): ``code`` and the text to log."""

    code: str
    text: str

    def describe(self) -> str:
        return self.text


def autoscale_setting_reason(names: tuple[str, ...]) -> str:
    """The decision log's text for a plan driven by enabled Azure Monitor autoscale settings."""
    listed = ", ".join(names)
    return (f"{AUTOSCALE_SETTING} {listed}: an enabled Azure Monitor autoscale setting targets this plan; "
            "the autoscaler holds while it exists (disable or delete it to hand the plan over)")
