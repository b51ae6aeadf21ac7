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
  SLO-long window of the history, not the busiest interval. The step applies it
  (``slo_kernel.slo_step``); this module reads the history it needs (``SourceOutlook.times``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from operator import attrgetter

import numpy as np

from scaling.domain import slo_history
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
    #: Absorbing bursts (``slo_kernel.absorb``): the history's sample times, last-enqueued sequence
    #: numbers (samples x partitions) and each partition's oldest unprocessed sequence number.
    times: np.ndarray | None = None
    positions: np.ndarray | None = None
    oldest: np.ndarray | None = None
    #: The partitions' positions summed per sample (the trend and the bursts read them).
    totals: np.ndarray | None = None
    #: The source's history over the window (``slo_history``), for the rules that read more of it.
    history: slo_history.Stack | None = None

    @property
    def partitions(self) -> int:
        return len(self.keys)


def _seconds(moment: datetime) -> float:
    return moment.timestamp()


_PARTITION_ID = attrgetter("partition_id")
_BACKLOG = attrgetter("backlog")
_OWNER = attrgetter("owner")


@functools.lru_cache(maxsize=64)
def _keys(source: str, ids: tuple[str, ...]) -> tuple[str, ...]:
    """Each partition's key in decisions (``source/partition``): the same at every evaluation."""
    return tuple(f"{source}/{partition_id}" for partition_id in ids)


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
        ids = tuple(map(_PARTITION_ID, source.partitions))
        history = slo_history.stacked(samples, source.name, ids)
        readings, times_array, positions = history.readings, history.times, history.positions
        times = times_array.tolist()
        missing = np.isnan(positions)  # (a partition missing from an older sample: not moved since then)
        if missing.any():
            positions = np.where(missing, positions[-1][None, :], positions)
        base = 0
        for index, time in enumerate(times):
            if latest_time - time >= rate_window_seconds:
                base = index
        recent = max(len(times) - 2, 0)

        arrival, recent_rate = kernel.rate_since(times_array, positions, base), kernel.rate_since(times_array, positions, recent)
        peak = recent_rate
        if len(times) > 1:
            first = next(index for index, time in enumerate(times) if latest_time - time <= peak_seconds)
            peak = kernel.later_peak(times_array, positions, max(min(first, len(times) - 2), 0))
        oldest = np.asarray([(p.checkpoint + 1) if p.checkpoint is not None and p.checkpoint >= 0 else max(p.beginning, 0)
                             for p in source.partitions], dtype=float)
        ages = kernel.oldest_event_ages(times_array, positions, oldest, np.maximum(arrival, recent_rate))
        totals = positions.sum(axis=1)
        rise, noise = kernel.trend(times_array, totals)
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
            times=times_array,
            positions=positions,
            totals=totals,
            oldest=oldest,
            history=history,
        )
    return outlooks


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
    return replace(outlook, arrival_rate=zero(outlook.arrival_rate), recent_arrival_rate=zero(outlook.recent_arrival_rate),
                   backlog=zero(outlook.backlog), age_seconds=zero(outlook.age_seconds), peak_arrival_rate=peak, set_aside=hot,
                   earlier_backlog=earlier)


def _checkpoint_readings(samples: Sequence[MetricSample], source: SourceReading) -> tuple[np.ndarray, np.ndarray] | None:
    """The source's checkpoints at the latest sample and at the one before, as the events
    checkpointed (checkpoint + 1, the oldest unprocessed event's sequence number; 0: no checkpoint
    yet, as the batched simulator counts them), partitions x 1, for
    ``slo_kernel.checkpoints_keep_pace``, ``keeping_up`` and ``steady_lags``; ``None`` without
    the one before."""
    if len(samples) < 2:
        return None
    before = next((s for s in samples[-2].sources if s.ok and s.name == source.name), None)
    if before is None:
        return None
    by_id = {p.partition_id: p.checkpoint for p in before.partitions}
    now = np.array([0.0 if p.checkpoint is None else p.checkpoint + 1.0 for p in source.partitions])
    then = np.array([0.0 if by_id.get(p.partition_id) is None else by_id[p.partition_id] + 1.0
                     for p in source.partitions])
    return now[:, None], then[:, None]


