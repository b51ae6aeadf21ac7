"""The offline optimum (scaling/benchmarks/optimum.py): exact on its fluid models, checked against
brute force over every schedule of short traces, and bracketing the world's own optimum (every
schedule replayed through the physics) between its lower bound and its schedule.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from scaling.benchmarks import optimum
from scaling.simulation.world.loop import World, simulate
from scaling.simulation.world.physics import Physics
from scaling.simulation.world.scenario import Scenario

#: Five partitions: counts 1, 2, 3, 5, where 2 and 3 do not divide them (the models differ there).
SMALL = Scenario(peak_instances=4.0, events_per_instance_per_minute=100.0, partitions=5, provisioning_delay_minutes=2,
                 slo_minutes=2.0, initial_capacity=1, max_violation_fraction=0.0)


def trace(seed: int, minutes: int, high: float) -> np.ndarray:
    """Random arrivals, quiet in the first two minutes (the loop cannot scale before them)."""
    arrivals = np.random.default_rng(seed).uniform(0.0, high, minutes).round(1)
    arrivals[:2] = np.minimum(arrivals[:2], 60.0)
    return arrivals


def model_objective(arrivals: np.ndarray, model: optimum.FluidModel, requested: tuple[int, ...], action_price: int,
                    violation_price: int | None) -> float:
    """The priced objective of one schedule in a fluid model, written out minute by minute."""
    history = [model.initial] * (model.delay + 1)
    backlog, total, previous = 0.0, 0.0, model.initial
    for minute, count in enumerate(requested):
        history = [*history[1:], count]
        serving = min(history)
        backlog = max(backlog + arrivals[minute] - model.capacity[list(model.counts).index(serving)], 0.0)
        total += count + action_price * (count != previous)
        previous = count
        if backlog > model.limits[minute]:
            if violation_price is None:
                return math.inf
            total += violation_price
            backlog = min(backlog, optimum.FORGET_ABOVE * model.limits[minute])
    return total


def all_schedules(counts: list[int], minutes: int, initial: int) -> list[tuple[int, ...]]:
    """Every schedule; the first minute runs at the initial count, as in the world's loop."""
    return [(initial, *rest) for rest in itertools.product(counts, repeat=minutes - 1)]


@pytest.mark.parametrize("make", [optimum.relaxed_model, optimum.conservative_model])
@pytest.mark.parametrize(("seed", "delay", "action_price", "violation_price"), [
    (1, 2, 0, None), (2, 2, 3, None), (3, 1, 0, None), (4, 0, 2, None), (5, 2, 0, 4), (6, 2, 5, 9), (7, 3, 1, None), (8, 3, 0, 2), (9, 2, 0, None),
])
def test_cheapest_schedule_is_the_brute_force_optimum_of_its_model(make, seed, delay, action_price, violation_price):
    scenario = Scenario(**{**{field: getattr(SMALL, field) for field in SMALL.__slots__},
                           "provisioning_delay_minutes": delay})
    arrivals = trace(seed, 8, 400.0)
    model = make(arrivals, scenario)
    counts = model.counts.tolist()
    best = min(model_objective(arrivals, model, schedule, action_price, violation_price)
               for schedule in all_schedules(counts, len(arrivals), scenario.initial_capacity))
    if math.isinf(best):
        with pytest.raises(ValueError, match="no schedule meets the SLO"):
            optimum.cheapest_schedule(arrivals, model, action_price=action_price, violation_price=violation_price)
        return
    for across_states in (True, False):
        found = optimum.cheapest_schedule(arrivals, model, action_price=action_price, violation_price=violation_price,
                                          across_states=across_states)
        assert found.objective == pytest.approx(best)
        assert model_objective(arrivals, model, tuple(found.requested), action_price, violation_price) == pytest.approx(best)


def world_runs(arrivals: np.ndarray, scenario: Scenario, schedules: list[tuple[int, ...]]):
    """Every schedule through the world's physics, in one batch."""
    physics = Physics(arrivals, scenario, len(schedules))
    plan = np.array(schedules)
    while not physics.done:
        physics.advance()
        if physics.minute < len(arrivals):
            wanted = plan[:, physics.minute]
            rows = np.flatnonzero(wanted != physics.requested)
            if rows.size:
                physics.request(rows, wanted[rows])
    return physics.results(algorithm="brute", knobs=[str(s) for s in schedules], score_from=0)


