"""The look-ahead wired into the engine (issue 52), driven by the simulated world: ``forecast: off``,
``shadow`` and ``on`` on the same traffic, the learned and the perfect outlooks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scaling.domain import forecast
from scaling.domain.decisions import DOWN, UP
from scaling.domain.engine import FORECAST_FLOOR, FORECAST_HOLD, evaluate
from scaling.simulation.drivers.batched_slo import supports
from scaling.simulation.peers import looped as peers
from scaling.simulation.peers.lookahead import LearnedOutlook, PerfectOutlook
from scaling.simulation.world.loop import Scenario, scale_trace, simulate

DAY = forecast.DAY_MINUTES
SCENARIO = Scenario.named("standard")


def hourly_jumps(days: float = 2.5, seed: int = 3) -> np.ndarray:
    """A jump to five times the base at the top of every hour, decaying over minutes (batch jobs)."""
    minutes = np.arange(int(days * DAY))
    rng = np.random.default_rng(seed)
    return scale_trace((1 + 4 * np.exp(-(minutes % 60) / 4.0)) * rng.gamma(100, 0.01, size=len(minutes)), SCENARIO)


def white_noise(days: float = 2.5) -> np.ndarray:
    return scale_trace(1000 + 200 * np.abs(np.random.default_rng(7).standard_normal(int(days * DAY))), SCENARIO)


def run(arrivals: np.ndarray, mode: str, outlook=None) -> tuple[np.ndarray, list]:
    decisions: list = []
    target = peers.simulated_target(SCENARIO, name="default", forecast=mode)
    autoscaler = peers.EngineAutoscaler(target, lambda sample, decision: decisions.append(decision),
                                        outlook=outlook or LearnedOutlook(refit_minutes=360))
    result = simulate(arrivals, autoscaler, SCENARIO)
    return np.asarray(result.capacity), decisions


@pytest.fixture(scope="module")
def clock_runs() -> dict[str, tuple[np.ndarray, list]]:
    arrivals = hourly_jumps()
    return {mode: run(arrivals, mode) for mode in forecast.MODES}


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


def test_forecast_targets_run_through_the_engine_loop_not_the_batched_driver() -> None:
    target = peers.simulated_target(SCENARIO, name="default")
    assert supports(target)
    assert not supports(replace(target, forecast="shadow")) and not supports(replace(target, forecast="on"))


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
