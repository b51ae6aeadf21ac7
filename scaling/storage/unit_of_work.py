"""One unit of work on a target's state entity: read, decide, commit under the ETag, retry.

Every writer of the state (evaluate, the namespace targets' evaluate, pause/resume, scale's reset
after a failed write) goes through ``commit_state``, so they share one rule for the case that is
easy to get wrong: a commit that landed while its reply was lost. azure-core retries a
transaction whose reply was a 5xx; the retry fails its ETag (412) and reads as a conflict. Each
unit of work stamps its commits with a fresh writer token (``StoredState.written_by``): a state
re-read after a conflict that carries the token is this unit's own commit, and the unit ends as
committed (its action goes out now) instead of mistaking itself for another writer.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from scaling.storage.base import ConcurrencyConflict
from scaling.storage.records import DecisionRecord, StoredState

PlanT = TypeVar("PlanT")
DoneT = TypeVar("DoneT")


class StateStore(Protocol):
    def load_state(self, target: str) -> StoredState: ...

    def commit(self, stored: StoredState, decisions: Sequence[DecisionRecord] = ()) -> StoredState: ...


@dataclass(frozen=True, slots=True)
class Write(Generic[PlanT]):
    """What to commit: the next state, its decision-log rows, and what the caller keeps of it."""

    stored: StoredState
    records: Sequence[DecisionRecord]
    plan: PlanT


@dataclass(frozen=True, slots=True)
class Committed(Generic[PlanT, DoneT]):
    """How the unit of work ended.

    ``attempts`` counts the states read (a lost reply's re-read included). ``plan`` is the committed plan (``None`` when ``done`` stopped the unit before any write of
    its own landed; ``finished`` is then what ``done`` returned). ``stored`` is the state as
    saved, or as last read. ``reply_lost`` says that the commit landed although its reply was lost.
    """

    stored: StoredState
    attempts: int
    plan: PlanT | None = None
    finished: DoneT | None = None
    reply_lost: bool = False


def commit_state(store: StateStore, target: str, decide: Callable[[StoredState], Write[PlanT]], *,
                 done: Callable[[StoredState, int], DoneT | None] = lambda stored, attempt: None,
                 first: StoredState | None = None, max_attempts: int = 10,
                 on_conflict: Callable[[int], None] = lambda attempt: None,
                 what: str = "") -> Committed[PlanT, DoneT]:
    """Read ``target``'s state (or start from ``first``), let ``done`` stop the unit (a sample
    already evaluated, a newer decision that owns the state: its value ends the unit), else
    ``decide`` the write and commit it with the writer token; on a conflict re-read and go again,
    at most ``max_attempts`` writes. ``done`` also sees the state read after the last conflict,
    before giving up raises ``ConcurrencyConflict`` (the queue redelivers the message)."""
    writer = uuid.uuid4().hex
    stored = first if first is not None else store.load_state(target)
    attempt = 0
    while True:
        attempt += 1
        finished = done(stored, attempt)
        if finished is not None:
            return Committed(stored, attempt, finished=finished)
        if attempt > max_attempts:
            raise ConcurrencyConflict(f"{what or target}: gave up after {max_attempts} conflicting writes; "
                                      "the queue will redeliver it")
        write = decide(stored)
        try:
            saved = store.commit(replace(write.stored, written_by=writer), write.records)
        except ConcurrencyConflict:
            on_conflict(attempt)
            stored = store.load_state(target)
            if stored.written_by == writer:
                # Our commit landed and only its reply was lost: what we decided stands.
                return Committed(stored, attempt + 1, plan=write.plan, reply_lost=True)
            continue
        return Committed(saved, attempt, plan=write.plan)
