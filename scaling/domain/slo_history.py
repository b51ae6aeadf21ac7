"""One Event Hubs source's history as the SLO mode reads it, stacked a sample at a time.

Every evaluation reads the window's samples of a source: the last-enqueued positions for the
rates and ages, the owners, checkpoints and backlogs for the checkpoints' cadence and the
rebalance pause. The window slides by a sample per evaluation (the simulated loop, a warm host)
and a sample's readings never change, so each reading is read off once, and the next window's
arrays are the last window's less its oldest rows, with the newest added. A window that does not
continue the last one (a cold host reads its samples anew) is read whole, with the same numbers.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from scaling.domain.samples import MetricSample, SourceReading

_PARTITION_ID = attrgetter("partition_id")
_LAST_ENQUEUED = attrgetter("last_enqueued")
_OWNER, _CHECKPOINT, _BACKLOG = attrgetter("owner"), attrgetter("checkpoint"), attrgetter("backlog")

#: How many stacks are kept (one per source of each target evaluated; the oldest dropped).
STACKS_KEPT = 64
#: Owner names a stack's codes may hold before the codes start again (owners come and go).
CODES_KEPT = 1024


@functools.lru_cache(maxsize=64)
def _distinct(ids: tuple[str, ...]) -> bool:
    """Whether every id is listed once (the same ids at every evaluation)."""
    return len(set(ids)) == len(ids)


@dataclass(frozen=True, slots=True)
class Row:
    """One reading of the partitions ``ids``: last-enqueued positions (NaN: missing), owners ("":
    none or missing), checkpoints (-1: none yet; NaN: missing) and backlogs (0: missing)."""

    positions: np.ndarray
    owners: tuple[str, ...]
    checkpoints: np.ndarray
    backlogs: np.ndarray

    @classmethod
    def read(cls, reading: SourceReading, ids: tuple[str, ...]) -> Row:
        """Read off in one pass when the reading lists the same partitions, each once, in the same
        order, as it nearly always does (a dictionary for the rest)."""
        partitions = reading.partitions
        if tuple(map(_PARTITION_ID, partitions)) == ids and _distinct(ids):  # (each reading's fields in one pass)
            return cls(np.array(list(map(_LAST_ENQUEUED, partitions)), dtype=float),
                       tuple("" if owner is None else owner for owner in map(_OWNER, partitions)),
                       np.array([-1.0 if checkpoint is None else checkpoint for checkpoint in map(_CHECKPOINT, partitions)],
                                dtype=float),
                       np.array(list(map(_BACKLOG, partitions)), dtype=float))
        by_id = {p.partition_id: p for p in partitions}
        row = [by_id.get(partition_id) for partition_id in ids]
        positions = np.array([np.nan if p is None else p.last_enqueued for p in row], dtype=float)
        return cls(positions, tuple("" if p is None or p.owner is None else p.owner for p in row),
                   np.array([math.nan if p is None else -1.0 if p.checkpoint is None else float(p.checkpoint) for p in row]),
                   np.array([0.0 if p is None else float(p.backlog) for p in row]))


@dataclass(frozen=True, slots=True)
class Stack:
    """The samples that read a source (oldest first): their readings and times (seconds), and
    their rows stacked (samples x partitions), each owner as an integer code (-1: none; only
    equality and liveness are read)."""

    ids: tuple[str, ...]
    readings: tuple[SourceReading, ...]
    rows: tuple[Row, ...]
    times: np.ndarray
    positions: np.ndarray
    owners: np.ndarray
    checkpoints: np.ndarray
    backlogs: np.ndarray
    codes: dict[str, int]


#: The stacks read last, by their last reading's identity (the reading is kept in the stack, so
#: the identity stays its own).
_STACKS: dict[int, Stack] = {}
_LOCK = threading.Lock()


def stacked(samples: Sequence[MetricSample], name: str, ids: tuple[str, ...]) -> Stack:
    """The history of source ``name``'s partitions ``ids`` over the samples that read it."""
    readings, read = [], []
    for sample in samples:
        for reading in sample.sources:  # (the sample's reading of this source, if it read it)
            if reading.name == name and reading.ok:
                readings.append(reading)
                read.append(sample)
                break
    if not readings:
        return _stack(ids, (), (), [], {"": -1})
    same = _STACKS.get(id(readings[-1]))
    if same is not None and same.ids == ids and _continues(same.readings, readings):
        return same
    before = _STACKS.get(id(readings[-2])) if len(readings) > 1 else None
    if before is not None and before.ids == ids and len(before.codes) < CODES_KEPT and _continues(before.readings,
                                                                                                   readings[:-1]):
        stack = _slid(before, readings, read[-1].collected_at.timestamp(), ids)
    else:
        stack = _stack(ids, tuple(readings), tuple(Row.read(reading, ids) for reading in readings),
                       [sample.collected_at.timestamp() for sample in read], {"": -1})
    for values in (stack.times, stack.positions, stack.owners, stack.checkpoints, stack.backlogs):
        values.flags.writeable = False  # (read by every later window: nobody writes them)
    with _LOCK:
        if before is not None:
            _STACKS.pop(id(before.readings[-1]), None)
        if len(_STACKS) >= STACKS_KEPT:
            del _STACKS[next(iter(_STACKS))]
        _STACKS[id(readings[-1])] = stack
    return stack


