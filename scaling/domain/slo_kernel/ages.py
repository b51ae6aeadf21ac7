"""Rates and ages from the sequence-number history, and the fluid model that predicts the
oldest event's age ahead (one model, two readings of the backlog)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from scaling.domain.slo_kernel.arrays import _PLAIN, NO_RATE, any_of, maximum, minimum, where

#: How many standard errors of its slope a rise of the arrivals must clear to count as a trend:
#: a flat but noisy rate is no reason to hold capacity.
TREND_CONFIDENCE = 1.0


def rate_since(times: np.ndarray, positions: np.ndarray, index: int) -> np.ndarray:
    """Each partition's arrival rate (events/s) from sample ``index`` to the last (``positions``:
    last-enqueued sequence numbers, samples x partitions, or samples x partitions x traces); 0
    over no time."""
    elapsed = times[-1] - times[index]
    if elapsed <= 0:
        return np.zeros(positions.shape[1:])
    return np.maximum(positions[-1] - positions[index], 0.0) / elapsed


def later_peaks(times: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Row ``j``: each partition's busiest interval rate among the intervals from ``j`` on
    (intervals x partitions[ x traces]); a scale-in holds against the one its peak window starts at."""
    steps = times[1:] - times[:-1]  # (np.diff, without its overhead: this runs at every evaluation)
    steps = np.where(steps > 0, steps, np.inf).reshape(-1, *[1] * (positions.ndim - 1))
    rates = np.maximum(positions[1:] - positions[:-1], 0.0) / steps
    return np.maximum.accumulate(rates[::-1], axis=0)[::-1]


def later_peak(times: np.ndarray, positions: np.ndarray, index: int) -> np.ndarray:
    """Row ``index`` of ``later_peaks`` alone (what the engine reads: one peak window), the same
    numbers without the rows before it."""
    steps = times[index + 1:] - times[index:-1]
    steps = np.where(steps > 0, steps, np.inf).reshape(-1, *[1] * (positions.ndim - 1))
    return (np.maximum(positions[index + 1:] - positions[index:-1], 0.0) / steps).max(axis=0)


def trend(times: np.ndarray, totals: np.ndarray) -> tuple[float, float]:
    """How fast the arrivals rise and how noisy they are, from one least-squares line through the
    intervals' rates (``totals``: events enqueued so far, all partitions, at ``times``); both
    ``(0, 0)`` with fewer than three intervals or a time that does not advance.

    - The rise, per second, as a fraction of the fitted rate at the last sample: the slope less
      ``TREND_CONFIDENCE`` standard errors, so that only a rise the history shows beyond its noise
      counts (0 when it shows none).
    - The noise: the standard deviation of the rates about the line, over their mean rate (0 with
      no rate). A scale-in held against the busiest recent interval pays for that interval's
      noise; this measures how much of it is noise at all (``calm_rates``).
    """
    steps = times[1:] - times[:-1]  # (np.diff and np.mean, without their overhead)
    if len(steps) < 3 or not (steps > 0).all():
        return 0.0, 0.0
    rates = (totals[1:] - totals[:-1]) / steps
    middles = (times[1:] + times[:-1]) / 2.0
    centred = middles - middles.sum() / len(middles)
    spread = float(np.dot(centred, centred))
    slope = float(np.dot(centred, rates)) / spread
    mean_rate = float(rates.sum() / len(rates))
    residuals = rates - (mean_rate + slope * centred)
    variance = float(np.dot(residuals, residuals)) / (len(residuals) - 2)
    rise = slope - TREND_CONFIDENCE * math.sqrt(variance / spread)
    fitted_now = mean_rate + slope * float(centred[-1])
    rising = rise / fitted_now if rise > 0 and fitted_now > NO_RATE else 0.0
    return rising, (math.sqrt(variance) / mean_rate if mean_rate > NO_RATE else 0.0)


def rising_factor(rise, dwell_seconds):
    """How much higher the arrivals are halfway through ``dwell_seconds`` if they go on rising by
    ``rise`` (a fraction of the rate per second)."""
    return 1.0 + rise * (dwell_seconds / 2.0)