@pytest.mark.parametrize(("seed", "fraction", "budget"), [(11, 0.0, None), (12, 0.0, 2), (13, 0.15, None), (14, 0.15, 1),
                                                          (15, 0.0, None), (16, 0.0, 3)])
def test_bounds_bracket_the_worlds_own_optimum(seed, fraction, budget):
    """The lower bound is at most the cheapest schedule that meets the SLO in the world within
    the budget, and the schedule found meets it there, at the cost it claims."""
    scenario = Scenario(**{**{field: getattr(SMALL, field) for field in SMALL.__slots__}, "max_violation_fraction": fraction})
    arrivals = trace(seed, 7, 420.0)
    schedules = all_schedules(optimum.relaxed_model(arrivals, scenario).counts.tolist(), len(arrivals), 1)
    runs = world_runs(arrivals, scenario, schedules)
    meeting = [run.cost for run in runs if run.meets_slo(scenario) and (budget is None or run.scale_actions <= budget)]
    (bracket,) = optimum.offline_optimum(arrivals, scenario, [budget], violation_price=3)
    assert meeting, "the case must have a schedule that meets the SLO"
    assert bracket.lower_bound <= min(meeting) + 1e-9
    assert bracket.cost >= min(meeting)
    replay = simulate(arrivals, optimum.ScheduledCapacity(bracket.schedule), scenario)
    assert replay.cost == bracket.cost
    assert replay.slo_violation_minutes == 0
    assert budget is None or replay.scale_actions <= budget


def test_the_relaxed_model_is_below_and_the_conservative_above_the_world_for_any_schedule():
    """For every schedule: the relaxed model's backlog is at most the world's, and the
    conservative model's worst partition at least the world's (so its ages bound the world's)."""
    scenario = SMALL
    arrivals = trace(21, 7, 420.0)
    relaxed, conservative = optimum.relaxed_model(arrivals, scenario), optimum.conservative_model(arrivals, scenario)
    schedules = all_schedules(relaxed.counts.tolist(), len(arrivals), 1)
    runs = world_runs(arrivals, scenario, schedules)
    for schedule, run in zip(schedules, runs, strict=True):
        low, high = model_backlogs(arrivals, relaxed, schedule), model_backlogs(arrivals, conservative, schedule)
        assert np.all(low <= run.backlog + 1e-6)
        assert np.all(run.backlog <= high + 1e-6)


def model_backlogs(arrivals: np.ndarray, model: optimum.FluidModel, schedule: tuple[int, ...]) -> np.ndarray:
    serving = optimum.serving_counts(np.array(schedule), model.delay, model.initial)
    capacity = model.capacity[np.searchsorted(model.counts, serving)]
    backlog, series = 0.0, []
    for arrived, served in zip(arrivals, capacity, strict=True):
        backlog = max(backlog + arrived - served, 0.0)
        series.append(backlog)
    return np.array(series)


@pytest.mark.parametrize("delay", [0, 1, 2, 3])
def test_serving_counts_are_what_the_world_serves(delay):
    """The smallest request over the last ``delay + 1`` minutes serves: scale-outs wait, scale-ins
    act at once and trim what is in flight."""
    scenario = Scenario(partitions=32, provisioning_delay_minutes=delay)
    rng = np.random.default_rng(delay)
    requested = rng.choice([1, 2, 4, 8, 16, 32], size=60)
    requested[0] = 1
    world = World(np.full(60, 100.0), scenario)
    while not world.done:
        world.advance()
        if world.minute < 60:
            world.request(int(requested[world.minute]))
    assert world.serving_series.tolist() == optimum.serving_counts(requested, delay, 1).tolist()


