"""The batched rule simulator against the engine in the loop: every number must agree.

Any mismatch is a bug in scaling/simulation/drivers/batched.py (the engine-driven ``simulate`` is the
reference)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaling.domain.policy import Bounds, Rule, Step, Tier
from scaling.simulation.drivers.batched import simulate_batch, supports
from scaling.simulation.drivers.candidates import rule_candidates, slo_candidates
from scaling.simulation.peers.looped import EngineAutoscaler, seed_target, simulated_target
from scaling.simulation.world.loop import Scenario, simulate
from tests.helpers import (
    JOB_SHAPED_CASES,
    assert_batch_gives_each_what_it_gets_alone,
    assert_batch_matches_engine,
    assert_same_run,
    flat,
    noisy_diurnal,
    step_surge,
)


def hand_made(scenario: Scenario) -> list:
    base = simulated_target(scenario, name="hand", mode="rules")
    tiers = Rule(name="tiers", metric="backlog_per_instance", aggregate="average", window_seconds=300, min_samples=3,
                 scale_up_above=1000.0, scale_down_below=200.0,
                 tiers=(Tier(1, 4, 500.0, 100.0), Tier(5, 16, 2000.0, 400.0)))
    percent = Rule(name="percent", metric="backlog", aggregate="maximum", window_seconds=180, min_samples=2,
                   scale_up_above=20000.0, scale_down_below=3000.0)
    latest = Rule(name="latest", metric="backlog", aggregate="latest", window_seconds=120, min_samples=1,
                  scale_up_above=30000.0, scale_down_below=5000.0)
    slow = Rule(name="slow", metric="backlog_per_instance", aggregate="average", window_seconds=600, min_samples=5,
                scale_up_above=1500.0, scale_down_below=300.0, scale_down_aggregate="maximum")
    up_only = Rule(name="up-only", metric="backlog_per_instance", aggregate="maximum", window_seconds=120,
                   min_samples=1, scale_up_above=800.0, source="hub")
    down_only = Rule(name="down-only", metric="backlog", aggregate="latest", window_seconds=60, min_samples=1,
                     scale_down_below=500.0)
    short = Rule(name="short", metric="backlog_per_instance", window_seconds=90, min_samples=1,
                 scale_up_above=600.0, scale_down_below=150.0)
    return [
        replace(base, name="tiers", rules=(tiers,), scale_up=Step(step=2, cooldown_seconds=60),
                scale_down=Step(step=1, cooldown_seconds=300), bounds=replace(base.bounds, balanced_counts=False)),
        replace(base, name="percent", rules=(percent,), scale_up=Step(step_percent=100.0, cooldown_seconds=0),
                scale_down=Step(step_percent=25.0, cooldown_seconds=600)),
        replace(base, name="two-rules", rules=(latest, slow), scale_up=Step(step=3, cooldown_seconds=120),
                scale_down=Step(step=2, cooldown_seconds=600),
                bounds=Bounds(min_instances=2, max_instances=20)),
        replace(base, name="split-directions", rules=(up_only, down_only), scale_up=Step(step=1, cooldown_seconds=0),
                scale_down=Step(step=1, cooldown_seconds=120),
                bounds=Bounds(min_instances=1, max_instances=12, balanced_counts=False)),
        replace(base, name="short-window", rules=(short,), scale_up=Step(step_percent=50.0, cooldown_seconds=0),
                scale_down=Step(step=4, cooldown_seconds=0), bounds=Bounds(min_instances=3, max_instances=64)),
        seed_target(scenario, 12000.0, 1500.0),
    ]


def candidates(scenario: Scenario) -> list:
    base = simulated_target(scenario)
    return [candidate.target for candidate in rule_candidates(base, "medium")] + hand_made(scenario)


CASES = {
    "flat": lambda delay: (Scenario(checkpoint_delay_seconds=delay), flat(720), 0),
    "surge": lambda delay: (Scenario(checkpoint_delay_seconds=delay), step_surge(), 600),
    "diurnal": lambda delay: (Scenario(checkpoint_delay_seconds=delay), noisy_diurnal(), 300),
    **JOB_SHAPED_CASES,
}


@pytest.mark.parametrize("delay", [0.0, 10.0])
@pytest.mark.parametrize("trace", sorted(CASES))
def test_batched_matches_engine(trace: str, delay: float) -> None:
    scenario, arrivals, score_from = CASES[trace](delay)
    targets = candidates(scenario)
    assert all(supports(target) for target in targets)
    if trace in ("skewed", "instant"):  # smaller hubs: every candidate; the standard hub: a rotating third
        chosen = targets
    else:  # (the engine runs ~4,000 minutes a second; the medium grid is checked whole below)
        offset = (sorted(CASES).index(trace) + int(delay)) % 3
        chosen = targets[offset::3]
    acted = assert_batch_matches_engine(simulate_batch, arrivals, chosen, scenario, score_from,
                                        lambda target: f"{trace} delay={delay} {target.name} {target.rules[0]}")
    assert acted  # the traces exercise the rules


def test_every_rule_candidate_of_the_medium_grid_matches_on_a_diurnal_day() -> None:
    scenario = Scenario(checkpoint_delay_seconds=10.0)
    arrivals = noisy_diurnal(1440, seed=11)
    targets = [candidate.target for candidate in rule_candidates(simulated_target(scenario), "medium")]
    for target, result in zip(targets, simulate_batch(arrivals, targets, scenario, score_from=500), strict=True):
        assert_same_run(simulate(arrivals, EngineAutoscaler(target), scenario, score_from=500), result, str(target.rules[0]))


def test_a_batch_gives_each_candidate_what_it_gets_alone() -> None:
    scenario = Scenario()
    arrivals = step_surge(600)
    targets = hand_made(scenario)
    assert_batch_gives_each_what_it_gets_alone(simulate_batch, arrivals, targets, scenario)


@pytest.mark.parametrize("world", ["standard", "realistic"])
def test_candidates_on_different_traces_in_one_batch_get_what_they_get_alone(world: str) -> None:
    """The benchmark's seed sweeps of several family members run as columns of one step
    (``trace_of``): each candidate on its own trace as it runs alone on that trace."""
    import numpy as np

    scenario = Scenario.named(world, partitions=8, peak_instances=6.0)
    traces = [step_surge(600) * 0.25, noisy_diurnal(600, seed=3) * 0.25]
    targets = hand_made(scenario)
    trace_of = [index for index in range(len(traces)) for _ in targets]
    batched = simulate_batch(np.column_stack(traces), targets * len(traces), scenario, score_from=60, trace_of=trace_of)
    for (arrivals, target), result in zip([(arrivals, target) for arrivals in traces for target in targets], batched,
                                          strict=True):
        assert_same_run(simulate_batch(arrivals, [target], scenario, score_from=60)[0], result, f"{world} {target.name}")
    assert sum(result.scale_actions for result in batched) > 20


def test_supports_only_what_it_reproduces() -> None:
    scenario = Scenario()
    base = simulated_target(scenario)
    assert not any(supports(candidate.target) for candidate in slo_candidates(base, "small"))
    lag = Rule(name="lag", metric="lag_seconds", scale_up_above=120.0, scale_down_below=20.0)
    assert not supports(replace(base, mode="rules", rules=(lag,)))
    elsewhere = Rule(name="other", metric="backlog", scale_up_above=10.0, source="other-hub")
    assert not supports(replace(base, mode="rules", rules=(elsewhere,)))
    with pytest.raises(ValueError, match="cannot reproduce"):
        simulate_batch(flat(10), [replace(base, mode="rules", rules=(lag,))], scenario)
    assert simulate_batch(flat(10), [], scenario) == []


def test_tuning_tasks_give_the_same_rows_batched_as_through_the_engine() -> None:
    from scaling.simulation.drivers.candidates import Candidate, all_candidates
    from scaling.tuning.planning import plan_tasks
    from scaling.tuning.tasks import CURRENT, TargetWork, batch_group, run_chunk, simulate_candidate

    scenario = Scenario(partitions=8, peak_instances=6.0, checkpoint_delay_seconds=10.0)
    base = simulated_target(scenario, name="t")
    arrivals = noisy_diurnal(480, seed=5) * 0.5
    lag = Rule(name="lag", metric="lag_seconds", scale_up_above=120.0, scale_down_below=20.0)
    longer = replace(base, slo=replace(base.slo, rate_window_seconds=300.0))
    candidates = (Candidate(CURRENT, seed_target(scenario, 4000.0, 500.0)), *all_candidates(base, "small")[:2],
                  *rule_candidates(base, "small"), Candidate("lag", replace(base, mode="rules", rules=(lag,))),
                  Candidate("longer rate window", longer))
    work = TargetWork("t", arrivals, scenario, 300, candidates)
    works = {"t": work}
    tasks = plan_tasks(works, 2, 3)
    # One batch per group: the seed rule and the rule grid; the SLO grid; the other SLO window;
    # the lag_seconds rule through the engine.
    assert sorted(indices for _, indices in tasks) == [[0, 3, 4], [1, 2], [5], [6]]
    assert batch_group(work, 5) is None and batch_group(work, 6) != batch_group(work, 1)
    rows = [row for task in tasks for row in run_chunk(task, works)]
    assert sorted(row["index"] for row in rows) == list(range(len(candidates)))
    for row in rows:
        alone = simulate_candidate(work, row["index"])
        assert {**row, "seconds": 0} == {**alone, "seconds": 0}


def test_run_candidates_batches_what_it_can_and_keeps_the_order() -> None:
    """The benchmark's project-tuned search: mixed candidates, each equal to its engine run."""
    from scaling.simulation.drivers.candidates import Candidate, all_candidates, batch_group, run_candidate, run_candidates

    scenario = Scenario(partitions=8, peak_instances=6.0)
    base = simulated_target(scenario, name="t")
    lag = Rule(name="lag", metric="lag_seconds", scale_up_above=120.0, scale_down_below=20.0)
    mixed = [Candidate("lag", replace(base, mode="rules", rules=(lag,))), *all_candidates(base, "small")]
    assert {batch_group(candidate.target) for candidate in mixed} >= {None, ("rules",)}
    arrivals = noisy_diurnal(360, seed=2) * 0.5
    for candidate, result in zip(mixed, run_candidates(mixed, arrivals, scenario, score_from=100), strict=True):
        assert_same_run(run_candidate(candidate, arrivals, scenario, score_from=100), result, candidate.label)
        assert result.knob == candidate.label


@pytest.mark.parametrize("initial_capacity", [1, 8])
def test_a_run_starting_outside_the_bounds_is_corrected_batched_as_through_the_engine(initial_capacity) -> None:
    """The engine brings a plan outside its bounds (2..6 here) inside at its first decision,
    whatever the load says; both batched simulators do the same."""
    from scaling.simulation.drivers.batched_slo import simulate_slo_batch

    scenario = Scenario(partitions=8, peak_instances=6.0, initial_capacity=initial_capacity)
    bounds = Bounds(min_instances=2, max_instances=6, balanced_counts=False)
    slo = replace(simulated_target(scenario, name="slo"), bounds=bounds)
    rules = replace(seed_target(scenario, 4000.0, 500.0), name="rules", bounds=bounds)
    arrivals = noisy_diurnal(240, seed=3) * 0.5
    for target, simulator in ((slo, simulate_slo_batch), (rules, simulate_batch)):
        [batched] = simulator(arrivals, [target], scenario)
        alone = simulate(arrivals, EngineAutoscaler(target), scenario, algorithm="candidate")
        assert_same_run(alone, batched, target.name)
        assert batched.capacity[0] == initial_capacity and 2 <= batched.capacity[5:].min() <= batched.capacity[5:].max() <= 6
