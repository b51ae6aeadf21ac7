"""The shortcuts a batch of one takes in the SLO kernel (a selection skipped where one side holds
throughout, a value made once and kept) give the bits the general selection gives: each case
here against the selection written out in full, as the kernel wrote it before the shortcut.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from scaling.domain import slo_kernel as kernel
from scaling.domain.engine import allowed_counts
from scaling.domain.policy import Bounds

INF = math.inf


def loads_of(forecast, owners, rate: float = 100.0) -> kernel.OwnerLoads:
    forecast = np.asarray(forecast, dtype=float)[:, None]
    return kernel.OwnerLoads(forecast, None, kernel.Owners.of(owners, len(forecast)), np.array([rate]),
                             kernel.per_instance_table(len(forecast), 64), np.array([False]))


def full_hold_seconds(loads, calm, age, counts, limit, reaction, breach=None):
    """``hold_seconds`` with every selection made in full."""
    columns = np.zeros(len(counts), dtype=np.int64)
    calm, ages = calm[:, columns], age[:, columns]
    serve = loads.service(calm, counts, columns)
    growth = np.where(calm > kernel.NO_RATE, 1.0 - serve / np.maximum(calm, kernel.NO_RATE), -1.0)
    filling = growth > 0
    margin = limit - growth * reaction - ages
    if breach is not None:
        slo, interval = breach
        margin = np.where((ages > slo) & (ages + growth * interval > slo), 0.0, margin)
    return np.where(margin > 0, np.where(filling, margin / np.where(filling, growth, 1.0), np.inf), 0.0).min(axis=0)


@pytest.mark.parametrize(
    ("calm", "age", "breach"),
    [
        pytest.param([5.0] * 8, [0.0] * 8, None, id="every-row-flows-none-fills"),
        pytest.param([5.0, 40.0, 5.0, 60.0] * 2, [10.0, 90.0, 0.0, 170.0] * 2, None, id="some-fill"),
        pytest.param([0.0, 40.0, 0.0, 60.0] * 2, [0.0, 90.0, 0.0, 30.0] * 2, None, id="rows-without-arrivals"),
        pytest.param([0.0] * 8, [0.0] * 8, None, id="no-arrivals-at-all"),
        pytest.param([5.0, 40.0] * 4, [320.0, 10.0] * 4, 300.0, id="past-the-slo"),
        pytest.param([5.0, 40.0] * 4, [20.0, 10.0] * 4, 300.0, id="within-the-slo"),
        pytest.param([5.0, 400.0] * 4, [20.0, 250.0] * 4, 300.0, id="past-the-limit"),
    ],
)
def test_hold_seconds_takes_the_full_selections_bits(calm, age, breach) -> None:
    calm, age = np.array(calm)[:, None], np.array(age)[:, None]
    loads = loads_of(calm[:, 0], ("a", "b", "c", "d") * 2)
    counts = np.array([1, 2, 3, 4])
    limit, reaction = np.full(4, 180.0), np.full(4, 120.0)
    slo = None if breach is None else (np.full(4, breach), 60.0)
    got = kernel.hold_seconds(loads, calm, age, counts, limit, reaction, np.zeros(4, dtype=np.int64), slo)
    assert got.tobytes() == full_hold_seconds(loads, calm, age, counts, limit, reaction, slo).tobytes()


@pytest.mark.parametrize(
    ("values", "owners", "counts"),
    [
        pytest.param([10.0, 20.0, 30.0, 40.0], ("a", "a", "b", "b"), [2, 1, 3], id="every-count-sized-by-its-owners"),
        pytest.param([0.0, 0.0, 0.0, 0.0], ("a", "a", "b", "b"), [2, 1, 3], id="no-load-equal-shares"),
        pytest.param([10.0, 20.0, 30.0, 40.0], None, [2, 1, 3], id="no-ownership"),
        pytest.param([10.0, 20.0, 30.0, 40.0], ("a", "a", "b", "b"), [2, 0], id="a-count-of-none"),
    ],
)
def test_service_takes_the_full_selections_bits(values, owners, counts) -> None:
    loads = loads_of(values, owners)
    counts = np.array(counts)
    columns = np.zeros(len(counts), dtype=np.int64)
    forecast = np.array(values)[:, None][:, columns]
    rate = loads.rate[columns]
    equal = rate / loads.per_instance[counts]
    load = loads.load(counts, columns)
    sized = loads.ownership[columns] & (load > 0)
    served = np.where(sized[None, :], np.maximum(forecast * (rate / np.where(sized, load, 1.0))[None, :], equal[None, :]),
                      equal[None, :])
    expected = np.where(counts[None, :] > 0, served, 0.0)
    assert loads.service(forecast, counts, columns).tobytes() == expected.tobytes()


def full_oldest_event_ages(times, positions, oldest, rate):
    """``oldest_event_ages`` (shared positions) with every selection made in full."""
    samples = len(times)
    waiting = positions[-1] >= oldest
    first = (np.maximum.accumulate(positions, axis=0) < oldest[None, :]).sum(axis=0)
    first = np.where(first < samples, first, 0)
    previous_index = np.maximum(first - 1, 0)
    columns = np.arange(positions.shape[1])
    position, previous = positions[first, columns], positions[previous_index, columns]
    span = np.maximum(position - previous, 1.0)
    start = times[previous_index]
    interpolated = start + (oldest - previous) / span * (times[first] - start)
    measured = rate > kernel.NO_RATE
    extrapolated = times[0] - np.where(measured, (position - oldest) / np.where(measured, rate, 1.0), 0.0)
    arrived = np.where(first == 0, extrapolated, interpolated)
    return np.where(waiting, np.maximum(times[-1] - arrived, 0.0), 0.0)


@pytest.mark.parametrize(
    ("oldest", "rate"),
    [
        pytest.param([301.0, 250.0, 120.0, 420.0], [1.0, 1.0, 1.0, 1.0], id="caught-up-and-within-the-history"),
        pytest.param([5.0, 250.0, 50.0, 301.0], [1.0, 0.0, 2.0, 1.0], id="older-than-the-history"),
        pytest.param([400.0, 500.0, 900.0, 301.0], [1.0, 1.0, 1.0, 1.0], id="nothing-waits"),
    ],
)
@pytest.mark.parametrize("samples", [1, 2, 4])
def test_oldest_event_ages_take_the_full_selections_bits(oldest, rate, samples) -> None:
    times = np.array([0.0, 60.0, 120.0, 180.0])[-samples:]
    positions = np.array([[100.0, 200.0, 100.0, 300.0], [160.0, 260.0, 130.0, 300.0], [220.0, 320.0, 160.0, 300.0],
                          [300.0, 400.0, 190.0, 300.0]])[-samples:]
    oldest, rate = np.array(oldest), np.array(rate)
    got = kernel.oldest_event_ages(times, positions, oldest, rate)
    assert got.tobytes() == full_oldest_event_ages(times, positions, oldest, rate).tobytes()


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("samples", [1, 2, 5, 130])
def test_oldest_event_ages_of_many_candidates_take_each_columns_bits(shared, samples) -> None:
    """Candidates as columns (the sweep's shape; positions shared or each its own, events older
    than the history among them): each column's ages are the full selections' bits, the span and
    step gathered per interval as where ``first`` is read; past 127 samples counted in int16)."""
    generator = np.random.default_rng(samples)
    partitions, candidates = 5, 30
    times = 60.0 * np.arange(samples) + 1e9
    positions = np.cumsum(generator.integers(0, 50, (samples, partitions, candidates if not shared else 1)), axis=0) + 100.0
    positions = positions[:, :, 0] if shared else positions
    last = positions[-1][:, None] if shared else positions[-1]
    oldest = last - generator.integers(-5, 250, (partitions, candidates)) + 0.0
    rate = np.where(generator.random((partitions, candidates)) < 0.2, 0.0, generator.random((partitions, candidates)))
    got = kernel.oldest_event_ages(times, positions, oldest, rate)
    for column in range(candidates):
        history = positions if shared else positions[:, :, column]
        expected = full_oldest_event_ages(times, history, oldest[:, column], rate[:, column])
        assert got[:, column].tobytes() == expected.tobytes()


def test_allowed_counts_made_once_are_each_callers_own() -> None:
    """Made once per bounds and partitions, they come as a new list each time: a caller that
    changes its list changes no one else's."""
    target = SimpleNamespace(bounds=Bounds(min_instances=1, max_instances=12, balanced_counts=True))  # (all it reads)
    first = allowed_counts(target, 12)
    first.append(99)
    assert allowed_counts(target, 12) == [1, 2, 3, 4, 6, 12]
    assert allowed_counts(target, 12) is not allowed_counts(target, 12)