def test_a_schedule_replays_in_the_world_at_its_cost_and_meets_the_slo():
    """The standard scenario on a bursty synthetic day: the schedule's cost is the world's."""
    scenario = Scenario()
    minutes = np.arange(400)
    arrivals = 8000 + 6000 * np.sin(minutes / 40.0) + np.random.default_rng(5).uniform(0, 4000, len(minutes))
    arrivals[200:210] += 9000
    (unlimited, budgeted) = optimum.offline_optimum(arrivals, scenario, [None, 10])
    for bracket in (unlimited, budgeted):
        run = simulate(arrivals, optimum.ScheduledCapacity(bracket.schedule), scenario)
        assert run.cost == bracket.cost
        assert run.scale_actions == bracket.actions
        assert run.slo_violation_minutes == 0
        assert arrivals.sum() / scenario.events_per_instance_per_minute < bracket.lower_bound <= bracket.cost
    assert budgeted.actions <= 10
    assert budgeted.lower_bound >= unlimited.lower_bound


def test_skewed_partitions_are_refused():
    with pytest.raises(ValueError, match="uniform partitions"):
        optimum.relaxed_model(np.ones(10), Scenario(skew=0.1))


def test_the_optimum_command_writes_rows_and_compares_the_default(tmp_path):
    """``python -m scaling optimum`` on a short trace: one row per budget, replayed in the world,
    with project-default's cost over the bracket."""
    from scaling.benchmarks import optimum_bench

    minutes = np.arange(240)
    counts = 5000 + 4000 * np.sin(minutes / 30.0) + np.random.default_rng(2).uniform(0, 2000, len(minutes))
    path = tmp_path / "day" / "per_minute.csv"
    path.parent.mkdir()
    path.write_text("minute,arrivals\n" + "".join(f"{m},{c:.0f}\n" for m, c in zip(minutes, counts, strict=True)))
    rows = optimum_bench.trace_rows(str(path), steps=2)
    default = rows[0]
    assert default["algorithm"] == "project-default"
    found = rows[1:]
    assert [row["budget"] for row in found] == [None, 240 // 15, 240 // 30, default["scale_actions"]]
    for row in found:
        assert row["algorithm"] == "offline-optimum"
        assert row["meets_slo"] and row["slo_violation_minutes"] == 0
        assert 1.0 < row["lower_bound_ratio"] <= row["cost_ratio"]
        assert row["budget"] is None or row["scale_actions"] <= row["budget"]
        assert row["project_default_vs_schedule"] == pytest.approx(default["cost_ratio"] / row["cost_ratio"], rel=1e-3)
        assert row["project_default_vs_lower_bound"] >= row["project_default_vs_schedule"]
    markdown = optimum_bench.table(rows)
    assert "day/per_minute.csv" in markdown and "project-default: cost / fluid bound" in markdown


def test_the_benchmark_table_divides_by_the_offline_optimum_when_its_rows_are_there():
    from scaling.benchmarks.tables import mark_best, summary_table

    def row(algorithm, ratio, **extra):
        return {"trace": "t", "algorithm": algorithm, "knob": "k", "cost_ratio": ratio, "slo_violation_minutes": 0,
                "minutes": 100, "scale_actions": 10, "p99_age_minutes": 1.0, "max_age_minutes": 2.0, "meets_slo": True,
                "best": False, **extra}

    rows = [row("project-default", 1.2), row("clairvoyant", 1.5)]
    mark_best(rows)
    assert "offline optimum" not in summary_table(rows)
    rows.append(row("offline-optimum", 1.1, budget=None, lower_bound_ratio=1.0))
    mark_best(rows)
    table = summary_table(rows)
    header = next(line for line in table.splitlines() if line.startswith("| algorithm"))
    assert header.endswith("| cost / offline optimum |")
    default_line = next(line for line in table.splitlines() if line.startswith("| project-default"))
    assert default_line.endswith(f" {1.2 / 1.1:.3f} – {1.2 / 1.0:.3f} |")
    assert any(line.startswith("| offline-optimum") for line in table.splitlines())


@pytest.mark.parametrize("name", ["realistic", "hot"])
def test_the_stress_scenarios_are_refused(name) -> None:
    from scaling.benchmarks.optimum import relaxed_model

    with pytest.raises(ValueError, match="skew|standard scenario only"):
        relaxed_model(np.full(30, 1000.0), Scenario.named(name, skew=0.0))
