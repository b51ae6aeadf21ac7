"""Checkpoints written less often than collect runs: their cadence, learned from how often each
partition's checkpoint moves, and the two readings it corrects.

A consumer that checkpoints every N seconds leaves its checkpoint up to N seconds behind what it
processed. Read as it is, every partition's oldest event looks up to N seconds old (WC98 with
checkpoints every 300 s: ages of 215-219 s net of a learned delay at its ceiling, and the plan
held 32 instances for 18 hours), and an interval's processed events come in lumps (one
checkpoint moves N seconds of work at once: 21-29/s learned where the truth is 16.7/s).
Corrected together (docs/policy-experiments.md, "Trouble, sixth round: checkpoints every 5
minutes"): each partition's age less the time since its own checkpoint last moved, and the
throughput read over a span as long as the cadence. Neither alone helps.

Late checkpoints (a delay, every partition moving each interval) and checkpoints that stand
still everywhere at once (late ones after a quiet spell, a stall) are no cadence: it is learned
only from intervals in which some partitions moved and others did not, as spread phases do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from scaling.domain.slo_kernel.arrays import is_nan, maximum, where

#: Weight of a new measurement in the learned cadence (the first one sets it).
CADENCE_LEARNING_RATE = 0.3
#: A learned cadence counts from this many collection intervals on: checkpoints every interval
#: or more often read about one interval (a partition that paused for a rebalance a little
#: more), and the readings are as they were.
CADENCE_SHOWN = 1.5
#: Where the throughput is a lower bound and a cadence is known, a scale-in is sized at this many
#: times the floor. Every partition keeps up at the counts the floor asks for, so no reading there
#: could raise it (WC98 held 32, then 16 instances for 16 hours on the cold start's 2.29/s); the
#: floor rises with the load per instance once fewer serve, and a scale-out from it confirms it
#: (``confirms_floor``). WC98 every 300 s: 1.5 1.283, 1.6 1.259, 1.75 1.266, 1.8-1.9 1.241, 1.95
#: 1.293, 2 1.244 of the fluid bound (the trouble set's NASA 470 s 1.343, 1.338, 1.338, 1.330-1.338,
#: 1.462, 1.385): the middle of the plateau.
CADENCE_PROBE = 1.85
#: The fewest intervals a cadence is measured over (``measured_cadence``): after the last in
#: which the checkpoints stood still everywhere at once.
CADENCE_INTERVALS = 3
#: (a cadence of exactly k intervals spans k, not k + 1, whatever the float's last digit)
_SPAN_ROUNDING = 1e-9


def measured_cadence(times: np.ndarray, owners: np.ndarray, checkpoints: np.ndarray, backlogs: np.ndarray) -> np.ndarray:
    """Per candidate, the seconds between a partition's checkpoint moves over the window (NaN:
    the window cannot tell). Arrays are (samples, partitions, candidates), oldest sample first:
    each partition's live owner (an integer code, negative: none), checkpoint (negative: none
    yet) and backlog; ``times`` (samples,) in seconds.

    Counted over the (partition, interval) pairs whose partition kept its live owner, had a
    checkpoint and held a backlog at the interval's start (a consumer with work to checkpoint):
    the mean interval over the share of them whose checkpoint moved. Only over the intervals
    after the last one in which such pairs stood still everywhere at once (late checkpoints
    after a quiet spell, a stall, or the first cadence after a start: not a cadence), at least
    ``CADENCE_INTERVALS`` of them and at least as long as the cadence they measure (every
    checkpoint had its turn: over three intervals WC98's 602 s read short and cost 3.67 of the
    fluid bound where 3.11 is the whole window's). (Over the whole window, the cold start's first
    five minutes kept a 300 s cadence unread until minute 14, and 32 instances with it.)"""
    return cadence_over(times, *cadence_interval(owners[:-1], owners[1:], checkpoints[:-1], checkpoints[1:], backlogs[:-1]))


def cadence_interval(owners_before: np.ndarray, owners: np.ndarray, checkpoints_before: np.ndarray, checkpoints: np.ndarray,
                     backlogs_before: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What ``cadence_over`` reads of an interval (or a stack of them: leading axes), from the
    samples at its two ends (partitions x candidates each): per candidate, whether the pairs that
    count stood still everywhere at once, how many pairs counted and how many of them moved. A
    caller that keeps these per interval as its window slides reads each interval once (the
    window's partitions are not re-read every minute)."""
    held = (backlogs_before > 0) & (checkpoints_before >= 0) & (owners_before >= 0) & (owners == owners_before)
    counted = (checkpoints != checkpoints_before) & held
    pairs = held.sum(axis=-2)
    moves = counted.sum(axis=-2)
    return (pairs > 0) & (moves == 0), pairs, moves


