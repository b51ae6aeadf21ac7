"""The look-ahead in the sweep: ``forecast: on`` in the batched SLO driver (issue 52; docs/forecast.md).

The learned outlook is a function of the arrivals alone (the samples' sequence numbers; the refits
never read a decision), so each trace's is worked out once, up front, as the loop's
``LearnedOutlook`` refits it (``peers.lookahead.learned_series``: the same refit times on the same
data). Each collection the kernel's floor and hold (``slo_kernel.lookahead``) then run over the
candidates whose outlook is trusted then, as the engine's ``_looked_ahead`` runs them on its batch
of one, between the step's proposal and the gates:

- before the step (``may_scale_in``): where the look-ahead may act, the step works out a scale-in
  even where the gates will stop it, as the engine always does (the floor starts from the count
  decided, and a scale-in's floor from a smaller count than a hold's);
- after it (``applied``): the decided count raised to the floor (a scale-out, or a smaller
  scale-in snapped down as the engine snaps it) or a scale-in held.

``shadow`` changes no decision, and this driver keeps no decision log: only ``on`` runs here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from scaling.domain import forecast
from scaling.domain.engine import allowed_counts, snap_down
from scaling.domain.policy import TargetPolicy
from scaling.domain.slo_kernel import DOWN, HOLD, UP, StepOutcome, lookahead
from scaling.simulation.peers.lookahead import OutlookSeries, enqueued_totals, learned_series, perfect_series

#: The reason code of a decision the look-ahead changed (the engine's ``forecast_floor`` or
#: ``forecast_hold``): none of the step's, so not a stall's hold at the next step.
FORECAST = -1

#: Each trace's outlook series from (the events enqueued so far at each observation, the trace's
#: arrivals per minute, the observations' minutes).
SeriesOf = Callable[[np.ndarray, np.ndarray, np.ndarray], OutlookSeries]


def learned(totals: np.ndarray, arrivals: np.ndarray, minutes: np.ndarray) -> OutlookSeries:
    """What a deployed target learns (``LearnedOutlook``, the engine loop's default for ``on``)."""
    return learned_series(totals)


def perfect(horizon: int) -> SeriesOf:
    """The true arrivals of the next ``horizon`` minutes (``PerfectOutlook``: the reference rows)."""
    return lambda totals, arrivals, minutes: perfect_series(arrivals, minutes, horizon)


class SweepLookAhead:
    """The candidates' look-ahead: each one's trace's outlook series and its minutes, in the units
    the engine's ``_looked_ahead`` passes (provisioning and dwell in whole minutes, throughput per
    minute, the age budget in minutes)."""

    def __init__(self, targets: Sequence[TargetPolicy], world, interval: int, series_of: SeriesOf,
                 partitions: int) -> None:
        self.acting = np.array([target.forecast == "on" for target in targets])
        count = len(targets)
        self.trace = np.zeros(count, dtype=np.int64) if world.trace_of is None else np.asarray(world.trace_of)
        minutes = np.arange(interval, len(world.arrivals) + 1, interval)  # the observations' minutes
        arrivals = world.arrivals.reshape(len(world.arrivals), -1)
        self.series: dict[int, OutlookSeries] = {
            int(trace): series_of(enqueued_totals(world.enqueued[minutes, :, trace]), arrivals[:, trace], minutes)
            for trace in np.unique(self.trace[self.acting])}
        slo = [target.slo for target in targets]
        self.provisioning = np.array([math.ceil(s.provisioning_delay_seconds / 60) for s in slo])
        self.dwell = np.array([math.ceil(s.min_dwell_seconds / 60) for s in slo])
        self.budget = np.array([max(0.0, s.max_event_age_seconds - s.safety_seconds) / 60 for s in slo])
        self.window = np.full(count, forecast.FLOOR_WINDOW_MINUTES)
        self.counts = [allowed_counts(target, partitions) for target in targets]

    @classmethod
    def of(cls, targets: Sequence[TargetPolicy], world, interval: int, series_of: SeriesOf | None,
           partitions: int) -> SweepLookAhead | None:
        """The look-ahead of a sweep with a candidate on ``forecast: on``; None without one."""
        if not any(target.forecast == "on" for target in targets):
            return None
        return cls(targets, world, interval, series_of or learned, partitions)

    def looking(self, seen: int, rate: np.ndarray) -> np.ndarray:
        """Per candidate: whether the look-ahead runs after the ``seen``-th observation (``on``, a
        throughput known, its outlook trusted then)."""
        trusted = np.array([series.trusted[seen - 1] for series in self.series.values()])
        by_trace = np.zeros(int(self.trace.max()) + 1, dtype=bool)
        by_trace[list(self.series)] = trusted
        return self.acting & (rate > 0) & by_trace[self.trace]

    def applied(self, outcome: StepOutcome, seen: int, capacity: np.ndarray, rate: np.ndarray,
                backlog: np.ndarray) -> StepOutcome:
        """The step's proposal once the look-ahead has had its say (``engine._looked_ahead``)."""
        columns = np.flatnonzero(self.looking(seen, rate))
        if not columns.size:
            return outcome
        rows = seen - 1
        expected = np.stack([self.series[int(trace)].expected[rows] for trace in self.trace[columns]])
        lengths = np.array([self.series[int(trace)].lengths[rows] for trace in self.trace[columns]])
        current = capacity[columns]
        decided = np.where(outcome.direction[columns] == HOLD, current, outcome.wanted[columns])
        throughput = rate[columns] * 60
        usable = lookahead.usable_rows(expected, lengths, np.ones(columns.size, dtype=bool), throughput)
        count, _, _, held, acted = lookahead.look_ahead_over(
            decided, current, expected, lengths, usable, np.ones(columns.size, dtype=bool), self.provisioning[columns],
            self.dwell[columns], self.window[columns], throughput, self.budget[columns], backlog[columns].astype(float))
        if not acted.any():
            return outcome
        wanted, direction, reason = outcome.wanted.copy(), outcome.direction.copy(), outcome.reason.copy()
        for column, to, at, hold in zip(columns[acted], count[acted], current[acted], held[acted], strict=True):
            moves = UP if to > at and not hold else DOWN if to < at and not hold else HOLD
            wanted[column] = snap_down(self.counts[column], min(to, at - 1)) if moves == DOWN else to if moves == UP else at
            direction[column], reason[column] = moves, FORECAST
        outcome.wanted, outcome.direction, outcome.reason = wanted, direction, reason
        return outcome


def widened(looking: SweepLookAhead | None, allowed: np.ndarray, seen: int, rate: np.ndarray) -> np.ndarray:
    """The step's ``may_scale_in`` (where the gates let a scale-in act), widened to the candidates
    the look-ahead reads after the ``seen``-th observation (``looking``; None: none)."""
    return allowed if looking is None else allowed | looking.looking(seen, rate)
