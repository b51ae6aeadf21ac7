"""The SLO-driven, rate-aware mode (the project's default).

Backlog alone is a late and noisy signal. The collected sequence numbers also tell the arrival
rate per partition and, together with the checkpoints, how long the oldest unprocessed event has
waited. With the learned per-instance throughput, the engine predicts each partition's oldest
event age under a candidate capacity (a fluid model: the age grows by ``1 - service/arrivals``
per second) and:

- scales out only when, without acting now, the age would pass the SLO minus a safety margin
  before new instances could help (next evaluation + provisioning delay);
- scales out to the smallest allowed count that serves the forecast arrivals and drains what
  piled up;
- sizes every count by the load of the instances' partitions (``sizing.py``: the busiest live
  owner's exact load at the current count, a bound or the expected draw at another);
- scales in to the smallest allowed count that is expected to hold for ``min_dwell_seconds``
  before the age would call for a scale-out again, at the forecast or the busiest collection
  interval of the last ``scale_in_peak_seconds``, whichever is higher (a lull between bursts is
  no reason to scale in, and scale out again at the next burst), raised while the arrivals
  clearly rise to the rate halfway through the dwell (no scale-in into a rising edge). A count
  that serves *less* than the arrival rate is allowed: the backlog then grows slowly within the
  SLO budget, and the next scale-out drains it. Alternating between two neighbouring counts this way costs what the arrivals need
  on average instead of the next count up, while the dwell time bounds how often it acts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from scaling.domain.decisions import DOWN, HOLD, UP
from scaling.domain.policy import TargetPolicy
from scaling.domain.proposal import Proposal, Situation, timing
from scaling.domain.samples import MetricSample
from scaling.domain.sizing import OWNER_LOAD, WORST_CASE, OwnerLoads, distinct_shares

NO_RATE = 1e-9
#: How fast the learned checkpoint delay may creep up per evaluation (seconds), and its ceiling
#: as a fraction of the SLO: a delay is learned from the lowest ages seen, so it must not drift
#: far while consumers stay saturated.
CHECKPOINT_DELAY_DRIFT = 0.5
CHECKPOINT_DELAY_CEILING = 0.25
#: How many unowned partitions a decision names (the count says the rest).
UNOWNED_NAMED = 5
#: How many standard errors of its slope a rise of the arrivals must clear to count as a trend:
#: a flat but noisy rate is no reason to hold capacity.
TREND_CONFIDENCE = 1.0


@dataclass(frozen=True, slots=True)
class SourceOutlook:
    """What the engine knows of one source's partitions (arrays in partition order): arrival
    rates over the rate window and the last interval (events/s), backlog, and oldest-event age (s)."""

    keys: tuple[str, ...]
    arrival_rate: np.ndarray
    recent_arrival_rate: np.ndarray
    backlog: np.ndarray
    age_seconds: np.ndarray
    #: The busiest collection interval's arrival rate of the last ``scale_in_peak_seconds`` (events/s):
    #: a scale-in must hold at it too.
    peak_arrival_rate: np.ndarray | None = None
    #: Each partition's live owner in the latest sample (``None``: none); ``None`` when the source
    #: collects no ownership (a consumer that writes none, the legacy layout).
    owners: tuple[str | None, ...] | None = None
    #: Partitions set aside as hotter than one instance (``_set_aside``); ``None``: none.
    set_aside: np.ndarray | None = None
    #: How fast the source's arrivals are rising, as a fraction of their rate per second
    #: (``rising_fraction``; 0 when flat, falling or unclear).
    rise: float = 0.0

    @property
    def partitions(self) -> int:
        return len(self.keys)


def _seconds(moment: datetime) -> float:
    return moment.timestamp()


def oldest_event_ages(times: np.ndarray, positions: np.ndarray, oldest: np.ndarray, arrival_rate: np.ndarray) -> np.ndarray:
    """Seconds each partition's oldest unprocessed event has waited at the last sample time.

    ``positions`` holds last-enqueued sequence numbers (samples x partitions), ``oldest`` the
    sequence number of each partition's oldest unprocessed event (checkpoint + 1). Its arrival
    time is read off the positions' history, interpolated between samples, or extrapolated at
    the arrival rate when it is older than the history. Without a measured rate (a single
    sample, or nothing enqueued over the history) it counts as arrived at the first sample: as
    old as the history, which is all that is known (dividing by a zero rate would call it
    billions of seconds old and scale out on the first sample after every start).
    """
    reached = positions >= oldest[None, :]
    waiting = reached[-1]
    first = np.argmax(reached, axis=0)
    columns = np.arange(positions.shape[1])
    position = positions[first, columns]
    previous_index = np.maximum(first - 1, 0)
    previous = positions[previous_index, columns]
    span = np.maximum(position - previous, 1.0)
    interpolated = times[previous_index] + (oldest - previous) / span * (times[first] - times[previous_index])
    measured = arrival_rate > NO_RATE
    extrapolated = times[0] - np.where(measured, (position - oldest) / np.where(measured, arrival_rate, 1.0), 0.0)
    arrived = np.where(first == 0, extrapolated, interpolated)
    return np.where(waiting, np.maximum(times[-1] - arrived, 0.0), 0.0)


def oldest_event_age(times: Sequence[float], last_enqueued: Sequence[int], checkpoint: int | None,
                     beginning: int, arrival_rate: float) -> float:
    """One partition's oldest-event age (see ``oldest_event_ages``)."""
    if not last_enqueued:
        return 0.0
    oldest = (checkpoint + 1) if checkpoint is not None and checkpoint >= 0 else max(beginning, 0)
    ages = oldest_event_ages(np.asarray(times, dtype=float), np.asarray(last_enqueued, dtype=float)[:, None],
                             np.asarray([oldest], dtype=float), np.asarray([arrival_rate], dtype=float))
    return float(ages[0])