def cadence_over(times: np.ndarray, still: np.ndarray, pairs: np.ndarray, moves: np.ndarray) -> np.ndarray:
    """``measured_cadence`` from its ``cadence_interval`` readings (intervals x candidates, oldest
    first; ``times`` of their samples: one more)."""
    samples = len(times)
    shape = still.shape[1:]
    if samples <= CADENCE_INTERVALS:
        return np.full(shape, np.nan)
    intervals = samples - 1
    after = intervals - np.argmax(still[::-1], axis=0)  # the first interval after the last one standing still
    after = np.where(still.any(axis=0), after, 0)
    since = np.arange(intervals).reshape(-1, *[1] * len(shape)) >= after  # (intervals, candidates)
    pairs = np.where(since, pairs, 0).sum(axis=0)
    moves = np.where(since, moves, 0).sum(axis=0)
    step = float(times[-1] - times[0]) / intervals
    cadence = step * pairs / np.maximum(moves, 1)
    # (after a still interval, only over at least the cadence measured: every checkpoint had its turn)
    enough = (intervals - after >= CADENCE_INTERVALS) & ((after == 0) | (step * (intervals - after) >= cadence))
    return np.where(enough & (moves > 0), cadence, np.nan)


def learned_checkpoint_cadence(previous, measured):
    """Fold a measured cadence (NaN: none) into the learned one (NaN ``previous``: none yet): the
    first sets it, the next move it by ``CADENCE_LEARNING_RATE``."""
    blended = previous + CADENCE_LEARNING_RATE * (measured - previous)
    return where(is_nan(measured), previous, where(is_nan(previous), measured, blended))


def cadence_allowance(cadence, interval):
    """The seconds the readings allow for the checkpoints' cadence: the learned one where it is
    at least ``CADENCE_SHOWN`` collection intervals, else 0 (the readings as before)."""
    return where(cadence >= CADENCE_SHOWN * interval, cadence, 0.0)  # (NaN: 0)


def since_checkpoint_moved(times: np.ndarray, checkpoints: np.ndarray) -> np.ndarray:
    """Per partition (and candidate), the seconds since the sample that showed its checkpoint's
    last move (``checkpoints``: samples x partitions[ x candidates], oldest first); infinite
    where it did not move in the window."""
    moved = checkpoints[1:] != checkpoints[:-1]
    intervals = len(moved)
    if not intervals:
        return np.full(checkpoints.shape[1:], np.inf)
    last = intervals - 1 - np.argmax(moved[::-1], axis=0)  # the last interval with a move
    since = times[-1] - times[last + 1]
    return np.where(moved.any(axis=0), since, np.inf)


def cadence_ages(ages: np.ndarray, since: np.ndarray, allowance: np.ndarray, interval: float) -> np.ndarray:
    """The oldest events' ages with the checkpoints' cadence taken off (``allowance``: per
    candidate, ``cadence_allowance``): each partition's age less the time since its checkpoint
    last moved (``since_checkpoint_moved``), the age the consumer had reached when it wrote it.
    A partition whose checkpoint stood still longer than the cadence and an interval keeps its
    whole age (a consumer that stopped, not one between checkpoints)."""
    on_cadence = (allowance > 0) & (since <= allowance + interval)
    return np.where(on_cadence, np.maximum(ages - np.where(on_cadence, since, 0.0), 0.0), ages)


def cadence_span(allowance, interval: float, intervals: int):
    """Per candidate, how many collection intervals back the throughput is read: enough to hold
    the cadence (``allowance``: ``cadence_allowance``), at most the ``intervals`` the history
    has; 1 without a cadence. (A batch of one's plain number gives a plain int.)"""
    if type(allowance) is float:
        if not allowance > 0 or intervals < 1:
            return 1
        return max(1, min(intervals, math.ceil(allowance / interval - _SPAN_ROUNDING)))
    spans = np.clip(np.ceil(allowance / interval - _SPAN_ROUNDING), 1, max(intervals, 1))
    return np.where(allowance > 0, spans, 1).astype(np.int64)


