"""The peers of the benchmark (scaling/simulation/peers/looped.py), each against its documented
behaviour in docs/peers.md and docs/benchmark-contract.md, on hand-made observations."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.simulation.peers.looped import (
    AzureMonitorStyle,
    Clairvoyant,
    EngineAutoscaler,
    FunctionsTargetBased,
    KedaHpa,
    minute_time,
    observation_sample,
    observed_backlog,
    seed_target,
)
from scaling.simulation.world.loop import Observation, Scenario, simulate

P = 32


def obs(minute: int, capacity: int, total: int = 0, *, partitions: int = P, true_backlog: float | None = None) -> Observation:
    """An observation whose checkpoints trail last-enqueued by ``total`` events spread over the partitions."""
    shares = np.array([total // partitions + (1 if p < total % partitions else 0) for p in range(partitions)], dtype=np.int64)
    checkpoint = np.full(partitions, 10_000, dtype=np.int64)
    return Observation(minute=minute, capacity=capacity, last_enqueued=checkpoint + shares, checkpoint=checkpoint,
                       true_backlog=float(total if true_backlog is None else true_backlog))


def run(autoscaler, totals: list[int], capacity: int, *, start: int = 1) -> list[int | None]:
    """Feed one observation a minute, applying each decision to the capacity as the world would."""
    decisions = []
    for offset, total in enumerate(totals):
        wanted = autoscaler.decide(obs(start + offset, capacity, total))
        decisions.append(wanted)
        if wanted is not None:
            capacity = wanted
    return decisions


@pytest.mark.parametrize(
    ("last", "checkpoint", "expected"),
    [
        ([-1, -1], [-1, 5], [0, 0]),  # empty partitions
        ([9, 0], [-1, -1], [10, 1]),  # no checkpoint: everything from sequence number 0
        ([100, 100], [40, 100], [60, 0]),
        ([100], [105], [0]),  # checkpoint ahead: never negative
    ],
)
def test_observed_backlog_uses_the_lag_rules(last, checkpoint, expected) -> None:
    observation = Observation(1, 1, np.array(last, dtype=np.int64), np.array(checkpoint, dtype=np.int64), 0.0)
    assert observed_backlog(observation).tolist() == expected


def test_observation_sample_is_what_collect_would_send() -> None:
    observation = obs(7, 3, 1000)
    sample = observation_sample("orders", observation)
    assert sample.collected_at == minute_time(7)
    assert sample.capacity == 3
    assert sample.partition_count == P
    assert sample.backlog == 1000 == observed_backlog(observation).sum()


# --- KEDA + HPA ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capacity", "total", "threshold", "expected"),
    [
        pytest.param(1, 1000, 100, 10, id="ceil-total-over-threshold"),
        # 1 -> 5 -> 10 in the first two syncs; 1001 / (10 x 100) is then within the tolerance
        pytest.param(1, 1001, 100, 10, id="tolerance-after-scale-up"),
        pytest.param(1, 100_000, 100, 32, id="capped-at-partitions"),
        pytest.param(4, 0, 100, 1, id="no-lag-one-instance"),
        pytest.param(10, 1050, 100, 10, id="within-tolerance-above"),
        pytest.param(10, 950, 100, 10, id="within-tolerance-below"),
        pytest.param(10, 1090, 100, 10, id="within-tolerance-0.09"),
        pytest.param(10, 1120, 100, 12, id="outside-tolerance-above"),
        pytest.param(10, 850, 100, 9, id="outside-tolerance-below"),
        pytest.param(10, 1000, 64, 16, id="keda-default-threshold"),
    ],
)
def test_keda_hpa_desired(capacity, total, threshold, expected) -> None:
    assert KedaHpa(threshold, P).decide(obs(1, capacity, total)) == expected


@pytest.mark.parametrize(
    ("capacity", "expected"),
    [(1, 5), (2, 6), (4, 8), (10, 20), (20, 32)],  # max(+4, +100%) per 15 s sync, never above partitions
)
def test_keda_hpa_scale_up_rate_per_sync(capacity, expected) -> None:
    assert KedaHpa(100, P, syncs_per_minute=1).decide(obs(1, capacity, 1_000_000)) == expected


@pytest.mark.parametrize(("capacity", "total", "expected"), [(8, 1001, 11), (8, 1600, 16), (20, 1_000_000, 32)])
def test_keda_hpa_one_sync_rounds_up_and_caps(capacity, total, expected) -> None:
    assert KedaHpa(100, P, syncs_per_minute=1).decide(obs(1, capacity, total)) == expected


def test_keda_hpa_scale_down_stabilization_keeps_the_highest_recommendation_for_5_minutes() -> None:
    hpa = KedaHpa(100, P)
    decisions = run(hpa, [1000, 200, 200, 200, 200, 200, 200], capacity=10, start=0)
    # recommendations of 10 made at minute 0.00-0.75 leave the 300 s window during minute 5
    assert decisions == [10, 10, 10, 10, 10, 2, 2]


@pytest.mark.parametrize(
    ("minutes", "stabilization", "expected_drop_minute"),
    [
        (8, 5.0, 5),
        (8, 2.0, 2),
        pytest.param(8, 0.0, 1, id="no-stabilization"),
    ],
)
def test_keda_hpa_stabilization_window_length(minutes, stabilization, expected_drop_minute) -> None:
    hpa = KedaHpa(100, P, stabilization_minutes=stabilization)
    decisions = run(hpa, [1000] + [200] * (minutes - 1), capacity=10, start=0)
    assert decisions.index(2) == expected_drop_minute


# --- Functions target-based ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("total", "expected"),
    [
        (0, 1),
        (100, 1),
        (101, 2),
        (450, 5),
        (501, 6),
        (700, 7),
        (801, 11),  # 9 is not a count that spreads 32 partitions evenly
        (1201, 16),
        (1601, 32),
        (1_000_000, 32),
    ],
)
def test_functions_target_based_rounds_up_to_balanced_counts(total, expected) -> None:
    assert FunctionsTargetBased(100, P, votes_per_minute=60).decide(obs(1, 1, total)) == expected


@pytest.mark.parametrize(("votes", "expected"), [(1, 5), (2, 9), (3, 11), (6, 11)])
def test_functions_target_based_adds_at_most_4_per_vote(votes, expected) -> None:
    assert FunctionsTargetBased(100, P, votes_per_minute=votes).decide(obs(1, 1, 900)) == expected


def test_functions_target_based_ignores_scale_in_within_180_s_of_a_scale_out() -> None:
    functions = FunctionsTargetBased(100, P)
    # the last scale-out vote is at minute 0 + 2/6; scale-in votes from minute 3 + 2/6 on count
    assert run(functions, [900, 100, 100, 100, 100], capacity=1, start=0) == [11, 11, 11, 1, 1]


def test_functions_target_based_scales_in_at_once_without_a_recent_scale_out() -> None:
    assert FunctionsTargetBased(100, P).decide(obs(10, 11, 100)) == 1


# --- Azure Monitor autoscale ---------------------------------------------------------------------------------


def test_azure_monitor_needs_a_full_5_sample_window() -> None:
    monitor = AzureMonitorStyle(1000)
    assert run(monitor, [10_000] * 5, capacity=2) == [None, None, None, None, 3]


def test_azure_monitor_cooldown_is_shared_by_both_directions() -> None:
    monitor = AzureMonitorStyle(1000)
    decisions = run(monitor, [10_000] * 5 + [0] * 6, capacity=2)
    # out at minute 5; the scale-in wanted from minute 6 on waits for the 5-minute cooldown
    assert decisions == [None, None, None, None, 3, None, None, None, None, 2, None]


@pytest.mark.parametrize(
    ("window", "capacity", "expected"),
    [
        ([0, 0, 0, 0, 30_000], 5, 6),  # the average (6,000 / 5 = 1,200 per instance) decides, not the last value
        ([0, 0, 0, 0, 20_000], 5, None),
        ([5_000] * 5, 5, None),  # exactly at the threshold
        ([10_000] * 5, 32, None),  # at the maximum
        ([500] * 5, 1, None),  # at the minimum
        ([500] * 5, 3, 2),  # 167 per instance < 250 (the default lower threshold, a quarter)
    ],
)
def test_azure_monitor_rule_on_the_window_average(window, capacity, expected) -> None:
    monitor = AzureMonitorStyle(1000)
    assert run(monitor, window, capacity=capacity)[-1] == expected


@pytest.mark.parametrize(
    ("capacity", "total", "step", "expected"),
    [
        (2, 1700, 1, None),  # 850 < 900 per instance, but 1,700 on one instance would exceed 1,000: skipped
        (2, 900, 1, 1),  # 900 on one instance stays below 1,000: scale in
        (8, 6000, 4, None),  # 750 per instance; 6,000 on 4 = 1,500 > 1,000: skipped
        (8, 3000, 4, 4),  # 3,000 on 4 = 750: scale in by the step
    ],
)
def test_azure_monitor_flapping_check_skips_a_scale_in_that_would_trigger_a_scale_out(capacity, total, step, expected) -> None:
    monitor = AzureMonitorStyle(1000, scale_in_below=900, step=step)
    assert run(monitor, [total] * 5, capacity=capacity)[-1] == expected


def test_azure_monitor_step_capped_at_maximum() -> None:
    assert run(AzureMonitorStyle(100, step=4, maximum=32), [100_000] * 5, capacity=30)[-1] == 32


# --- Clairvoyant ----------------------------------------------------------------------------------------------

FLAT = np.full(60, 5000.0)
STEP_UP = np.array([1000.0] * 15 + [10000.0] * 45)
STEP_DOWN = np.array([10000.0] * 20 + [1000.0] * 40)


@pytest.mark.parametrize(
    ("arrivals", "horizon", "minute", "backlog", "expected"),
    [
        # effective capacity per balanced count (P = 32, mu = 1000): 5 -> 4571, 6 -> 5333, 7 -> 6400, 8 -> 8000, 11 -> 10667
        pytest.param(FLAT, 1, 10, 0, 6, id="flat-5000"),
        pytest.param(FLAT, 1, 10, 4000, 7, id="drain-backlog-over-slo-minus-1"),
        pytest.param(FLAT, 1, 10, 100_000, 32, id="huge-backlog-max"),
        pytest.param(STEP_UP, 1, 12, 0, 1, id="surge-beyond-horizon"),
        pytest.param(STEP_UP, 3, 12, 0, 8, id="surge-in-3-minute-horizon"),  # mean of 1000, 10000, 10000 = 7000
        pytest.param(STEP_UP, 5, 12, 0, 11, id="surge-in-5-minute-horizon"),  # 8200
        pytest.param(STEP_UP, 1, 13, 0, 11, id="surge-at-ready-time"),
        pytest.param(STEP_DOWN, 1, 19, 0, 4, id="keeps-serving-until-new-count-ready"),  # (10000 + 1000 + 1000) / 3
        pytest.param(STEP_DOWN, 1, 21, 0, 1, id="after-the-drop"),
        pytest.param(FLAT, 1, 59, 0, 6, id="end-of-trace"),
        pytest.param(FLAT, 1, 60, 0, 1, id="past-the-end"),
    ],
)
def test_clairvoyant_picks_the_smallest_balanced_count_covering_the_future(arrivals, horizon, minute, backlog, expected) -> None:
    clairvoyant = Clairvoyant(arrivals, Scenario(), horizon)
    assert clairvoyant.decide(obs(minute, 1, 0, true_backlog=backlog)) == expected


def test_clairvoyant_meets_the_slo_in_the_world() -> None:
    arrivals = np.concatenate([np.full(30, 2000.0), np.full(30, 20000.0), np.full(30, 4000.0)])
    result = simulate(arrivals, Clairvoyant(arrivals, Scenario(), 3), Scenario())
    assert result.slo_violation_minutes == 0
    assert set(result.capacity.tolist()) <= {1, 2, 3, 4, 5, 6, 7, 8, 11, 16, 32}


# --- the seed rule in the loop ------------------------------------------------------------------------------------


def test_seed_in_the_loop_steps_by_one_at_most_every_10_minutes() -> None:
    arrivals = np.concatenate([np.full(20, 500.0), np.full(60, 8000.0), np.full(60, 200.0)])
    result = simulate(arrivals, EngineAutoscaler(seed_target(Scenario(), 1000.0, 100.0)), Scenario())
    changes = np.flatnonzero(np.diff(result.capacity))
    assert len(changes) >= 4
    assert set(np.diff(result.capacity)[changes].tolist()) <= {-1, 1}
    assert (np.diff(changes) >= 10).all()