def _hub_checkpoints(sample: MetricSample) -> float:
    """Events checkpointed so far over the sample's partitions (checkpoint + 1; 0 for none)."""
    return float(sum(p.checkpoint + 1 for source in sample.sources if source.ok for p in source.partitions
                     if p.checkpoint is not None))


def _stall_readings(samples: Sequence[MetricSample], capacity: int) -> tuple | None:
    """The serving counts and processed rates (``slo_kernel.stalled``) of the history's first
    interval and its last; None where the history cannot tell them."""
    if len(samples) < 3:
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
    return (serving[0], serving[1]), (done[0], done[1])


def _moved_stand_still(samples: Sequence[MetricSample], histories: dict[str, Callable[[], tuple | None]]
                       ) -> np.ndarray | None:
    """How long the partitions that changed owner in the window kept their checkpoints still
    (``slo_kernel.moved_stand_still``, a batch of one; None: no episode ended in the last
    interval), over the sources that read in every sample (the mean where several show one).
    ``histories``: each source's ``_source_history`` by name, read once for this and the cadence."""
    measured = []
    for source in samples[-1].sources:
        if not source.ok or not source.partitions or source.owners is None or source.name not in histories:
            continue
        history = histories[source.name]()
        if history is None:
            continue
        owners = history[1]
        if (owners == owners[0]).all():  # no owner changed in the window: nothing to measure
            continue
        value = kernel.moved_stand_still(*history)[0]
        if not math.isnan(value):
            measured.append(float(value))
    return np.array([sum(measured) / len(measured)]) if measured else None


def _source_history(samples: Sequence[MetricSample], history: slo_history.Stack) -> tuple[np.ndarray, ...] | None:
    """A source's history as the kernel reads it (a batch of one: samples x partitions x 1, oldest
    first), where it read in every sample of the window (None: not): the sample times, each
    partition's live owner (an integer code, -1: none), its checkpoint (-1: none yet; NaN: not
    in the sample) and its backlog (``history``: its ``slo_history.stacked``)."""
    if len(history.readings) != len(samples):
        return None
    return history.times, history.owners[:, :, None], history.checkpoints[:, :, None], history.backlogs[:, :, None]


def _measured_cadence(histories: Sequence[tuple[np.ndarray, ...] | None]) -> np.ndarray | None:
    """The seconds between checkpoint moves (``slo_kernel.measured_cadence``, a batch of one) over
    the sources with a history (the mean where several show one); None: none shows one."""
    measured = [float(value) for value in (kernel.measured_cadence(*history)[0] for history in histories
                                           if history is not None) if not math.isnan(value)]
    return np.array([sum(measured) / len(measured)]) if measured else None


def _since_moved(history: tuple[np.ndarray, ...] | None) -> tuple[np.ndarray, None] | None:
    """Per partition (x 1), the seconds since the sample that showed its checkpoint's last move
    (``slo_kernel.since_checkpoint_moved``; None without a history: the ages as they are)."""
    if history is None:
        return None
    times, _, checkpoints, _ = history
    return kernel.since_checkpoint_moved(times, checkpoints), None


def _hub_reading(samples: Sequence[MetricSample], source: SourceReading, outlook: SourceOutlook, per_instance: np.ndarray,
                 history) -> kernel.HubReading:
    """One source's outlook as the step reads it: a batch of one (partitions x 1); ``history``:
    its ``_source_history``, read when a rule needs it."""
    backlog = outlook.backlog[:, None]
    peak = outlook.peak_arrival_rate
    return kernel.HubReading(
        arrival_rate=outlook.arrival_rate, recent_rate=outlook.recent_arrival_rate, ages=outlook.age_seconds[:, None],
        backlog=backlog, owners=kernel.Owners.of(outlook.owners, outlook.partitions), per_instance=per_instance,
        checkpoints=lambda: _checkpoint_readings(samples, source),
        scale_in_rates=lambda: (np.zeros_like(backlog) if peak is None else peak[:, None], outlook.rise, outlook.noise),
        earlier_backlog=None if outlook.earlier_backlog is None else outlook.earlier_backlog[:, None],
        bursts=lambda: _burst_history(outlook), since_moved=lambda: _since_moved(history()),
        arrivals=lambda: (outlook.times, outlook.positions))