def rising_fraction(times: np.ndarray, totals: np.ndarray) -> float:
    """How fast the arrivals rise, per second, as a fraction of their fitted rate at the last
    sample, from ``totals`` (events enqueued so far, all partitions, at ``times``).

    The least-squares slope of the intervals' rates, less ``TREND_CONFIDENCE`` standard errors,
    so that only a rise the history shows beyond its noise counts; 0 when it shows none, or with
    fewer than three intervals.
    """
    steps = np.diff(times)
    if len(steps) < 3 or not np.all(steps > 0):
        return 0.0
    rates = np.diff(totals) / steps
    middles = (times[1:] + times[:-1]) / 2.0
    centred = middles - middles.mean()
    spread = float(np.dot(centred, centred))
    slope = float(np.dot(centred, rates)) / spread
    mean_rate = float(rates.mean())
    residuals = rates - (mean_rate + slope * centred)
    error = math.sqrt(float(np.dot(residuals, residuals)) / (len(rates) - 2) / spread)
    rise = slope - TREND_CONFIDENCE * error
    fitted_now = mean_rate + slope * float(centred[-1])
    return rise / fitted_now if rise > 0 and fitted_now > NO_RATE else 0.0


def partition_outlooks(samples: Sequence[MetricSample], rate_window_seconds: float,
                       peak_seconds: float = 0.0) -> dict[str, SourceOutlook]:
    """Per Event Hubs source of the latest sample, its partitions' rates, backlog and ages, and the
    busiest interval's rate among those ending within ``peak_seconds`` (at least the last one)."""
    latest = samples[-1]
    latest_time = _seconds(latest.collected_at)
    outlooks: dict[str, SourceOutlook] = {}
    for source in latest.sources:
        if not source.ok or not source.partitions:
            continue
        ids = [p.partition_id for p in source.partitions]
        times, rows = [], []
        for sample in samples:
            reading = next((x for x in sample.sources if x.name == source.name and x.ok), None)
            if reading is None:
                continue
            by_id = {p.partition_id: p.last_enqueued for p in reading.partitions}
            # A partition missing from an older sample counts as not having moved since then.
            rows.append([by_id.get(partition_id, np.nan) for partition_id in ids])
            times.append(_seconds(sample.collected_at))
        positions = np.asarray(rows, dtype=float)
        current = positions[-1]
        positions = np.where(np.isnan(positions), current[None, :], positions)
        times_array = np.asarray(times, dtype=float)
        base = 0
        for index, time in enumerate(times):
            if latest_time - time >= rate_window_seconds:
                base = index
        recent = max(len(times) - 2, 0)

        def rate_since(index: int, positions=positions, times_array=times_array) -> np.ndarray:
            elapsed = times_array[-1] - times_array[index]
            if elapsed <= 0:
                return np.zeros(positions.shape[1])
            return np.maximum(positions[-1] - positions[index], 0.0) / elapsed

        arrival, recent_rate = rate_since(base), rate_since(recent)
        peak = recent_rate
        if len(times) > 1:
            first = next(index for index, time in enumerate(times) if latest_time - time <= peak_seconds)
            start = max(min(first, len(times) - 2), 0)
            steps = np.diff(times_array[start:])
            peak = np.max(np.maximum(np.diff(positions[start:], axis=0), 0.0) / np.where(steps > 0, steps, np.inf)[:, None], axis=0)
        oldest = np.asarray([(p.checkpoint + 1) if p.checkpoint is not None and p.checkpoint >= 0 else max(p.beginning, 0)
                             for p in source.partitions], dtype=float)
        ages = oldest_event_ages(times_array, positions, oldest, np.maximum(arrival, recent_rate))
        outlooks[source.name] = SourceOutlook(
            keys=tuple(f"{source.name}/{partition_id}" for partition_id in ids),
            arrival_rate=arrival,
            recent_arrival_rate=recent_rate,
            backlog=np.asarray([p.backlog for p in source.partitions], dtype=float),
            age_seconds=ages,
            peak_arrival_rate=peak,
            owners=tuple(p.owner for p in source.partitions) if source.owners else None,
            rise=rising_fraction(times_array, positions.sum(axis=1)),
        )
    return outlooks


