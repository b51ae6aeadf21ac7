"""The hub as a whole: hot partitions, whether the maximum can serve it, a growing or flat
backlog, a stall; and the rates and times a decision sizes for."""

from __future__ import annotations

import numpy as np

from scaling.domain.slo_kernel.ages import rising_factor
from scaling.domain.slo_kernel.arrays import _PLAIN, NO_RATE, any_of, clip, maximum, minimum, where

#: How much the processed rate may rise with more instances and still count as a stall (``stalled``).
STALL_TOLERANCE = 0.1
#: How little the backlog may change over the rate window, in intervals' arrivals, to count as flat.
FLAT_TOLERANCE = 0.1
#: How many times the mean partition's forecast the busiest partition's must be for the hub to
#: count as skewed (``carried_age_limits``): geometric skew 0.10 on 32 partitions gives 3.0,
#: 0.03 gives 1.6, 0.015 gives 1.3.
SKEWED_SPREAD = 2.0


def forecast_rates(arrival_rate: np.ndarray, recent_rate: np.ndarray, headroom_factor: np.ndarray) -> np.ndarray:
    """Each partition's forecast per candidate (partitions x candidates): the higher of its rate over
    the rate window and over the last interval (per partition, or per partition and candidate),
    raised by the headroom."""
    return _per_candidate(np.maximum(arrival_rate, recent_rate)) * headroom_factor


def hot_partitions(arrival_rate: np.ndarray, recent_rate: np.ndarray, throughput: np.ndarray,
                   measured: np.ndarray, most_instances: np.ndarray | None = None,
                   row_of: np.ndarray | None = None) -> np.ndarray:
    """The partitions (x candidates) that receive more than one instance serves over the rate
    window and the last interval alike, against a ``measured`` (learned or configured, not a
    lower bound) throughput: they fall behind at any count, so they are set aside.

    Only while the hub as a whole can be served (``hub_servable``: its arrivals within what
    ``most_instances``, the instances' worth the highest allowed count serves, can do): when
    every instance is slower than a partition's arrivals (a slow downstream) or the traffic is
    beyond the maximum, no count keeps up, and setting the partitions aside would leave nothing
    in view and the hub sized for none (32 -> 1 instance with millions waiting)."""
    steady = _per_candidate(np.minimum(arrival_rate, recent_rate))
    hot = (steady > throughput[None, :]) & measured[None, :]
    if most_instances is None or not any_of(hot):  # (whether the hub can be served matters only then)
        return hot
    return hot & hub_servable(steady, throughput, most_instances, row_of)[None, :]


def column_sums(values: np.ndarray, row_of: np.ndarray | None = None) -> np.ndarray:
    """Per candidate, the sum of ``values`` (partitions x candidates; rows standing for several
    partitions counted once per partition, ``row_of``), added row after row in partition order
    (``np.cumsum``'s order, whatever the number of columns: the engine's batch of one and a
    sweep's columns add alike, bit for bit).

    Two routes to those bits, neither the accumulation itself (which writes every running sum,
    column by column, the most of a sweep's evaluation once): several columns are reduced down
    the rows of a C-ordered copy, one row added to all the sums at a time (numpy adds pairwise
    only along the memory's fastest axis), from -0.0 (the sum of nothing that leaves the first
    row as it is, a -0.0 included); a single column is accumulated (reduced, it would be added
    pairwise). tests/unit/test_domain_slo_kernel_sums.py holds both to ``np.cumsum``'s bits."""
    rows = values if row_of is None else values[row_of]
    if rows.shape[1] == 1:
        return np.add.accumulate(rows, axis=0)[-1]
    return np.add.reduce(np.ascontiguousarray(rows), axis=0, initial=-0.0)


def most_instances(partitions: int, highest: np.ndarray | int, per_instance: np.ndarray) -> np.ndarray:
    """How many instances' worth the ``highest`` count serves on ``partitions`` partitions (an
    instance owning two serves each at half speed): ``partitions / ceil(partitions / highest)``
    (``per_instance``: a ``per_instance_table``)."""
    return partitions / per_instance[highest]