def _burst_history(outlook: SourceOutlook) -> kernel.BurstHistory:
    """What absorbing bursts reads of a source's history (a batch of one): the arrivals' noise, and
    whether a short burst ended in the partitions' summed sequence numbers."""
    return kernel.BurstHistory(times=outlook.times, positions=outlook.positions, oldest=outlook.oldest[:, None],
                               noise=outlook.noise, ended=kernel.bursts_ended(outlook.times, outlook.totals))


def _unowned(outlooks: Sequence[SourceOutlook]) -> list[str]:
    """The partitions without a live owner in sources where others have one."""
    return [key for outlook in outlooks if outlook.owners is not None
            for key, owner in zip(outlook.keys, outlook.owners, strict=True) if owner is None]


def propose(target: TargetPolicy, situation: Situation) -> Proposal:
    """Scale out when the SLO is at risk, in to the cheapest count that holds (module docstring).

    It reads the samples into the arrays of ``slo_kernel.slo_step`` (a batch of one), which
    decides, and writes the outcome's reasons and metrics."""
    samples, capacity, ready_capacity = situation.samples, situation.capacity, situation.ready_capacity
    state, throughput, counts = situation.state, situation.throughput, situation.counts
    slo = target.slo
    latest = samples[-1]
    known = throughput is not None and throughput > 0
    by_source = partition_outlooks(samples, slo.rate_window_seconds, slo.scale_in_peak_seconds) if known else {}
    outlooks = list(by_source.values())
    readings = {source.name: source for source in latest.sources if source.ok and source.partitions}  # (by name)
    clock = timing(target, situation)
    limit, interval = clock.limit, clock.interval
    top = max(capacity, counts[-1]) + 1
    unowned = _unowned(outlooks)
    step_state = kernel.StepState(
        throughput=np.array([math.nan if throughput is None else float(throughput)]),
        measured=np.array([situation.throughput_measured]), capacity=np.array([capacity]),
        ready=np.array([ready_capacity]), pending_seconds=np.array([clock.pending_seconds]),
        delay=np.array([math.nan if state.checkpoint_delay_seconds is None else state.checkpoint_delay_seconds]),
        stalling=np.array([state.last_reason_code == "stall"]), up_size=np.array([target.scale_up.size(capacity)]),
        below=np.array([sum(1 for count in counts if count < capacity)]),
        # (the hub's backlog totals: read only while the throughput is unknown, the one rule that uses them)
        backlog_total=np.array([0 if known else latest.backlog]),
        previous_backlog_total=np.array([0 if known or len(samples) < 2 else samples[-2].backlog]),
        unowned=np.array([len(unowned)]),
        pause=np.array([math.nan if state.rebalance_pause_seconds is None else state.rebalance_pause_seconds]),
        cadence=np.array([math.nan if state.checkpoint_cadence_seconds is None else state.checkpoint_cadence_seconds]))
    histories = {name: functools.cache(functools.partial(_source_history, samples, outlook.history))
                 for name, outlook in by_source.items()}
    outcome = kernel.slo_step(
        [_hub_reading(samples, readings[name], outlook, kernel.per_instance_table(outlook.partitions, top), histories[name])
         for name, outlook in by_source.items()],
        step_state, kernel.StepKnobs.one(slo), kernel.StepCounts.one(tuple(counts), top), interval=interval,
        since_latest=clock.since_latest, enough_history=(latest.collected_at - samples[0].collected_at).total_seconds()
        >= slo.rate_window_seconds, stall_readings=lambda: _stall_readings(samples, capacity),
        stand_still=lambda: _moved_stand_still(samples, histories),
        cadence=lambda: _measured_cadence([history() for history in histories.values()]), explain=True)
    return _proposal(target, situation, outlooks, unowned, outcome, limit, interval)


