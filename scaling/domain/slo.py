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
  on average instead of the next count up, while the dwell time bounds how often it acts;
- where the arrivals come in short bursts (their measured noise), judges a count by the backlog
  the sequence numbers show and the arrivals of an SLO-long window instead (``slo_kernel.absorb``):
  a burst the backlog carries within the limit is no reason to scale out, a scale-out drains it
  within the limit instead of serving the burst's rate, and a scale-in holds at the busiest
  SLO-long window of the history, not the busiest interval.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from operator import attrgetter

import numpy as np

from scaling.domain import slo_kernel as kernel
from scaling.domain.decisions import DOWN, HOLD, UP
from scaling.domain.policy import TargetPolicy
from scaling.domain.proposal import Proposal, Situation, scale_out_drain, serving_instances, timing
from scaling.domain.samples import MetricSample, SourceReading
from scaling.domain.sizing import OWNER_LOAD, WORST_CASE

#: How many unowned partitions a decision names (the count says the rest).
UNOWNED_NAMED = 5


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
    #: (``slo_kernel.trend``; 0 when flat, falling or unclear).
    rise: float = 0.0
    #: How noisy the source's arrivals are, as a fraction of their rate (``slo_kernel.trend``).
    noise: float = 0.0
    #: Each partition's backlog at the rate window's first sample (``None``: as now): whether the
    #: hub's backlog grows (``slo_kernel.backlog_growing``).
    earlier_backlog: np.ndarray | None = None
    #: Absorbing bursts (``slo_kernel.absorb``): the history's sample times and last-enqueued
    #: sequence numbers (samples x partitions), each partition's oldest unprocessed sequence
    #: number, the rate over the last SLO-long window and the busiest such window's of the history
    #: (events/s; a lull between bursts is no reason to scale in). ``None``: not read (no SLO given).
    times: np.ndarray | None = None
    positions: np.ndarray | None = None
    oldest: np.ndarray | None = None
    sustained_rate: np.ndarray | None = None
    window_peak_rate: np.ndarray | None = None

    @property
    def partitions(self) -> int:
        return len(self.keys)


def _seconds(moment: datetime) -> float:
    return moment.timestamp()


_PARTITION_ID = attrgetter("partition_id")
_LAST_ENQUEUED = attrgetter("last_enqueued")
_BACKLOG = attrgetter("backlog")
_OWNER = attrgetter("owner")


#: The rows ``_positions`` read last, by the reading's identity (the reading is kept with its
#: row, so the identity stays its own): each sample stays in the window for a window's worth of
#: evaluations (the simulated loop, a warm host), and its readings never change.
_ROWS: dict[int, tuple[SourceReading, tuple[str, ...], np.ndarray]] = {}
_ROWS_KEPT = 64
_ROWS_LOCK = threading.Lock()


def _positions(reading: SourceReading, ids: tuple[str, ...]) -> np.ndarray:
    """The last-enqueued sequence numbers of ``ids`` in ``reading`` as floats (NaN where one is
    missing: a partition missing from an older sample counts as not having moved since then).
    Read off in one pass when the reading lists the same partitions, each once, in the same
    order, as it nearly always does (the dictionary is for the rest). Read-only: the caller
    stacks the rows into a new array."""
    kept = _ROWS.get(id(reading))
    if kept is not None and kept[0] is reading and kept[1] == ids:
        return kept[2]
    if tuple(map(_PARTITION_ID, reading.partitions)) == ids and len(set(ids)) == len(ids):
        row = np.array(list(map(_LAST_ENQUEUED, reading.partitions)), dtype=float)
    else:
        by_id = {p.partition_id: p.last_enqueued for p in reading.partitions}
        row = np.array([by_id.get(partition_id, np.nan) for partition_id in ids], dtype=float)
    row.flags.writeable = False
    with _ROWS_LOCK:
        if len(_ROWS) >= _ROWS_KEPT:
            del _ROWS[next(iter(_ROWS))]
        _ROWS[id(reading)] = (reading, ids, row)
    return row


@functools.lru_cache(maxsize=64)
def _keys(source: str, ids: tuple[str, ...]) -> tuple[str, ...]:
    """Each partition's key in decisions (``source/partition``): the same at every evaluation."""
    return tuple(f"{source}/{partition_id}" for partition_id in ids)


