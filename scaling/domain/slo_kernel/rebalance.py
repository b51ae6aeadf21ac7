"""Rebalance pauses: how long a partition that changed owner keeps its checkpoint still, learned
from the readings, and what a decision allows for it where the target's own history shows one.

A consumer that takes over a partition first claims it and reads its checkpoint; meanwhile the
partition stands still and its oldest event ages. Read as an ordinary shortfall, each
scale-out's pause calls for another (4 -> 7 -> 8 -> 11 -> 16 -> 32 in 13 minutes for load that
needs 5). Reading a moved partition's age down does not help (the SLO counts the true oldest
event, pause included: docs/policy-experiments.md, "Trouble, third round"); what does is acting
earlier and once, sized to drain what the pause adds. That costs where there is no pause (late
checkpoints 30% dearer), so it applies only where a pause has been learned.
"""

from __future__ import annotations

import numpy as np

from scaling.domain.slo_kernel.arrays import is_nan, minimum, where

#: Weight of a new measurement in the learned pause (the first one sets it).
PAUSE_LEARNING_RATE = 0.3
#: A learned pause counts only from this fraction of the collection interval on. A stand-still
#: shows in whole intervals, so the mean of a move's partitions under half an interval is a
#: stray one among many that did not stand still (and a learned pause only decays towards 0):
#: on WC98 realistic (20 s pauses, checkpoints every 30 s) one of 23 moved partitions stood
#: still 60 s once, the pause read 2.6 s, and every scale-out drained within the SLO for it.
PAUSE_SHOWN = 0.5


def moved_stand_still(times: np.ndarray, owners: np.ndarray, checkpoints: np.ndarray, backlogs: np.ndarray) -> np.ndarray:
    """Per candidate, how long (seconds) the partitions that changed owner kept their checkpoints
    still while holding a backlog, over the episodes that end in the window's last interval (the
    checkpoint moved again); NaN where none ends there.

    Arrays are (samples, partitions, candidates), oldest sample first: each partition's live
    owner (an integer code, negative: none), checkpoint and backlog; ``times`` (samples,) in
    seconds. An episode starts with an owner change from one live owner to another, in an
    interval in which the live owners did not become fewer (a failed or removed instance's
    partitions stand still until its ownership expires: no rebalance of live instances); the still
    run is the intervals after it in which the checkpoint did not move while a backlog waited
    (the interval of the move itself counts when the checkpoint stood still in it too). A move
    whose checkpoint moved in its own interval and the next measures 0. It counts only where
    every partition whose owner stayed the same over the window, and held a backlog, moved its
    checkpoint in each interval from the move on (at least one such partition): checkpoints that
    stand still everywhere (written every few minutes, or late) are no pause of the moved ones."""
    if len(times) < 3:
        return np.full(checkpoints.shape[2:], np.nan)
    moved, held, changed, differ = interval_readings(owners[:-1], owners[1:], checkpoints[:-1], checkpoints[1:], backlogs[:-1])
    return stand_still_over(times, moved, held, changed, ~differ.any(axis=0))


