"""The storage contracts in memory, with the same conditions as Table storage (ETags,
create-if-absent, atomic commit). For fast property tests and simulations; thread-safe."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from scaling.domain.decisions import ScalerState
from scaling.domain.forecast_record import StoredProfile
from scaling.domain.samples import MetricSample
from scaling.storage.base import ConcurrencyConflict, history_row_key
from scaling.storage.records import (
    AppliedRecord,
    DeadLetter,
    DecisionRecord,
    StoredState,
    decision_row_key,
    epoch_seconds,
    json_text,
    profile_from_document,
    profile_to_document,
)


class MemoryStorage:
    """History, state, decision log, dead letters and applied actions in dictionaries."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._etags = itertools.count(1)
        self.history: dict[str, dict[str, MetricSample]] = {}
        self.states: dict[str, StoredState] = {}
        self.decision_rows: dict[str, dict[str, DecisionRecord]] = {}
        self.letters: list[DeadLetter] = []
        self.applied: dict[tuple[str, str], AppliedRecord] = {}
        self.profiles: dict[str, dict] = {}
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _etag(self) -> str:
        return f"W/\"{next(self._etags)}\""

    def add_sample(self, sample: MetricSample) -> bool:
        with self._lock:
            self._count("add_sample")
            rows = self.history.setdefault(sample.target, {})
            key = history_row_key(sample)
            if key in rows:
                return False
            rows[key] = sample
            return True

    def load_window(self, target: str, start: datetime, end: datetime) -> list[MetricSample]:
        with self._lock:
            self._count("load_window")
            low, high = epoch_seconds(start), epoch_seconds(end)
            found = [s for s in self.history.get(target, {}).values() if low <= epoch_seconds(s.collected_at) <= high]
        return sorted(found, key=lambda sample: sample.collected_at)

    def purge_history(self, target: str, before: datetime, limit: int) -> int:
        with self._lock:
            self._count("purge_history")
            rows = self.history.get(target, {})
            old = sorted(key for key, sample in rows.items() if epoch_seconds(sample.collected_at) < epoch_seconds(before))
            for key in old[:limit]:
                del rows[key]
            return min(len(old), limit)

    def load_state(self, target: str) -> StoredState:
        with self._lock:
            self._count("load_state")
            return self.states.get(target) or StoredState(state=ScalerState(target=target))

    def commit(self, stored: StoredState, decisions: Sequence[DecisionRecord] = ()) -> StoredState:
        with self._lock:
            self._count("commit")
            current = self.states.get(stored.target)
            if (current.etag if current else None) != stored.etag:
                raise ConcurrencyConflict(f"state of {stored.target!r} changed")
            saved = replace(stored, etag=self._etag())
            self.states[stored.target] = saved
            rows = self.decision_rows.setdefault(stored.target, {})
            for record in decisions:
                rows[record.row_key] = record
            return saved

    def record_outcome(self, target: str, decided_at: datetime, decision_id: str, outcome: str,
                       detail: str | None, at: datetime) -> bool:
        with self._lock:
            rows = self.decision_rows.get(target, {})
            key = decision_row_key(decided_at, decision_id)
            if key not in rows:
                return False
            rows[key] = replace(rows[key], outcome=outcome, outcome_detail=detail, outcome_at=at)
            return True

    def decision_row(self, target: str, decided_at: datetime, decision_id: str) -> DecisionRecord | None:
        with self._lock:
            return self.decision_rows.get(target, {}).get(decision_row_key(decided_at, decision_id))

    def decisions(self, target: str, since: datetime | None = None, limit: int | None = None) -> list[DecisionRecord]:
        with self._lock:
            rows = [self.decision_rows.get(target, {})[key] for key in sorted(self.decision_rows.get(target, {}))]
        if since is not None:
            rows = [row for row in rows if row.evaluated_at >= since]
        return rows[:limit] if limit is not None else rows

    def load_profile(self, target: str) -> StoredProfile | None:
        with self._lock:
            self._count("load_profile")
            document = self.profiles.get(target)
        return None if document is None else profile_from_document(document, target)

    def save_profile(self, profile: StoredProfile) -> None:
        with self._lock:
            self._count("save_profile")
            self.profiles[profile.target] = json.loads(json_text(profile_to_document(profile)))

    def dead_letter(self, letter: DeadLetter) -> bool:
        with self._lock:
            if any(known.function == letter.function and known.letter_id == letter.letter_id for known in self.letters):
                return False
            self.letters.append(letter)
            return True

    def dead_letters_for(self, function: str | None = None) -> list[DeadLetter]:
        with self._lock:
            return sorted((letter for letter in self.letters if function in (None, letter.function)),
                          key=lambda letter: letter.received_at)

    def mark_replayed(self, letter: DeadLetter, at: datetime) -> None:
        with self._lock:
            self.letters = [replace(known, replayed_at=at) if known.letter_id == letter.letter_id else known
                            for known in self.letters]

    def get_applied(self, target: str, decision_id: str) -> AppliedRecord | None:
        with self._lock:
            return self.applied.get((target, decision_id))

    def claim_applied(self, record: AppliedRecord) -> AppliedRecord:
        with self._lock:
            key = (record.target, record.decision_id)
            if key in self.applied:
                raise ConcurrencyConflict(f"decision {record.decision_id} is already claimed")
            saved = replace(record, etag=self._etag())
            self.applied[key] = saved
            return saved

    def save_applied(self, record: AppliedRecord) -> AppliedRecord:
        with self._lock:
            key = (record.target, record.decision_id)
            current = self.applied.get(key)
            if current is None or current.etag != record.etag:
                raise ConcurrencyConflict(f"applied record {record.decision_id} changed")
            saved = replace(record, etag=self._etag())
            self.applied[key] = saved
            return saved