def hub_servable(steady: np.ndarray, throughput: np.ndarray, most: np.ndarray,
                 row_of: np.ndarray | None = None) -> np.ndarray:
    """Per candidate, whether the hub's steady arrivals (per partition x candidate: the lower of
    the rate window's and the last interval's) are within what ``most`` instances serve at
    ``throughput``: the hub as a whole can be served."""
    return column_sums(steady, row_of) <= throughput * most


def backlog_growing(backlog: np.ndarray, earlier: np.ndarray, arrival_rate: np.ndarray, tolerance_seconds,
                    row_of: np.ndarray | None = None) -> np.ndarray:
    """Per candidate, whether the backlog (partitions x candidates, set-aside partitions at 0)
    grew since an ``earlier`` reading by more than ``tolerance_seconds`` of the arrivals
    (``arrival_rate``, the same shape): the processed rate was below the arrival rate, beyond
    what checkpoints written now and then explain. No scale-in then: fewer instances serve less."""
    grown = column_sums(backlog - earlier, row_of)
    return grown > column_sums(arrival_rate, row_of) * tolerance_seconds


def backlog_flat(backlog: np.ndarray, earlier: np.ndarray, arrival_rate: np.ndarray, tolerance_seconds,
                 row_of: np.ndarray | None = None) -> np.ndarray:
    """Per candidate, whether the backlog (as ``backlog_growing`` reads it) neither grew nor
    shrank since the ``earlier`` reading by more than ``tolerance_seconds`` of the arrivals: the
    consumers process what arrives (a backlog that drains is no evidence: its ages are real)."""
    grown = column_sums(backlog - earlier, row_of)
    return np.abs(grown) <= column_sums(arrival_rate, row_of) * tolerance_seconds


def stalled(serving_before, serving_now, processed_before, processed_now, growing, continuing, arrivals, most):
    """Per candidate, whether the consumers stalled: the backlog grows, and either a stall was
    recognised before (``continuing``) or now: more instances serve than at the start of the
    history (``serving_before``, ``serving_now``), the processed rate (events/s over the
    history's first interval and its last) did not rise by more than ``STALL_TOLERANCE`` with
    them, and at what each serving instance processes now even ``most`` instances (the highest
    count's worth, ``most_instances``) would not keep up with the ``arrivals``. More instances
    do not help then (a downstream that stopped, a poison message): more still would only cost,
    and fewer would leave the recovery short. (A slow-down that more instances do serve, or a
    rebalance pause, is no stall.)"""
    recognised = ((serving_now > serving_before) & (processed_now <= processed_before * (1.0 + STALL_TOLERANCE))
                  & (processed_now / maximum(serving_now, 1) * most < arrivals))
    return growing & (continuing | recognised)


def recovery_counts(arrivals, backlog, rate, drain, highest):
    """Per candidate, the instances that, once stalled consumers recover, serve the ``arrivals``
    and drain the ``backlog`` (events, the hub's) within ``drain`` seconds at ``rate`` per
    instance: at most ``highest``. Held through a stall, they serve from the recovery's first
    minute instead of a provisioning delay later (held at the count that served, 16 of the 32
    the WC98 stall's backlog needed: 48 violation minutes, the lag peers' 45)."""
    return np.minimum(highest, np.ceil((arrivals + backlog / drain) / rate)).astype(np.int64)


def checkpoints_keep_pace(checkpoint: np.ndarray, before: np.ndarray, backlog: np.ndarray) -> np.ndarray:
    """Per candidate, whether every partition holding a ``backlog`` (partitions x candidates) moved
    its ``checkpoint`` since the reading ``before``: the
    checkpoints are written at every collection. Where they are written less often, an age
    that stays old is (part of) the wait between them, which the delay must not learn: a delay
    learned from checkpoints every 470 s hid a real backlog (148 violation minutes)."""
    return ((backlog <= 0) | (checkpoint > before)).all(axis=0)


def _per_candidate(rates: np.ndarray) -> np.ndarray:
    """Rates per partition (shared by the candidates) as a column; per partition and candidate as they are."""
    return rates[:, None] if rates.ndim == 1 else rates


def drain_seconds(dwell, max_age, measured, predicted_age):
    """Over how many seconds a scale-out plans to drain the backlog: half the ``dwell`` or the
    SLO (``max_age``), whichever is longer; within the SLO itself while the throughput is only a
    lower bound (nothing measured: a cold start) and the oldest event is predicted past the SLO,
    not only past its safety margin: the count is a guess from a bound then, and the SLO is
    already at stake."""
    drain = maximum(dwell / 2, max_age)
    return where(measured | (predicted_age <= max_age), drain, minimum(drain, max_age))


