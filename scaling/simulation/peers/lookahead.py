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
        if now - self.fitted_at >= self.refit_minutes and now >= forecast.MIN_HISTORY_MINUTES:
            self.origin = max(0, now - self.history_minutes)
            self.fitted = forecast.forecast(np.asarray(self.arrivals[self.origin:], dtype=float))
            self.fitted_at = now
            self.fits += 1
        if self.fitted is None:
            return forecast.Outlook((), False, (f"history {now} min < {forecast.MIN_HISTORY_MINUTES}",))
        if not self.fitted.trust.trusted:
            return forecast.Outlook((), False, self.fitted.trust.reasons)
        recent = np.asarray(self.arrivals[-forecast.LEVEL_MINUTES:], dtype=float)
        expected = self.fitted.profile.expected_after(recent, now - self.origin)
        return forecast.Outlook(tuple(float(value) for value in expected), True)


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