def oldest_event_ages(times: np.ndarray, positions: np.ndarray, oldest: np.ndarray, arrival_rate: np.ndarray) -> np.ndarray:
    """Seconds each partition's oldest unprocessed event has waited at the last sample time.

    ``positions`` holds last-enqueued sequence numbers (samples x partitions, shared by the
    candidates; or samples x partitions x candidates, each its own: a batch of several traces),
    ``oldest`` the sequence number of each partition's oldest unprocessed event
    (checkpoint + 1; partitions, or partitions x candidates), ``arrival_rate`` each partition's
    rate (the same shapes). Its arrival time is read off the positions' history, interpolated
    between samples, or extrapolated at the arrival rate when it is older than the history.
    Without a measured rate (a single sample, or nothing enqueued over the history) it counts as
    arrived at the first sample: as old as the history, which is all that is known (dividing by a
    zero rate would call it billions of seconds old and scale out on the first sample after every
    start). Returns ``oldest``'s shape.
    """
    single = oldest.ndim == 1
    oldest = oldest[:, None] if single else oldest
    arrival_rate = arrival_rate[:, None] if arrival_rate.ndim == 1 else arrival_rate
    samples, shared = positions.shape[0], positions.ndim == 2
    waiting = (positions[-1][:, None] if shared else positions[-1]) >= oldest
    # The first sample that reached it: where the running highest position first does (the
    # positions never decrease but for a partition missing from a sample, read as the newest).
    running = np.maximum.accumulate(positions, axis=0)
    reached = (running[:, :, None] if shared else running) < oldest[None]
    # (bytes summed as bytes where the count fits; .sum's wrapper costs more)
    first = (np.add.reduce(reached.view(np.int8), axis=0, dtype=np.int8) if samples < 128
             else np.add.reduce(reached, axis=0, dtype=np.int16))
    # (no sample reached it only where nothing waits, whose age is 0 whatever it reads: read there
    # at the last sample, an index in range, and extrapolated only where a waiting event is older)
    first = np.minimum(first, samples - 1)
    if samples < 2:  # (every event older than the one sample: extrapolated or 0)
        previous_index = first
        position = previous = positions[0][:, None] if shared else positions[0]
        span, step = 1.0, 0.0
    else:
        # Where ``first`` > 0 it is ``previous_index`` + 1: the span and the step are the interval's
        # at ``previous_index``, gathered from the intervals' (fewer than the candidates' elements);
        # where ``first`` is 0 the interpolation is replaced by the extrapolation below.
        previous_index = np.maximum(first - 1, 0)
        spans = np.maximum(positions[1:] - positions[:-1], 1.0)
        steps = times[1:] - times[:-1]
        if shared:  # gathers from the flattened (partition, sample) history
            offsets = (np.arange(positions.shape[1]) * samples)[:, None]
            previous = np.ascontiguousarray(positions.T).ravel().take(offsets + previous_index)
            span = np.ascontiguousarray(spans.T).ravel().take(offsets - np.arange(positions.shape[1])[:, None]
                                                              + previous_index)
        else:
            previous = np.take_along_axis(positions, previous_index[None], axis=0)[0]
            span = np.take_along_axis(spans, previous_index[None], axis=0)[0]
        position = positions[0][:, None] if shared else positions[0]  # (read only where ``first`` is 0)
        step = steps.take(previous_index)
    start = times.take(previous_index)
    interpolated = start + (oldest - previous) / span * step
    arrived = interpolated
    older = first == 0
    if any_of(older):
        measured = arrival_rate > NO_RATE
        extrapolated = times[0] - np.where(measured, (position - oldest) / np.where(measured, arrival_rate, 1.0), 0.0)
        arrived = np.where(older, extrapolated, interpolated)
    ages = np.where(waiting, np.maximum(times[-1] - arrived, 0.0), 0.0)
    return ages[:, 0] if single else ages


def predicted_age(age, backlog, forecast, service, seconds, came_in=None):
    """The oldest event's age after ``seconds`` at constant arrival (``forecast``) and service
    rates; ``age`` itself over no time. Broadcasts: per partition, per candidate, or both.

    One fluid model, first in first out: the head moves through the ``backlog`` that waited at
    the rate it came in (``came_in``, events per second of their arrival), then through new
    arrivals at ``forecast`` (``head_age``). ``came_in`` None is the Event Hubs reading: its
    backlog counts events behind the checkpoint, some of them processed, and its age has the
    learned checkpoint delay taken off, so backlog over age is no rate at all; the waiting events
    count as come in at the forecast, and the age grows by ``1 - service / arrivals`` per second
    (docs/architecture.md, "One fluid model"). A queue reads both directly (the active count and
    the peek), so it passes ``backlog / age``: an old backlog from a burst drains no faster
    because the arrivals are low now, and a short old backlog is gone in seconds."""
    if came_in is not None:
        served = minimum(service * seconds, backlog + forecast * seconds)  # (no more served than came)
        return where(seconds > 0, head_age(age, backlog, came_in, forecast, seconds, served), age)
    growth = 1.0 - service / np.maximum(forecast, NO_RATE)
    then = np.where((age <= 0) & (growth <= 0), 0.0, np.maximum(age + growth * seconds, 0.0))
    quiet = forecast <= NO_RATE
    if any_of(quiet):  # (no arrivals: the backlog drains at the service rate, or waits; worked out only then)
        then = np.where(quiet, np.where(service * seconds >= backlog, 0.0, age + seconds), then)
    # (the engine's one number of seconds, plain or a batch of one: ``then`` already has the
    # shape the selection below would give it)
    if (seconds > 0 if type(seconds) in _PLAIN else seconds.size == 1 and seconds.flat[0] > 0):
        return then
    return np.where(seconds > 0, then, age)


