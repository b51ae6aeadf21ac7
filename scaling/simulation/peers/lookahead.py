"""The look-ahead in the simulated world: what the engine is told of the next minutes.

Two outlooks for ``peers.EngineAutoscaler`` (a target with ``forecast: on``):

- ``LearnedOutlook``: what a deployed target has. The arrivals are read off the simulated samples
  (the increase of the partitions' last enqueued sequence numbers, as the service reads them off
  the history table), the profile is refit every ``refit_minutes`` on what was seen so far (never
  a minute it has not seen: the first two days are untrusted by construction), and the expected
  minutes come from the last minutes' level times the profile (``forecast.Profile``).
- ``PerfectOutlook``: the reference. The true future arrivals of the next ``horizon`` minutes,
  always trusted: what the same rules would save with a perfect 15-minute forecast, so that the
  share of that saving the learned one captures can be reported
  (``(default - learned) / (default - perfect)``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scaling.domain import forecast
from scaling.simulation.world.loop import Observation

#: How often the simulated target refits its profile. The service refits hourly; a fit costs about
#: a second on 14 days, so the simulator refits every six hours (a profile changes slowly: the
#: back-test's verdict on a day-long holdout moves little in six hours).
REFIT_MINUTES = 360
#: The history a fit reads: the 30 days the history table keeps.
HISTORY_MINUTES = 30 * forecast.DAY_MINUTES
#: The perfect reference's horizon (the issue's "perfect 15-minute look-ahead").
PERFECT_HORIZON_MINUTES = 15


def _refit_due(seen: int, fitted_at: int, refit_minutes: int) -> bool:
    """Whether the target refits after its ``seen``-th observation (never before two days)."""
    return seen - fitted_at >= refit_minutes and seen >= forecast.MIN_HISTORY_MINUTES


def _fit(arrivals: Sequence[float] | np.ndarray, seen: int, history_minutes: int) -> tuple[int, forecast.Forecast]:
    """The refit after the ``seen``-th observation: its origin and the fit on the history it reads."""
    origin = max(0, seen - history_minutes)
    return origin, forecast.forecast(np.asarray(arrivals[origin:seen], dtype=float))


def _outlook(fitted: forecast.Forecast | None, origin: int, arrivals: Sequence[float] | np.ndarray, seen: int) -> forecast.Outlook:
    """What the engine is told after the ``seen``-th observation, from the last fit."""
    if fitted is None:
        return forecast.Outlook((), False, (f"history {seen} min < {forecast.MIN_HISTORY_MINUTES}",))
    if not fitted.trust.trusted:
        return forecast.Outlook((), False, fitted.trust.reasons)
    expected = fitted.profile.expected_after(arrivals[max(0, seen - forecast.LEVEL_MINUTES):seen], seen - origin)
    return forecast.Outlook(tuple(float(value) for value in expected), True)


class LearnedOutlook:
    """The outlook a target learns from its own arrivals, refit every ``refit_minutes``."""

    def __init__(self, refit_minutes: int = REFIT_MINUTES, history_minutes: int = HISTORY_MINUTES) -> None:
        self.refit_minutes = refit_minutes
        self.history_minutes = history_minutes
        self.arrivals: list[float] = []
        self.total = 0.0
        self.fitted: forecast.Forecast | None = None
        self.origin = 0
        self.fitted_at = -refit_minutes
        self.fits = 0

    def __call__(self, observation: Observation) -> forecast.Outlook:
        total = float(np.sum(observation.last_enqueued))
        self.arrivals.append(max(0.0, total - self.total))
        self.total = total
        now = len(self.arrivals)  # the next minute's index (minute 0: the trace's first)
        if _refit_due(now, self.fitted_at, self.refit_minutes):
            self.origin, self.fitted = _fit(self.arrivals, now, self.history_minutes)
            self.fitted_at = now
            self.fits += 1
        return _outlook(self.fitted, self.origin, self.arrivals, now)


@dataclass(frozen=True, slots=True)
class OutlookSeries:
    """A run's outlooks worked out up front, one per observation (the ``k``-th at index ``k - 1``):
    what the engine is told after each. ``expected`` (observations, minutes) is valid over the
    first ``lengths`` minutes of each row (NaN beyond, and where untrusted)."""

    trusted: np.ndarray
    expected: np.ndarray
    lengths: np.ndarray


def enqueued_totals(enqueued: np.ndarray) -> np.ndarray:
    """What ``LearnedOutlook`` reads at each observation: the partitions' last enqueued sequence
    numbers summed (``enqueued``: (observations, partitions), last enqueued + 1, as the world keeps it)."""
    return (enqueued.astype(np.int64) - 1).sum(axis=1).astype(float)


#: Series already worked out, by their arrivals (a benchmark runs one trace in several units).
_SERIES: dict = {}


def learned_series(totals: np.ndarray, refit_minutes: int = REFIT_MINUTES,
                   history_minutes: int = HISTORY_MINUTES) -> OutlookSeries:
    """``LearnedOutlook``'s outlook at every observation of a run, from ``totals`` (events enqueued
    so far at each, ``enqueued_totals``) alone: the arrivals it reads, the same refits on the same
    data at the same observations (the refits never read a decision), so a sweep can be told what
    the engine in the loop is told (``simulation/drivers/outlook.py``)."""
    totals = np.asarray(totals, dtype=float)
    key = (hashlib.sha1(totals.tobytes()).hexdigest(), len(totals), refit_minutes, history_minutes)
    if key in _SERIES:
        return _SERIES[key]
    arrivals = np.maximum(0.0, np.diff(totals, prepend=0.0))
    count = len(totals)
    trusted = np.zeros(count, dtype=bool)
    expected = np.full((count, forecast.HORIZON_MINUTES), np.nan)
    fitted, origin, fitted_at = None, 0, -refit_minutes
    for seen in range(1, count + 1):
        if _refit_due(seen, fitted_at, refit_minutes):
            (origin, fitted), fitted_at = _fit(arrivals, seen, history_minutes), seen
        if fitted is not None and fitted.trust.trusted:
            outlook = _outlook(fitted, origin, arrivals, seen)
            trusted[seen - 1] = True
            expected[seen - 1, :len(outlook.expected)] = outlook.expected
    series = OutlookSeries(trusted, expected, np.where(trusted, forecast.HORIZON_MINUTES, 0))
    if len(_SERIES) >= 8:
        _SERIES.pop(next(iter(_SERIES)))
    _SERIES[key] = series
    return series


def outlook_for(target) -> LearnedOutlook | None:
    """What a simulated run of ``target`` tells its engine each minute: the look-ahead learned
    from the arrivals seen so far when its policy reads one (``forecast: shadow`` or ``on``), as
    the evaluate service refits it from the recorded history; ``None`` when it is off."""
    return None if target.forecast == "off" else LearnedOutlook()


class PerfectOutlook:
    """The true arrivals of the next ``horizon`` minutes (the reference: no forecast does better)."""

    def __init__(self, arrivals: np.ndarray, horizon: int = PERFECT_HORIZON_MINUTES) -> None:
        self.arrivals = np.asarray(arrivals, dtype=float)
        self.horizon = horizon

    def __call__(self, observation: Observation) -> forecast.Outlook:
        ahead = self.arrivals[observation.minute:observation.minute + self.horizon]
        return forecast.Outlook(tuple(float(value) for value in ahead), True)


def perfect_series(arrivals: np.ndarray, minutes: np.ndarray, horizon: int = PERFECT_HORIZON_MINUTES) -> OutlookSeries:
    """``PerfectOutlook``'s outlook at each observation (``minutes``: their minutes), up front."""
    arrivals = np.asarray(arrivals, dtype=float)
    lengths = np.clip(len(arrivals) - np.asarray(minutes), 0, horizon)
    expected = np.full((len(minutes), horizon), np.nan)
    for row, (minute, length) in enumerate(zip(minutes, lengths, strict=True)):
        expected[row, :length] = arrivals[minute:minute + length]
    return OutlookSeries(np.ones(len(minutes), dtype=bool), expected, lengths)