def interval_readings(owners_before: np.ndarray, owners: np.ndarray, checkpoints_before: np.ndarray, checkpoints: np.ndarray,
                      backlogs_before: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What ``stand_still_over`` reads of an interval (or a stack of them: leading axes), from the
    samples at its two ends (partitions x candidates each): whether each partition's checkpoint
    moved, whether a backlog waited at its start, whether its owner changed from one live owner to
    another while the live owners did not become fewer, and whether its owner changed at all. A
    caller that keeps these per interval as its window slides reads each interval once."""
    moved = checkpoints != checkpoints_before
    held = backlogs_before > 0
    differ = owners != owners_before
    changed = differ & (owners >= 0) & (owners_before >= 0)
    columns = changed.any(axis=-2)  # (an interval without such a change needs no count of its owners)
    if columns.any():
        fewer = np.zeros(columns.shape, dtype=bool)
        fewer[columns] = _distinct_live(np.moveaxis(owners, -2, -1)[columns]) < _distinct_live(
            np.moveaxis(owners_before, -2, -1)[columns])
        changed &= ~fewer[..., None, :]
    return moved, held, changed, differ


def stand_still_over(times: np.ndarray, moved, held, changed, kept: np.ndarray) -> np.ndarray:
    """``moved_stand_still`` from its ``interval_readings`` (``moved``, ``held``, ``changed``: per
    interval, oldest first, partitions x candidates each; an array or anything indexed so, as a
    ring read in window order) and ``kept`` (partitions x candidates: the owner never changed in
    the window); ``times`` of the samples (one more than the intervals). Only the intervals the
    episodes reach back to are read (each interval's pace is worked out when reached), so a
    caller keeping the readings per interval copies nothing."""
    samples = len(times)
    shape = kept.shape[1:]
    if samples < 3:
        return np.full(shape, np.nan)

    def pace(interval: int) -> np.ndarray:  # (candidates,) every kept partition holding a backlog moved
        control = kept & held[interval]
        return (moved[interval] | ~control).all(axis=0) & control.any(axis=0)

    last = samples - 2
    total = np.zeros(shape)
    found = np.zeros(shape)
    run = moved[last].copy()  # still over intervals last - k .. last - 1 (none yet), moved in the last
    paced = pace(last)
    for k in range(last):
        start = last - k - 1  # the interval before the run: the move's, or the one before it
        paced = paced & pace(start)
        moved_start, held_start, changed_start = moved[start], held[start], changed[start]
        still = ~moved_start & held_start
        ends = run & ~still  # the run is exactly k intervals long
        if k == 0:  # moved in the move's interval and in the next: no pause
            episode = ends & changed_start & moved_start & held_start
        else:
            episode = ends & ((changed_start & moved_start & held_start) | changed[start + 1])
        episode &= paced[None]
        total += np.where(episode, float(times[last] - times[start + 1]), 0.0).sum(axis=0)
        found += episode.sum(axis=0)
        run = run & still
        if not run.any():
            break
    return np.where(found > 0, total / np.maximum(found, 1), np.nan)


def _distinct_live(owners: np.ndarray) -> np.ndarray:
    """(columns, partitions) -> (columns,): how many distinct live owners each column shows."""
    ranked = np.sort(owners, axis=1)
    return ((ranked[:, 1:] != ranked[:, :-1]) & (ranked[:, 1:] >= 0)).sum(axis=1) + (ranked[:, 0] >= 0)


def learned_rebalance_pause(previous, measured):
    """Fold a measured stand-still (NaN: none) into the learned pause (NaN ``previous``: none yet):
    the first sets it, the next move it by ``PAUSE_LEARNING_RATE``. A move that stood still for
    no interval measures 0, so a pause that stops is forgotten."""
    blended = previous + PAUSE_LEARNING_RATE * (measured - previous)
    return where(is_nan(measured), previous, where(is_nan(previous), measured, blended))


def pause_allowance(pause, interval):
    """The seconds a decision allows for a rebalance pause: the learned one where it is known and
    at least ``PAUSE_SHOWN`` of the collection ``interval``, else 0 (the decision as before)."""
    return where(pause >= PAUSE_SHOWN * interval, pause, 0.0)  # (NaN: 0)


def paused_drain_seconds(drain, max_age, allowance):
    """Over how many seconds a scale-out drains where a pause is allowed for (``pause_allowance``):
    within the SLO (``max_age``), not half the dwell; the newcomers' partitions stand still
    first, so draining slowly leaves the oldest event past the SLO for longer."""
    return where(allowance > 0, minimum(drain, max_age), drain)


def scale_in_ages(age, allowance):
    """The ages a scale-in must hold from where a pause has been learned: each as old as it would
    be after the pause (a scale-in moves partitions too, and a moved one stands still however
    many instances serve). Read as they are, the newcomers' drain right after a scale-out looks
    like surplus: the plan scaled in five minutes after each scale-out with the oldest event at
    200 s, and out again a minute later. ``allowance``: ``pause_allowance``."""
    return age + allowance


def paused_age_limit(limit, max_age, allowance):
    """The age the scale-out's prediction may reach where a pause is allowed for: the ``limit``
    (the SLO less its safety margin) or the SLO less the pause, whichever is lower. The partitions
    the newcomers take stand still for the pause after they start, their oldest events ageing a
    second a second whatever the count: on WC98 with 120 s pauses every scale-out fired at an
    oldest event of 3.0-3.2 minutes and the newcomers' partitions reached 5.2-5.6."""
    return minimum(limit, max_age - allowance)


def pause_blocks_scale_in(age, allowance, limit):
    """Per candidate, whether a scale-in would take a partition's oldest event past the ``limit``
    by the pause alone (``age``: partitions x candidates, net of the checkpoint delay). The
    fluid model credits the drain a scale-in leaves; a moved partition drains nothing until its
    pause has passed (WC98, 120 s pauses: scale-ins at oldest events of 1.8-3.2 minutes, right
    after the scale-out that drained them, took the moved partitions to 5.2-5.5 minutes)."""
    return ((age + allowance) > limit).any(axis=0) & (allowance > 0)