def age_at_reaction(age, backlog, forecast, served_ready, served, first, react):
    """The oldest event's age ``react`` seconds on, when a scale-out decided at the next
    evaluation would serve: the instances ready now serve (``served_ready``) for ``first``
    seconds (until those in flight serve), then all asked for (``served``) the rest of the way
    (``predicted_age`` on each stretch). The Event Hubs mode's risk test, the engine's and the
    batched simulator's alike; the queue mode follows its per-scale-out schedule (``age_path``)."""
    then = predicted_age(age, backlog, forecast, served_ready, first)
    return predicted_age(then, backlog, forecast, served, react - first)


def backlog_came_in(backlog, age):
    """The rate a FIFO backlog read with its oldest age came in (events/s): ``backlog / age``;
    infinite where the oldest is new (all of it came at once), 0 where nothing waits."""
    return where(age > 0, backlog / maximum(age, NO_RATE), where(backlog > 0, math.inf, 0.0))


def head_age(age, backlog, came_in, forecast, elapsed, served):
    """The oldest event's age ``elapsed`` seconds on, once ``served`` events have been served since:
    within the ``backlog`` that waited, the head is ``served / came_in`` seconds of arrivals
    younger than it was; past it, it is the new arrival (at ``forecast``) served last; none
    waiting (no arrivals and all served): 0."""
    within = age + elapsed - served / maximum(came_in, NO_RATE)
    beyond = maximum(elapsed - (served - backlog) / maximum(forecast, NO_RATE), 0.0)
    return where(served < backlog, within, where(forecast > NO_RATE, beyond, 0.0))


def age_path(age: float, backlog: float, forecast: float, services: Sequence[tuple[float, float]],
             moments: Sequence[float]) -> list[tuple[float, float]]:
    """The oldest event's age along the way (plain numbers: a queue's one head), the service
    changing as ``services`` has it ((from seconds on, events/s), ascending; the first from 0 or
    before): (seconds on, age) at ``moments`` and wherever the path bends between them (a
    change of service, the waiting events all served), so that its highest point is among them.
    The head model is ``head_age``'s, the service so far added stretch by stretch."""
    came_in = float(backlog_came_in(backlog, age))
    end = max(moments)
    stops = sorted({0.0, *(at for at, _ in services if 0 < at < end), *moments})

    def service_at(moment: float) -> float:
        rate = 0.0
        for at, level in services:
            if at <= moment:
                rate = level
        return rate

    served, points = 0.0, [(0.0, age)]
    for start, stop in zip(stops, stops[1:], strict=False):
        service = service_at(start)
        if service > NO_RATE and served < backlog < served + service * (stop - start):
            through = start + (backlog - served) / service
            points.append((through, float(head_age(age, backlog, came_in, forecast, through, backlog))))
        # (no more is served than has arrived: an empty queue waits for the next event)
        served = min(served + service * (stop - start), backlog + forecast * stop)
        points.append((stop, float(head_age(age, backlog, came_in, forecast, stop, served))))
    return points


def keeps_age(age: float, backlog: float, forecast: float, services: Sequence[tuple[float, float]],
              serving_from: float, limit: float, within: float) -> bool:
    """Whether the service of ``services`` keeps the oldest event under ``limit`` from
    ``serving_from`` (when the last change serves) over the next ``within`` seconds; where it is
    past the limit by then already, whether it brings it back under within that time."""
    path = age_path(age, backlog, forecast, services, [serving_from, serving_from + within])
    at_start = next(then for moment, then in path if moment >= serving_from)
    if at_start > limit:
        return path[-1][1] <= limit
    return all(then <= limit for moment, then in path if moment >= serving_from)


def fifo_hold_seconds(age: float, backlog: float, calm: float, service: float, limit: float, reaction: float,
                      dwell: float) -> float:
    """``hold_seconds``' rule for one FIFO head (a queue, plain numbers): how long ``service``
    keeps the oldest event under ``limit`` at the ``calm`` rate with a scale-out ``reaction``
    seconds away (infinite when the age stops growing, 0 when it does not hold at all). The age
    is ``predicted_age``'s with the backlog's own rate (``backlog_came_in``), checked a reaction
    on, a dwell and a reaction on, and where the waiting events are all served between: an old
    backlog that drains slowly is no surplus. Where the backlog came in at ``calm`` it is
    ``hold_seconds``' number: ``(limit - age) / growth - reaction``."""
    came_in = float(backlog_came_in(backlog, age))
    through = backlog / service if backlog > 0 and service > NO_RATE else (math.inf if backlog > 0 else 0.0)
    checks = [reaction, dwell + reaction] + ([through] if 0 < through < dwell + reaction else [])
    if any(float(predicted_age(age, backlog, calm, service, moment, came_in)) > limit for moment in checks):
        return 0.0
    growth = 1.0 - service / calm if calm > NO_RATE else -1.0
    if growth <= 0 and through < math.inf:
        return math.inf
    then = float(predicted_age(age, backlog, calm, service, dwell + reaction, came_in))
    return dwell + (limit - then) / max(growth, NO_RATE)