def busy_over_span(start_backlog, end_backlog, arrived, lag_seconds, span_seconds, interval):
    """``busy_partitions`` over a span of several collection intervals: a partition held, at both
    ends, more than two intervals' arrivals and the arrivals over the ``lag_seconds`` its
    checkpoints trail by (the cadence), at the span's rate (``arrived`` over ``span_seconds``).
    A consumer that keeps up holds up to a cadence's arrivals behind its checkpoint."""
    rate = arrived / span_seconds
    return np.minimum(start_backlog, end_backlog) > rate * (2.0 * interval + maximum(lag_seconds, 0.0))


def cadence_readings(previous: np.ndarray | None, measure, hubs: Sequence, ages: list[np.ndarray], interval: float,
                     known: np.ndarray) -> tuple[np.ndarray | None, list[np.ndarray]]:
    """The step's part (``slo_step``, before the checkpoint delay is learned from the ages): the
    learned cadence (``previous`` folded with ``measure()``, the caller's ``measured_cadence``;
    None or NaN: none measured; only the ``known`` columns learn) and the sources' ages with it
    taken off (``cadence_ages``). Each hub's ``since_moved()`` reads ``since_checkpoint_moved``
    per row and None, or, where rows stand for several partitions, per partition with the
    partitions' own ages (None: the ages as they are). ``previous`` None: not read."""
    if previous is None:
        return None, ages
    measured = None if measure is None else measure()
    learned = previous if measured is None else np.where(known, learned_checkpoint_cadence(previous, measured), previous)
    allowance = cadence_allowance(learned, interval)
    if not (allowance > 0).any():
        return learned, ages
    corrected = []
    for hub, age in zip(hubs, ages, strict=True):
        read = None if hub.since_moved is None else hub.since_moved()
        if read is None:
            corrected.append(age)
            continue
        since, partition_ages = read
        if partition_ages is None:  # (rows are partitions)
            corrected.append(cadence_ages(age, since, allowance, interval))
            continue
        corrected.append(np.where(allowance > 0, _paired_rows(cadence_ages(partition_ages, since, allowance, interval),
                                                              hub.row_of, age.shape[0]), age))
    return learned, corrected


def _paired_rows(values: np.ndarray, row_of: np.ndarray, rows: int) -> np.ndarray:
    """Per-partition ``values`` on rows that stand for several in pairs (``share_rows.py``: a
    group's first row its largest age, the second its smallest; ``row_of``: each partition's
    group's first row). The corrected ages are not monotone in the checkpoint as the ages are,
    so each group's extremes are taken over its partitions."""
    high = np.full((rows, *values.shape[1:]), -np.inf)
    np.maximum.at(high, row_of, values)
    low = np.full((rows, *values.shape[1:]), np.inf)
    np.minimum.at(low, row_of + 1, values)
    high[1::2] = low[1::2]
    return high


def probed_rates(rate, measured, cadence, interval: float):
    """The per-instance rate a scale-in is sized by (``slo_step``): ``CADENCE_PROBE`` times
    ``rate`` where it is a lower bound (not ``measured``) and the learned ``cadence`` counts
    (``cadence_allowance``; None: not read), else ``rate``."""
    if cadence is None:
        return rate
    return np.where(~measured & (cadence_allowance(cadence, interval) > 0), rate * CADENCE_PROBE, rate)


def confirms_floor(at_risk, lower_bound, cadence, interval: float, ready, capacity):
    """Where an at-risk scale-out makes the lower bound the learned rate: the throughput was the
    floor (``lower_bound``), a cadence counts, and every instance asked for served. The hub fell
    behind at the floor, so the floor is what the instances do; without this the probe goes on
    (2 -> 4 -> 2 every 15 minutes, 132 actions in 2,000 minutes): under a cadence a saturated span
    needs both ends to hold two intervals' and a cadence's arrivals, which a hub 20% short builds
    in half an hour while the risk test scales out within 15 minutes."""
    return at_risk & lower_bound & (cadence_allowance(cadence, interval) > 0) & (ready >= capacity)
