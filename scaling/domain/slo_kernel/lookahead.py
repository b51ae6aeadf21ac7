"""The look-ahead's floor and hold over candidates (issue 52; docs/forecast.md).

What a decision may do with the arrivals a trusted forecast expects, written once over a
candidate dimension: the engine calls it with a batch of one (through ``forecast.look_ahead``),
the batched simulator with every candidate of a sweep whose outlook is trusted at that minute
(``simulation/drivers/outlook.py``). Two rules and their combination:

- ``floors``: the fewest instances, never fewer than the count decided, that, serving from the
  provisioning delay on, carry the expected minutes of a window after it within the age budget;
- ``holds``: whether a scale-in must wait because the count it leaves would not carry the
  expected minutes of the dwell plus the provisioning delay;
- ``look_ahead_over``: the decided count raised to the floor, or kept at the current count when
  its scale-in is held. Never below the count decided: no scale-in comes from here.

``expected`` is (candidates, minutes), minute 0 the one that starts now, each row valid over its
first ``lengths`` minutes (NaN beyond: an outlook near a trace's end is shorter). A row is used
only where ``usable`` (trusted, a throughput known, its valid minutes finite); elsewhere every
rule returns its input. Counts are whole instances; arrivals and throughput per minute.
"""

from __future__ import annotations

import numpy as np

#: Slack on the age budget's comparison (the fluid backlog against the instances' work).
SLACK = 1e-9


def _masks(length: np.ndarray, start: np.ndarray, stop: np.ndarray, width: int) -> np.ndarray:
    """(candidates, minutes): minute ``m`` within ``[start, min(stop, length))`` per row."""
    minutes = np.arange(width)[None, :]
    return (minutes >= start[:, None]) & (minutes < np.minimum(stop, length)[:, None])


def carries(count: np.ndarray, expected: np.ndarray, within: np.ndarray, throughput: np.ndarray, budget: np.ndarray,
            backlog: np.ndarray) -> np.ndarray:
    """Whether ``count`` instances keep the expected arrivals of the minutes ``within`` (in order)
    within the age budget: the fluid backlog, from ``backlog``, never more than ``budget`` minutes
    of their work. A burst the backlog carries within it asks for no instance."""
    capacity = count * throughput
    limit = capacity * budget + SLACK
    fails = np.zeros(len(count), dtype=bool)
    for minute in range(expected.shape[1]):
        active = within[:, minute]
        if not active.any():
            continue
        backlog = np.where(active, np.maximum(0.0, backlog + np.where(active, expected[:, minute], 0.0) - capacity), backlog)
        fails |= active & (backlog > limit)
    return ~fails


def usable_rows(expected: np.ndarray, lengths: np.ndarray, trusted: np.ndarray, throughput: np.ndarray) -> np.ndarray:
    """Rows a rule may read: trusted, a positive throughput, at least one valid minute, all finite."""
    valid = np.arange(expected.shape[1])[None, :] < lengths[:, None]
    finite = np.where(valid, np.isfinite(expected), True).all(axis=1)
    return trusted & (throughput > 0) & (lengths > 0) & finite


def floors(decided: np.ndarray, expected: np.ndarray, lengths: np.ndarray, provisioning: np.ndarray,
           window: np.ndarray, throughput: np.ndarray, budget: np.ndarray, backlog: np.ndarray,
           usable: np.ndarray) -> np.ndarray:
    """The count to have serving before a predicted rise: the fewest instances, from ``decided``
    up, that carry the ``window`` minutes after the provisioning delay within ``budget``, from the
    backlog ``decided`` leaves at the delay (``backlog`` now plus what arrives beyond its service).
    Never below ``decided``; a row not ``usable``, or without a minute in its window, ``decided``."""
    decided = np.asarray(decided, dtype=np.int64)
    width = expected.shape[1]
    ahead = _masks(lengths, provisioning, provisioning + window, width)
    usable = usable & ahead.any(axis=1)
    if not usable.any():
        return decided.copy()
    rate = np.where(usable, throughput, 1.0)
    carried = np.asarray(backlog, dtype=float)
    before = _masks(lengths, np.zeros_like(provisioning), provisioning, width)
    for minute in range(width):
        active = before[:, minute]
        if active.any():
            carried = np.where(active, np.maximum(0.0, carried + np.where(active, expected[:, minute], 0.0)
                                                  - decided * rate), carried)
    peak = np.where(ahead, expected, -np.inf).max(axis=1)
    need = np.maximum(peak, carried / np.maximum(budget, 1.0)) / rate - SLACK
    most = np.maximum(decided, np.ceil(np.where(usable, need, 0.0)).astype(np.int64))
    # The fewest that carry, by bisection (``carries`` is monotone in the count): ``most`` when none below it does.
    low, high = decided.copy(), np.where(usable, most, decided)
    while (open_ := low < high).any():
        middle = (low + high) // 2
        held = carries(middle, expected, ahead & open_[:, None], rate, budget, carried)
        high = np.where(open_ & held, middle, high)
        low = np.where(open_ & ~held, middle + 1, low)
    return high


def holds(proposed: np.ndarray, current: np.ndarray, expected: np.ndarray, lengths: np.ndarray, horizon: np.ndarray,
          throughput: np.ndarray, budget: np.ndarray, backlog: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Whether a scale-in from ``current`` to ``proposed`` must wait: over the first ``horizon``
    minutes (the dwell plus the provisioning delay: the earliest a new scale-out could serve),
    ``proposed`` would not carry the expected arrivals within ``budget``. A hold only: never a
    scale-in; a row not ``usable`` or not scaling in, never."""
    proposed = np.asarray(proposed, dtype=np.int64)
    within = _masks(lengths, np.zeros_like(horizon), horizon, expected.shape[1])
    candidates = usable & (proposed < current) & within.any(axis=1)
    if not candidates.any():
        return candidates
    rate = np.where(candidates, throughput, 1.0)
    return candidates & ~carries(proposed, expected, within & candidates[:, None], rate, budget,
                                 np.asarray(backlog, dtype=float))


def look_ahead_over(decided: np.ndarray, current: np.ndarray, expected: np.ndarray, lengths: np.ndarray,
                    usable: np.ndarray, acting: np.ndarray, provisioning: np.ndarray, dwell: np.ndarray,
                    window: np.ndarray, throughput: np.ndarray, budget: np.ndarray, backlog: np.ndarray) -> tuple:
    """The count the observed load ``decided`` once the look-ahead has had its say: raised to the
    floor before a predicted rise, or kept at ``current`` where its scale-in is held. Returns
    (count, would_be, raised_floor, held_scale_in, acted): ``count`` is ``would_be`` where
    ``acting`` (``forecast: on``) and ``decided`` elsewhere (``shadow``: only what it would do).
    ``count`` is never below ``decided``, and never below ``current`` unless ``decided`` is."""
    decided = np.asarray(decided, dtype=np.int64)
    floor = floors(decided, expected, lengths, provisioning, window, throughput, budget, backlog, usable)
    held = holds(decided, current, expected, lengths, dwell + provisioning, throughput, budget, backlog, usable)
    would_be = np.where(held, np.maximum(floor, current), floor)
    acted = acting & (would_be != decided)
    return np.where(acting, would_be, decided), would_be, floor > decided, held, acted
