"""Bursts the backlog absorbs: the counts a decision needs under the arrivals of an SLO-long
window, not the last interval's.

A burst of a minute or two that pushes the predicted age past the limit reads, at the last
interval's rate, as a load that goes on; sized for it, the scale-out orders instances that serve
after the burst has passed, and holding them at the burst's rate keeps them for nothing. What the
SLO asks is narrower: every event served within the limit of its arrival (first in, first out).
So a count is judged by the backlog the sequence numbers show (when each waiting event came in)
and by the arrivals over an SLO-long window, and a scale-in by the busiest such window, not the
busiest interval. Where the history shows no short bursts (its measured noise under half of
``ABSORB_FULL_NOISE``) nothing here changes a decision (``absorb_weight`` is 0).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scaling.domain.slo_kernel.ages import rate_since, rising_factor

#: The measured noise of the arrivals (``trend``: the spread of the history's interval rates about
#: their trend line, over their mean) from which the absorbing rules count wholly; not at all up to
#: half of it, in proportion between. Steady, diurnal and noisy traffic measure 0.02-0.4 (the
#: gated family's 90th percentile 0.42, NASA's 0.48); short bursts 0.5-1.4.
ABSORB_FULL_NOISE = 1.0


def absorb_weight(noise, full_noise=None):
    """How much the absorbing rules count (0 to 1) at the arrivals' measured ``noise``: 0 up to
    half of ``full_noise``, 1 from it on, in proportion between (the scale-in peak hold's ramp,
    ``calm_rates``); 0 everywhere where ``full_noise`` is 0 (off)."""
    noise = np.asarray(noise, dtype=float)
    full = np.asarray(ABSORB_FULL_NOISE if full_noise is None else full_noise, dtype=float)
    ramp = np.clip(2.0 * noise / np.where(full > 0, full, 1.0) - 1.0, 0.0, 1.0)
    return np.where(full > 0, ramp, 0.0)


def bursts_ended(times: np.ndarray, totals: np.ndarray) -> bool:
    """Whether the history shows a short burst that ended: an interval (before the last) at
    least twice the intervals' median rate (and above 0), the next at most half of it.

    The measured noise alone cannot tell a short burst from a step: the first minutes of a load
    that doubles and stays (the gated family's on/off ``bursts``, tens of minutes on) read as
    noisy as micro-bursts, and sizing them for the SLO-long window's rate left the realistic
    scenario 45 avoidable violation minutes where the plain rules had 17. ``totals``: events
    enqueued so far, all partitions, at ``times``."""
    steps = times[1:] - times[:-1]
    if len(steps) < 2 or not (steps > 0).all():
        return False
    rates = (totals[1:] - totals[:-1]) / steps
    drops = (rates[1:] <= rates[:-1] / 2.0) & (rates[:-1] > 0)
    if not drops.any():  # (no interval halved after a busy one: the median is not needed)
        return False
    return bool((drops & (rates[:-1] >= 2.0 * np.median(rates))).any())


def blended(plain, absorbed, weight):
    """``plain`` moved towards ``absorbed`` by ``weight`` (per candidate): the rule as it was at
    weight 0, the absorbing one at 1."""
    return plain + weight * (absorbed - plain)


def window_index(times: np.ndarray, seconds: float) -> int:
    """The sample the last ``seconds`` start from: the latest at least ``seconds`` before the last
    sample (the first one where the history is shorter)."""
    back = np.flatnonzero(times[-1] - times >= seconds)
    return int(back[-1]) if back.size else 0


def later_window_peaks(times: np.ndarray, positions: np.ndarray, intervals: int) -> np.ndarray:
    """Row ``j``: each partition's highest mean arrival rate over ``intervals`` consecutive
    intervals (fewer at the history's start) among the windows whose last interval is ``j`` or
    later (intervals x partitions[ x traces]): ``later_peaks`` over windows an SLO long instead
    of single intervals, so that a scale-in holds against the busiest such window of its peak
    stretch, not against a burst the backlog carries."""
    ends = np.arange(1, len(times))
    starts = np.maximum(ends - max(int(intervals), 1), 0)
    spans = times[ends] - times[starts]
    spans = np.where(spans > 0, spans, np.inf).reshape(-1, *[1] * (positions.ndim - 1))
    rates = np.maximum(positions[ends] - positions[starts], 0.0) / spans
    return np.maximum.accumulate(rates[::-1], axis=0)[::-1]


def absorbed_need(times: np.ndarray, positions: np.ndarray, oldest: np.ndarray, sustained: np.ndarray,
                  served_meanwhile: np.ndarray, until_serving, limit, shortest) -> np.ndarray:
    """Per partition (x candidates), the service rate (events/s) a count must give from
    ``until_serving`` seconds on so that every event is served within ``limit`` seconds of its
    arrival: the waiting ones as the sequence numbers show they came in, new ones at the
    ``sustained`` rate (an SLO-long window's, not the last interval's).

    First in, first out, the events that arrived up to ``limit`` before a moment must all be
    served by it. Served until then: ``served_meanwhile`` (events, by the instances serving now),
    then the rate asked for. Between samples the arrivals are linear, after the last at
    ``sustained``, so the rate asked for is the highest of the sustained rate and, at each sample
    (and the moment ``limit`` before the instances serve), what arrived by it and is not yet
    served over the time left until it reaches the limit (at least ``shortest`` seconds: what a
    backlog already too old for the limit needs is to be caught up within that).

    ``positions``: last enqueued sequence numbers (samples x partitions, shared by the candidates,
    or samples x partitions x candidates); ``oldest``: each partition's oldest unprocessed
    sequence number (partitions x candidates); ``until_serving``, ``limit``, ``shortest``: per
    candidate (or plain numbers)."""
    history = positions[:, :, None] if positions.ndim == 2 else positions  # (samples, partitions, 1 or candidates)
    owed = oldest + served_meanwhile  # the first sequence number still waiting when the new instances serve
    candidates = owed.shape[1]
    now = times[-1]
    # What arrived before ``start`` must all be served when the new instances serve; what arrived
    # at a later sample, ``left`` seconds after it.
    start = np.broadcast_to(now + np.asarray(until_serving, dtype=float) - np.asarray(limit, dtype=float), (candidates,))
    left = times[:, None] - start[None, :]  # (samples, candidates)
    waiting = history + 1.0 - owed[None]  # (samples, partitions, candidates)
    rates = np.where((left > 0)[:, None, :], waiting / np.maximum(left, shortest)[:, None, :], -np.inf)
    need = np.maximum(sustained, rates.max(axis=0))
    # ``start`` itself: between two samples (before the history: its first; after it: the last
    # sample's position and the sustained arrivals since).
    at = np.clip(np.searchsorted(times, start, side="right"), 1, len(times) - 1)
    before, after = times[at - 1], times[at]
    share = np.clip((start - before) / np.where(after > before, after - before, 1.0), 0.0, 1.0)
    column = np.zeros(candidates, dtype=np.int64) if history.shape[2] == 1 else np.arange(candidates)
    low, high = history[at - 1, :, column].T, history[at, :, column].T  # (partitions, candidates)
    arrived = low + share * (high - low) + sustained * np.maximum(start - now, 0.0)
    overdue = arrived + 1.0 - owed
    return np.where(overdue > 0, np.maximum(need, overdue / shortest), need)


def absorbed_calm_rates(sustained, window_peak, headroom_factor, rise, dwell):
    """The rates a scale-in must hold at where bursts are absorbed: the busiest SLO-long window's
    of the peak stretch (``later_window_peaks``) or the last one's (``sustained``), with the
    headroom, raised while the arrivals clearly rise (``calm_rates``' rise); a lull between bursts
    is no reason to scale in, and the burst itself is what the backlog carries."""
    return np.maximum(sustained, window_peak) * headroom_factor * rising_factor(rise, dwell)


def carries(need: np.ndarray, served: np.ndarray) -> np.ndarray:
    """Per candidate, whether ``served`` (partitions x candidates, events/s) gives every partition
    its ``absorbed_need``: the count carries the backlog and the SLO-long window's arrivals within
    the limit, so the burst is no reason to scale out."""
    return (served >= need).all(axis=0)


# --- at the SLO step (``step.slo_step``): one source's readings and the three rules over its columns

@dataclass(slots=True)
class BurstHistory:
    """What absorbing reads of one source's history (``HubReading.bursts``): the sample times,
    the last-enqueued sequence numbers (samples x rows, shared by the candidates, or samples x rows
    x candidates), each row's oldest unprocessed sequence number (rows x candidates;
    ``partition_oldest`` per partition where rows stand for several), the arrivals' measured noise
    (``trend``) and whether the history shows a short burst that ended (``bursts_ended``), each a
    plain value shared by the candidates or one per candidate."""

    times: np.ndarray
    positions: np.ndarray
    oldest: np.ndarray
    noise: float | np.ndarray
    ended: bool | np.ndarray
    partition_oldest: np.ndarray | None = None


class SourceAbsorbing:
    """Absorbing short bursts for one source at one step, every candidate a column: the weight
    (``absorb_weight`` where a burst ended), each candidate's SLO-long window's rates, and the
    three rules the step applies (``relieved``: the risk test; ``sized``: the scale-out's need;
    ``calm``: the scale-in's rates). The history is read only when a rule asks for it, and the
    rules change only the columns whose weight is above 0.

    Built from what the step worked out for the risk test: the forecast, the service the ready
    and the asked-for instances give (rows x candidates), when the instances in flight serve
    (``first``), the age limit with the learned checkpoint delay, the shortest catch-up
    (``shortest``: the collection interval), the settings it reads, and the partitions set aside
    (``hot``, rows x candidates; None: none)."""

    def __init__(self, read: Callable[[], BurstHistory | None], forecast: np.ndarray, served_ready: np.ndarray,
                 served: np.ndarray, first: np.ndarray, limit: np.ndarray, shortest: float, headroom_factor: np.ndarray,
                 max_age: np.ndarray, dwell: np.ndarray, row_of: np.ndarray | None, hot: np.ndarray | None) -> None:
        self.read, self.forecast, self.served_ready, self.served = read, forecast, served_ready, served
        self.first, self.limit, self.shortest, self.headroom_factor = first, limit, shortest, headroom_factor
        self.max_age, self.dwell, self.row_of, self.hot = max_age, dwell, row_of, hot
        self._history: BurstHistory | None = None
        self._weight: np.ndarray | None = None
        self._rates: tuple[np.ndarray, np.ndarray] | None = None

    def weight(self) -> np.ndarray:
        """Per candidate, how much the absorbing rules count (0 where no short burst ended)."""
        if self._weight is None:
            self._history = self.read()
            count = len(self.max_age)
            history = self._history
            # (no burst ended, a plain False: 0 everywhere without reading the noise)
            self._weight = np.zeros(count) if history is None or history.ended is False else np.broadcast_to(
                np.where(history.ended, absorb_weight(history.noise), 0.0), (count,))
        return self._weight

    def rates(self) -> tuple[np.ndarray, np.ndarray]:
        """Per candidate, the rate over its last SLO-long window and the busiest such window's of
        the history (rows x candidates; worked out once per step, for each SLO once)."""
        if self._rates is None:
            times, positions = self._history.times, self._history.positions
            sustained = np.zeros((positions.shape[1], len(self.max_age)))
            window_peak = np.zeros_like(sustained)
            for seconds in np.unique(self.max_age):
                chosen = np.flatnonzero(self.max_age == seconds)
                start = window_index(times, float(seconds))
                history = positions if positions.ndim == 2 else positions[:, :, chosen]
                rate = rate_since(times, history, start)
                peak = later_window_peaks(times, history, len(times) - 1 - start)[0]
                sustained[:, chosen] = rate[:, None] if rate.ndim == 1 else rate
                window_peak[:, chosen] = peak[:, None] if peak.ndim == 1 else peak
            self._rates = (sustained, window_peak)
        return self._rates

    def need(self, columns: np.ndarray, until_serving: np.ndarray, by_partition: bool = False) -> np.ndarray:
        """``absorbed_need`` of the ``columns`` (rows, or partitions with ``by_partition``, x
        columns): new arrivals at the SLO-long window's rate blended by the weight, the ready
        instances serving until those in flight do (``first``), then all asked for, until
        ``until_serving``; the set-aside partitions need 0."""
        sustained = self.rates()[0][:, columns]
        forecast, ready, asked = self.forecast[:, columns], self.served_ready[:, columns], self.served[:, columns]
        history, oldest = self._history.positions, self._history.oldest
        hot = None if self.hot is None else self.hot[:, columns]
        if by_partition:
            sustained, forecast, ready, asked = sustained[self.row_of], forecast[self.row_of], ready[self.row_of], \
                asked[self.row_of]
            history, oldest = history[:, self.row_of], self._history.partition_oldest
            hot = None if hot is None else hot[self.row_of]
        rates = blended(forecast, sustained * self.headroom_factor[columns], self.weight()[columns])
        first = self.first[columns]
        meanwhile = ready * np.minimum(first, until_serving) + asked * np.maximum(until_serving - first, 0.0)
        need = absorbed_need(self._history.times, history if history.ndim == 2 else history[:, :, columns],
                             oldest[:, columns], rates, meanwhile, until_serving, self.limit[columns], self.shortest)
        return need if hot is None else np.where(hot, 0.0, need)

    def relieved(self, risk: np.ndarray, react: np.ndarray) -> np.ndarray:
        """``risk`` without the columns whose asked-for count carries the burst: every partition
        served its absorbed need from the reaction time on (``carries``)."""
        columns = np.flatnonzero(risk & (self.weight() > 0))
        if not columns.size:
            return risk
        risk = risk.copy()
        risk[columns[carries(self.need(columns, react[columns]), self.served[:, columns])]] = False
        return risk

    def sized(self, need: np.ndarray, rows: np.ndarray, until_serving: np.ndarray, by_partition: bool) -> np.ndarray:
        """The scale-out's ``need`` of the columns ``rows`` moved towards the absorbed need by the
        weight (``until_serving``: when the new instances serve, per column of ``rows``)."""
        weight = self.weight()[rows]
        absorbing = np.flatnonzero(weight > 0)
        if not absorbing.size:
            return need
        need = need.copy()
        absorbed = self.need(rows[absorbing], until_serving[absorbing], by_partition)
        need[:, absorbing] = blended(need[:, absorbing], absorbed, weight[absorbing])
        return need

    def calm(self, calm: np.ndarray, rows: np.ndarray, rise) -> np.ndarray:
        """The scale-in's ``calm`` rates (rows x candidates) of the columns ``rows`` moved towards
        the busiest SLO-long window's (``absorbed_calm_rates``, ``rise``: the arrivals')."""
        chosen = rows[self.weight()[rows] > 0]
        if not chosen.size:
            return calm
        sustained, window_peak = self.rates()
        rises = np.broadcast_to(rise, self.max_age.shape)
        absorbed = absorbed_calm_rates(sustained[:, chosen], window_peak[:, chosen], self.headroom_factor[chosen],
                                       rises[chosen], self.dwell[chosen])
        calm = calm.copy()
        calm[:, chosen] = blended(calm[:, chosen], absorbed, self.weight()[chosen])
        return calm


# --- the step's marked sites (``step.slo_step``, ``# absorb``) read this ---------------------------

def absorbed_risk(risks: list[np.ndarray], absorbing: list[SourceAbsorbing | None], risk: np.ndarray,
                  react: np.ndarray) -> np.ndarray:
    """``risk`` (the undecided columns at risk) where some source stays at risk once the bursts
    its asked-for count carries are no reason (``SourceAbsorbing.relieved``)."""
    return functools.reduce(np.logical_or, [hub_risk & risk if absorbs is None else absorbs.relieved(hub_risk & risk, react)
                                            for hub_risk, absorbs in zip(risks, absorbing, strict=True)])
