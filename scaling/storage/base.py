"""The storage contracts the evaluate and scale services use, and the names of the tables.

Two implementations: ``scaling.storage.tables.TableStorage`` (Azure Table storage / Azurite)
and ``scaling.storage.memory.MemoryStorage`` (tests, simulations). Both honour the same
semantics: create-if-absent for samples and claims, ETag-conditional state writes, and one
atomic commit for the state and its decision rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from urllib.parse import unquote

from scaling.domain.forecast_record import StoredProfile
from scaling.domain.names import table_key
from scaling.domain.samples import MetricSample
from scaling.settings import APPLIED_TABLE, DEAD_LETTER_TABLE, HISTORY_TABLE, STATE_TABLE
from scaling.storage.records import AppliedRecord, DeadLetter, DecisionRecord, StoredState, epoch_seconds

#: RowKey of the state entity inside its target's partition of the state table.
STATE_ROW = "state"
#: Table storage limits a string property to 64 KiB (32K UTF-16 characters) and an entity to
#: 1 MiB; longer text is split over numbered properties, and text beyond this is refused.
MAX_PROPERTY_CHARS = 32_000
MAX_PROPERTY_PARTS = 15


class ConcurrencyConflict(Exception):
    """An ETag or create-if-absent condition failed: someone else wrote first. Re-read and retry."""


class EntityTooLarge(ValueError):
    """A value too large for one Table entity (a sample over roughly 480K characters)."""


@dataclass(frozen=True, slots=True)
class TableNames:
    """Table names, a parameter so that tests can use fresh tables.

    The decision log lives in the state table (same partition as the state entity) so that the
    state, the decision rows and the outbox commit in one entity-group transaction.
    """

    history: str = HISTORY_TABLE
    state: str = STATE_TABLE
    dead_letters: str = DEAD_LETTER_TABLE
    applied: str = APPLIED_TABLE

    @classmethod
    def with_prefix(cls, prefix: str) -> TableNames:
        """Fresh names for a test or benchmark: ``{prefix}history`` etc. (letters and digits only)."""
        return cls(f"{prefix}history", f"{prefix}state", f"{prefix}deadletters", f"{prefix}applied")

    @property
    def decisions(self) -> str:
        return self.state

    def all(self) -> tuple[str, ...]:
        return (self.history, self.state, self.dead_letters, self.applied)


def partition_key(target: str) -> str:
    """A target name as a PartitionKey: ``/ \\ # ?``, ``%`` and control characters are escaped."""
    return table_key(target)


def target_from_key(key: str) -> str:
    return unquote(key)


def history_row_key(sample: MetricSample) -> str:
    """Samples sort by collection time; the id (a function of target and second) dedupes."""
    return f"{epoch_seconds(sample.collected_at):012d}-{sample.sample_id}"


def history_bound(moment: datetime) -> str:
    """A RowKey bound: every sample collected in a later second sorts after it."""
    return f"{epoch_seconds(moment):012d}"


def split_text(name: str, text: str) -> dict[str, object]:
    """``text`` as properties ``name``, ``name_1``, ... of at most ``MAX_PROPERTY_CHARS`` each."""
    parts = [text[i:i + MAX_PROPERTY_CHARS] for i in range(0, len(text), MAX_PROPERTY_CHARS)] or [""]
    if len(parts) > MAX_PROPERTY_PARTS:
        raise EntityTooLarge(f"{name} is {len(text)} characters; at most {MAX_PROPERTY_CHARS * MAX_PROPERTY_PARTS} fit in one entity")
    properties: dict[str, object] = {name: parts[0]}
    for index, part in enumerate(parts[1:], start=1):
        properties[f"{name}_{index}"] = part
    if len(parts) > 1:
        properties[f"{name}_parts"] = len(parts)
    return properties


def join_text(entity: dict, name: str) -> str | None:
    """The inverse of ``split_text`` (``None`` when the property is absent)."""
    if name not in entity:
        return None
    count = int(plain_value(entity.get(f"{name}_parts")) or 1)
    return "".join([str(entity[name]), *(str(entity[f"{name}_{index}"]) for index in range(1, count))])


def plain_value(value: object) -> object:
    """Table values come back as ``EntityProperty`` for Int64; unwrap them."""
    return getattr(value, "value", value)


class EvaluateStore(Protocol):
    def add_sample(self, sample: MetricSample) -> bool:
        """Store a sample if absent (keyed by time and id); ``False`` when it was already there."""

    def load_window(self, target: str, start: datetime, end: datetime) -> list[MetricSample]:
        """The target's samples collected in ``(start, end]`` (one range query), oldest first."""

    def load_state(self, target: str) -> StoredState:
        """The state entity (``etag`` ``None`` when there is none yet)."""

    def commit(self, stored: StoredState, decisions: Sequence[DecisionRecord] = ()) -> StoredState:
        """Write the state (if ``stored.etag`` still matches; create when ``None``) and upsert the
        decision rows, atomically. Returns the state with its new ETag; raises
        ``ConcurrencyConflict`` when someone else wrote first."""

    def purge_history(self, target: str, before: datetime, limit: int) -> int:
        """Delete at most ``limit`` samples collected before ``before``; returns how many."""

    def decisions(self, target: str, since: datetime | None = None, limit: int | None = None) -> list[DecisionRecord]:
        """The target's decision-log rows evaluated at or after ``since``, oldest first (at most ``limit``)."""

    def dead_letter(self, letter: DeadLetter) -> None: ...

    def load_profile(self, target: str) -> StoredProfile | None:
        """The target's look-ahead profile (``None``: none yet, or unreadable: refit it)."""

    def save_profile(self, profile: StoredProfile) -> None:
        """Write the target's profile (last writer wins: two refits of one hour agree)."""


class ScaleStore(Protocol):
    def load_state(self, target: str) -> StoredState: ...

    def commit(self, stored: StoredState, decisions: Sequence[DecisionRecord] = ()) -> StoredState: ...

    def get_applied(self, target: str, decision_id: str) -> AppliedRecord | None: ...

    def claim_applied(self, record: AppliedRecord) -> AppliedRecord:
        """Create the record; ``ConcurrencyConflict`` if it exists."""

    def save_applied(self, record: AppliedRecord) -> AppliedRecord:
        """Replace the record if its ETag still matches; ``ConcurrencyConflict`` otherwise."""

    def record_outcome(self, target: str, decided_at: datetime, decision_id: str, outcome: str,
                       detail: str | None, at: datetime) -> bool:
        """Note what became of an action on its decision row; ``False`` if the row is gone."""

    def decision_row(self, target: str, decided_at: datetime, decision_id: str) -> DecisionRecord | None:
        """The decision-log row of ``decision_id`` decided at ``decided_at`` (``None`` when absent)."""

    def dead_letter(self, letter: DeadLetter) -> None: ...


class DecisionReader(Protocol):
    def decisions(self, target: str, since: datetime | None = None, limit: int | None = None) -> list[DecisionRecord]:
        """The target's decision log, oldest first."""