def partition_outlooks(samples: Sequence[MetricSample], rate_window_seconds: float,
                       peak_seconds: float = 0.0, slo_seconds: float = 0.0) -> dict[str, SourceOutlook]:
    """Per Event Hubs source of the latest sample, its partitions' rates, backlog and ages, and the
    busiest interval's rate among those ending within ``peak_seconds`` (at least the last one);
    with ``slo_seconds``, what absorbing bursts reads (``SourceOutlook.times`` and after)."""
    latest = samples[-1]
    latest_time = _seconds(latest.collected_at)
    outlooks: dict[str, SourceOutlook] = {}
    for source in latest.sources:
        if not source.ok or not source.partitions:
            continue
        ids = tuple(map(_PARTITION_ID, source.partitions))
        times, rows, readings = [], [], []
        for sample in samples:
            reading = next((x for x in sample.sources if x.name == source.name and x.ok), None)
            if reading is None:
                continue
            rows.append(_positions(reading, ids))
            times.append(_seconds(sample.collected_at))
            readings.append(reading)
        positions = np.array(rows)
        missing = np.isnan(positions)
        if missing.any():
            positions = np.where(missing, positions[-1][None, :], positions)
        times_array = np.asarray(times, dtype=float)
        base = 0
        for index, time in enumerate(times):
            if latest_time - time >= rate_window_seconds:
                base = index
        recent = max(len(times) - 2, 0)

        arrival, recent_rate = kernel.rate_since(times_array, positions, base), kernel.rate_since(times_array, positions, recent)
        peak = recent_rate
        absorbing = {}
        if len(times) > 1:
            first = next(index for index, time in enumerate(times) if latest_time - time <= peak_seconds)
            peak = kernel.later_peaks(times_array, positions)[max(min(first, len(times) - 2), 0)]
            if slo_seconds > 0:  # (slo_kernel.absorb)
                absorbing = _absorbing(times_array, positions, slo_seconds)
        oldest = np.asarray([(p.checkpoint + 1) if p.checkpoint is not None and p.checkpoint >= 0 else max(p.beginning, 0)
                             for p in source.partitions], dtype=float)
        ages = kernel.oldest_event_ages(times_array, positions, oldest, np.maximum(arrival, recent_rate))
        rise, noise = kernel.trend(times_array, positions.sum(axis=1))
        backlog = np.array(list(map(_BACKLOG, source.partitions)), dtype=float)
        earlier_backlog = _backlogs(readings[base], ids, backlog)
        outlooks[source.name] = SourceOutlook(
            keys=_keys(source.name, ids),
            arrival_rate=arrival,
            recent_arrival_rate=recent_rate,
            backlog=backlog,
            age_seconds=ages,
            peak_arrival_rate=peak,
            owners=tuple(map(_OWNER, source.partitions)) if source.owners else None,
            rise=rise,
            noise=noise,
            earlier_backlog=earlier_backlog,
            **({"oldest": oldest, **absorbing} if absorbing else {}),
        )
    return outlooks


def _absorbing(times: np.ndarray, positions: np.ndarray, slo_seconds: float) -> dict:
    """What absorbing bursts reads of a source's history (``SourceOutlook.times`` and after)."""
    start = kernel.window_index(times, slo_seconds)
    return {"times": times, "positions": positions, "sustained_rate": kernel.rate_since(times, positions, start),
            "window_peak_rate": kernel.later_window_peaks(times, positions, len(times) - 1 - start)[0]}


def _backlogs(reading: SourceReading, ids: tuple[str, ...], now: np.ndarray) -> np.ndarray:
    """The backlogs of ``ids`` in ``reading`` (a partition missing there: as ``now``)."""
    if tuple(map(_PARTITION_ID, reading.partitions)) == ids:
        return np.array(list(map(_BACKLOG, reading.partitions)), dtype=float)
    by_id = {p.partition_id: float(p.backlog) for p in reading.partitions}
    return np.array([by_id.get(partition_id, now[index]) for index, partition_id in enumerate(ids)], dtype=float)


def _set_aside(outlook: SourceOutlook, hot: np.ndarray) -> SourceOutlook:
    """The outlook with the ``hot`` partitions counted as idle and caught up: they still share
    their owners (the service rate keeps every partition), but no count is chosen for them."""
    def zero(values: np.ndarray) -> np.ndarray:
        return np.where(hot, 0.0, values)
    peak = None if outlook.peak_arrival_rate is None else zero(outlook.peak_arrival_rate)
    earlier = None if outlook.earlier_backlog is None else zero(outlook.earlier_backlog)
    sustained = None if outlook.sustained_rate is None else zero(outlook.sustained_rate)
    window_peak = None if outlook.window_peak_rate is None else zero(outlook.window_peak_rate)
    return replace(outlook, arrival_rate=zero(outlook.arrival_rate), recent_arrival_rate=zero(outlook.recent_arrival_rate),
                   backlog=zero(outlook.backlog), age_seconds=zero(outlook.age_seconds), peak_arrival_rate=peak, set_aside=hot,
                   earlier_backlog=earlier, sustained_rate=sustained, window_peak_rate=window_peak)


