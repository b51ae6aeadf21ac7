"""The batched SLO-mode driver beside the engine in the loop: every number must agree.

Both call the one SLO kernel (scaling/domain/slo_kernel/, its tables in
test_domain_slo_kernel.py); what differs, and what these runs check, is the drivers: how each
reads the world (samples and their ownership by name, against the world's arrays) and the
order in which ``evaluate`` applies its gates (learning once capacity is steady, the prior and
the lower bound, the hold while partitions are unowned, and the kernel's cooldowns, budget and
bounds). A mismatch is a bug in
scaling/simulation/drivers/batched_slo.py (the engine-driven ``simulate`` is the reference)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaling.domain.policy import Bounds, Step
from scaling.simulation.drivers.batched_slo import batch_key, simulate_slo_batch, supports
from scaling.simulation.drivers.candidates import slo_candidates
from scaling.simulation.peers.looped import EngineAutoscaler, simulated_target
from scaling.simulation.world.loop import Scenario, simulate
from scaling.tuning.tasks import HistoryScenario
from tests.helpers import (
    assert_batch_gives_each_what_it_gets_alone,
    assert_same_run,
    flat,
    noisy_diurnal,
    step_surge,
)


def hand_made(scenario: Scenario) -> list:
    """SLO targets that take the engine's other paths: a configured throughput (right and far too
    low), a tight action budget with cooldowns, narrow unbalanced bounds with a percent step, a
    strict SLO with a short provisioning delay, a long provisioning delay with a loose budget, the
    busiest interval held at whatever the noise."""
    base = simulated_target(scenario, name="hand")
    slo = base.slo
    rate = scenario.events_per_instance_per_minute / 60
    return [
        replace(base, name="prior", slo=replace(slo, events_per_instance_per_second=rate)),
        replace(base, name="low-prior", slo=replace(slo, events_per_instance_per_second=rate / 3)),
        replace(base, name="budget", slo=replace(slo, max_actions_per_hour=1.0),
                scale_up=Step(step=1, cooldown_seconds=120), scale_down=Step(step=1, cooldown_seconds=900)),
        replace(base, name="narrow", bounds=Bounds(min_instances=2, max_instances=max(scenario.partitions * 5 // 8, 2),
                                                   balanced_counts=False),
                scale_up=Step(step_percent=100.0, cooldown_seconds=0)),
        replace(base, name="strict", slo=replace(slo, max_event_age_seconds=180.0, safety_seconds=30.0, headroom=0.2,
                                                 min_dwell_seconds=600.0, provisioning_delay_seconds=60.0)),
        replace(base, name="slow-start", slo=replace(slo, provisioning_delay_seconds=300.0, max_actions_per_hour=12.0)),
        replace(base, name="peak-always", slo=replace(slo, scale_in_peak_full_noise=0.0)),
    ]


def candidates(scenario: Scenario) -> list:
    base = simulated_target(scenario, name="default")
    return [base, *(candidate.target for candidate in slo_candidates(base, "small")), *hand_made(scenario)]


@pytest.mark.parametrize(("name", "expiry"), [("realistic", 60.0), ("realistic", 150.0), ("hot", 60.0)])
def test_the_stress_scenarios_match_too(name: str, expiry: float) -> None:
    """The stress knobs (checkpoints every 30 s, a moving hot spot, drift, drawn delays, frequent
    failures, the balanced load balancer and its pauses) on a small hub: the batch still decides
    what the engine decides, ownership included (an interval whose owners changed teaches no
    throughput; the live owners divide what was processed; the live owners say which instances
    serve). With an ownership expiry past the collection interval, a failed instance's
    partitions show no live owner at a collection, and the engine holds (``unowned_partitions``)."""
    scenario = Scenario.named(name, partitions=8, peak_instances=6.0, instance_failures_per_day=40.0
                              if name == "realistic" else 0.0, hot_spot_rotation_minutes=60 if name == "realistic" else 0,
                              slowdowns=((200.0, 120.0, 0.7, 0.0),) if name == "realistic" else (),
                              ownership_expiry_seconds=expiry)
    arrivals = noisy_diurnal(720, seed=13) * 0.4
    targets = candidates(scenario)[::4]
    reasons: set[str] = set()
    for target, result in zip(targets, simulate_slo_batch(arrivals, targets, scenario), strict=True):
        engine = EngineAutoscaler(target, on_decision=lambda sample, decision: reasons.add(decision.reason_code))
        assert_same_run(simulate(arrivals, engine, scenario), result, f"{name} {target.slo}")
    assert ("unowned_partitions" in reasons) == (expiry > 60.0)


@pytest.mark.parametrize(("changes", "traffic"), [
    pytest.param({"slowdowns": ((200.0, 120.0, 0.2, 0.0),)}, 0.4, id="slow-consumers"),
    pytest.param({"slowdowns": ((200.0, 45.0, 0.01, 0.0),)}, 0.4, id="stalled-consumers"),
    pytest.param({"slowdowns": ((300.0, 45.0, 0.01, 0.0),)}, 0.4, id="a-stall-held"),  # (past the quiet spell: reason stall)
    pytest.param({"peak_instances": 11.0}, 1.0, id="traffic-beyond-the-maximum"),
    pytest.param({"checkpoint_interval_seconds": 300.0}, 0.4, id="rare-checkpoints"),
    pytest.param({"checkpoint_delay_seconds": 180.0}, 0.4, id="late-checkpoints"),
    pytest.param({"rebalance_pause_seconds": 120.0, "assignment": "balanced"}, 0.4, id="long-rebalances"),
])
def test_the_trouble_worlds_match_too(changes: dict, traffic: float) -> None:
    """Issue 48's worlds (a hub-wide shortage, where no partition is set aside; the backlog
    growing, where no scale-in acts; checkpoints late or rare; long rebalance pauses): the batch
    decides what the engine decides, on a hub of 8 partitions, one with uneven shares."""
    for skew in (0.0, 0.05):
        scenario = Scenario(**{"partitions": 8, "peak_instances": 6.0, "skew": skew, **changes})
        arrivals = noisy_diurnal(600, seed=7) * traffic
        targets = candidates(scenario)[::7]
        for target, result in zip(targets, simulate_slo_batch(arrivals, targets, scenario), strict=True):
            assert_same_run(simulate(arrivals, EngineAutoscaler(target), scenario), result, f"{changes} skew {skew} {target.slo}")


def test_late_checkpoints_over_pauses_in_the_arrivals_match_too() -> None:
    """Two minutes without arrivals inside a 180 s checkpoint delay, every 100 minutes: the batch
    reads the quietest interval within the delay off its window as the engine does off its samples
    (``slo_kernel.dense_arrivals``), and learns the same delay."""
    scenario = Scenario(partitions=8, peak_instances=6.0, checkpoint_delay_seconds=180.0)
    arrivals = noisy_diurnal(600, seed=7) * 0.4
    for start in range(150, 600, 100):
        arrivals[start:start + 2] = 0.0
    targets = candidates(scenario)[::7]
    for target, result in zip(targets, simulate_slo_batch(arrivals, targets, scenario), strict=True):
        assert_same_run(simulate(arrivals, EngineAutoscaler(target), scenario), result, str(target.slo))


@pytest.mark.parametrize(("seed", "partitions", "failures_per_day"), [(1, 4, 60.0), (4, 8, 150.0), (6, 8, 60.0)])
def test_the_lone_instance_failing_matches_too(seed: int, partitions: int, failures_per_day: float) -> None:
    """A hub one instance serves, whose instances fail often. When the only instance fails,
    collect reports 0 owners: no instance serves, the interval teaches nothing, and the restart
    is expected to take a provisioning delay (the first case). When a new instance takes over
    within the minute, its index is the old one's but its name is new: an owner change that
    teaches nothing (the second). The third needs both. (Each diverged before: on the full NASA
    trace in the realistic scenario, the first one did at minute 22151.)"""
    scenario = Scenario.named("realistic", partitions=partitions, peak_instances=1.5, instance_failures_per_day=failures_per_day,
                              seed=seed, hot_spot_rotation_minutes=60, slowdowns=())
    arrivals = noisy_diurnal(720, seed=seed) * 0.1
    target = simulated_target(scenario, name="default")
    engine = simulate(arrivals, EngineAutoscaler(target), scenario)
    assert engine.scale_actions
    assert_same_run(engine, simulate_slo_batch(arrivals, [target], scenario)[0], f"seed {seed}")


def test_other_windows_batch_separately_and_match() -> None:
    scenario = Scenario(partitions=16, peak_instances=12.0, checkpoint_delay_seconds=10.0)
    base = simulated_target(scenario, name="windows")
    targets = [replace(base, slo=replace(base.slo, rate_window_seconds=300.0, history_seconds=900.0, safety_seconds=safety))
               for safety in (60.0, 120.0)]
    arrivals = noisy_diurnal(720, seed=5) * 0.5
    for target, result in zip(targets, simulate_slo_batch(arrivals, targets, scenario), strict=True):
        assert_same_run(simulate(arrivals, EngineAutoscaler(target), scenario), result, str(target.slo))
    with pytest.raises(ValueError, match="one window"):
        simulate_slo_batch(arrivals, [base, targets[0]], scenario)
    assert batch_key(base) != batch_key(targets[0])


def test_a_batch_gives_each_candidate_what_it_gets_alone() -> None:
    scenario = Scenario()
    arrivals = step_surge(600)
    targets = hand_made(scenario)
    assert_batch_gives_each_what_it_gets_alone(simulate_slo_batch, arrivals, targets, scenario)


def test_a_skewed_hub_scales_out_for_partitions_near_one_instance_as_the_engine_does() -> None:
    """Skew 0.4 on 8 partitions (the busiest 2.5x the mean, past ``SKEWED_SPREAD``): partitions
    near one instance scale out by the age they may carry (``carried_age_limits``, issue 53), in
    the batch as in the engine (the default's run differs from the plain limit's here)."""
    scenario = Scenario.named("hot", partitions=8, peak_instances=6.0, skew=0.4)
    arrivals = noisy_diurnal(720, seed=13) * 0.4
    targets = [simulated_target(scenario, name="default"), *hand_made(scenario)[1:3]]
    for target, result in zip(targets, simulate_slo_batch(arrivals, targets, scenario), strict=True):
        assert_same_run(simulate(arrivals, EngineAutoscaler(target), scenario), result, f"skewed {target.slo}")


@pytest.mark.parametrize("world", ["standard", "realistic", "hot"])
def test_candidates_on_different_traces_in_one_batch_get_what_they_get_alone(world: str) -> None:
    """The benchmark's family members of one length run as columns of one step (``trace_of``):
    each candidate on its own trace decides as it does alone on it (rates, ages, peaks and the
    trend are its trace's): with equal shares (``standard``: two share rows) and in stressed worlds."""
    scenario = Scenario.named(world, partitions=8, peak_instances=6.0,
                              instance_failures_per_day=20.0 if world == "realistic" else 0.0)
    traces = [noisy_diurnal(480, seed=13) * 0.4, step_surge(480) * 0.3, noisy_diurnal(480, seed=2) * 0.1]
    targets = hand_made(scenario)[1:4] + [simulated_target(scenario, name="default")]
    trace_of = [index for index in range(len(traces)) for _ in targets]
    batched = simulate_slo_batch(np.column_stack(traces), targets * len(traces), scenario, score_from=30, trace_of=trace_of)
    alone = [(arrivals, target) for arrivals in traces for target in targets]
    for (arrivals, target), result in zip(alone, batched, strict=True):
        assert_same_run(simulate_slo_batch(arrivals, [target], scenario, score_from=30)[0], result, f"{world} {target.name}")
    assert len({tuple(result.capacity) for result in batched}) > len(targets)  # the traces move the candidates apart
    assert sum(result.scale_actions for result in batched) > 30


@pytest.mark.parametrize("room", [60.0, 61.0, 3600.0])
@pytest.mark.parametrize("offset", [-1e-6, -4e-7, 0.0, 4e-7, 5e-7, 6e-7, 1e-6, 0.25])
def test_learning_waits_for_the_trail_as_timedelta_rounds_it(room: float, offset: float) -> None:
    """The engine compares ``previous - timedelta(seconds=trail) >= steady``; timedelta rounds
    the trail to microseconds, so a trail half a microsecond past the room still counts."""
    from datetime import timedelta

    from scaling.simulation.drivers.batched_slo import _learns
    from scaling.simulation.peers.looped import EPOCH

    steady = EPOCH.timestamp() + 1200.0
    previous = steady + room
    trail = np.array([room + offset])
    expected = EPOCH + timedelta(seconds=previous - EPOCH.timestamp()) - timedelta(seconds=float(trail[0])) >= EPOCH + timedelta(
        seconds=steady - EPOCH.timestamp())
    assert bool(_learns(trail, np.array([steady]), previous)[0]) == expected


def test_supports_only_what_it_reproduces() -> None:
    scenario = Scenario()
    base = simulated_target(scenario)
    assert supports(base)
    assert not supports(replace(base, mode="rules"))
    assert not supports(replace(base, bounds=Bounds(min_instances=0, max_instances=8)))
    assert not supports(replace(base, slo=replace(base.slo, provisioning_delay_seconds=90.5)))
    with pytest.raises(ValueError, match="cannot reproduce"):
        simulate_slo_batch(flat(10), [replace(base, mode="rules")], scenario)
    assert simulate_slo_batch(flat(10), [], scenario) == []


@settings(max_examples=20, deadline=None, derandomize=True)
@given(partitions=st.integers(2, 12), hot=st.integers(0, 3), minutes=st.integers(120, 300), seed=st.integers(0, 10_000),
       delay=st.sampled_from([0.0, 10.0, 45.0, 70.0]), interval=st.sampled_from([1, 1, 2]),
       safety=st.sampled_from([30.0, 90.0, 150.0]), headroom=st.sampled_from([0.0, 0.1]),
       dwell=st.sampled_from([300.0, 1200.0]), budget=st.sampled_from([1.0, 4.0, 30.0]),
       provisioning=st.sampled_from([0, 1, 3]), lowest=st.integers(1, 3), highest=st.integers(1, 14), balanced=st.booleans(),
       cooldowns=st.sampled_from([(0, 300), (120, 0), (0, 900)]))
def test_random_hubs_and_settings_match_the_engine(partitions, hot, minutes, seed, delay, interval, safety, headroom, dwell,
                                                   budget, provisioning, lowest, highest, balanced, cooldowns) -> None:
    """Random small hubs (some partitions hotter than others, so groups of equal shares and single
    partitions mix), random bursty arrivals, random SLO settings, bounds and cooldowns."""
    rng = np.random.default_rng(seed)
    weights = tuple(3.0 if index < hot else 1.0 for index in range(partitions))
    scenario = HistoryScenario(partitions=partitions, weights=weights, checkpoint_delay_seconds=delay,
                               collection_interval_minutes=interval, provisioning_delay_minutes=provisioning,
                               events_per_instance_per_minute=500.0, initial_capacity=int(rng.integers(1, partitions + 1)))
    arrivals = rng.gamma(2.0, 500.0 * partitions / 4, minutes) * (1 + (rng.random(minutes) < 0.05) * 4)
    base = replace(simulated_target(scenario, name="random"),
                   bounds=Bounds(min_instances=lowest, max_instances=max(highest, lowest), balanced_counts=balanced),
                   scale_up=Step(step_percent=50.0, cooldown_seconds=cooldowns[0]), scale_down=Step(step=1, cooldown_seconds=cooldowns[1]))
    slo = replace(base.slo, safety_seconds=safety, headroom=headroom, min_dwell_seconds=dwell, max_actions_per_hour=budget,
                  provisioning_delay_seconds=60.0 * provisioning)
    targets = [replace(base, slo=slo), replace(base, slo=replace(slo, events_per_instance_per_second=500.0 / 60))]
    for target, result in zip(targets, simulate_slo_batch(arrivals, targets, scenario), strict=True):
        assert_same_run(simulate(arrivals, EngineAutoscaler(target), scenario), result, f"{scenario} {target.slo}")