def rising_factor(rise, dwell_seconds):
    """How much higher the arrivals are halfway through ``dwell_seconds`` if they go on rising by
    ``rise`` (a fraction of the rate per second). Works on floats and numpy arrays alike."""
    return 1.0 + rise * (dwell_seconds / 2.0)


def predicted_age(age, backlog, arrival_rate, service_rate, seconds):
    """The oldest event's age after ``seconds`` at constant arrival and service rates (fluid model:
    it grows by ``1 - service / arrivals`` per second). Works on floats and numpy arrays alike."""
    age, backlog, arrival_rate = np.asarray(age, dtype=float), np.asarray(backlog, dtype=float), np.asarray(arrival_rate, dtype=float)
    if seconds <= 0:
        result = age
    else:
        growth = 1.0 - service_rate / np.maximum(arrival_rate, NO_RATE)
        flowing = np.where((age <= 0) & (growth <= 0), 0.0, np.maximum(age + growth * seconds, 0.0))
        idle = np.where(service_rate * seconds >= backlog, 0.0, age + seconds)
        result = np.where(arrival_rate <= NO_RATE, idle, flowing)
    return float(result) if result.ndim == 0 else result


def _set_aside(outlook: SourceOutlook, hot: np.ndarray) -> SourceOutlook:
    """The outlook with the ``hot`` partitions counted as idle and caught up: they still share
    their owners (the service rate keeps every partition), but no count is chosen for them."""
    def zero(values: np.ndarray) -> np.ndarray:
        return np.where(hot, 0.0, values)
    peak = None if outlook.peak_arrival_rate is None else zero(outlook.peak_arrival_rate)
    return replace(outlook, arrival_rate=zero(outlook.arrival_rate), recent_arrival_rate=zero(outlook.recent_arrival_rate),
                   backlog=zero(outlook.backlog), age_seconds=zero(outlook.age_seconds), peak_arrival_rate=peak, set_aside=hot)


