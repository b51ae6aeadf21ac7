"""Pause values: durations, expiry limits (default 4 hours, at most 7 days, never in the past),
and the stored form; the evaluate service's use of them is tested on Azurite
(tests/integration/test_pause_azurite.py) and in memory here."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.decisions import ScalerState
from scaling.domain.pause import Pause, PauseError, parse_duration, pause_until
from scaling.services.pause import PauseConflict, PauseService
from scaling.storage.memory import MemoryStorage
from scaling.storage.records import StoredState, stored_state_from_document, stored_state_to_document
from tests.helpers import Clock

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "expected"), [
    ("90m", timedelta(minutes=90)), ("4h", timedelta(hours=4)), ("1h30m", timedelta(minutes=90)),
    ("2d", timedelta(days=2)), ("45s", timedelta(seconds=45)), (" 7D ", timedelta(days=7)),
])
def test_durations(text: str, expected: timedelta):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "4", "h", "4 hours", "-1h", "1.5h", "30m4h"])
def test_unreadable_durations_are_refused(text: str):
    with pytest.raises(PauseError, match="is not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(("until", "duration", "expected"), [
    (None, None, NOW + timedelta(hours=4)),  # the default
    (None, timedelta(days=7), NOW + timedelta(days=7)),  # the longest
    ("2026-11-23T18:00:00+01:00", None, datetime(2026, 11, 23, 17, 0, tzinfo=UTC)),
    (None, timedelta(seconds=1), NOW + timedelta(seconds=1)),
])
def test_a_pause_ends(until, duration, expected):
    assert pause_until(NOW, until=until, duration=duration) == expected


@pytest.mark.parametrize(("until", "duration", "message"), [
    (None, timedelta(days=7, seconds=1), "at most 7 days"),
    ("2026-11-23T11:59:59Z", None, "must end in the future"),
    (None, timedelta(0), "must end in the future"),
    ("2026-11-23T18:00:00", None, "must carry a UTC offset"),
    ("tomorrow", None, "is not an ISO-8601 time"),
    ("2026-11-23T18:00:00Z", timedelta(hours=1), "not both"),
])
def test_a_pause_without_a_sensible_end_is_refused(until, duration, message):
    with pytest.raises(PauseError, match=message):
        pause_until(NOW, until=until, duration=duration)


def test_a_pause_round_trips_through_the_state_document():
    pause = Pause("p1", "INC-1 ü", "alice", NOW, NOW + timedelta(hours=1), pinned_at=5, pin_requested=True,
                  logged_would=6)
    stored = StoredState(ScalerState("orders", capacity=2), pause=pause)
    assert stored_state_from_document(stored_state_to_document(stored), "orders", None).pause == pause


class Interleaved:
    """The storage a pause command sees, with something else written right after its first read."""

    def __init__(self, store: MemoryStorage, after_first_read) -> None:
        self.store, self.after_first_read, self.reads = store, after_first_read, 0

    def load_state(self, target):
        stored = self.store.load_state(target)
        self.reads += 1
        if self.reads == 1:
            self.after_first_read(stored)
        return stored

    def commit(self, stored, decisions=()):
        return self.store.commit(stored, decisions)


def test_a_new_pause_over_an_expired_one_is_no_conflict_when_an_evaluation_clears_it():
    """The expired pause may be cleared by an evaluation between the command's read and write."""
    store, clock = MemoryStorage(), Clock(NOW)
    store.commit(StoredState(ScalerState("orders"), pause=Pause("old", "x", "a", NOW - timedelta(hours=5),
                                                                 NOW - timedelta(hours=1))))

    # an evaluation clears the expired pause right after the command's read
    interleaved = Interleaved(store, lambda stored: store.commit(replace(stored, pause=None)))
    pause = PauseService(interleaved, clock=clock).pause("orders", reason="r", requested_by="b",
                                                           until=NOW + timedelta(hours=1))
    assert store.load_state("orders").pause == pause


def test_a_pause_over_another_operators_live_pause_written_meanwhile_is_a_conflict():
    store, clock = MemoryStorage(), Clock(NOW)

    interleaved = Interleaved(store, lambda stored: PauseService(store, clock=clock).pause(
        "orders", reason="mine", requested_by="other", until=NOW + timedelta(hours=2)))
    with pytest.raises(PauseConflict, match="paused by other"):
        PauseService(interleaved, clock=clock).pause("orders", reason="r", requested_by="b", until=NOW + timedelta(hours=1))
    assert store.load_state("orders").pause.requested_by == "other"
