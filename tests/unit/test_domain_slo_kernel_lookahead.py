"""The look-ahead's floor and hold over candidates (``slo_kernel.lookahead``): every column the
count the rules give it alone, whatever its delay, dwell, window, throughput and outlook length.

The reference is the rules as they were written one decision at a time before they moved into
the kernel (kept here, not in the project): the batched simulator's candidates and the engine's
batch of one must both give what they gave."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.domain import forecast as fc
from scaling.domain.slo_kernel import lookahead


def _carries(count, expected, rate, budget, backlog):
    capacity = count * rate
    for arrivals in expected:
        backlog = max(0.0, backlog + float(arrivals) - capacity)
        if backlog > capacity * budget + 1e-9:
            return False
    return True


def _floor(current, values, delay, rate, usable, window, budget, backlog):
    if not usable or rate <= 0 or not len(values):
        return current
    ahead = values[delay:delay + window]
    if len(ahead) == 0:
        return current
    carried = backlog
    for arrivals in values[:delay]:
        carried = max(0.0, carried + float(arrivals) - current * rate)
    most = max(current, math.ceil(max(float(ahead.max()), carried / max(budget, 1.0)) / rate - 1e-9))
    for count in range(current, most):
        if _carries(count, ahead, rate, budget, carried):
            return count
    return most


def _held(proposed, values, dwell, delay, rate, usable, budget, backlog):
    if not usable or rate <= 0 or not len(values):
        return False
    ahead = values[:dwell + delay]
    return bool(len(ahead)) and not _carries(proposed, ahead, rate, budget, backlog)


def reference(decided, current, values, usable, acting, delay, dwell, window, rate, budget, backlog):
    """What ``forecast.look_ahead`` computed one decision at a time before the kernel."""
    floor = _floor(decided, values, delay, rate, usable, window, budget, backlog)
    held = decided < current and _held(decided, values, dwell, delay, rate, usable, budget, backlog)
    would_be = max(floor, current) if held else floor
    return (would_be if acting else decided), would_be, floor > decided, held, acting and would_be != decided


def random_columns(count: int, seed: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    columns = []
    for _ in range(count):
        length = int(rng.choice([0, 1, 3, 7, 15, 30]))
        base = rng.uniform(50, 800)
        values = base * rng.choice([1.0, 1.0, 4.0], size=length) * rng.uniform(0.5, 1.5, size=length)
        columns.append((int(rng.integers(1, 12)), int(rng.integers(1, 12)), values, bool(rng.random() < 0.85),
                        bool(rng.random() < 0.7), int(rng.choice([0, 1, 2, 4])), int(rng.choice([0, 5, 10, 40])),
                        int(rng.choice([1, 2, 5])), float(rng.choice([0.0, 60.0, 100.0, 250.0])),
                        float(rng.choice([0.0, 0.5, 3.5])), float(rng.choice([0.0, 100.0, 2000.0]))))
    return columns


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_candidate_gets_what_the_rules_give_it_alone(seed: int) -> None:
    columns = random_columns(400, seed)
    width = max(len(column[2]) for column in columns)
    expected = np.full((len(columns), width), np.nan)
    for row, column in enumerate(columns):
        expected[row, :len(column[2])] = column[2]
    lengths = np.array([len(column[2]) for column in columns])
    field = [None if index == 2 else np.array([column[index] for column in columns]) for index in range(len(columns[0]))]
    decided, current, _, trusted, acting, delay, dwell, window, rate, budget, backlog = field
    usable = lookahead.usable_rows(expected, lengths, trusted, rate)
    batch = lookahead.look_ahead_over(decided, current, expected, lengths, usable, acting, delay, dwell, window, rate,
                                      budget, backlog)
    changed = 0
    for row, (d, c, values, t, a, p, w, n, r, b, q) in enumerate(columns):
        alone = reference(d, c, values, t, a, p, w, n, r, b, q)
        assert tuple(part[row] for part in batch) == alone, (row, columns[row])
        # the engine's batch of one says the same
        one = fc.look_ahead(d, c, values, t, "on" if a else "shadow", p, w, r, b, q, window_minutes=n)
        assert (one.count, one.would_be, one.raised_floor, one.held_scale_in, one.acted) == alone
        changed += alone[1] != d
    assert changed > 40  # not vacuous: the floor and the hold act on many columns


def test_a_column_not_usable_keeps_its_count() -> None:
    expected = np.array([[100.0, np.inf, 900.0], [900.0, 900.0, np.nan]])
    usable = lookahead.usable_rows(expected, np.array([3, 2]), np.array([True, False]), np.array([60.0, 60.0]))
    assert not usable.any()
    count, *_ = lookahead.look_ahead_over(np.array([1, 1]), np.array([4, 4]), expected, np.array([3, 2]), usable,
                                          np.array([True, True]), np.array([1, 1]), np.array([10, 10]), np.array([2, 2]),
                                          np.array([60.0, 60.0]), np.array([3.5, 3.5]), np.array([0.0, 0.0]))
    assert count.tolist() == [1, 1]