def _checkpoints_keep_pace(samples: Sequence[MetricSample], outlooks: Sequence[SourceOutlook]) -> bool:
    """Whether every partition in view that holds a backlog moved its checkpoint over the last
    interval (``slo_kernel.checkpoints_keep_pace``), source by source."""
    if len(samples) < 2:
        return False
    earlier = {source.name: source for source in samples[-2].sources if source.ok}
    for outlook, source in zip(outlooks, (s for s in samples[-1].sources if s.ok and s.partitions), strict=True):
        before = earlier.get(source.name)
        if before is None:
            return False
        by_id = {p.partition_id: p.checkpoint for p in before.partitions}
        now = np.array([-1.0 if p.checkpoint is None else float(p.checkpoint) for p in source.partitions])
        then = np.array([-1.0 if by_id.get(p.partition_id) is None else float(by_id[p.partition_id])
                         for p in source.partitions])  # (-1: no checkpoint yet)
        if not kernel.checkpoints_keep_pace(now[:, None], then[:, None], outlook.backlog[:, None])[0]:
            return False
    return True


def _hub_checkpoints(sample: MetricSample) -> float:
    """Events checkpointed so far over the sample's partitions (checkpoint + 1; 0 for none)."""
    return float(sum(p.checkpoint + 1 for source in sample.sources if source.ok for p in source.partitions
                     if p.checkpoint is not None))


def _stall(samples: Sequence[MetricSample], capacity: int, growing: bool, continuing: bool, arrivals: float,
           most: float) -> tuple | None:
    """The serving counts and processed rates (``slo_kernel.stalled``) of the history's first
    interval and its last, when they show a stall (or one recognised before goes on); else None."""
    if not growing or len(samples) < 3:
        return None
    first, second, before_last, last = samples[0], samples[1], samples[-2], samples[-1]
    serving = [serving_instances(sample, sample.capacity if sample.capacity is not None else capacity) for sample in (second, last)]
    if None in serving:
        return None
    elapsed = [(b.collected_at - a.collected_at).total_seconds() for a, b in ((first, second), (before_last, last))]
    if min(elapsed) <= 0:
        return None
    done = [(_hub_checkpoints(b) - _hub_checkpoints(a)) / seconds
            for (a, b), seconds in zip(((first, second), (before_last, last)), elapsed, strict=True)]
    if not kernel.stalled(serving[0], serving[1], done[0], done[1], True, continuing, arrivals, most):
        return None
    return (serving[0], serving[1]), (done[0], done[1])


def _absorbed_need(outlook: SourceOutlook, forecast: np.ndarray, weight: float, headroom: float, served: np.ndarray,
                   first: float, until_serving: float, limit: float, shortest: float) -> np.ndarray:
    """``slo_kernel.absorbed_need`` of a source (partitions x 1; the set-aside partitions 0): the
    instances ready now serve (``served``'s first column) until those in flight do (``first``),
    then all asked for (its second), until ``until_serving``."""
    rates = kernel.blended(forecast, outlook.sustained_rate[:, None] * (1.0 + headroom), weight)
    meanwhile = served[:, :1] * min(first, until_serving) + served[:, 1:] * max(until_serving - first, 0.0)
    need = kernel.absorbed_need(outlook.times, outlook.positions, outlook.oldest[:, None], rates, meanwhile, until_serving,
                                limit, shortest)
    return need if outlook.set_aside is None else np.where(outlook.set_aside[:, None], 0.0, need)