def _proposal(target: TargetPolicy, situation: Situation, outlooks: list[SourceOutlook], unowned: list[str],
              outcome: kernel.StepOutcome, limit: float, interval: float) -> Proposal:
    """The step's outcome for one candidate as a proposal: the count, the reasons, the metrics.

    Long for the words: each outcome says why in its own sentence."""
    slo, capacity, throughput, counts = target.slo, situation.capacity, situation.throughput, situation.counts
    code = int(outcome.reason[0])
    reason_code = kernel.REASONS[code]
    direction = (DOWN, HOLD, UP)[int(outcome.direction[0]) + 1]  # (the step's -1, 0, 1)
    wanted = None if direction == HOLD else int(outcome.wanted[0])
    samples = situation.samples
    if code == kernel.UNKNOWN_WAITING:
        return Proposal(None, HOLD, reason_code, (f"per-instance throughput not known yet; waiting for "
                                                  f"{capacity - situation.ready_capacity} new instances",), {})
    if code == kernel.UNKNOWN_GROWING:
        previous = samples[-2].backlog if len(samples) >= 2 else 0
        return Proposal(wanted, UP, reason_code, (f"per-instance throughput not learned yet; backlog grew {previous} -> "
                                                  f"{samples[-1].backlog}",), {})
    if code == kernel.UNKNOWN:
        return Proposal(None, HOLD, reason_code,
                        ("per-instance throughput not learned yet (needs an interval with backlog on every partition)",), {})
    if code == kernel.NO_DATA:
        return Proposal(None, HOLD, reason_code, ("no Event Hubs source with partitions in the latest sample",), {})

    delay, pause = float(outcome.delay[0]), float(outcome.pause[0])
    allowance = 0.0 if outcome.allowance is None else float(outcome.allowance[0])
    cadence = float(outcome.cadence[0]) if outcome.cadence is not None else math.nan if \
        situation.state.checkpoint_cadence_seconds is None else situation.state.checkpoint_cadence_seconds
    previous = situation.state.checkpoint_delay_seconds
    clipped = bool(kernel.delay_clipped(situation.state.checkpoint_delay_clipped, math.nan if previous is None else previous,
                                        delay, target.slo.max_event_age_seconds * kernel.CHECKPOINT_DELAY_CEILING))
    new_state = situation.state.changed(checkpoint_delay_seconds=delay, checkpoint_delay_clipped=clipped,
                        rebalance_pause_seconds=None if math.isnan(pause) else pause,
                        checkpoint_cadence_seconds=None if math.isnan(cadence) else cadence)
    total_rate = float(sum(o.arrival_rate.sum() for o in outlooks))
    true_worst = max(float(o.age_seconds.max()) for o in outlooks)
    worst_predicted, react = float(outcome.predicted_age[0]), float(outcome.react[0])
    busiest_now = float(outcome.busiest_now[0])
    hot_notes = []
    if outcome.hot is not None:
        hot_notes = [f"{key} receives {rate:.1f}/s, more than one instance serves ({throughput:.1f}/s)"
                     for outlook, mask in zip(outlooks, outcome.hot, strict=True)
                     if mask[:, 0].any() for key, rate in zip(np.asarray(outlook.keys)[mask[:, 0]],
                                                                 outlook.arrival_rate[mask[:, 0]], strict=True)]
        if hot_notes:
            hot_notes.append(f"sized for the other {sum(o.partitions for o in outlooks) - len(hot_notes)} partitions")
    hot_reasons = tuple(["hot_partition: " + "; ".join(hot_notes)] if hot_notes else [])
    sizing_note = (f"sizing: {OWNER_LOAD}, busiest owner {busiest_now:.1f}/s now "
                   f"of {throughput:.1f}/s per instance" if outcome.owned[0] else f"sizing: {WORST_CASE}, no ownership")
    if situation.ready_capacity <= 0:  # ownership collected, no claim live: the instances stopped
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
        **({"rebalance_pause_seconds": round(allowance, 1)} if allowance > 0 else {}),
    }
    absorbed = outcome.absorbed is not None and bool(outcome.absorbed[0])
    if absorbed:
        metrics["absorbed_burst"] = 1
        hot_reasons = (f"absorbed: the oldest event would be {worst_predicted:.0f}s old in {react:.0f}s, but the burst "
                       f"has ended and {capacity} instances carry its backlog within the limit; no scale-out",
                       *hot_reasons)

    if code == kernel.UNOWNED:
        metrics["unowned_partitions"] = len(unowned)
        named = ", ".join(unowned[:UNOWNED_NAMED]) + (f" and {len(unowned) - UNOWNED_NAMED} more" if len(unowned) > UNOWNED_NAMED else "")
        return Proposal(None, HOLD, reason_code,
                        (f"{len(unowned)} partitions have no live owner ({named}): a stalled consumer, not missing "
                         "capacity; holding until they are owned again", sizing_note, *hot_reasons),
                        metrics, new_state)
    if code == kernel.STALL:
        (before, now), (done_before, done_now) = outcome.stall_readings
        metrics["stall_processed_per_second"] = round(done_now, 3)
        told = (f"stall: {now} instances process {done_now:.1f}/s where {before} processed {done_before:.1f}/s, "
                f"the backlog grows (arrivals {total_rate:.1f}/s): more instances do not help; ")
        if direction == DOWN:
            return Proposal(wanted, DOWN, reason_code,
                            (told + f"scaling to the minimum ({counts[0]}) until the consumers recover (stall_scale_to_minimum)",
                             sizing_note, *hot_reasons), metrics, new_state)
        if direction == UP:
            waiting = sum(float(o.backlog.sum()) for o in outlooks)
            return Proposal(wanted, UP, reason_code,
                            (told + f"scaling out so that the recovery drains at once: {wanted} instances at "
                                    f"{throughput:.2f}/s serve the arrivals and drain the {waiting:.0f} events waiting "
                                    f"within the SLO ({slo.max_event_age_seconds:.0f}s)", sizing_note, *hot_reasons),
                            metrics, new_state)
        return Proposal(None, HOLD, reason_code, (told + f"holding {capacity} so that the recovery drains at once",
                                                  sizing_note, *hot_reasons), metrics, new_state)
    if code == kernel.AT_RISK:
        if kernel.confirms_floor(True, situation.throughput_source == "lower bound", cadence, interval,
                                 situation.ready_capacity, capacity):  # (the floor, learned: ``slo_kernel.cadence``)
            new_state = new_state.changed(throughput_per_instance=situation.state.throughput_floor)
        _, drain_note = scale_out_drain(target, situation, worst_predicted)
        metrics["predicted_busiest_load"] = round(float(outcome.busiest_wanted[0]), 3)
        metrics["drain_seconds"] = round(float(outcome.drain_seconds[0]), 1)
        return Proposal(wanted, UP, reason_code,
                        (f"oldest event would be {worst_predicted:.0f}s old in {react:.0f}s (limit {limit:.0f}s); "
                         f"arrivals {total_rate:.1f}/s, {throughput:.2f}/s per instance", *drain_note, sizing_note,
                         *hot_reasons),
                        metrics, new_state)
    if code == kernel.TOO_FEW_SAMPLES:
        return Proposal(None, HOLD, reason_code,
                        (f"holding: rates need {slo.rate_window_seconds:.0f}s of history before any scale-in", *hot_reasons),
                        metrics, new_state)
    if code == kernel.GROWING:
        in_view = outlooks if outcome.hot is None else [_set_aside(o, mask[:, 0]) for o, mask in zip(outlooks, outcome.hot,
                                                                                                     strict=True)]
        grown = sum(float((o.backlog - o.earlier_backlog).sum()) for o in in_view if o.earlier_backlog is not None)
        return Proposal(None, HOLD, reason_code,
                        (f"holding: the backlog grew by {grown:.0f} events over the rate window, more than "
                         f"{interval:.0f}s of arrivals ({total_rate:.1f}/s): the instances serve less than arrives, "
                         "no scale-in", sizing_note, *hot_reasons),
                        metrics, new_state)
    if code in (kernel.STEADY, kernel.STEADY_HOT):
        worst_now = float(outcome.oldest_in_view[0])
        why = (f"a scale-in's rebalance pause ({allowance:.0f}s) would take it past the limit"
               if outcome.pause_blocked is not None and outcome.pause_blocked[0]
               else f"no smaller count would hold for {slo.min_dwell_seconds:.0f}s")
        return Proposal(None, HOLD, reason_code,
                        (f"oldest event {worst_now:.0f}s, predicted {worst_predicted:.0f}s within the {limit:.0f}s limit; {why}",
                         sizing_note, *hot_reasons),
                        metrics, new_state)
    hold_seconds = float(outcome.hold_seconds[0])
    holds = "indefinitely" if math.isinf(hold_seconds) else f"for about {hold_seconds:.0f}s"
    metrics["predicted_busiest_load"] = round(float(outcome.busiest_wanted[0]), 3)
    return Proposal(wanted, DOWN, reason_code,
                    (f"{wanted} instances keep the oldest event under {limit:.0f}s {holds} "
                     f"(arrivals {total_rate:.1f}/s, {throughput:.2f}/s per instance)", sizing_note, *hot_reasons),
                    metrics, new_state)