def carried_age_limits(limit, forecast, rate, horizon, row_of: np.ndarray | None = None):
    """Per partition (x candidates), how old its oldest event may be predicted before new
    instances serve: the age ``limit``, or, on a skewed hub (the busiest partition's forecast at
    least ``SKEWED_SPREAD`` times the mean's), less for a partition near one instance's
    throughput. Served by an instance of its own at ``rate`` (the most any count gives it), its
    oldest event gets younger by only ``rate / forecast - 1`` seconds a second, so the age it
    carries into a scale-out stays, and the day's rise takes it past the SLO where an instance of
    its own from the start would have kept it within (WC98 in `hot`). It may carry what
    its own instance drains within the scale-out's ``horizon`` (``drain_seconds``); none at or
    past ``rate``. On an even hub the plain limit stands: there such partitions share owners with
    others at every count the limit chooses, and scaling out earlier only costs (realistic
    bursts and steps: 3% dearer)."""
    forecast = np.asarray(forecast, dtype=float)
    partitions = forecast.shape[0] if row_of is None else len(row_of)
    mean = column_sums(forecast, row_of) / max(partitions, 1)
    skewed = (mean > NO_RATE) & (forecast.max(axis=0) >= SKEWED_SPREAD * mean)
    if not any_of(skewed):  # (an even hub everywhere: the plain limit, read only by comparisons)
        return np.broadcast_to(limit, np.broadcast_shapes(forecast.shape, np.shape(limit)))
    flowing = forecast > NO_RATE
    drained = np.maximum(rate / np.where(flowing, forecast, 1.0) - 1.0, 0.0) * horizon
    return np.where(flowing & skewed, np.minimum(limit, drained), limit)


def scale_out_need(forecast, backlog, provisioning, since, safety, drain):
    """What each partition must be served to serve its forecast and drain, over ``drain``
    seconds, what will have piled up (less the safety margin's worth) by the time new instances
    serve (``provisioning`` after ``since``)."""
    return forecast + np.maximum(backlog + forecast * (provisioning + since) - forecast * safety, 0.0) / drain


def calm_rates(forecast, peak, headroom_factor, rise, dwell, noise=0.0, full_noise=0.0):
    """The rates a scale-in must hold at: the forecast or, on noisy traffic, the busiest recent
    interval (with the headroom), whichever is higher, raised to the rate halfway through the dwell
    while the arrivals clearly rise.

    How much the busiest interval counts follows the arrivals' measured ``noise``
    (``trend``): not at all up to half of ``full_noise`` (per candidate), wholly from
    ``full_noise`` on, in proportion between (0: always wholly). On noisy traffic a lull is no
    reason to scale in and out again at the next burst; on quiet traffic a busier interval a few
    minutes ago is a trend that has passed, and holding at it only pays for capacity (on issue
    32's trace family up to 17% dearer at 10% noise). The ramp keeps a noise estimate from ten
    intervals, which wanders, from switching the hold on and off (docs/policy-experiments.md)."""
    if type(noise) in _PLAIN and np.size(full_noise) == 1:  # (a batch of one: its one weight as a plain number)
        full_noise = full_noise if type(full_noise) in _PLAIN else full_noise.item()
    weight = clip(where(full_noise > 0, 2.0 * noise / where(full_noise > 0, full_noise, 1.0) - 1.0, 1.0), 0.0, 1.0)
    held = forecast + weight * (peak * headroom_factor - forecast)
    return np.maximum(forecast, held) * rising_factor(rise, dwell)


def distinct_shares(forecast: np.ndarray) -> np.ndarray:
    """Per candidate, whether its forecasts (partitions x candidates) are spread enough for a
    scale-out to size its newcomers by the draw (``NEWCOMER_MARGIN``): at least half of them
    distinct. Partitions with equal shares see equal sequence numbers, so then the draw and the
    bound differ only by the backlogs, and the bound stays."""
    ranked = np.sort(forecast, axis=0)
    return 2 * ((ranked[1:] - ranked[:-1] != 0).sum(axis=0) + 1) >= forecast.shape[0]  # (np.diff, without its overhead)
