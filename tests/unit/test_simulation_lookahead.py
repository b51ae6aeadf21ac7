"""The look-ahead wired into the engine (issue 52), driven by the simulated world: ``forecast: off``,
``shadow`` and ``on`` on the same traffic, the learned and the perfect outlooks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scaling.domain import forecast, slo_kernel
from scaling.domain.decisions import DOWN, UP
from scaling.domain.engine import FORECAST_FLOOR, FORECAST_HOLD, evaluate
from scaling.domain.policy import Bounds, Step
from scaling.domain.slo_kernel import StepOutcome
from scaling.simulation.drivers.batched_slo import simulate_slo_batch, supports
from scaling.simulation.drivers.outlook import FORECAST, SweepLookAhead, perfect
from scaling.simulation.peers import looped as peers
from scaling.simulation.peers.lookahead import LearnedOutlook, PerfectOutlook, enqueued_totals, learned_series
from scaling.simulation.world.loop import Scenario, World, scale_trace, simulate
from scaling.simulation.world.physics import Physics
from tests.helpers import assert_same_run

DAY = forecast.DAY_MINUTES
SCENARIO = Scenario.named("standard")


def hourly_jumps(days: float = 2.5, seed: int = 3, jitter: int = 0) -> np.ndarray:
    """A jump to five times the base at the top of every hour, decaying over minutes (batch jobs);
    ``jitter``: each hour's jump up to that many minutes early or late (a clock no profile foresees)."""
    minutes = np.arange(int(days * DAY))
    rng = np.random.default_rng(seed)
    shift = np.repeat(rng.integers(-jitter, jitter + 1, size=len(minutes) // 60 + 2), 60)[:len(minutes)] if jitter else 0
    return scale_trace((1 + 4 * np.exp(-((minutes + shift) % 60) / 4.0)) * rng.gamma(100, 0.01, size=len(minutes)),
                       SCENARIO)


def white_noise(days: float = 2.5) -> np.ndarray:
    return scale_trace(1000 + 200 * np.abs(np.random.default_rng(7).standard_normal(int(days * DAY))), SCENARIO)


#: The engine loop's runs by (trace, mode), for the batched driver's equivalence tests.
ENGINE_RUNS: dict = {}


def run(arrivals: np.ndarray, mode: str, outlook=None, trace: str = "") -> tuple[np.ndarray, list]:
    decisions: list = []
    target = peers.simulated_target(SCENARIO, name="default", forecast=mode)
    autoscaler = peers.EngineAutoscaler(target, lambda sample, decision: decisions.append(decision),
                                        outlook=outlook or LearnedOutlook(refit_minutes=360))
    result = simulate(arrivals, autoscaler, SCENARIO)
    if trace:
        ENGINE_RUNS[trace, mode] = result
    return np.asarray(result.capacity), decisions


@pytest.fixture(scope="module")
def clock_runs() -> dict[str, tuple[np.ndarray, list]]:
    arrivals = hourly_jumps()
    return {mode: run(arrivals, mode, trace="clock") for mode in forecast.MODES}


def test_shadow_changes_no_decision_on_the_same_history(clock_runs) -> None:
    off, _ = clock_runs["off"]
    shadow, decisions = clock_runs["shadow"]
    on, _ = clock_runs["on"]
    assert np.array_equal(off, shadow)
    # Not vacuous: the look-ahead is trusted on this trace, would have acted, and on acts.
    would = [d for d in decisions if d.metrics.get("forecast_would_scale_to") not in (None, d.target_capacity or d.current_capacity)]
    assert would and all(d.reason_code not in (FORECAST_FLOOR, FORECAST_HOLD) for d in decisions)
    assert not np.array_equal(off, on)


def test_on_says_in_the_log_when_it_acted_and_what_it_expected(clock_runs) -> None:
    _, decisions = clock_runs["on"]
    acted = [d for d in decisions if d.reason_code in (FORECAST_FLOOR, FORECAST_HOLD)]
    assert {d.reason_code for d in acted} == {FORECAST_FLOOR, FORECAST_HOLD}
    for decision in acted:
        assert decision.metrics["forecast_acted"] and decision.metrics["forecast_trusted"]
        assert decision.metrics["forecast_expected_peak"] > 0
        assert any(reason.startswith("look-ahead:") for reason in decision.reasons)
    assert all(d.direction == UP for d in acted if d.reason_code == FORECAST_FLOOR and d.acts)


def test_stays_off_on_a_trace_without_a_period() -> None:
    arrivals = white_noise()
    off, _ = run(arrivals, "off")
    on, decisions = run(arrivals, "on")
    assert np.array_equal(off, on)
    judged = [d for d in decisions if "forecast_trusted" in d.metrics]
    assert judged and not any(d.metrics["forecast_trusted"] for d in judged)
    assert any("no period" in d.metrics.get("forecast_untrusted", "") for d in judged)


def test_the_look_ahead_never_scales_in_by_itself() -> None:
    """At every minute of a run, with any trusted outlook (random series), the engine with ``on``
    asks for at least what it asks for with ``off``: the count with ``on`` is never below; a
    scale-in with ``on`` is one ``off`` makes too."""
    arrivals = hourly_jumps(days=0.5)
    points: list = []
    target = peers.simulated_target(SCENARIO, name="default")
    autoscaler = peers.EngineAutoscaler(target)
    original = autoscaler.decide

    def decide(observation):
        points.append((autoscaler.state, tuple(autoscaler.history), observation))
        return original(observation)

    autoscaler.decide = decide  # type: ignore[method-assign]
    simulate(arrivals, autoscaler, SCENARIO)
    on_target = replace(target, forecast="on")
    rng = np.random.default_rng(52)
    scale_ins = 0
    for state, history, observation in points[::7]:
        sample = autoscaler.sample(observation)
        window = [*history, sample]
        off = evaluate(target, state, window, sample.collected_at)
        for _ in range(3):
            expected = tuple(rng.gamma(1.0, 1.0, 30) * rng.choice([0.0, 100.0, 2000.0, 20000.0]))
            on = evaluate(on_target, state, window, sample.collected_at, outlook=forecast.Outlook(expected, True))
            before = off.current_capacity
            assert (on.target_capacity or before) >= (off.target_capacity or before)
            if on.acts and on.direction == DOWN:
                assert off.acts and off.direction == DOWN
                scale_ins += 1
    assert scale_ins  # scale-ins were there to hold


def test_the_perfect_outlook_is_the_true_arrivals_ahead() -> None:
    arrivals = np.arange(100.0)
    outlook = PerfectOutlook(arrivals, horizon=15)

    class Seen:
        minute = 10

    result = outlook(Seen())  # type: ignore[arg-type]
    assert result.trusted and result.expected == tuple(float(value) for value in range(10, 25))


def test_forecast_targets_run_in_the_batched_driver_too() -> None:
    target = peers.simulated_target(SCENARIO, name="default")
    assert supports(target) and supports(replace(target, forecast="shadow")) and supports(replace(target, forecast="on"))


def test_the_series_worked_out_up_front_is_what_the_loop_is_told_each_minute() -> None:
    """The learned outlook is a function of the arrivals alone: the series the batched driver
    reads equals, observation by observation, what ``LearnedOutlook`` tells the engine (the same
    refits at the same minutes on the same arrivals), trusted after two days on the hourly clock."""
    arrivals = hourly_jumps(days=2.3)
    world = World(arrivals, SCENARIO)
    outlook, told = LearnedOutlook(), []
    while not world.done:
        world.advance()
        told.append(outlook(world.observe()))
    minutes = np.arange(1, len(arrivals) + 1)
    series = learned_series(enqueued_totals(world.physics.enqueued[minutes, :, 0]))
    assert series.trusted.tolist() == [item.trusted for item in told]
    assert series.trusted[-1] and not series.trusted[2878] and outlook.fits == 2
    for row, item in enumerate(told):
        assert series.lengths[row] == len(item.expected)
        assert series.expected[row, :series.lengths[row]].tolist() == list(item.expected)


def sweep(arrivals: np.ndarray, modes: tuple[str, ...], outlook=None) -> list:
    targets = [peers.simulated_target(SCENARIO, name="default", forecast=mode) for mode in modes]
    return simulate_slo_batch(arrivals, targets, SCENARIO, outlook=outlook)


def test_the_sweep_decides_what_the_engine_decides_with_forecast_on_where_it_is_trusted(clock_runs) -> None:
    """The hourly clock, trusted after two days: the batched driver's ``on`` run is the engine
    loop's, bit for bit, and so are ``off`` and ``shadow`` (which changes nothing there either)."""
    off, shadow, on = sweep(hourly_jumps(), ("off", "shadow", "on"))
    assert_same_run(ENGINE_RUNS["clock", "on"], on, "on")
    assert_same_run(ENGINE_RUNS["clock", "off"], off, "off")
    assert_same_run(ENGINE_RUNS["clock", "off"], shadow, "shadow")
    assert not np.array_equal(off.capacity, on.capacity)  # the look-ahead acted


def test_the_sweep_decides_what_the_engine_decides_where_the_clock_earns_no_trust() -> None:
    """Each hour's jump up to ten minutes early or late: no profile earns trust, and the engine's
    ``on`` run, the sweep's ``on`` run and ``off`` are one run."""
    arrivals = hourly_jumps(jitter=10)
    on = sweep(arrivals, ("on",))[0]
    _, decisions = run(arrivals, "on", trace="jitter")
    judged = [d for d in decisions if "forecast_trusted" in d.metrics]
    assert judged and not any(d.metrics["forecast_trusted"] for d in judged)
    assert any("back-test error" in d.metrics.get("forecast_untrusted", "") for d in judged)
    assert_same_run(ENGINE_RUNS["jitter", "on"], on, "on")
    assert_same_run(ENGINE_RUNS["jitter", "on"], sweep(arrivals, ("off",))[0], "off")


def test_the_sweep_with_a_perfect_outlook_decides_what_the_engine_decides_per_candidate() -> None:
    """Half a day of the hourly clock with the true next 15 minutes (trusted from the start), on
    candidates that take the rule's other paths (a short and a long provisioning delay, a short
    dwell with a strict SLO, a tight action budget with cooldowns, unbalanced narrow bounds): every
    candidate's run is the engine loop's."""
    arrivals = hourly_jumps(days=0.5)
    base = peers.simulated_target(SCENARIO, name="default", forecast="on")
    slo = base.slo
    targets = [
        base,
        replace(base, slo=replace(slo, provisioning_delay_seconds=300.0)),
        replace(base, slo=replace(slo, max_event_age_seconds=180.0, safety_seconds=30.0, min_dwell_seconds=600.0,
                                  provisioning_delay_seconds=60.0)),
        replace(base, slo=replace(slo, max_actions_per_hour=2.0), scale_up=Step(step=1, cooldown_seconds=120),
                scale_down=Step(step=1, cooldown_seconds=900)),
        replace(base, bounds=Bounds(min_instances=2, max_instances=SCENARIO.partitions * 5 // 8, balanced_counts=False)),
    ]
    batched = simulate_slo_batch(arrivals, targets, SCENARIO, outlook=perfect(15))
    decisions: list = []
    for index, (target, result) in enumerate(zip(targets, batched, strict=True)):
        engine = simulate(arrivals, peers.EngineAutoscaler(target, lambda sample, decision: decisions.append(decision),
                                                            outlook=PerfectOutlook(arrivals, 15)), SCENARIO)
        assert_same_run(engine, result, f"candidate {index}")
    assert sum(d.reason_code in (FORECAST_FLOOR, FORECAST_HOLD) for d in decisions) > 20


def test_in_the_sweep_the_look_ahead_never_scales_in_by_itself(monkeypatch) -> None:
    """At every collection of a sweep with a perfect outlook, the proposal after the look-ahead
    (``SweepLookAhead.applied``) is never below the step's, and it scales in only where the step
    did: a floor may make a scale-in smaller, a hold may stop one, nothing starts one."""
    arrivals = hourly_jumps(days=0.5)
    targets = [peers.simulated_target(SCENARIO, name="default", forecast="on")] * 3
    seen: list = []
    original = SweepLookAhead.applied

    def applied(self, outcome, *args):
        before = (outcome.wanted.copy(), outcome.direction.copy())
        after = original(self, outcome, *args)
        seen.append((before, (after.wanted.copy(), after.direction.copy()), args[1].copy()))
        return after

    monkeypatch.setattr(SweepLookAhead, "applied", applied)
    simulate_slo_batch(arrivals, targets, SCENARIO, outlook=perfect(15))
    changed = 0
    for (wanted, direction), (new_wanted, new_direction), capacity in seen:
        proposed = np.where(direction == 0, capacity, wanted)
        after = np.where(new_direction == 0, capacity, new_wanted)
        assert (after >= proposed).all()
        assert ((new_direction >= 0) | (direction < 0)).all()
        changed += int((after != proposed).sum())
    assert changed


def test_the_burst_family_is_run_by_its_own_flag_beside_the_gated_one() -> None:
    import argparse

    from scaling.benchmarks import family_cli
    from scaling.simulation.world.trace_family import burst_family_names

    bursts = family_cli.members(argparse.Namespace(family=False, burst_family=True))
    assert bursts == [f"family/{name}" for name in burst_family_names()] and len(bursts) == 15
    both = family_cli.members(argparse.Namespace(family=True, burst_family=True))
    assert both[-15:] == bursts and len(both) > 15
    assert not family_cli.gate_alone(argparse.Namespace(gate="b.json", trace=[], family=False, burst_family=True))


@pytest.mark.parametrize(("default", "learned", "perfect", "share"), [
    (2.0, 1.5, 1.0, 0.5), (2.0, 1.0, 1.0, 1.0), (2.0, 2.2, 1.0, -0.2), (2.0, 1.9, 2.0, None), (2.0, 1.5, 2.5, None)])
def test_the_share_of_the_perfect_saving_captured(default, learned, perfect, share) -> None:
    from scaling.benchmarks.family import look_ahead_share

    result = look_ahead_share(default, learned, perfect)
    assert result == pytest.approx(share) if share is not None else result is None


def test_the_family_table_reports_the_share_per_member() -> None:
    from scaling.benchmarks.family import look_ahead_lines

    rows = [{"trace": "family/clock-seed3-noise10", "algorithm": algorithm, "cost_ratio": cost, "minutes": 600,
             "scale_actions": 20} for algorithm, cost in (("project-default", 1.7), ("project-forecast", 1.5),
                                                           ("perfect-lookahead", 1.6), ("perfect-lookahead-30", 1.45))]
    lines = look_ahead_lines(rows, "standard")
    assert lines[-2] == "| clock-seed3-noise10 | 1.700, 30.0 | 1.500, 30.0 | 1.600, 30.0 | 1.450, 30.0 | 2.00 | 0.80 |"
    assert look_ahead_lines(rows[:1], "standard") == []


def test_a_floor_between_the_scale_in_and_the_current_count_is_snapped_down_as_the_engine_snaps_it() -> None:
    """With a dwell shorter than the floor's window a floor can make a scale-in smaller without
    holding it (16 -> 2 becomes 16 -> 9 here): the sweep snaps it down to an allowed count (8 of
    1-8, 11, 16, 32), as the engine's gates snap a scale-in, and marks it as the look-ahead's."""
    target = peers.simulated_target(SCENARIO, name="default", forecast="on")
    target = replace(target, slo=replace(target.slo, min_dwell_seconds=60.0))
    arrivals = np.concatenate([np.full(12, 100.0), [500.0], np.full(47, 1600.0)])
    look = SweepLookAhead([target], Physics(arrivals, SCENARIO, 1), 1, perfect(15), SCENARIO.partitions)
    rate = SCENARIO.events_per_instance_per_minute / 10 / 60  # (events per second per instance)
    alone = forecast.look_ahead(2, 16, arrivals[10:25], True, "on", 2, 1, rate * 60, 3.5, 0.0, forecast.FLOOR_WINDOW_MINUTES)
    assert (alone.count, alone.held_scale_in) == (9, False)
    outcome = StepOutcome(np.array([2]), np.array([slo_kernel.DOWN]), np.array([slo_kernel.SURPLUS]), np.array([np.nan]),
                          np.array([np.nan]))
    after = look.applied(outcome, 10, np.array([16]), np.array([rate]), np.array([0.0]))
    assert (after.wanted[0], after.direction[0], after.reason[0]) == (8, slo_kernel.DOWN, FORECAST)
