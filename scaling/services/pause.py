"""The pause use case: an operator pauses, pins or resumes a target (``python -m scaling pause`` /
``resume``).

The pause lives in the target's state entity and is written with the entity's ETag, like every
evaluation, so nothing is lost when writers meet: an evaluation that wrote first makes this
write re-read and apply the pause again, and an evaluation that comes second re-reads and sees
the pause. Two operators at once: the one that writes second finds a pause (or a resume) it did
not see when it started, and gets a ``PauseConflict`` naming it instead of overwriting it. The
command writes a decision-log row in the same transaction, so the log says who paused and why.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from scaling.domain.conflict import ExternalWriterHold
from scaling.domain.decisions import HOLD, decision_id_for
from scaling.domain.pause import RESUMED, Pause
from scaling.storage.base import EvaluateStore
from scaling.storage.records import HOLD_FIELDS, DecisionRecord, StoredState, utc_now
from scaling.storage.unit_of_work import Write, commit_state

logger = logging.getLogger(__name__)


class PauseConflict(Exception):
    """Another operator paused or resumed the target meanwhile; nothing was written."""


@dataclass(frozen=True, slots=True)
class UnreadableHold:
    """A stored pause or external-writer hold that could not be read (``StoredState.unreadable``):
    evaluate treats it as ended, and ``resume`` clears it."""

    errors: tuple[str, ...]

    @classmethod
    def of(cls, stored: StoredState) -> UnreadableHold | None:
        errors = tuple(error for error in stored.unreadable if error.split(":", 1)[0] in HOLD_FIELDS)
        return cls(errors) if errors else None

    def describe(self) -> str:
        return "unreadable: " + "; ".join(self.errors)


class PauseService:
    """Pauses and resumes targets in ``store`` (Table storage or memory)."""

    def __init__(self, store: EvaluateStore, *, clock: Callable[[], datetime] = utc_now, max_attempts: int = 10) -> None:
        self.store = store
        self.clock = clock
        self.max_attempts = max_attempts

    def status(self, target: str) -> Pause | None:
        """The target's pause, if one is in force."""
        pause = self.store.load_state(target).pause
        return pause if pause is not None and pause.active(self.clock()) else None

    def pause(self, target: str, *, reason: str, requested_by: str, until: datetime,
              pinned_at: int | None = None) -> Pause:
        """Pause (or pin at ``pinned_at``) ``target`` until ``until``; returns the stored pause."""
        now = self.clock()
        pause = Pause(uuid.uuid4().hex[:16], reason, requested_by, now, until, pinned_at)
        record = _row(target, pause.pause_id, now, pause.code, pause.describe(), pinned_at)
        self._write(target, lambda stored: replace(stored, pause=pause), record)
        logger.warning("pause %s: %s", target, pause.describe())
        return pause

    def resume(self, target: str, *, requested_by: str) -> Pause | ExternalWriterHold | UnreadableHold | None:
        """End ``target``'s pause now, and a hold for another controller resizing its plan
        (``domain/conflict.py``: the operator has dealt with it), and clear either when the
        stored one cannot be read; returns the pause ended, else the hold ended, else what could
        not be read (``None`` when there was none of them)."""
        now = self.clock()
        stored = self.store.load_state(target)
        ended = stored.pause if stored.pause is not None and stored.pause.active(now) else None
        writer = stored.external_writer
        unreadable = UnreadableHold.of(stored)
        if stored.pause is None and writer is None and unreadable is None:
            return None
        was = [item.describe() for item in (ended, writer, unreadable) if item is not None]
        text = f"resumed by {requested_by}" + (f" (was {'; '.join(was)})" if was else "")
        held_id = stored.pause.pause_id if stored.pause is not None else \
            f"writer|{writer.since.isoformat()}" if writer is not None else f"unreadable|{stored.etag}"
        record = _row(target, f"resume|{held_id}", now, RESUMED, text, None)
        self._write(target, lambda fresh: replace(fresh, pause=None, external_writer=None, external_changes=(),
                                                  unreadable=()), record, first=stored)
        logger.warning("resume %s: %s", target, text)
        return ended if ended is not None else writer if writer is not None else unreadable

    def _live_id(self, stored: StoredState) -> str | None:
        """The id of the pause in force (an expired one an evaluation may clear any time counts as none)."""
        pause = stored.pause
        return pause.pause_id if pause is not None and pause.active(self.clock()) else None

    def _write(self, target: str, change: Callable[[StoredState], StoredState], record: DecisionRecord,
               first: StoredState | None = None) -> StoredState:
        stored = first or self.store.load_state(target)
        seen = self._live_id(stored)

        def done(current: StoredState, attempt: int) -> None:
            # An evaluation that wrote meanwhile (or sent the pin) is kept and the change applied
            # again; another operator's pause or resume is theirs to keep.
            if self._live_id(current) != seen:
                other = current.pause.describe() if current.pause else "resumed"
                raise PauseConflict(f"{target} changed meanwhile ({other}); nothing written: "
                                    "check `python -m scaling decisions` and run the command again")

        def decide(current: StoredState) -> Write[None]:
            return Write(replace(change(current), updated_at=self.clock()), (record,), None)

        # Our own write whose reply was lost is recognised by its writer token, not taken for
        # another operator's pause.
        return commit_state(self.store, target, decide, done=done, first=stored, max_attempts=self.max_attempts,
                            what=f"pause {target}").stored


def _row(target: str, row_id: str, now: datetime, code: str, text: str, pinned_at: int | None) -> DecisionRecord:
    """The decision-log row of an operator's pause, pin or resume."""
    metrics = {"pinned_at": pinned_at} if pinned_at is not None else {}
    return DecisionRecord(target, decision_id_for(target, f"operator|{row_id}"), now, "operator", acts=False,
                          direction=HOLD, reason_code=code,
                          reasons=(text,), metrics=metrics)