def propose(target: TargetPolicy, situation: Situation) -> Proposal:
    """Scale out when the SLO is at risk, in to the cheapest count that holds (module docstring)."""
    samples, capacity, ready_capacity = situation.samples, situation.capacity, situation.ready_capacity
    state, throughput, counts = situation.state, situation.throughput, situation.counts
    slo = target.slo
    latest = samples[-1]
    if throughput is None or throughput <= 0:
        previous = samples[-2].backlog if len(samples) >= 2 else 0
        if ready_capacity < capacity:
            return Proposal(None, HOLD, "throughput_unknown_waiting",
                            (f"per-instance throughput not known yet; waiting for {capacity - ready_capacity} new instances",), {})
        if latest.backlog > 0 and latest.backlog > previous:
            return Proposal(capacity + target.scale_up.size(capacity), UP, "throughput_unknown_backlog_growing",
                            (f"per-instance throughput not learned yet; backlog grew {previous} -> {latest.backlog}",), {})
        return Proposal(None, HOLD, "throughput_unknown",
                        ("per-instance throughput not learned yet (needs an interval with backlog on every partition)",), {})

    outlooks = list(partition_outlooks(samples, slo.rate_window_seconds, slo.scale_in_peak_seconds).values())
    if not outlooks:
        return Proposal(None, HOLD, "no_partition_data", ("no Event Hubs source with partitions in the latest sample",), {})

    clock = timing(target, situation)
    limit, interval, since_latest, pending_seconds = clock.limit, clock.interval, clock.since_latest, clock.pending_seconds
    enough_history = (latest.collected_at - samples[0].collected_at).total_seconds() >= slo.rate_window_seconds

    # A partition that receives more than one instance can serve (its owner's whole rate) over
    # the rate window and the last interval alike falls behind at any count: size for the rest
    # of the hub and say so, instead of chasing it. (Not against a lower bound of the throughput.)
    total_rate = float(sum(o.arrival_rate.sum() for o in outlooks))
    measured = situation.throughput_source in ("learned", "configured")
    hot = [(np.minimum(o.arrival_rate, o.recent_arrival_rate) > throughput) & measured for o in outlooks]
    hot_notes = [f"{key} receives {rate:.1f}/s, more than one instance serves ({throughput:.1f}/s)"
                 for outlook, mask in zip(outlooks, hot, strict=True)
                 for key, rate in zip(np.asarray(outlook.keys)[mask], outlook.arrival_rate[mask], strict=True)]
    if hot_notes:
        outlooks = [_set_aside(outlook, mask) for outlook, mask in zip(outlooks, hot, strict=True)]
        hot_notes.append(f"sized for the other {sum(o.partitions for o in outlooks) - len(hot_notes)} partitions")

    # Checkpoints trail the consumers, so even idle consumers show an oldest event as old as the
    # checkpoint delay. Learn that delay as the floor of observed ages and read ages net of it.
    observed_worst = max(float(o.age_seconds.max()) for o in outlooks)
    previous_delay = state.checkpoint_delay_seconds
    # It may creep up (checkpoints got slower) only while the ages are as low as checkpoints
    # alone explain (within an interval of it): ages well above it are a backlog, not a delay.
    creep = CHECKPOINT_DELAY_DRIFT if previous_delay is not None and observed_worst <= previous_delay + interval else 0.0
    delay = observed_worst if previous_delay is None else min(observed_worst, previous_delay + creep)
    delay = min(delay, slo.max_event_age_seconds * CHECKPOINT_DELAY_CEILING)
    new_state = replace(state, checkpoint_delay_seconds=delay)
    since_latest += delay
    react = since_latest + interval + slo.provisioning_delay_seconds

    forecasts = [np.maximum(o.arrival_rate, o.recent_arrival_rate) * (1.0 + slo.headroom) for o in outlooks]
    ages = [np.maximum(o.age_seconds - delay, 0.0) for o in outlooks]
    worst_now = max(float(a.max()) for a in ages)
    worst_predicted = 0.0
    by_draw = [distinct_shares(forecast) for forecast in forecasts]
    loads = [OwnerLoads.of(forecast, outlook.owners, outlook.set_aside, by_draw=draw)
             for outlook, forecast, draw in zip(outlooks, forecasts, by_draw, strict=True)]
    for outlook, load, age in zip(outlooks, loads, ages, strict=True):
        first = min(pending_seconds, react)
        then = predicted_age(age, outlook.backlog, load.forecast, load.service(ready_capacity, throughput), first)
        then = predicted_age(then, outlook.backlog, load.forecast, load.service(capacity, throughput), react - first)
        worst_predicted = max(worst_predicted, float(np.max(then)))
    owned = all(load.ownership for load in loads)
    busiest_now = _busiest(loads, capacity)
    sizing_note = (f"sizing: {OWNER_LOAD}, busiest owner {busiest_now:.1f}/s now "
                   f"of {throughput:.1f}/s per instance" if owned else f"sizing: {WORST_CASE}, no ownership")
    if ready_capacity <= 0:  # ownership collected, no claim live: the instances stopped
        sizing_note = f"sizing: {WORST_CASE}, no live owner: no instance serves until one claims the partitions"
    metrics = {
        "arrival_rate": round(total_rate, 3),
        "oldest_age_seconds": round(worst_now, 1),
        "predicted_age_seconds": round(worst_predicted, 1),
        "age_limit_seconds": limit,
        "reaction_seconds": round(react, 1),
        "checkpoint_delay_seconds": round(delay, 1),
        "busiest_load": round(busiest_now, 3),
        **({"hot_partitions": len(hot_notes) - 1} if hot_notes else {}),
    }
    hot_reasons = tuple(["hot_partition: " + "; ".join(hot_notes)] if hot_notes else [])

    # Partitions without a live owner while others have one: a consumer that stalled or is
    # rebalancing, which no count fixes until they are claimed again. Act on the next evaluation.
    unowned = [key for outlook in outlooks if outlook.owners is not None
               for key, owner in zip(outlook.keys, outlook.owners, strict=True) if owner is None]
    if unowned:
        metrics["unowned_partitions"] = len(unowned)
        named = ", ".join(unowned[:UNOWNED_NAMED]) + (f" and {len(unowned) - UNOWNED_NAMED} more" if len(unowned) > UNOWNED_NAMED else "")
        return Proposal(None, HOLD, "unowned_partitions",
                        (f"{len(unowned)} partitions have no live owner ({named}): a stalled consumer, not missing "
                         "capacity; holding until they are owned again", sizing_note, *hot_reasons),
                        metrics, new_state)

    if worst_predicted > limit:
        # Serve the forecast and drain what will have piled up by the time new instances serve.
        drain_seconds = max(slo.min_dwell_seconds / 2, slo.max_event_age_seconds)
        needed = [forecast + np.maximum(outlook.backlog + forecast * (slo.provisioning_delay_seconds + since_latest)
                                        - forecast * slo.safety_seconds, 0.0) / drain_seconds
                  for outlook, forecast in zip(outlooks, forecasts, strict=True)]
        need_loads = [OwnerLoads.of(need, outlook.owners, outlook.set_aside, by_draw=draw)
                      for outlook, need, draw in zip(outlooks, needed, by_draw, strict=True)]
        wanted = next((count for count in counts if count > capacity and all(
            bool(np.all(load.service(count, throughput) >= load.forecast)) for load in need_loads)), counts[-1])
        metrics["predicted_busiest_load"] = round(_busiest(loads, wanted), 3)
        return Proposal(wanted, UP, "slo_at_risk",
                        (f"oldest event would be {worst_predicted:.0f}s old in {react:.0f}s (limit {limit:.0f}s); "
                         f"arrivals {total_rate:.1f}/s, {throughput:.2f}/s per instance", sizing_note, *hot_reasons),
                        metrics, new_state)

    if not enough_history:
        return Proposal(None, HOLD, "too_few_samples",
                        (f"holding: rates need {slo.rate_window_seconds:.0f}s of history before any scale-in", *hot_reasons),
                        metrics, new_state)
    # A scale-in must hold at the busiest recent interval too, not only at the rate window's
    # forecast: a lull between bursts is no reason to act (and act again at the next burst).
    # While the arrivals clearly rise, it must hold at the rate halfway through the dwell if the
    # rise goes on (the dwell's average under a linear rise): no scale-in into a rising edge.
    calm = [(forecast if outlook.peak_arrival_rate is None
             else np.maximum(forecast, outlook.peak_arrival_rate * (1.0 + slo.headroom)))
            * rising_factor(outlook.rise, slo.min_dwell_seconds)
            for outlook, forecast in zip(outlooks, forecasts, strict=True)]
    calm_loads = [OwnerLoads.of(forecast, outlook.owners, outlook.set_aside, by_draw=draw)
                  for outlook, forecast, draw in zip(outlooks, calm, by_draw, strict=True)]
    chosen = None
    hold_seconds = math.inf
    for count in (count for count in counts if count < capacity):
        shortest = math.inf
        for load, forecast, age in zip(calm_loads, calm, ages, strict=True):
            serve = load.service(count, throughput)
            growth = np.where(forecast > NO_RATE, 1.0 - serve / np.maximum(forecast, NO_RATE), -1.0)
            filling = growth > 0
            if not filling.any():
                continue
            margin = limit - growth[filling] * (interval + slo.provisioning_delay_seconds) - age[filling]
            shortest = min(shortest, float(np.min(np.where(margin > 0, margin / growth[filling], 0.0))))
        if shortest >= slo.min_dwell_seconds:
            chosen, hold_seconds = count, shortest
            break
    if chosen is None:
        return Proposal(None, HOLD, "hot_partition" if hot_reasons else "slo_steady",
                        (f"oldest event {worst_now:.0f}s, predicted {worst_predicted:.0f}s within the {limit:.0f}s limit; "
                         f"no smaller count would hold for {slo.min_dwell_seconds:.0f}s", sizing_note, *hot_reasons),
                        metrics, new_state)
    holds = "indefinitely" if math.isinf(hold_seconds) else f"for about {hold_seconds:.0f}s"
    metrics["predicted_busiest_load"] = round(_busiest(calm_loads, chosen), 3)
    return Proposal(chosen, DOWN, "slo_surplus",
                    (f"{chosen} instances keep the oldest event under {limit:.0f}s {holds} "
                     f"(arrivals {total_rate:.1f}/s, {throughput:.2f}/s per instance)", sizing_note, *hot_reasons),
                    metrics, new_state)


def _busiest(loads: Sequence[OwnerLoads], instances: int) -> float:
    """The busiest owner's forecast load (events/s) at ``instances``, over the sources."""
    return max(load.busiest(instances) for load in loads)