def _continues(kept: Sequence[SourceReading], readings: Sequence[SourceReading]) -> bool:
    """Whether ``readings`` are the last of ``kept``, the same objects."""
    start = len(kept) - len(readings)
    return start >= 0 and all(a is b for a, b in zip(kept[start:], readings, strict=True))


def _slid(before: Stack, readings: list[SourceReading], time: float, ids: tuple[str, ...]) -> Stack:
    """``before`` less its rows older than ``readings``, with the newest reading's row (read at
    ``time``) added."""
    start = len(before.readings) - len(readings) + 1
    row = Row.read(readings[-1], ids)
    owners = before.owners[-1] if row.owners == before.rows[-1].owners else _coded(row.owners, before.codes)
    return Stack(ids, (*before.readings[start:], readings[-1]), (*before.rows[start:], row),
                 np.concatenate((before.times[start:], (time,))), _added(before.positions[start:], row.positions),
                 _added(before.owners[start:], owners), _added(before.checkpoints[start:], row.checkpoints),
                 _added(before.backlogs[start:], row.backlogs), before.codes)


def _added(rows: np.ndarray, row: np.ndarray) -> np.ndarray:
    """``rows`` with ``row`` after them, a new array."""
    return np.concatenate((rows, row[None, :]))


def _coded(names: tuple[str, ...], codes: dict[str, int]) -> np.ndarray:
    """The owners' codes, new names numbered on (in order of first appearance)."""
    return np.array([codes.setdefault(owner, len(codes) - 1) for owner in names], dtype=np.int64)


def _stack(ids: tuple[str, ...], readings: tuple[SourceReading, ...], rows: tuple[Row, ...], times: list[float],
           codes: dict[str, int]) -> Stack:
    """The stack of ``rows`` read whole (each distinct owners row coded once: owners rarely change)."""
    partitions = len(ids)
    coded: dict[tuple[str, ...], np.ndarray] = {}
    for row in rows:
        if row.owners not in coded:
            coded[row.owners] = _coded(row.owners, codes)

    def stack(values: list[np.ndarray], dtype: type) -> np.ndarray:
        return np.array(values, dtype=dtype) if values else np.zeros((0, partitions), dtype=dtype)

    return Stack(ids, readings, rows, np.array(times, dtype=float), stack([row.positions for row in rows], float),
                 stack([coded[row.owners] for row in rows], np.int64), stack([row.checkpoints for row in rows], float),
                 stack([row.backlogs for row in rows], float), codes)
