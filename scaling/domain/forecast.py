"""The look-ahead's pure core: what a target's own history says the next minutes bring.

A rise that comes every hour, every morning or every Monday is met as a surprise each time by a
decision that sees only the past minutes. This module finds such repeats in a target's per-minute
arrival history (days to weeks), keeps them as a compact seasonal profile, back-tests the profile
on the history's own last part, and says whether it has earned trust. Then two rules turn the
expected load into what a decision may do with it, and nothing else:

- ``floor_before_rise``: the count to have serving before a predicted rise (ordered a provisioning
  delay ahead). It returns the current count or more, never less.
- ``holds_off_scale_in``: whether a scale-in must wait because a predicted rise comes within the
  dwell (plus the provisioning delay) that the scale-in would start. A boolean: it can stop a
  scale-in, never ask for one.

Both size for what the backlog cannot carry (``carries``: the fluid backlog within an age budget):
sized for the busiest expected minute, a floor raised for every short jump the backlog would have
absorbed cost more than no look-ahead at all (docs/forecast.md, "What it bought").

So the look-ahead can raise the floor and hold a scale-in, and it cannot scale in: the observed
load decides every scale-in. An untrusted forecast changes nothing, and ``look_ahead`` in
``shadow`` mode returns what it would have done beside the decision it leaves unchanged.
How the engine is to call it: docs/forecast.md.

Pure numpy, no Azure. The Function App must not import it at its own import time (numpy costs
most of the 0.6 s budget); the evaluate path imports it where it already holds numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from scaling.domain.forecast_record import SeasonalIndex, StoredProfile
from scaling.domain.samples import MetricSample
from scaling.domain.slo_kernel import lookahead

DAY_MINUTES = 1440
WEEK_MINUTES = 7 * DAY_MINUTES
#: The periods looked for: every whole minute from 3 to 2 hours (cron-like jobs at fixed minutes of
#: the hour, their harmonics), then shifts, half days, the day and the week.
CANDIDATE_PERIODS: tuple[int, ...] = (*range(3, 121), 180, 240, 360, 480, 720, DAY_MINUTES, WEEK_MINUTES)
#: A period counts only when the history holds this many of its cycles (fewer could be chance).
MIN_CYCLES = 3
#: How far above chance a period's phases must stand: under no period the statistic
#: (``Period.strength``) is about 1, give or take sqrt(2 / (period - 1)); a period counts at this
#: many of those spreads above 1.
MIN_SIGMAS = 6.0
#: A period explains at least this share of the variance (the rest, chance or noise, is no repeat).
MIN_SHARE = 0.02
#: Of the periods that explain within this share of the best one's explained variance, the
#: shortest is kept: a multiple of a period explains as much (it contains it), a divisor less.
NEAR_BEST = 0.9
#: At most this many periods are kept (greedily, each on what the ones before left).
MAX_PERIODS = 3
#: The minutes a profile foresees (what the floor and the dwell need: provisioning plus a dwell).
HORIZON_MINUTES = 30
#: Too little history to judge by: two days (a daily period needs its ``MIN_CYCLES`` besides).
MIN_HISTORY_MINUTES = 2 * DAY_MINUTES
#: The back-test's error bound: the profile's mean absolute error over the horizon, over the mean
#: load (WAPE), must be at most this ...
MAX_ERROR = 0.35
#: ... and at most this share of persistence's (the last minutes' mean held flat): a profile that
#: does not clearly beat "what just happened" has not earned the right to act. Wired into the
#: engine, profiles at 0.68-0.81 of persistence's (the daily jump, WC98) made it 0.3-0.4% dearer,
#: those at 0.03-0.28 (jumps every 10 minutes to 4 hours) 4-31% cheaper (docs/forecast.md).
MAX_ERROR_OVER_PERSISTENCE = 0.5
#: A regime change: the back-tested part's level (or its minute-to-minute change) over the fitted
#: part's, beyond this factor either way.
REGIME_LIMIT = 2.0
#: The back-test compares minutes in blocks of this many (their means): a decision sizes for
#: minutes, not for one minute's independent noise, which no forecast can know.
ERROR_BLOCK_MINUTES = 5
#: Back-test origins: one every this many minutes of the held-out part.
BACKTEST_STEP_MINUTES = 5
#: The recent minutes whose de-seasonalised mean is the level the profile multiplies.
LEVEL_MINUTES = 15


@dataclass(frozen=True, slots=True)
class Period:
    """A repeat found in the history: its length and how far its phases stand above chance."""

    minutes: int
    #: Variance of the phase means over the variance of the series, times the cycles: about 1 for
    #: noise, large for a repeat.
    strength: float
    #: The share of the variance its phases explain beyond chance (``period / minutes`` of it).
    share: float = 0.0


@dataclass(frozen=True, slots=True)
class Seasonal:
    """One period's multiplicative index: ``index[(minute // resolution) % len(index)]``, minute
    counted from the history's first minute."""

    period: int
    resolution: int
    index: tuple[float, ...] = field(repr=False)

    def factor(self, minutes: np.ndarray) -> np.ndarray:
        return np.asarray(self.index)[(minutes % self.period) // self.resolution]


@dataclass(frozen=True, slots=True)
class Profile:
    """The compact seasonal profile: the product of its seasonal indices (none: a flat profile)."""

    seasonals: tuple[Seasonal, ...] = ()

    def factor(self, minutes: np.ndarray) -> np.ndarray:
        result = np.ones(len(minutes))
        for seasonal in self.seasonals:
            result = result * seasonal.factor(minutes)
        return result

    def expected(self, history: np.ndarray, start: int, horizon: int = HORIZON_MINUTES) -> np.ndarray:
        """The load expected in minutes ``start .. start + horizon - 1`` (minute 0: the history's
        first), from the de-seasonalised level of the ``LEVEL_MINUTES`` before ``start``."""
        return self.expected_after(history[max(0, start - LEVEL_MINUTES):start], start, horizon)

    def expected_after(self, recent: np.ndarray, start: int, horizon: int = HORIZON_MINUTES) -> np.ndarray:
        """The same from ``recent``, the arrivals of the minutes just before ``start`` (what a
        decision has at hand: its window, not the whole history)."""
        recent = np.asarray(recent, dtype=float)[-LEVEL_MINUTES:]
        if len(recent) == 0:
            return np.zeros(horizon)
        factors = self.factor(np.arange(start - len(recent), start))
        level = float(np.sum(recent) / max(np.sum(factors), 1e-12))
        return level * self.factor(np.arange(start, start + horizon))


@dataclass(frozen=True, slots=True)
class BackTest:
    """The profile's and persistence's error (WAPE over the horizon) on the held-out minutes."""

    error: float
    persistence_error: float
    origins: int


@dataclass(frozen=True, slots=True)
class Trust:
    trusted: bool
    #: Why not (empty when trusted).
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Forecast:
    """What a history yields: the periods found, the profile, its back-test and the verdict."""

    periods: tuple[Period, ...]
    profile: Profile
    backtest: BackTest | None
    trust: Trust
    #: Minutes of history the profile was fitted on (the index's origin is its first minute).
    history_minutes: int


# --- finding the repeats --------------------------------------------------------------------------


def _moving_mean(values: np.ndarray, window: int) -> np.ndarray:
    """The centred mean over ``window`` minutes (valid part only: ``len - window + 1`` values)."""
    sums = np.cumsum(np.concatenate(([0.0], values)))
    return (sums[window:] - sums[:-window]) / window


def _phase_strength(residual: np.ndarray, period: int) -> tuple[float, float]:
    """(strength, share beyond chance) of a period's phase means in ``residual`` (whole cycles)."""
    cycles = len(residual) // period
    if cycles < 2:
        return 0.0, 0.0
    folded = residual[: cycles * period].reshape(cycles, period)
    total = float(folded.var())
    if total <= 0:
        return 0.0, 0.0
    explained = float(folded.mean(axis=0).var()) / total
    return explained * cycles, explained - 1 / cycles


def _ratio_to_trend(values: np.ndarray, period: int) -> tuple[np.ndarray, int]:
    """The series over its one-period moving mean (what a period-``period`` repeat leaves), and the
    minute of the history its first value is."""
    trend = _moving_mean(values, period)
    first = period // 2
    middle = values[first:first + len(trend)]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(trend > 0, middle / np.where(trend > 0, trend, 1.0), 1.0)
    return ratio, first


def find_periods(history: Sequence[float] | np.ndarray, candidates: Sequence[int] = CANDIDATE_PERIODS,
                 max_periods: int = MAX_PERIODS) -> tuple[Period, ...]:
    """The repeats in a per-minute history, strongest first: each the candidate whose phases explain
    the most of what the periods before it left (its ratio to its own moving mean, so that a slow
    trend or a daily cycle under an hourly job does not count as the job). A multiple of a period
    explains the same with fewer cycles, so the fundamental wins."""
    values = np.asarray(history, dtype=float)
    found: list[Period] = []
    for _ in range(max_periods):
        significant = []
        for period in candidates:
            if any(period == kept.minutes for kept in found) or len(values) < MIN_CYCLES * period:
                continue
            ratio, _ = _ratio_to_trend(values, period)
            strength, share = _phase_strength(ratio - 1.0, period)
            if strength >= 1 + MIN_SIGMAS * math.sqrt(2 / max(period - 1, 1)) and share >= MIN_SHARE:
                significant.append(Period(period, strength, share))
        if not significant:
            break
        most = max(period.share for period in significant)
        best = min((period for period in significant if period.share >= NEAR_BEST * most), key=lambda period: period.minutes)
        found.append(best)
        values = values / np.maximum(_seasonal(values, best.minutes).factor(np.arange(len(values))), 1e-9)
    return tuple(found)


def _seasonal(values: np.ndarray, period: int) -> Seasonal:
    """A period's index: the median over cycles of the series over its moving mean, per bin of
    ``resolution`` minutes (a week in 7-minute bins: 1,440 numbers), normalised to mean 1."""
    resolution = max(1, period // DAY_MINUTES)
    ratio, first = _ratio_to_trend(values, period)
    minutes = np.arange(first, first + len(ratio))
    bins = period // resolution
    slots = (minutes % period) // resolution
    index = np.ones(bins)
    for slot in range(bins):
        chosen = ratio[slots == slot]
        if len(chosen):
            index[slot] = float(np.median(chosen))
    mean = float(index.mean())
    index = index / mean if mean > 0 else np.ones(bins)
    return Seasonal(period, resolution, tuple(float(value) for value in index))


def fit_profile(history: Sequence[float] | np.ndarray, periods: Sequence[Period]) -> Profile:
    """The seasonal profile of ``periods`` on ``history``: each index on what the ones before left."""
    values = np.asarray(history, dtype=float)
    seasonals = []
    for period in periods:
        if len(values) < MIN_CYCLES * period.minutes:
            continue
        seasonal = _seasonal(values, period.minutes)
        seasonals.append(seasonal)
        values = values / np.maximum(seasonal.factor(np.arange(len(values))), 1e-9)
    return Profile(tuple(seasonals))


# --- earning trust --------------------------------------------------------------------------------


def backtest(history: np.ndarray, profile: Profile, start: int, horizon: int = HORIZON_MINUTES,
             step: int = BACKTEST_STEP_MINUTES) -> BackTest:
    """The profile (fitted before ``start``) forecasting every ``step`` minutes from ``start`` on,
    each over ``horizon`` minutes, beside persistence (the last ``LEVEL_MINUTES``' mean held flat);
    both against the actual ``ERROR_BLOCK_MINUTES`` means."""
    profile_error = persistence_error = actual_sum = 0.0
    origins = 0
    for origin in range(max(start, LEVEL_MINUTES), len(history) - horizon + 1, step):
        actual = _blocks(history[origin:origin + horizon])
        expected = _blocks(profile.expected(history, origin, horizon))
        flat = float(history[origin - LEVEL_MINUTES:origin].mean())
        profile_error += float(np.abs(expected - actual).sum())
        persistence_error += float(np.abs(flat - actual).sum())
        actual_sum += float(actual.sum())
        origins += 1
    if actual_sum <= 0:
        return BackTest(math.inf, math.inf, origins)
    return BackTest(profile_error / actual_sum, persistence_error / actual_sum, origins)


def _blocks(values: np.ndarray) -> np.ndarray:
    """Per-minute values as ``ERROR_BLOCK_MINUTES`` means (repeated per minute, so sums compare)."""
    whole = len(values) // ERROR_BLOCK_MINUTES * ERROR_BLOCK_MINUTES
    means = values[:whole].reshape(-1, ERROR_BLOCK_MINUTES).mean(axis=1)
    return np.concatenate((np.repeat(means, ERROR_BLOCK_MINUTES), values[whole:]))


def regime_change(fitted: np.ndarray, recent: np.ndarray, limit: float = REGIME_LIMIT) -> tuple[str, ...]:
    """Why the recent part looks unlike the part the profile was fitted on (empty: alike): its mean
    level, or its minute-to-minute change over the mean, beyond ``limit`` either way."""
    reasons = []
    for name, before, after in (("level", _mean(fitted), _mean(recent)), ("burstiness", _change(fitted), _change(recent))):
        if before <= 0 or after <= 0:
            if before != after:
                reasons.append(f"{name} {before:.3g} -> {after:.3g}")
            continue
        if max(after / before, before / after) > limit:
            reasons.append(f"{name} x{after / before:.2f} ({before:.3g} -> {after:.3g}; limit x{limit:g})")
    return tuple(reasons)


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else 0.0


def _change(values: np.ndarray) -> float:
    mean = _mean(values)
    return float(np.abs(np.diff(values)).mean() / mean) if mean > 0 and len(values) > 1 else 0.0


def judge(history_minutes: int, periods: Sequence[Period], result: BackTest | None,
          regime: Sequence[str] = ()) -> Trust:
    """Whether a forecast has earned the right to act: enough history, a period, a back-test error
    at most ``MAX_ERROR`` and at most ``MAX_ERROR_OVER_PERSISTENCE`` of persistence's, no regime
    change. Every failed condition is named."""
    reasons = []
    if history_minutes < MIN_HISTORY_MINUTES:
        reasons.append(f"history {history_minutes} min < {MIN_HISTORY_MINUTES}")
    if not periods:
        reasons.append("no period")
    if result is None or result.origins == 0:
        reasons.append("no back-test")
    else:
        if not result.error <= MAX_ERROR:
            reasons.append(f"back-test error {result.error:.3f} > {MAX_ERROR}")
        if not result.error <= MAX_ERROR_OVER_PERSISTENCE * result.persistence_error:
            reasons.append(f"back-test error {result.error:.3f} > {MAX_ERROR_OVER_PERSISTENCE} x persistence's "
                           f"{result.persistence_error:.3f}")
    reasons.extend(f"regime change: {reason}" for reason in regime)
    return Trust(not reasons, tuple(reasons))


def holdout_minutes(history_minutes: int) -> int:
    """The history's last part the back-test holds out: a fifth, between one day and a week."""
    return int(min(WEEK_MINUTES, max(DAY_MINUTES, history_minutes // 5)))


def forecast(history: Sequence[float] | np.ndarray, horizon: int = HORIZON_MINUTES) -> Forecast:
    """Find the periods and fit the profile on all but the last part, back-test there, judge; the
    profile returned (when trusted, the one to use) is then refitted on the whole history."""
    values = np.asarray(history, dtype=float)
    length = len(values)
    held = holdout_minutes(length)
    fitted = values[: max(0, length - held)]
    periods = find_periods(fitted) if length >= MIN_HISTORY_MINUTES else ()
    result = backtest(values, fit_profile(fitted, periods), len(fitted), horizon) if periods else None
    trust = judge(length, periods, result, regime_change(fitted, values[len(fitted):]) if periods else ())
    profile = fit_profile(values, periods) if trust.trusted else Profile()
    return Forecast(periods, profile, result, trust, length)


# --- what a decision may do with it ---------------------------------------------------------------


def _batch_of_one(expected: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``expected`` as the kernel's (1, minutes) row and its length (NaN-free: a row is read whole)."""
    values = np.asarray(expected, dtype=float).reshape(1, -1)
    return values, np.array([values.shape[1]])


def _one(value) -> np.ndarray:
    return np.array([value])


def carries(count: int, expected: np.ndarray, throughput_per_instance: float, age_budget_minutes: float,
            backlog: float = 0.0) -> bool:
    """Whether ``count`` instances keep the expected arrivals within the age budget: the fluid
    backlog, from ``backlog``, never more than ``age_budget_minutes`` of their work. A burst the
    backlog carries within it asks for no instance (a budget of 0: every minute served as it comes).
    The kernel's rule (``slo_kernel.lookahead.carries``) on a batch of one."""
    values, _ = _batch_of_one(expected)
    return bool(lookahead.carries(_one(count), values, np.ones(values.shape, dtype=bool), _one(float(throughput_per_instance)),
                                  _one(float(age_budget_minutes)), _one(float(backlog)))[0])


def _usable(expected: np.ndarray, length: np.ndarray, trusted: bool, throughput_per_instance: float) -> np.ndarray:
    return lookahead.usable_rows(expected, length, _one(bool(trusted)), _one(float(throughput_per_instance)))


def floor_before_rise(current: int, expected: Sequence[float] | np.ndarray, provisioning_minutes: int,
                      throughput_per_instance: float, trusted: bool, window_minutes: int = 2,
                      age_budget_minutes: float = 0.0, backlog: float = 0.0) -> int:
    """The count to have serving before a predicted rise: the fewest instances that, serving from
    the provisioning delay on (what a count ordered now serves first), carry the expected arrivals
    of the ``window_minutes`` after it within ``age_budget_minutes`` (the backlog there: ``backlog``
    now plus what arrives beyond ``current``'s service until the delay). Never below ``current``: a
    floor raises, it cannot lower; untrusted, ``current``. (``slo_kernel.lookahead.floors``.)"""
    values, length = _batch_of_one(expected)
    return int(lookahead.floors(_one(current), values, length, _one(provisioning_minutes), _one(window_minutes),
                                _one(float(throughput_per_instance)), _one(float(age_budget_minutes)), _one(float(backlog)),
                                _usable(values, length, trusted, throughput_per_instance))[0])


def holds_off_scale_in(proposed: int, expected: Sequence[float] | np.ndarray, dwell_minutes: int,
                       provisioning_minutes: int, throughput_per_instance: float, trusted: bool,
                       age_budget_minutes: float = 0.0, backlog: float = 0.0) -> bool:
    """Whether a scale-in to ``proposed`` must wait: within the dwell it would start plus the
    provisioning delay (the earliest a new scale-out could serve), ``proposed`` would not carry
    the expected arrivals within ``age_budget_minutes``. A hold only: it never asks for a
    scale-in; untrusted, never. (``slo_kernel.lookahead.holds``, from one above ``proposed``.)"""
    values, length = _batch_of_one(expected)
    return bool(lookahead.holds(_one(proposed), _one(proposed + 1), values, length,
                                _one(dwell_minutes + provisioning_minutes), _one(float(throughput_per_instance)),
                                _one(float(age_budget_minutes)), _one(float(backlog)),
                                _usable(values, length, trusted, throughput_per_instance))[0])


MODES = ("off", "shadow", "on")
#: The minutes after the provisioning delay a raised floor must carry: one SLO (docs/forecast.md).
FLOOR_WINDOW_MINUTES = 5


@dataclass(frozen=True, slots=True)
class Outlook:
    """What a decision is told of the next minutes: the arrivals expected per minute (events,
    minute 0 the one that starts now), whether the forecast behind them earned trust, and why not.
    The caller builds it from the stored profile; the engine never reads the profile itself."""

    expected: tuple[float, ...]
    trusted: bool
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LookAhead:
    """A decision after the look-ahead: the count to request, and what the look-ahead would have
    made it (in ``shadow``, only logged) with why."""

    count: int
    would_be: int
    raised_floor: bool
    held_scale_in: bool
    acted: bool


def look_ahead(decided: int, current: int, expected: Sequence[float] | np.ndarray, trusted: bool, mode: str,
               provisioning_minutes: int, dwell_minutes: int, throughput_per_instance: float,
               age_budget_minutes: float = 0.0, backlog: float = 0.0, window_minutes: int = 2) -> LookAhead:
    """Apply the look-ahead to the count the observed load ``decided``: raise it to the floor before
    a predicted rise, or keep ``current`` when a scale-in is held. The result is never below
    ``decided`` (no scale-in comes from here) and, unless ``decided`` scales in, never below
    ``current``. ``shadow`` returns ``decided`` unchanged with the would-be count beside it; ``off``
    and an untrusted forecast change nothing."""
    if mode not in MODES:
        raise ValueError(f"forecast mode {mode!r}: expected one of {', '.join(MODES)}")
    values, length = _batch_of_one(expected)
    usable = _usable(values, length, trusted and mode != "off", throughput_per_instance)
    count, would_be, raised, held, acted = lookahead.look_ahead_over(
        _one(decided), _one(current), values, length, usable, _one(mode == "on"), _one(provisioning_minutes),
        _one(dwell_minutes), _one(window_minutes), _one(float(throughput_per_instance)), _one(float(age_budget_minutes)),
        _one(float(backlog)))
    return LookAhead(count=int(count[0]), would_be=int(would_be[0]), raised_floor=bool(raised[0]),
                     held_scale_in=bool(held[0]), acted=bool(acted[0]))


# --- the stored profile and the outlook a decision is given ------------------------------------


def arrivals_per_minute(points: Sequence[tuple[datetime, float]]) -> tuple[np.ndarray, datetime | None]:
    """Per-minute arrivals from (collection time, events enqueued so far) points, oldest first,
    and the minute the first value is (``None``: fewer than two points). The increase between two
    points is spread evenly over the whole minutes between them, so a missing sample is a share of
    what arrived, not a zero that reads as a lull; a counter that went back (a reset) counts 0."""
    if len(points) < 2:
        return np.zeros(0), None
    origin = points[0][0].replace(second=0, microsecond=0)
    minutes = [int((moment - origin) // timedelta(minutes=1)) for moment, _ in points]
    totals = [total for _, total in points]
    values = np.zeros(max(minutes[-1] - minutes[0], 0))
    for index in range(1, len(points)):
        start, end = minutes[index - 1] - minutes[0], minutes[index] - minutes[0]
        if end > start:
            values[start:end] += max(0.0, totals[index] - totals[index - 1]) / (end - start)
    return values, origin + timedelta(minutes=minutes[0])


def stored_profile(target: str, result: Forecast, origin: datetime, fitted_at: datetime) -> StoredProfile:
    """What to keep of a fit (its indices rounded to 4 significant digits: a day is 1,440 numbers)."""
    return StoredProfile(
        target, fitted_at, origin, result.history_minutes, result.trust.trusted, result.trust.reasons,
        tuple(period.minutes for period in result.periods),
        tuple(SeasonalIndex(seasonal.period, seasonal.resolution, tuple(float(f"{value:.4g}") for value in seasonal.index))
              for seasonal in result.profile.seasonals),
        None if result.backtest is None else float(result.backtest.error),
        None if result.backtest is None else float(result.backtest.persistence_error))


def profile_of(stored: StoredProfile) -> Profile:
    return Profile(tuple(Seasonal(item.period, item.resolution, item.index) for item in stored.seasonals))


def outlook_from(stored: StoredProfile | None, recent: Sequence[float], start: datetime,
                 horizon: int = HORIZON_MINUTES) -> Outlook:
    """The outlook a decision at ``start`` is given: the stored profile's expected arrivals of the
    next ``horizon`` minutes from the level of ``recent`` (the arrivals of the minutes just before
    ``start``); untrusted, with the reasons, when there is no profile or it has not earned trust."""
    if stored is None:
        return Outlook((), False, ("no profile fitted yet",))
    if not stored.trusted or not stored.seasonals:
        return Outlook((), False, stored.reasons or ("no period",))
    if not len(recent):
        return Outlook((), False, ("no recent arrivals",))
    expected = profile_of(stored).expected_after(np.asarray(recent, dtype=float), stored.minute_of(start), horizon)
    return Outlook(tuple(float(value) for value in expected), True)


def enqueued_points(samples: Sequence[MetricSample]) -> list[tuple[datetime, float]]:
    """(collection time, events enqueued so far over every partition) of the samples whose sources
    all read partitions, oldest first: what ``arrivals_per_minute`` takes. A sample with a failed
    source is left out (a gap, spread over by the next one), never read as no arrivals."""
    points = []
    for sample in sorted(samples, key=lambda item: item.collected_at):
        if sample.sources and all(source.ok and source.partitions for source in sample.sources):
            points.append((sample.collected_at, float(sum(max(partition.last_enqueued, 0) for source in sample.sources
                                                          for partition in source.partitions))))
    return points
