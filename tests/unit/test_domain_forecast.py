"""The look-ahead's pure core (scaling/domain/forecast.py, issue 52): it finds the repeats a history
holds and no others, earns trust only by its back-test, can raise a floor or hold a scale-in and
never scale in, and in shadow mode changes no decision."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.domain import forecast as fc

DAY = fc.DAY_MINUTES


def diurnal(days: int, rng: np.random.Generator, noise: float = 0.05) -> np.ndarray:
    t = np.arange(days * DAY)
    return 1000 * (1 + 0.5 * np.cos(2 * np.pi * t / DAY)) * rng.gamma(1 / noise**2, noise**2, size=len(t))


def jumps(days: int, period: int, offset: int = 0, factor: float = 5.0, decay: float = 4.0) -> np.ndarray:
    """A jump to ``factor`` at minute ``offset`` of every ``period``, decaying (batch jobs, cron)."""
    since = (np.arange(days * DAY) - offset) % period
    return 1 + (factor - 1) * np.exp(-since / decay)


def white_noise(days: int = 14) -> np.ndarray:
    return 1000 + 200 * np.random.default_rng(7).standard_normal(days * DAY)


def random_walk(days: int = 14) -> np.ndarray:
    return np.abs(1000 + np.cumsum(15 * np.random.default_rng(8).standard_normal(days * DAY))) + 50


# --- finding repeats --------------------------------------------------------------------------------


@pytest.mark.parametrize(("period", "offset"), [(10, 3), (60, 0), (60, 17), (240, 100)])
def test_a_jump_at_fixed_minutes_is_found_at_its_period_not_a_multiple_or_divisor(period: int, offset: int) -> None:
    history = diurnal(6, np.random.default_rng(period)) * jumps(6, period, offset, decay=max(1.0, period / 15))
    periods = fc.find_periods(history)
    assert periods[0].minutes == period
    assert DAY in {found.minutes for found in periods}  # the daily cycle under it, found next


def test_a_weekly_repeat_is_found_beside_the_daily_one() -> None:
    days = 22
    t = np.arange(days * DAY)
    weekend = np.where((t // DAY) % 7 >= 5, 0.4, 1.0)
    history = diurnal(days, np.random.default_rng(3)) * weekend
    assert {fc.DAY_MINUTES, fc.WEEK_MINUTES} <= {found.minutes for found in fc.find_periods(history)}


@pytest.mark.parametrize("trace", [white_noise, random_walk], ids=["white-noise", "random-walk"])
def test_a_trace_without_a_period_yields_no_trusted_forecast_and_changes_nothing(trace) -> None:
    history = trace()
    result = fc.forecast(history)
    assert not result.trust.trusted
    assert result.profile == fc.Profile()
    expected = result.profile.expected(history, len(history))
    for decided, current in ((3, 5), (8, 5), (5, 5)):
        outcome = fc.look_ahead(decided, current, expected * 10, result.trust.trusted, "on", 2, 20, 1000.0)
        assert (outcome.count, outcome.acted, outcome.held_scale_in, outcome.raised_floor) == (decided, False, False, False)


def test_a_repeating_jump_earns_trust_and_the_profile_foresees_the_next_one() -> None:
    history = diurnal(8, np.random.default_rng(5)) * jumps(8, 60, offset=0, decay=6.0)
    result = fc.forecast(history)
    assert result.trust.trusted, result.trust.reasons
    assert result.backtest.error < fc.MAX_ERROR_OVER_PERSISTENCE * result.backtest.persistence_error
    # Four minutes before a top of the hour (three hours back, so that it is known), the jump is in
    # the profile four minutes ahead.
    origin = len(history) - 3 * 60 - 4
    expected = result.profile.expected(history, origin, 10)
    assert int(np.argmax(expected)) == 4
    assert expected[4] > 3 * expected[0]


def test_a_regime_change_withholds_trust() -> None:
    history = diurnal(10, np.random.default_rng(6)) * jumps(10, 60, decay=6.0)
    history[-2 * DAY:] *= 3  # the last days at three times the level
    result = fc.forecast(history)
    assert not result.trust.trusted
    assert any(reason.startswith("regime change: level") for reason in result.trust.reasons)


# --- the verdict, at each boundary ------------------------------------------------------------------

PERIOD = (fc.Period(60, 100.0, 0.5),)


@pytest.mark.parametrize(
    ("history", "periods", "error", "persistence", "regime", "trusted", "reason"),
    [
        (fc.MIN_HISTORY_MINUTES, PERIOD, 0.1, 0.5, (), True, ""),
        (fc.MIN_HISTORY_MINUTES - 1, PERIOD, 0.1, 0.5, (), False, "history"),
        (fc.MIN_HISTORY_MINUTES, (), 0.1, 0.5, (), False, "no period"),
        (fc.MIN_HISTORY_MINUTES, PERIOD, fc.MAX_ERROR, 1.0, (), True, ""),
        (fc.MIN_HISTORY_MINUTES, PERIOD, fc.MAX_ERROR + 1e-9, 1.0, (), False, "back-test error"),
        (fc.MIN_HISTORY_MINUTES, PERIOD, 0.1, 0.2, (), True, ""),  # exactly 0.5 x persistence's
        (fc.MIN_HISTORY_MINUTES, PERIOD, 0.1 + 1e-9, 0.2, (), False, "persistence"),
        (fc.MIN_HISTORY_MINUTES, PERIOD, 0.15, 0.2, (), False, "persistence"),  # 0.75: a daily jump's, WC98's
        (fc.MIN_HISTORY_MINUTES, PERIOD, math.nan, 0.5, (), False, "back-test error"),
        (fc.MIN_HISTORY_MINUTES, PERIOD, 0.1, 0.5, ("level x3.00",), False, "regime change"),
    ],
)
def test_trust_at_each_boundary(history, periods, error, persistence, regime, trusted, reason) -> None:
    verdict = fc.judge(history, periods, fc.BackTest(error, persistence, 10), regime)
    assert verdict.trusted is trusted
    assert (not verdict.reasons) if trusted else any(reason in text for text in verdict.reasons)


def test_no_back_test_is_no_trust() -> None:
    assert not fc.judge(fc.MIN_HISTORY_MINUTES, PERIOD, None).trusted
    assert not fc.judge(fc.MIN_HISTORY_MINUTES, PERIOD, fc.BackTest(0.1, 0.5, 0)).trusted


@pytest.mark.parametrize(("ratio", "changed"), [(1.0, False), (2.0, False), (2.01, True), (0.5, False), (0.49, True)])
def test_a_regime_change_is_a_level_beyond_twice_either_way(ratio: float, changed: bool) -> None:
    fitted = np.full(100, 1000.0)
    assert bool(fc.regime_change(fitted, fitted * ratio)) is changed


# --- the decision-facing rules ----------------------------------------------------------------------

RATE = 1000.0  # events a minute per instance


@pytest.mark.parametrize(
    ("current", "expected", "trusted", "floor"),
    [
        (4, [4000, 4000, 8000, 4000, 4000], True, 8),  # the rise at the provisioning delay (2): ordered now
        (4, [4000, 4000, 4000, 8000, 4000], True, 8),  # ... or within the window after it
        (4, [4000, 4000, 4000, 4000, 8000], True, 4),  # beyond the window: a later decision orders it
        (4, [4000, 4000, 8000.0, 0, 0], True, 8),  # exactly 8 instances' worth: 8, not 9
        (4, [4000, 4000, 8000.5, 0, 0], True, 9),  # beyond: one more
        (4, [4000, 4000, 0, 0, 0], True, 4),  # nothing beyond the current count's service: unchanged
        (4, [9000, 9000, 0, 0, 0], True, 10),  # the backlog built within the delay (10,000) to clear at once
        (6, [0, 0, 1000, 1000, 0], True, 6),  # a fall ahead: never below the current count
        (4, [4000, 4000, 8000, 8000, 8000], False, 4),  # untrusted: unchanged
        (4, [4000, 4000, math.nan, 8000, 8000], True, 4),  # no number, no floor
    ],
)
def test_floor_before_rise(current: int, expected: list[float], trusted: bool, floor: int) -> None:
    assert fc.floor_before_rise(current, expected, 2, RATE, trusted) == floor


@pytest.mark.parametrize(
    ("expected", "window", "budget", "floor"),
    [
        ([4000, 4000, 8000, 4000, 4000], 2, 0.0, 8),  # no budget: the busiest minute served as it comes
        ([4000, 4000, 8000, 4000, 4000], 2, 3.5, 4),  # a one-minute burst the backlog carries: no floor
        ([4000, 4000, *[8000] * 10], 10, 3.5, 6),  # ten minutes at 8,000: 6 carry them within 3.5 minutes, 5 do not
        ([4000, 4000, *[8000] * 10], 10, 0.0, 8),
    ],
)
def test_floor_before_rise_sizes_for_what_the_backlog_cannot_carry(expected: list[float], window: int, budget: float,
                                                                    floor: int) -> None:
    assert fc.floor_before_rise(4, expected, 2, RATE, True, window_minutes=window, age_budget_minutes=budget) == floor


@pytest.mark.parametrize(("budget", "held"), [(0.0, True), (3.5, False)])
def test_a_burst_the_backlog_carries_holds_no_scale_in(budget: float, held: bool) -> None:
    expected = np.full(40, 2000.0)
    expected[10] = 6000.0  # one minute at twice what 3 instances serve
    assert fc.holds_off_scale_in(3, expected, 20, 2, RATE, True, age_budget_minutes=budget) is held


@pytest.mark.parametrize(
    ("rise_at", "height", "trusted", "held"),
    [
        (21, 6000, True, True),  # within dwell (20) + provisioning (2): held
        (22, 6000, True, False),  # the first minute a new scale-out could serve: not held
        (5, 3000, True, False),  # what the proposed 3 instances serve: no reason to wait
        (5, 3000.5, True, True),
        (5, 6000, False, False),  # untrusted: never held
    ],
)
def test_holds_off_scale_in(rise_at: int, height: float, trusted: bool, held: bool) -> None:
    expected = np.full(40, 2000.0)
    expected[rise_at] = height
    assert fc.holds_off_scale_in(3, expected, 20, 2, RATE, trusted) is held


def random_cases(count: int = 2000):
    rng = np.random.default_rng(52)
    for _ in range(count):
        current, decided = int(rng.integers(1, 30)), int(rng.integers(1, 30))
        expected = rng.uniform(0, 40_000, size=int(rng.integers(0, 40))) * rng.choice((0.0, 0.1, 1.0))
        budget, backlog = float(rng.choice((0.0, 3.5))), float(rng.choice((0.0, rng.uniform(0, 50_000))))
        yield decided, current, expected, bool(rng.integers(0, 2)), int(rng.integers(0, 5)), int(rng.integers(0, 30)), budget, backlog


def test_the_look_ahead_never_scales_in_by_itself() -> None:
    """Whatever it expects: the floor is never below the current count, the hold is a boolean, and
    the count after the look-ahead is never below the observed load's, nor below the current count
    unless the observed load scaled in."""
    for decided, current, expected, trusted, delay, dwell, budget, backlog in random_cases():
        assert fc.floor_before_rise(current, expected, delay, RATE, trusted, age_budget_minutes=budget, backlog=backlog) >= current
        assert isinstance(fc.holds_off_scale_in(decided, expected, dwell, delay, RATE, trusted, budget, backlog), bool)
        outcome = fc.look_ahead(decided, current, expected, trusted, "on", delay, dwell, RATE, budget, backlog)
        assert outcome.count >= decided
        assert outcome.count >= current or decided < current
        assert outcome.count <= max(decided, current) or outcome.raised_floor


def test_shadow_mode_changes_no_decision_and_says_what_on_would_do() -> None:
    for decided, current, expected, trusted, delay, dwell, budget, backlog in random_cases():
        shadow = fc.look_ahead(decided, current, expected, trusted, "shadow", delay, dwell, RATE, budget, backlog)
        acting = fc.look_ahead(decided, current, expected, trusted, "on", delay, dwell, RATE, budget, backlog)
        assert shadow.count == decided and not shadow.acted
        assert shadow.would_be == acting.count
        assert (shadow.raised_floor, shadow.held_scale_in) == (acting.raised_floor, acting.held_scale_in)
        assert fc.look_ahead(decided, current, expected, trusted, "off", delay, dwell, RATE).count == decided


@pytest.mark.parametrize(
    ("decided", "current", "count", "acted", "held"),
    [
        (3, 6, 6, True, True),  # a scale-in to 3 held at 6: the rise at minute 10 needs 8
        (9, 6, 9, False, False),  # a scale-out beyond the floor: unchanged
        (6, 6, 6, False, False),  # no rise within the floor's window: unchanged
    ],
)
def test_look_ahead_on_a_rise_within_the_dwell(decided: int, current: int, count: int, acted: bool, held: bool) -> None:
    expected = np.full(30, 2000.0)
    expected[10] = 8000.0
    outcome = fc.look_ahead(decided, current, expected, True, "on", 2, 20, RATE)
    assert (outcome.count, outcome.acted, outcome.held_scale_in) == (count, acted, held)


def test_an_unknown_mode_fails_naming_it() -> None:
    with pytest.raises(ValueError, match="'sometimes'"):
        fc.look_ahead(3, 3, [], True, "sometimes", 2, 20, RATE)


@pytest.mark.parametrize(("minutes", "found"), [(fc.MIN_CYCLES * DAY - 1, False), (fc.MIN_CYCLES * DAY, True)])
def test_a_period_needs_its_minimum_of_cycles_in_the_history(minutes: int, found: bool) -> None:
    history = diurnal(4, np.random.default_rng(9), noise=0.02)[:minutes]
    assert (DAY in {period.minutes for period in fc.find_periods(history)}) is found
