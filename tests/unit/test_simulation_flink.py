"""The Flink peer (scaling/simulation/peers/flink.py, batched_peers.FlinkBatch, peers.Flink) against
docs/peers.md's Flink section: its formulas, table-driven, and its promise of one action per
step of the load."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.simulation.peers.batched import HOLD, FlinkBatch
from scaling.simulation.peers.flink import (
    FLINK_DEFAULTS,
    FlinkSettings,
    aligned_parallelism,
    need,
    next_parallelism,
    rate_bounds,
    sweep,
)
from scaling.simulation.peers.looped import Flink
from scaling.simulation.world.loop import Scenario, simulate


@pytest.mark.parametrize(
    ("lag", "rate", "catch_up", "restart", "utilization", "with_restart", "expected"),
    [
        (0.0, 7000.0, 30.0, 5.0, 0.7, False, 10000.0),  # the rate at the target utilization
        (0.0, 6000.0, 30.0, 5.0, 1.0, True, 7000.0),  # + the arrivals of a 5-minute restart caught up in 30
        (30000.0, 0.0, 30.0, 5.0, 0.7, True, 1000.0),  # the lag caught up within the catch-up duration
        (30000.0, 6000.0, 5.0, 5.0, 0.5, True, 6000.0 + 6000.0 + 12000.0),
        (0.0, 100.0, 30.0, 5.0, 0.0, True, math.inf),  # utilization 0: no capacity is too much
    ],
)
def test_need_is_the_lag_and_the_restart_caught_up_plus_the_rate_at_the_utilization(
        lag, rate, catch_up, restart, utilization, with_restart, expected) -> None:
    assert float(need(lag, rate, catch_up, restart, utilization, with_restart=with_restart)) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("lag", "rate", "processed", "expected"),
    [
        (0.0, 4000.0, 4000.0, (4000.0, 4000.0 * 5 / 30 + 4000.0 / 0.4)),  # [need at 1.0 without restart, need at 0.4]
        (3000.0, 4000.0, 4000.0, (4100.0, 100.0 + 4000.0 * 5 / 30 + 10000.0)),  # lag drains within 5 min: bounds stay
        (30000.0, 4000.0, 4000.0, (5000.0, math.inf)),  # 7.5 min of lag: bounds 1.0 and 0.0, no scale-down
    ],
)
def test_rate_bounds_follow_the_utilization_boundary_and_widen_while_processing_backlog(lag, rate, processed, expected) -> None:
    up, down = rate_bounds(lag, rate, processed, 0.7, 0.3, 30.0, 5.0, 5.0)
    assert (float(up), float(down)) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("target", "current", "expected"),
    [
        (5, 1, 6), (9, 1, 11), (12, 1, 16), (17, 1, 32),  # docs/peers.md's examples for 32 partitions
        (3, 1, 4), (6, 1, 7), (7, 1, 8), (8, 1, 8), (2, 1, 2), (32, 16, 32),
        (9, 16, 11), (12, 16, 16),  # a scale-down that reaches the current count is blocked
        (5, 7, 6), (1, 2, 1),
    ],
)
def test_source_parallelism_is_aligned_to_the_partitions(target, current, expected) -> None:
    assert aligned_parallelism(target, 32, current) == expected


@pytest.mark.parametrize(
    ("current", "target_rate", "capacity", "expected"),
    [
        (4, 6635.0, 4000.0, 8),  # factor 1.66: ceil(6.6) = 7, aligned to 8 on 8 partitions
        (8, 3190.0, 8000.0, 4),  # factor 0.399 clamped to 0.4: ceil(3.2) = 4
        (8, 100.0, 8000.0, 4),  # at most 60% down at once
        (1, 1e9, 1000.0, 8),  # never above the partitions
        (2, 2000.0, 2000.0, 2),
    ],
)
def test_next_parallelism_scales_the_count_by_need_over_capacity_within_the_max_factors(current, target_rate, capacity,
                                                                                     expected) -> None:
    assert int(next_parallelism(np.array([current]), np.array([target_rate]), np.array([capacity]), 8,
                                np.array([0.6]), np.array([100000.0]))[0]) == expected


def test_the_sweep_spans_the_documented_ranges_with_the_defaults_in_it() -> None:
    settings = sweep()
    assert FLINK_DEFAULTS in settings
    assert {s.utilization_target for s in settings} == {0.5, 0.6, 0.7, 0.8, 0.9}
    assert {s.metrics_window_minutes for s in settings} == {5, 15}
    assert {s.catch_up_minutes for s in settings} == {5.0, 30.0}
    assert {s.scale_down_interval_minutes for s in settings} == {0, 30, 60}
    assert len({s.label for s in settings}) == len(settings) == 60


@pytest.mark.parametrize("field", ["utilization_target", "catch_up_minutes", "metrics_window_minutes"])
def test_invalid_settings_fail_naming_the_setting(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        FlinkSettings(**{field: 0})


def _feed(batch: FlinkBatch, minutes: range, *, capacity: int, arrived: float, true_rate: float, lag: float) -> list[int]:
    wanted = []
    for minute in minutes:
        batch.measure(minute, arrived, np.array([arrived]), np.array([true_rate]))
        wanted.append(int(batch.decide(minute, np.array([capacity]), np.array([lag]), np.array([lag]))[0]))
    return wanted


@pytest.mark.parametrize(("window", "stabilization", "first"), [(15, 5, 20), (5, 5, 10), (5, 0, 5)])
def test_nothing_is_decided_before_the_window_is_full_after_stabilization(window, stabilization, first) -> None:
    settings = FlinkSettings(metrics_window_minutes=window, stabilization_minutes=stabilization)
    batch = FlinkBatch([settings], 8)
    wanted = _feed(batch, range(1, 30), capacity=1, arrived=4000.0, true_rate=1000.0, lag=50000.0)
    assert wanted.index(next(w for w in wanted if w != HOLD)) + 1 == first
    assert wanted[first - 1] == 8


@pytest.mark.parametrize(("interval", "acts_at"), [(0, 20), (30, 50), (60, 80)])
def test_a_scale_down_waits_for_the_interval_then_takes_the_largest_count_recommended(interval, acts_at) -> None:
    batch = FlinkBatch([FlinkSettings(scale_down_interval_minutes=interval, scale_down_max_factor=1.0)], 32)
    wanted = _feed(batch, range(1, 30), capacity=32, arrived=6000.0, true_rate=1000.0, lag=0.0)  # recommends 11 from 20
    wanted += _feed(batch, range(30, 100), capacity=32, arrived=2000.0, true_rate=1000.0, lag=0.0)  # then 4
    acted = [(minute, w) for minute, w in enumerate(wanted, start=1) if w != HOLD]
    assert acted[0] == (acts_at, 11)


def test_a_no_change_recommendation_clears_the_pending_scale_down() -> None:
    batch = FlinkBatch([FlinkSettings(metrics_window_minutes=5, scale_down_interval_minutes=30)], 32)
    wanted = _feed(batch, range(1, 35), capacity=32, arrived=6000.0, true_rate=1000.0, lag=0.0)  # pending from 10
    wanted += _feed(batch, range(35, 36), capacity=32, arrived=60000.0, true_rate=1000.0, lag=0.0)  # bounds hold it
    wanted += _feed(batch, range(36, 71), capacity=32, arrived=6000.0, true_rate=1000.0, lag=0.0)
    acted = [(minute, w) for minute, w in enumerate(wanted, start=1) if w != HOLD]
    assert acted == [(70, 16)]  # not at 40: pending again from 40 (the burst left the window)


def step_trace() -> np.ndarray:
    return np.concatenate([np.full(120, 2000.0), np.full(240, 6000.0), np.full(240, 2000.0), np.full(240, 6000.0)])


@pytest.mark.parametrize("settings", [FLINK_DEFAULTS, FlinkSettings(scale_down_interval_minutes=0),
                                      FlinkSettings(metrics_window_minutes=5, catch_up_minutes=5.0)],
                         ids=lambda s: s.label)
def test_it_converges_in_one_action_per_step(settings: FlinkSettings) -> None:
    """DS2's promise: after a step in the load, one rescale to a count that holds, then none."""
    scenario = Scenario(partitions=8, peak_instances=6.0, initial_capacity=4)
    actions: list[tuple[int, int]] = []
    result = simulate(step_trace(), Flink(settings, 8), scenario,
                      on_minute=lambda minute, _, wanted: actions.append((minute, wanted)) if wanted is not None else None)
    assert result.slo_violation_minutes == 0
    steps = [(0, 120), (120, 360), (360, 600), (600, 840)]
    per_step = [[count for minute, count in actions if start <= minute < end] for start, end in steps]
    expected = [[], [8], [4], [8]] if settings.catch_up_minutes == 30.0 else [[], [8], [], []]  # 8 -> 5 aligns to 8: blocked
    assert per_step == expected


@pytest.mark.parametrize(
    ("per_minute", "partitions", "instances", "processed", "true_rate"),
    [
        (3000.0, 4, 2, 2000.0, 1000.0),  # saturated: busy all minute, the rate is what it processed
        (1000.0, 4, 2, 1000.0, 1000.0),  # half busy: 500 processed in half a minute each
        (900.0, 3, 2, 900.0, 750.0),  # instance 0 owns two partitions: 600 of 1,000, the busiest sets the fraction
        (0.0, 4, 2, 0.0, math.nan),  # nothing processed: no measurement
    ],
)
def test_busy_time_measures_what_an_instance_processes_while_it_has_backlog(per_minute, partitions, instances, processed,
                                                                           true_rate) -> None:
    from scaling.simulation.world.loop import World

    world = World(np.full(3, per_minute), Scenario(partitions=partitions, initial_capacity=instances, peak_instances=1.0))
    world.advance()
    observation = world.observe()
    assert observation.processed == pytest.approx(processed)
    if math.isnan(true_rate):
        assert math.isnan(observation.true_rate_per_instance)
    else:
        assert observation.true_rate_per_instance == pytest.approx(true_rate)