def propose(target: TargetPolicy, situation: Situation) -> Proposal:
    """Scale out when the SLO is at risk, in to the cheapest count that holds (module docstring).

    One long function on purpose: it reads the samples into the kernel's arrays and writes each
    outcome's reasons, and the order of its tests (unknown throughput, the hot set-aside, unowned
    partitions, the stall, the risk, too little history, the growing backlog, the scale-in) is the rule that
    ``simulation/drivers/batched_slo.py`` must follow step for step; split, that order would be
    spread over helpers that only make sense in sequence."""
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

    outlooks = list(partition_outlooks(samples, slo.rate_window_seconds, slo.scale_in_peak_seconds,
                                       slo.max_event_age_seconds).values())
    if not outlooks:
        return Proposal(None, HOLD, "no_partition_data", ("no Event Hubs source with partitions in the latest sample",), {})

    clock = timing(target, situation)
    limit, interval, since_latest, pending_seconds = clock.limit, clock.interval, clock.since_latest, clock.pending_seconds
    enough_history = (latest.collected_at - samples[0].collected_at).total_seconds() >= slo.rate_window_seconds

    # A partition that receives more than one instance can serve (its owner's whole rate) over
    # the rate window and the last interval alike falls behind at any count: size for the rest
    # of the hub and say so, instead of chasing it. (Not against a lower bound of the throughput,
    # and not while the hub as a whole cannot be served at the highest count: then it is a
    # hub-wide shortage, and every partition stays in view.)
    total_rate = float(sum(o.arrival_rate.sum() for o in outlooks))
    measured = situation.throughput_measured
    true_worst = max(float(o.age_seconds.max()) for o in outlooks)
    hot = [kernel.hot_partitions(o.arrival_rate, o.recent_arrival_rate, np.array([throughput]), np.array([measured]),
                                 kernel.most_instances(o.partitions, counts[-1], kernel.per_instance_table(o.partitions, counts[-1])))[:, 0]
           for o in outlooks]
    hot_notes = [f"{key} receives {rate:.1f}/s, more than one instance serves ({throughput:.1f}/s)"
                 for outlook, mask in zip(outlooks, hot, strict=True)
                 if mask.any() for key, rate in zip(np.asarray(outlook.keys)[mask], outlook.arrival_rate[mask], strict=True)]
    if hot_notes:
        outlooks = [_set_aside(outlook, mask) for outlook, mask in zip(outlooks, hot, strict=True)]
        hot_notes.append(f"sized for the other {sum(o.partitions for o in outlooks) - len(hot_notes)} partitions")

    # Checkpoints trail the consumers, so even idle consumers show an oldest event as old as the
    # checkpoint delay. Learn that delay as the floor of observed ages and read ages net of it.
    observed_worst = max(float(o.age_seconds.max()) for o in outlooks)
    previous_delay = math.nan if state.checkpoint_delay_seconds is None else state.checkpoint_delay_seconds
    dense = all(bool(kernel.dense_arrivals(o.arrival_rate, o.recent_arrival_rate, previous_delay, interval)[0]) for o in outlooks)
    steady = (enough_history and ready_capacity >= capacity >= counts[-1] and _checkpoints_keep_pace(samples, outlooks)
              and all(bool(kernel.backlog_flat(o.backlog[:, None], o.earlier_backlog[:, None], o.arrival_rate[:, None],
                                               interval * kernel.FLAT_TOLERANCE)[0])
                      for o in outlooks if o.earlier_backlog is not None))
    delay = float(kernel.learned_checkpoint_delay(observed_worst, previous_delay, interval,
                                                  slo.max_event_age_seconds * kernel.CHECKPOINT_DELAY_CEILING, dense, steady,
                                                  slo.max_event_age_seconds * kernel.CHECKPOINT_DELAY_STEADY_CEILING))
    new_state = replace(state, checkpoint_delay_seconds=delay)
    since_latest += delay
    react = since_latest + interval + slo.provisioning_delay_seconds

    # The kernel's arithmetic on a batch of one candidate (column), source by source.
    forecasts = [kernel.forecast_rates(o.arrival_rate, o.recent_arrival_rate, np.array([1.0 + slo.headroom])) for o in outlooks]
    ages = [np.maximum(o.age_seconds - delay, 0.0)[:, None] for o in outlooks]
    backlogs = [o.backlog[:, None] for o in outlooks]
    worst_now = max(float(a.max()) for a in ages)
    top = max(capacity, counts[-1]) + 1
    rate = np.array([throughput])
    levels = np.array([counts], dtype=np.int64)
    owners = [kernel.Owners.of(o.owners, o.partitions) for o in outlooks]
    tables = [kernel.per_instance_table(o.partitions, top) for o in outlooks]
    by_draw = [kernel.distinct_shares(forecast) for forecast in forecasts]

    def owner_loads(values: Sequence[np.ndarray]) -> list[kernel.OwnerLoads]:
        return [kernel.OwnerLoads(value, None if o.set_aside is None else o.set_aside[:, None], owned, rate, table, draw)
                for value, o, owned, table, draw in zip(values, outlooks, owners, tables, by_draw, strict=True)]

    def busiest(loads: Sequence[kernel.OwnerLoads], instances: int) -> float:
        """The busiest owner's forecast load (events/s) at ``instances``, over the sources."""
        return max(float(load.busiest(np.array([instances]))[0]) for load in loads)

    loads = owner_loads(forecasts)
    first = min(pending_seconds, react)
    worst_predicted = 0.0
    at_risk = False
    both = np.array([ready_capacity, capacity])  # the ready count, then the requested one (one column each)
    horizon = kernel.drain_seconds(slo.min_dwell_seconds, slo.max_event_age_seconds, True, 0.0)
    weights = [float(kernel.absorb_weight(o.noise)) if o.times is not None and kernel.bursts_ended(o.times, o.positions.sum(axis=1))
               else 0.0 for o in outlooks]  # (slo_kernel.absorb)
    services = []
    for load, forecast, age, backlog, outlook, weight in zip(loads, forecasts, ages, backlogs, outlooks, weights, strict=True):
        served = load.service(forecast[:, [0, 0]], both, np.array([0, 0]))
        services.append(served)
        then = kernel.age_at_reaction(age, backlog, forecast, served[:, :1], served[:, 1:], first, react)
        worst_predicted = max(worst_predicted, float(then.max()))
        risky = bool((then > kernel.carried_age_limits(limit, forecast, rate, horizon)).any())
        if risky and weight > 0:  # absorb: a burst the count carries within the limit is no reason to scale out
            need = _absorbed_need(outlook, forecast, weight, slo.headroom, served, first, react, limit + delay, interval)
            risky = not bool(kernel.carries(need, served[:, 1:])[0])
        at_risk = at_risk or risky
    owned = all(bool(reading.ownership[0]) for reading in owners)
    busiest_now = busiest(loads, capacity)
    sizing_note = (f"sizing: {OWNER_LOAD}, busiest owner {busiest_now:.1f}/s now "
                   f"of {throughput:.1f}/s per instance" if owned else f"sizing: {WORST_CASE}, no ownership")
    if ready_capacity <= 0:  # ownership collected, no claim live: the instances stopped
        sizing_note = f"sizing: {WORST_CASE}, no live owner: no instance serves until one claims the partitions"
    metrics = {
        "arrival_rate": round(total_rate, 3),
        "oldest_age_seconds": round(max(true_worst - delay, 0.0), 1),
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

    # No scale-in while the backlog (of the partitions in view) grows: the instances serve less
    # than arrives, and fewer would serve less still, whatever the model says they can do.
    growing = [kernel.backlog_growing(o.backlog[:, None], o.earlier_backlog[:, None], o.arrival_rate[:, None], interval)[0]
               for o in outlooks if o.earlier_backlog is not None]
    arriving = sum(float(kernel.column_sums(o.arrival_rate[:, None])[0]) for o in outlooks)
    most = min(float(kernel.most_instances(o.partitions, counts[-1], kernel.per_instance_table(o.partitions, counts[-1])))
               for o in outlooks)
    stall = _stall(samples, capacity, any(growing), state.last_reason_code == "stall", arriving, most)
    if stall is not None:
        (before, now), (done_before, done_now) = stall
        metrics["stall_processed_per_second"] = round(done_now, 3)
        if slo.stall_scale_to_minimum:
            return Proposal(counts[0], DOWN, "stall",
                            (f"stall: {now} instances process {done_now:.1f}/s where {before} processed {done_before:.1f}/s, "
                             f"the backlog grows (arrivals {total_rate:.1f}/s): more instances do not help; "
                             f"scaling to the minimum ({counts[0]}) until the consumers recover (stall_scale_to_minimum)",
                             sizing_note, *hot_reasons),
                            metrics, new_state)
        return Proposal(None, HOLD, "stall",
                        (f"stall: {now} instances process {done_now:.1f}/s where {before} processed {done_before:.1f}/s, "
                         f"the backlog grows (arrivals {total_rate:.1f}/s): more instances do not help; holding {capacity} "
                         "so that the recovery drains at once", sizing_note, *hot_reasons),
                        metrics, new_state)

    if at_risk:
        # Serve the forecast and drain what will have piled up by the time new instances serve.
        drain_seconds, drain_note = scale_out_drain(target, situation, worst_predicted)
        needed = [kernel.scale_out_need(forecast, backlog, slo.provisioning_delay_seconds, since_latest, slo.safety_seconds,
                                        drain_seconds) for forecast, backlog in zip(forecasts, backlogs, strict=True)]
        # absorb: sized for the SLO-long window's arrivals and the backlog's drain within the limit
        needed = [need if weight <= 0 else kernel.blended(need, _absorbed_need(
                      outlook, forecast, weight, slo.headroom, served, first, slo.provisioning_delay_seconds + since_latest,
                      limit + delay, interval), weight)
                  for need, forecast, outlook, weight, served in zip(needed, forecasts, outlooks, weights, services, strict=True)]
        wanted = int(kernel.scale_out_counts(levels, np.ones(levels.shape, dtype=bool), np.array([capacity]),
                                             np.array([counts[-1]]), top,
                                             list(zip(owner_loads(needed), needed, strict=True)))[0])
        metrics["predicted_busiest_load"] = round(busiest(loads, wanted), 3)
        metrics["drain_seconds"] = round(float(drain_seconds), 1)
        return Proposal(wanted, UP, "slo_at_risk",
                        (f"oldest event would be {worst_predicted:.0f}s old in {react:.0f}s (limit {limit:.0f}s); "
                         f"arrivals {total_rate:.1f}/s, {throughput:.2f}/s per instance", *drain_note, sizing_note,
                         *hot_reasons),
                        metrics, new_state)

    if not enough_history:
        return Proposal(None, HOLD, "too_few_samples",
                        (f"holding: rates need {slo.rate_window_seconds:.0f}s of history before any scale-in", *hot_reasons),
                        metrics, new_state)
    if any(growing):
        grown = sum(float((o.backlog - o.earlier_backlog).sum()) for o in outlooks if o.earlier_backlog is not None)
        return Proposal(None, HOLD, "backlog_growing",
                        (f"holding: the backlog grew by {grown:.0f} events over the rate window, more than "
                         f"{interval:.0f}s of arrivals ({total_rate:.1f}/s): the instances serve less than arrives, "
                         "no scale-in", sizing_note, *hot_reasons),
                        metrics, new_state)
    # A scale-in must hold at the busiest recent interval too, not only at the rate window's
    # forecast: a lull between bursts is no reason to act (and act again at the next burst).
    # While the arrivals clearly rise, it must hold at the rate halfway through the dwell if the
    # rise goes on (the dwell's average under a linear rise): no scale-in into a rising edge.
    calm = [kernel.calm_rates(forecast, np.zeros_like(forecast) if o.peak_arrival_rate is None else o.peak_arrival_rate[:, None],
                              1.0 + slo.headroom, o.rise, slo.min_dwell_seconds, o.noise, slo.scale_in_peak_full_noise)
            for o, forecast in zip(outlooks, forecasts, strict=True)]
    # absorb: held at the busiest SLO-long window's arrivals, not the busiest interval's
    calm = [rates if weight <= 0 else kernel.blended(rates, kernel.absorbed_calm_rates(
                o.sustained_rate[:, None], o.window_peak_rate[:, None], 1.0 + slo.headroom, o.rise, slo.min_dwell_seconds), weight)
            for rates, o, weight in zip(calm, outlooks, weights, strict=True)]
    calm_loads = owner_loads(calm)
    reaction = np.array([interval + slo.provisioning_delay_seconds])
    limits, dwell = np.array([limit]), np.array([slo.min_dwell_seconds])
    sources = list(zip(calm_loads, calm, ages, strict=True))
    chosen_counts, held = kernel.scale_in_counts(levels, np.array([sum(1 for count in counts if count < capacity)]),
                                                 np.array([capacity]), top, limits, dwell, reaction, sources)
    chosen, hold_seconds = int(chosen_counts[0]), float(held[0])
    if chosen < 0:
        return Proposal(None, HOLD, "hot_partition" if hot_reasons else "slo_steady",
                        (f"oldest event {worst_now:.0f}s, predicted {worst_predicted:.0f}s within the {limit:.0f}s limit; "
                         f"no smaller count would hold for {slo.min_dwell_seconds:.0f}s", sizing_note, *hot_reasons),
                        metrics, new_state)
    holds = "indefinitely" if math.isinf(hold_seconds) else f"for about {hold_seconds:.0f}s"
    metrics["predicted_busiest_load"] = round(busiest(calm_loads, chosen), 3)
    return Proposal(chosen, DOWN, "slo_surplus",
                    (f"{chosen} instances keep the oldest event under {limit:.0f}s {holds} "
                     f"(arrivals {total_rate:.1f}/s, {throughput:.2f}/s per instance)", sizing_note, *hot_reasons),
                    metrics, new_state)
