"""The one read-decide-commit-retry loop (``storage/unit_of_work.py``) over the memory store, with
the faults that matter injected in its ``commit``: another writer first, and a commit that lands
while its reply is lost (what azure-core's retry of a 5xx turns into a 412)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaling.domain.decisions import ScalerState
from scaling.storage.base import ConcurrencyConflict
from scaling.storage.memory import MemoryStorage
from scaling.storage.records import StoredState
from scaling.storage.unit_of_work import Write, commit_state


def store_with(faults: list[str]) -> MemoryStorage:
    """A memory store whose next commits suffer ``faults`` in order: ``other`` (someone else wrote
    first) or ``lost`` (the write lands, the caller sees a conflict)."""
    store = MemoryStorage()
    store.commit(StoredState(ScalerState("orders", capacity=2)))
    commit = store.commit

    def faulty(stored, decisions=()):
        fault = faults.pop(0) if faults else None
        if fault == "other":
            current = store.load_state("orders")
            commit(replace(current, state=replace(current.state, capacity=current.state.capacity + 10), written_by="x"))
            raise ConcurrencyConflict("other writer")
        saved = commit(stored, decisions)
        if fault == "lost":
            raise ConcurrencyConflict("412 on the retry of a landed transaction")
        return saved

    store.commit = faulty
    return store


def plus_one(stored: StoredState) -> Write[int]:
    capacity = stored.state.capacity + 1
    return Write(replace(stored, state=replace(stored.state, capacity=capacity)), (), capacity)


@pytest.mark.parametrize(("faults", "capacity", "plan", "attempts", "reply_lost"), [
    pytest.param([], 3, 3, 1, False, id="plain-commit"),
    pytest.param(["other"], 13, 13, 2, False, id="other-writer-then-decide-again"),
    pytest.param(["lost"], 3, 3, 2, True, id="own-commit-with-lost-reply-stands"),
    pytest.param(["other", "lost"], 13, 13, 3, True, id="other-writer-then-lost-reply"),
])
def test_commit_state_retries_other_writers_and_keeps_its_own_landed_commit(faults, capacity, plan, attempts,
                                                                            reply_lost):
    store = store_with(faults)
    unit = commit_state(store, "orders", plus_one)
    assert (store.load_state("orders").state.capacity, unit.plan, unit.attempts, unit.reply_lost) == \
        (capacity, plan, attempts, reply_lost)
    assert unit.stored.written_by == store.load_state("orders").written_by != "x"


def test_done_ends_the_unit_before_any_write():
    store = store_with([])
    unit = commit_state(store, "orders", plus_one, done=lambda stored, attempt: "already")
    assert (unit.finished, unit.plan, store.load_state("orders").state.capacity) == ("already", None, 2)


def test_done_sees_the_state_read_after_the_last_conflict_before_giving_up():
    store = store_with(["other", "other"])
    seen = []
    with pytest.raises(ConcurrencyConflict, match="gave up after 2"):
        commit_state(store, "orders", plus_one, done=lambda stored, attempt: seen.append(attempt), max_attempts=2)
    assert seen == [1, 2, 3]
