"""Dead letters: nothing ends in a poison queue unrecorded, and an operator can replay a fix.

- ``record_poison``: a message the Functions host moved to ``metrics-poison`` or
  ``actions-poison`` (``maxDequeueCount`` failed deliveries, typically a storage outage) is
  written to the dead-letter table with its body, its dequeue count and the last error this
  worker saw for it, then acknowledged, so the poison queues stay empty. Recording is
  create-if-absent on the message, so a redelivered poison message is kept once.
- ``letters``: the dead-letter table, oldest first, optionally for one target.
- ``replay``: put a letter's body back on the queue its function reads (after a fix of the
  policy or of the sender) and mark the letter as replayed; the message then goes through the
  normal, idempotent path again.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from scaling.domain.telemetry import DEAD_LETTERS
from scaling.services.telemetry import NO_TELEMETRY, Telemetry
from scaling.settings import ACTIONS_QUEUE, METRICS_QUEUE
from scaling.storage.records import DeadLetter, DecisionRecord, StoredState, body_text, parse_action, target_of, utc_now

logger = logging.getLogger(__name__)

#: The queue each function reads: where a replayed letter goes.
QUEUE_OF_FUNCTION = {"evaluate": METRICS_QUEUE, "scale": ACTIONS_QUEUE}
POISON = "poison"
#: Outcomes a poisoned action's decision row gets (docs/reliability.md, "After a storage outage").
SUPERSEDED = "superseded"
POISONED = "dead_lettered"


class DeadLetterStore(Protocol):
    def dead_letter(self, letter: DeadLetter) -> bool: ...

    def dead_letters_for(self, function: str | None = None) -> list[DeadLetter]: ...

    def mark_replayed(self, letter: DeadLetter, at: datetime) -> None: ...

    def load_state(self, target: str) -> StoredState: ...

    def decision_row(self, target: str, decided_at: datetime, decision_id: str) -> DecisionRecord | None: ...

    def record_outcome(self, target: str, decided_at: datetime, decision_id: str, outcome: str,
                       detail: str | None, at: datetime) -> bool: ...


class LastErrors:
    """The last error each message body met in this worker (bounded), so that the poison handler
    can say why a message was poisoned; the host's poison copy carries no error of its own."""

    def __init__(self, size: int = 1024) -> None:
        self._errors: OrderedDict[str, str] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    @staticmethod
    def _key(body: str | bytes) -> str:
        data = body if isinstance(body, bytes) else body.encode("utf-8", "backslashreplace")
        return hashlib.sha256(data).hexdigest()

    def remember(self, body: str | bytes, error: BaseException) -> None:
        with self._lock:
            key = self._key(body)
            self._errors[key] = f"{type(error).__name__}: {error}"[:2000]
            self._errors.move_to_end(key)
            while len(self._errors) > self._size:
                self._errors.popitem(last=False)

    def get(self, body: str | bytes) -> str | None:
        with self._lock:
            return self._errors.get(self._key(body))


#: One per worker process, shared by the queue blueprints and the poison handlers.
LAST_ERRORS = LastErrors()


@dataclass(frozen=True, slots=True)
class PoisonOutcome:
    """``recorded`` (new row) or ``already_recorded`` (a redelivery of a recorded poison message)."""

    status: str
    letter: DeadLetter


class DeadLetterService:
    def __init__(self, store: DeadLetterStore, *, clock: Callable[[], datetime] = utc_now,
                 last_errors: LastErrors = LAST_ERRORS, telemetry: Telemetry = NO_TELEMETRY) -> None:
        self.store = store
        self.telemetry = telemetry
        self.clock = clock
        self.last_errors = last_errors

    def record_poison(self, function: str, body: str | bytes, *, dequeue_count: int, message_id: str | None,
                      max_dequeue_count: int | None = None) -> PoisonOutcome:
        text = body_text(body)
        last_error = self.last_errors.get(body)
        queue = QUEUE_OF_FUNCTION.get(function, function)
        tries = f"after {max_dequeue_count} failed deliveries" if max_dequeue_count else "after its failed deliveries"
        error = f"moved to {queue}-poison {tries}; last error: {last_error or 'not seen by this worker'}"
        letter = DeadLetter(function, text, error, self.clock(), dequeue_count, message_id, target=target_of(text),
                            origin=POISON)
        created = self.store.dead_letter(letter)
        if created:
            self.telemetry.record(DEAD_LETTERS, 1, {"function": function})
        logger.error("%s-poison: message %s recorded as dead letter %s: %s", queue, message_id or "?",
                     letter.letter_id, error)
        if function == "scale":
            self._account_action(text, letter)
        return PoisonOutcome("recorded" if created else "already_recorded", letter)

    def _account_action(self, text: str, letter: DeadLetter) -> None:
        """Say on a poisoned action's decision row what became of it, so that the decision log
        accounts for every action after an outage: superseded by a newer decision, or dead-lettered
        with its error and re-issued by reconciliation once the grace has passed (the desired
        capacity stays in the state). A row that already has an outcome (scale got that far) keeps it."""
        try:
            action = parse_action(text)
            stored = self.store.load_state(action.target)
            row = self.store.decision_row(action.target, action.decided_at, action.decision_id)
            row_outcome = row.outcome if row is not None else None
        except Exception as error:  # the letter is recorded; accounting is best effort
            logger.warning("scale-poison: could not account dead letter %s on its decision row: %s", letter.letter_id, error)
            return
        if row_outcome is not None:
            return
        newest = stored.latest_decision_id
        if newest is not None and newest.startswith(f"{action.decision_id}-r"):
            outcome, detail = POISONED, f"dead-lettered ({letter.error}); reconciliation re-issued it as {newest}"
        elif newest is not None and newest != action.decision_id:
            outcome, detail = SUPERSEDED, f"superseded by decision {newest}; the action was dead-lettered ({letter.error})"
        elif stored.desired is not None and stored.desired.capacity == action.target_capacity:
            outcome, detail = POISONED, (f"dead-lettered ({letter.error}); its capacity {action.target_capacity} stays "
                                         "desired: reconciliation re-issues it after the grace")
        else:
            outcome, detail = POISONED, f"dead-lettered ({letter.error})"
        self.store.record_outcome(action.target, action.decided_at, action.decision_id, outcome, detail[:1000], self.clock())

    def letters(self, target: str | None = None, function: str | None = None) -> list[DeadLetter]:
        letters = self.store.dead_letters_for(function)
        return [letter for letter in letters if target is None or letter.target == target]

    def replay(self, letter_id: str, send: Callable[[str, str], None]) -> DeadLetter:
        """Send the letter whose id starts with ``letter_id`` to its function's queue
        (``send(queue, body)``) and mark it replayed. ``KeyError`` when no single letter matches."""
        matches = [letter for letter in self.store.dead_letters_for() if letter.letter_id.startswith(letter_id)]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} dead letters have an id starting with {letter_id!r}; give one exactly")
        letter = matches[0]
        queue = QUEUE_OF_FUNCTION.get(letter.function)
        if queue is None:
            raise KeyError(f"dead letter {letter.letter_id} belongs to {letter.function!r}, which reads no queue")
        send(queue, letter.body)
        self.store.mark_replayed(letter, self.clock())
        logger.warning("dead letter %s replayed to queue %s", letter.letter_id, queue)
        return letter
