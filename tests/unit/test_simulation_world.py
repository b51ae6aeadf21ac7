"""The simulated world run in the loop (scaling/simulation/world/loop.py, the kernel as a batch of one):
service at the effective capacity, provisioning delay, billing, SLO accounting, warm-up
exclusion, what the autoscaler observes, trace loading and conservation of events.

Autoscalers here are scripts (minute -> capacity), so every expected series is computed by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scaling.simulation.world.loop import Observation, Scenario, World, load_trace, per_minute, scale_trace, simulate


class Script:
    """An autoscaler that requests ``plan[minute]`` at the end of that minute and otherwise holds."""

    def __init__(self, plan: dict[int, int] | None = None) -> None:
        self.plan = plan or {}
        self.seen: list[Observation] = []

    def decide(self, observation: Observation) -> int | None:
        self.seen.append(observation)
        return self.plan.get(observation.minute)


# --- serving: even load on p mod n owners (the water-filling itself: test_simulation_physics.py) ----------------


@pytest.mark.parametrize(
    ("instances", "arrivals_per_minute", "backlog_growth_per_minute"),
    [
        (24, 16_000, 0.0),  # 24 instances serve 16 partitions' worth when the load is even
        (24, 20_000, 16 * (625 - 500)),  # 16 partitions on shared instances get 500 of their 625 a minute
        (16, 16_000, 0.0),
        (32, 20_000, 0.0),
        (40, 32_000, 0.0),
        (40, 36_000, 4_000),  # more instances than partitions add no throughput
        # 11 instances: ten own three partitions (333/min each of the 375 arriving), one owns two
        (11, 12_000, 30 * (375 - 1000 / 3)),
    ],
)
def test_even_load_is_served_at_the_effective_capacity(instances, arrivals_per_minute, backlog_growth_per_minute) -> None:
    minutes = 30
    scenario = Scenario(initial_capacity=instances, checkpoint_delay_seconds=0.0)
    result = simulate(np.full(minutes, float(arrivals_per_minute)), Script(), scenario)
    assert result.final_backlog == pytest.approx(backlog_growth_per_minute * minutes, abs=1e-6)
    assert result.cost == instances * minutes


# --- scaling: provisioning delay, scale-in at once, billing from the request ---------------------------------


@pytest.mark.parametrize(
    ("delay", "plan", "capacity", "serving"),
    [
        pytest.param(2, {5: 4, 12: 2}, [1] * 5 + [4] * 7 + [2] * 8, [1] * 7 + [4] * 5 + [2] * 8, id="out-2min-in-at-once"),
        pytest.param(0, {5: 4, 12: 2}, [1] * 5 + [4] * 7 + [2] * 8, [1] * 5 + [4] * 7 + [2] * 8, id="no-delay"),
        pytest.param(5, {5: 4, 12: 2}, [1] * 5 + [4] * 7 + [2] * 8, [1] * 10 + [4] * 2 + [2] * 8, id="5min-delay"),
        # a scale-in while a scale-out is in flight trims what will arrive
        pytest.param(2, {5: 8, 6: 3}, [1] * 5 + [8] + [3] * 14, [1] * 7 + [3] * 13, id="in-during-provisioning"),
        # two scale-outs in flight: each count arrives at its own time
        pytest.param(2, {5: 4, 6: 6}, [1] * 5 + [4] + [6] * 14, [1] * 7 + [4] + [6] * 12, id="stacked-scale-outs"),
        # instances removed by a scale-in are gone: scaling out again waits for the delay again
        pytest.param(2, {5: 8, 12: 2, 14: 4}, [1] * 5 + [8] * 7 + [2] * 2 + [4] * 6, [1] * 7 + [8] * 5 + [2] * 4 + [4] * 4,
                     id="out-after-in-waits-again"),
    ],
)
def test_provisioning_delay_and_billing(delay, plan, capacity, serving) -> None:
    scenario = Scenario(provisioning_delay_minutes=delay, checkpoint_delay_seconds=0.0)
    result = simulate(np.full(20, 500.0), Script(plan), scenario)
    assert result.capacity.tolist() == capacity
    assert result.serving.tolist() == serving
    assert result.cost == sum(capacity)  # billed per requested instance-minute
    assert result.scale_actions == len(plan)


def test_observation_reports_requested_capacity_and_minute() -> None:
    script = Script({3: 5})
    simulate(np.full(6, 100.0), script, Scenario())
    assert [o.minute for o in script.seen] == [1, 2, 3, 4, 5, 6]
    assert [o.capacity for o in script.seen] == [1, 1, 1, 5, 5, 5]


def test_holding_or_repeating_the_capacity_is_not_an_action() -> None:
    result = simulate(np.full(10, 100.0), Script({2: 1, 3: 1, 4: None}), Scenario())
    assert result.scale_actions == 0


# --- ages and SLO violations ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("slo_minutes", "violations"), [(5.0, 10), (3.0, 14), (9.5, 1), (10.0, 0), (20.0, 0)])
def test_slo_violation_minutes_count_minutes_with_oldest_age_over_slo(slo_minutes, violations) -> None:
    # one instance (1,000/min) facing 2,000/min: at the end of minute m the oldest waiting event
    # arrived at (m + 1) / 2, so its age is (m + 1) / 2 minutes
    scenario = Scenario(slo_minutes=slo_minutes)
    result = simulate(np.full(20, 2000.0), Script(), scenario)
    assert result.age == pytest.approx(np.arange(1, 21) / 2)
    assert result.slo_violation_minutes == violations
    assert result.max_age_minutes == pytest.approx(10.0)
    assert result.p99_age_minutes == pytest.approx(np.percentile(np.arange(1, 21) / 2, 99))
    assert result.final_backlog == pytest.approx(20 * 1000.0)
    assert result.meets_slo(scenario) is (violations == 0)


def test_age_is_zero_when_consumers_keep_up() -> None:
    result = simulate(np.full(10, 900.0), Script(), Scenario())
    assert (result.age == 0).all()
    assert result.slo_violation_minutes == 0


@pytest.mark.parametrize(
    ("violations", "minutes", "meets"),
    [(0, 1000, True), (1, 1000, True), (2, 1000, False), (1, 999, False), (0, 1, True)],
)
def test_meets_slo_allows_a_tenth_of_a_percent(violations, minutes, meets) -> None:
    result = simulate(np.full(3, 1.0), Script(), Scenario())
    result.slo_violation_minutes, result.minutes = violations, minutes
    assert result.meets_slo(Scenario()) is meets


@pytest.mark.parametrize("score_from", [0, 5, 12, 19])
def test_score_from_excludes_warm_up_minutes(score_from) -> None:
    arrivals = np.concatenate([np.full(10, 2000.0), np.full(10, 1500.0)])
    plan = {5: 2, 14: 3}  # decided at the end of minute index 4 and 13
    full = simulate(arrivals, Script(plan), Scenario(provisioning_delay_minutes=0))
    scored = simulate(arrivals, Script(plan), Scenario(provisioning_delay_minutes=0), score_from=score_from)
    assert scored.minutes == 20 - score_from
    assert scored.cost == full.capacity[score_from:].sum()
    assert scored.fluid_lower_bound == pytest.approx(arrivals[score_from:].sum() / 1000)
    assert scored.slo_violation_minutes == int((full.age[score_from:] > 5).sum())
    assert scored.max_age_minutes == pytest.approx(full.age[score_from:].max())
    assert scored.scale_actions == sum(minute - 1 >= score_from for minute in plan)
    # warm-up changes nothing in the world itself
    assert scored.capacity.tolist() == full.capacity.tolist()
    assert scored.final_backlog == full.final_backlog


def test_cost_ratio_is_cost_over_the_fluid_lower_bound() -> None:
    result = simulate(np.full(10, 500.0), Script(), Scenario(initial_capacity=2))
    assert result.fluid_lower_bound == pytest.approx(5.0)
    assert result.cost == 20
    assert result.cost_ratio == pytest.approx(4.0)


# --- checkpoints trail what was processed ---------------------------------------------------------------------


def _observed(delay: float, skew: float = 0.0) -> list[Observation]:
    script = Script({3: 4, 9: 2})
    arrivals = np.array([3000.0, 5000.0, 8000.0, 1000.0, 500.0, 4000.0, 2000.0, 0.0, 7000.0, 300.0, 100.0, 2500.0])
    simulate(arrivals, script, Scenario(checkpoint_delay_seconds=delay, skew=skew))
    return script.seen


@pytest.mark.parametrize("skew", [0.0, 0.4])
def test_checkpoints_trail_by_the_checkpoint_delay(skew) -> None:
    exact = _observed(0.0, skew)
    minute_behind = _observed(60.0, skew)
    half_minute_behind = _observed(30.0, skew)
    for k in range(1, len(exact)):
        # last-enqueued is current whatever the delay
        assert (minute_behind[k].last_enqueued == exact[k].last_enqueued).all()
        assert (minute_behind[k].checkpoint == exact[k - 1].checkpoint).all()
        halfway = ((exact[k].checkpoint + 1) + (exact[k - 1].checkpoint + 1)) / 2 - 1
        assert np.abs(half_minute_behind[k].checkpoint - halfway).max() <= 1
    assert (minute_behind[0].checkpoint == -1).all()  # nothing checkpointed before the first minute


# --- conservation -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("skew", [0.0, 0.3, 1.5])
def test_events_are_conserved_and_service_is_bounded(skew) -> None:
    scenario = Scenario(checkpoint_delay_seconds=0.0, skew=skew, provisioning_delay_minutes=1)
    arrivals = np.array([2000.0, 9000.0, 20000.0, 20000.0, 500.0, 0.0, 15000.0, 3000.0] * 4)
    script = Script({2: 8, 5: 32, 12: 3, 20: 16, 27: 1})
    result = simulate(arrivals, script, scenario)
    partitions = scenario.partitions
    cumulative = np.cumsum(arrivals)
    for k, observation in enumerate(script.seen):
        arrived = (observation.last_enqueued + 1).sum()
        processed = (observation.checkpoint + 1).sum()
        assert cumulative[k] - partitions <= arrived <= cumulative[k] + 1e-6
        assert observation.true_backlog == pytest.approx(result.backlog[k])
        # arrivals = processed + backlog, up to the sequence numbers' whole-event rounding
        assert abs(arrived - processed - observation.true_backlog) <= partitions
        if k:
            per_partition = observation.checkpoint - script.seen[k - 1].checkpoint
            assert per_partition.min() >= 0
            assert per_partition.max() <= 1000 + 1  # one owner serves at most mu a minute
    previous = np.concatenate([[0.0], result.backlog[:-1]])
    served = previous + arrivals - result.backlog
    assert (served >= -1e-6).all()
    assert (served <= result.serving * 1000 + 1e-6).all()
    assert (result.backlog >= -1e-9).all()
    assert arrivals.sum() == pytest.approx(served.sum() + result.final_backlog)


def test_skew_makes_a_hot_partition_the_bottleneck() -> None:
    # plenty of instances in total, but partition 0 gets a quarter of 12,000/min and one owner serves 1,000
    scenario = Scenario(initial_capacity=32, skew=0.3, checkpoint_delay_seconds=0.0)
    result = simulate(np.full(10, 12000.0), Script(), scenario)
    weights = scenario.partition_weights()
    assert weights.sum() == pytest.approx(1.0)
    assert weights[0] == pytest.approx(0.3 / 1.3, rel=1e-3)
    hot = 12000.0 * weights
    expected_backlog = np.maximum(hot - 1000.0, 0).sum() * 10
    assert result.final_backlog == pytest.approx(expected_backlog)


# --- traces ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "scenario", "expected"),
    [
        ([1.0, 5.0, 2.0], Scenario(), [4800.0, 24000.0, 9600.0]),
        ([10.0, 10.0], Scenario(), [24000.0, 24000.0]),
        ([0.0, 4.0, 1.0], Scenario(peak_instances=10, events_per_instance_per_minute=500), [0.0, 5000.0, 1250.0]),
    ],
)
def test_scale_trace_peak_needs_peak_instances(counts, scenario, expected) -> None:
    scaled = scale_trace(np.array(counts), scenario)
    assert scaled == pytest.approx(np.array(expected))
    assert scaled.max() == pytest.approx(scenario.peak_instances * scenario.events_per_instance_per_minute)


def test_scale_trace_rejects_an_empty_trace() -> None:
    with pytest.raises(ValueError, match="no arrivals"):
        scale_trace(np.zeros(5), Scenario())


@pytest.mark.parametrize(
    ("rows", "seconds_per_row", "expected"),
    [
        (np.arange(150.0), 1, [sum(range(60)), sum(range(60, 120))]),  # the partial minute is dropped
        (np.ones(120), 30, [2.0] * 60),
        (np.ones(12), 10, [6.0, 6.0]),
        (np.array([3.0, 4.0]), 60, [3.0, 4.0]),
        (np.array([3.0, 4.0]), 300, [3.0, 4.0]),
    ],
)
def test_per_minute_sums_finer_rows(rows, seconds_per_row, expected) -> None:
    assert per_minute(rows, seconds_per_row).tolist() == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("minute,count\n0,10\n1,20\n2,30\n", [10, 20, 30], id="header-integers"),
        pytest.param("0,10\n1,20\n2,30\n", [10, 20, 30], id="no-header-integers"),
        pytest.param("timestamp,arrivals\n2024-01-01T00:00,1.5\n2024-01-01T00:01,2.5\n", [1.5, 2.5], id="header-floats"),
        pytest.param("minute,count\n0,10\n1,\n2,30\n", [10, 30], id="blank-count-skipped"),
        pytest.param("0,12.5\n1,13\n2,14\n", [12.5, 13, 14], id="no-header-floats"),
    ],
)
def test_load_trace(tmp_path: Path, text: str, expected: list[float]) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(text, encoding="utf-8")
    assert load_trace(path).tolist() == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("minute,count\n", "no arrival counts"), ("", "no arrival counts"), ("0,5\n1,-2\n", "negative arrival counts")],
)
def test_load_trace_rejects_bad_files(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=fragment):
        load_trace(path)


@pytest.mark.parametrize("seconds_per_row", [7, 25, 45])
def test_per_minute_refuses_a_resolution_that_does_not_divide_a_minute(seconds_per_row) -> None:
    try:
        minutes = per_minute(np.ones(600), seconds_per_row)
    except ValueError:
        return
    # if it does not refuse, each minute must at least hold one minute of rows
    assert minutes.tolist() == pytest.approx([60 / seconds_per_row] * len(minutes))


# --- World: the kernel as a batch of one, driven a minute at a time (the demo's simulated hub) ----------------


def test_world_steps_one_minute_at_a_time() -> None:
    world = World(np.full(6, 2000.0), Scenario(partitions=4, provisioning_delay_minutes=1))
    assert (world.last_enqueued() == -1).all() and (world.checkpoints() == -1).all()
    ages = [world.advance(), world.advance()]
    assert ages == [0.5, 1.0]  # one instance, 2,000/min: after m minutes the oldest waiting event arrived at m / 2
    assert world.minute == 2 and world.requested == 1
    assert world.last_enqueued().tolist() == [999] * 4  # 4,000 events in, 1,000 a partition
    assert world.checkpoints().tolist() == [499] * 4  # 2,000 processed, 500 a partition
    assert world.request(1) is False  # the same count is not an action
    assert world.request(3) is True
    while not world.done:
        world.advance()
    assert world.capacity_series.tolist() == [1, 1, 3, 3, 3, 3]
    assert world.serving_series.tolist() == [1, 1, 1, 3, 3, 3]  # after the 1-minute provisioning delay
    assert world.backlog_series[1] == pytest.approx(2000.0)
    assert world.observe().true_backlog == pytest.approx(world.backlog.sum()) == pytest.approx(world.backlog_series[-1])
    result = world.result(algorithm="a", knob="k")
    assert (result.scale_actions, result.cost, result.knob) == (1, 14, "k")
