"""The rule engine: ``evaluate(policy, state, history, now) -> Decision``.

Pure and deterministic: time comes in as ``now``, state comes in and goes out as values. The
engine does the bookkeeping every mode shares (duplicates, ordering, learning throughput, and
the gates: bounds, cooldowns, the action budget, in the order ``slo_kernel.gates`` applies them
to a batch of one) and asks the target's mode, through ``modes.py``, what it wants:

- ``rules`` (``rules.py``): threshold rules over a window (the seed design and what Azure
  Monitor can express, plus per-instance and lag-seconds metrics, tiers and combined rules);
- ``slo`` (``slo.py``): keeps the oldest unprocessed event younger than the SLO using the arrival
  rate, the learned per-instance throughput and the event ages, and spends the SLO budget to
  absorb noise.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from operator import attrgetter

import numpy as np

from scaling.domain import forecast, slo_kernel, slo_queue
from scaling.domain.decisions import DOWN, HOLD, UP, Decision, ScalerState, decision_id_for
from scaling.domain.lag import balanced_counts
from scaling.domain.modes import mode_of
from scaling.domain.pause import Hold, paused_reason
from scaling.domain.policy import Bounds, TargetPolicy
from scaling.domain.profiles import BoundsInForce, bounds_in_force, with_bounds
from scaling.domain.proposal import Proposal, Situation, sample_interval, serving_instances
from scaling.domain.samples import MAX_CLOCK_SKEW, MetricSample, PartitionReading, SourceReading


def window_samples(history: Iterable[MetricSample], target: str, now: datetime, window_seconds: float,
                   clock_skew: timedelta = MAX_CLOCK_SKEW) -> list[MetricSample]:
    """The target's samples inside the window, de-duplicated by id and ordered by collection time.

    Late samples (arriving after newer ones) land in their place by time; samples from the
    future beyond the tolerated clock skew are ignored.
    """
    start, end = now - timedelta(seconds=window_seconds), now + clock_skew
    unique: dict[str, MetricSample] = {}
    for sample in history:
        if sample.target == target and start < sample.collected_at <= end:
            unique.setdefault(sample.sample_id, sample)
    return sorted(unique.values(), key=_COLLECTED_AT)


def partition_count(sample: MetricSample) -> int:
    """Partitions of the largest Event Hubs source (0 when no source has partitions)."""
    return max((len(source.partitions) for source in sample.sources), default=0)


def allowed_counts(target: TargetPolicy, partitions: int) -> list[int]:
    """Instance counts the policy allows, ascending (made once per bounds and partitions)."""
    return list(_allowed_counts(target.bounds, partitions))


@functools.lru_cache(maxsize=256)
def _allowed_counts(bounds: Bounds, partitions: int) -> tuple[int, ...]:
    high = bounds.max_instances
    if bounds.cap_at_partitions and partitions > 0:
        high = min(high, max(partitions, bounds.min_instances))
    if bounds.balanced_counts and partitions > 0:
        counts = [count for count in balanced_counts(partitions) if bounds.min_instances <= count <= high]
        for edge in (bounds.min_instances, high):
            if edge not in counts:
                counts.append(edge)
        return tuple(sorted(set(counts)))
    return tuple(range(bounds.min_instances, high + 1))


def snap_up(counts: Sequence[int], wanted: int) -> int:
    """The smallest allowed count at or above ``wanted`` (the largest allowed when none is)."""
    for count in counts:
        if count >= wanted:
            return count
    return counts[-1]


def snap_down(counts: Sequence[int], wanted: int) -> int:
    """The largest allowed count at or below ``wanted`` (the smallest allowed when none is)."""
    for count in reversed(counts):
        if count <= wanted:
            return count
    return counts[0]


def interval_throughput(samples: Sequence[MetricSample], ready_capacity: int | None,
                        by_owner: bool = False, lag_seconds: float = 0.0, cadence: float = 0.0,
                        interval: float = 60.0, throughput: float = math.nan,
                        most: Callable[[], float] = lambda: math.inf) -> tuple[float | None, bool, bool]:
    """Events per second per serving instance over the last interval, whether it was saturated,
    and whether its own readings corroborate a drop below the learned ``throughput``
    (``slo_kernel.corroborated_drop``: every serving instance busy and slower while the backlog
    grew, and the ``most`` instances' worth the bounds allow would serve the arrivals at it: read
    only where a drop is in question).

    Only saturated intervals tell the real rate: when a partition ran dry, its owner idled part
    of the time and the observed rate understates what it can do (it is still a lower bound).
    Checkpoints trail the true position, so a backlog of one interval's arrivals is normal even
    for idle consumers; a partition counts as saturated only when it held more than two
    intervals' arrivals at both ends. Without ownership (``by_owner`` false) the interval is
    saturated when every partition was, and ``ready_capacity`` instances divide what was
    processed. With ownership (the latest sample's owners, steady over the interval), each
    owner with a partition saturated throughout is a measurement of one instance (it shares its
    throughput by demand: a backlogged partition leaves it nothing to spare): their mean is
    the rate, so a hub with a few busy partitions still teaches it. With a checkpoint ``cadence``
    (seconds, ``slo_kernel.cadence``), ``samples`` end with a span's two ends and a busy partition
    holds a cadence's arrivals more over the collection ``interval``'s (``slo_kernel.busy_over_span``).
    """
    if len(samples) < 2 or not ready_capacity:
        return None, False, False
    earlier, later = samples[-2], samples[-1]
    elapsed = (later.collected_at - earlier.collected_at).total_seconds()
    if not (earlier.ok and later.ok) or elapsed <= 0:
        return None, False, False
    if not any(source.partitions for source in later.sources):
        # A queue has no sequence numbers: its completions per minute tell the rate.
        return (*slo_queue.interval_throughput(samples, ready_capacity), False)
    earlier_sources = {source.name: source for source in earlier.sources}
    # Per partition of the later sample, as it read then (None: not there); each list below in
    # one pass over them (comprehensions: this runs at every evaluation).
    pairs = [(partition, start) for source in later.sources
             for partition, start in zip(source.partitions, _earlier_readings(earlier_sources.get(source.name), source),
                                         strict=True)]
    unmeasured = [start is None or partition.checkpoint is None for partition, start in pairs]  # processed unknown
    if all(unmeasured):
        return None, False, False
    measured = [pair for pair, skip in zip(pairs, unmeasured, strict=True) if not skip]
    done = [0 if skip else partition.checkpoint - (start.checkpoint if start.checkpoint is not None else start.beginning - 1)
            for (partition, start), skip in zip(pairs, unmeasured, strict=True)]
    arrived = [partition.last_enqueued - start.last_enqueued for partition, start in measured]
    if min(arrived) < 0 or min(done) < 0:
        return None, False, False
    moved = [float(events) for events, skip in zip(done, unmeasured, strict=True) if not skip]
    # Checkpoints as far behind as the learned delay only where they keep pace (every partition
    # with a backlog moved its checkpoint: they trail by a delay, not by the wait between
    # checkpoints written less often than collect runs, which the delay does not measure).
    if lag_seconds:
        now = [-1.0 if partition.checkpoint is None else float(partition.checkpoint) for partition, _ in pairs]
        then = [-1.0 if start is None or start.checkpoint is None else float(start.checkpoint) for _, start in pairs]
        backlog = [float(partition.backlog) for partition, _ in pairs]
        if not slo_kernel.checkpoints_keep_pace(np.array(now)[:, None], np.array(then)[:, None],
                                                np.array(backlog)[:, None])[0]:
            lag_seconds = 0.0
    starts = np.array([start.backlog for _, start in measured], dtype=float)
    ends = np.array([partition.backlog for partition, _ in measured], dtype=float)
    arrivals = np.array(arrived, dtype=float)
    owners = [partition.owner for partition, _ in pairs] if by_owner else []
    unmeasured_flags = np.array(unmeasured)
    if cadence > 0:
        read = slo_kernel.busy_over_span(starts, ends, arrivals, cadence, elapsed, interval)
    else:
        read = slo_kernel.busy_partitions(
            starts, ends, arrivals, lag_seconds, elapsed,
            _arrived_over_lag(samples, later, [partition for (partition, _), skip in zip(pairs, unmeasured, strict=True)
                                                if not skip], lag_seconds) if lag_seconds > elapsed else None)
    busy = read if len(measured) == len(pairs) else np.zeros(len(unmeasured), dtype=bool)  # (read: the measured ones)
    if busy is not read:
        busy[~unmeasured_flags] = read
    observed, saturated, fastest = slo_kernel.observed_throughput(
        np.array([float(sum(done))]), elapsed, np.array([float(ready_capacity)]), np.array(done, dtype=float)[:, None],
        busy[:, None], unmeasured_flags[:, None], slo_kernel.Owners.of(tuple(owners), len(owners)) if by_owner else None)
    # (the kernel's test, asked only where the fastest owner read a drop: most() costs a lookup)
    corroborated = (bool(saturated[0]) and fastest[0] < throughput * (1 - slo_kernel.UNCONFIRMED_DROP)
                    and bool(slo_kernel.corroborated_drop(
        float(observed[0]), float(fastest[0]), throughput, starts, ends, arrivals, np.array(moved), elapsed, most())))
    return float(observed[0]), bool(saturated[0]), corroborated


def _arrived_over_lag(samples: Sequence[MetricSample], later: MetricSample, partitions: Sequence[PartitionReading],
                      lag_seconds: float) -> tuple[np.ndarray, np.ndarray] | None:
    """What arrived at each of ``partitions`` (the measured ones of ``later``) over the ``lag_seconds``
    before the interval's start and before its end (``slo_kernel.arrived_before``, for
    ``slo_kernel.busy_partitions``), off the window's samples; None where a sample did not read
    them all."""
    if len(samples) < 3:
        return None
    ids = {id(partition) for partition in partitions}
    rows, times = [], []
    for sample in samples:
        if not sample.ok:
            return None
        row = []
        for source in later.sources:
            earlier = next((reading for reading in sample.sources if reading.name == source.name), None)
            row.extend(float(start.last_enqueued) if start is not None else math.nan
                       for partition, start in zip(source.partitions, _earlier_readings(earlier, source), strict=True)
                       if id(partition) in ids)
        rows.append(row)
        times.append(sample.collected_at.timestamp())
    positions = np.array(rows)
    if np.isnan(positions).any():
        return None
    times_array = np.array(times)
    lag = np.array([lag_seconds])
    return (slo_kernel.arrived_before(times_array[:-1], positions[:-1], lag)[:, 0],
            slo_kernel.arrived_before(times_array, positions, lag)[:, 0])


def _earlier_readings(earlier: SourceReading | None, later: SourceReading) -> Sequence[PartitionReading | None]:
    """Each of ``later``'s partitions as ``earlier`` read it (``None``: not there). Paired in order
    when both list the same partitions, each once, in the same order, as they nearly always do."""
    if earlier is None:
        return [None] * len(later.partitions)
    ids = tuple(map(_PARTITION_ID, later.partitions))
    if tuple(map(_PARTITION_ID, earlier.partitions)) == ids and len(set(ids)) == len(ids):
        return earlier.partitions
    by_id = {partition.partition_id: partition for partition in earlier.partitions}
    return [by_id.get(partition.partition_id) for partition in later.partitions]


_PARTITION_ID, _OWNER, _COLLECTED_AT = attrgetter("partition_id"), attrgetter("owner"), attrgetter("collected_at")


def serving_owners(samples: Sequence[MetricSample]) -> int | None:
    """How many instances served the last interval, as the collected ownership shows it: the
    distinct live owners when every partition kept its owner (or its lack of one) from one
    sample to the next; 0 when a partition changed hands or lost or found its owner (a
    rebalance or a failed instance: the interval says nothing steady) or nothing is owned at all
    (no instance serves); ``None`` when a source collects no ownership."""
    if len(samples) < 2:
        return None
    earlier, later = samples[-2], samples[-1]
    earlier_sources = {source.name: source for source in earlier.sources if source.owners is not None}
    owners: set[str | None] = set()
    for source in later.sources:
        if source.owners is None:
            return None
        now = list(map(_OWNER, source.partitions))  # (each partition's owner then and now: compared as lists)
        if now != ["" if start is None else start.owner
                   for start in _earlier_readings(earlier_sources.get(source.name), source)]:
            return 0
        owners.update(now)
    owners.discard(None)
    return len(owners)


def ready_from_owners(expected: int, serving: int | None, pending_ready_at: datetime | None, now: datetime,
                      interval: float) -> int:
    """The instances ready now: those the owners show serving (``serving_instances``) where
    ownership is collected, else ``expected`` (the count the provisioning delay makes ready).
    Owners confirm new instances early, and show an instance that is late or lost (failed, and
    being restored). An instance claims its partitions as it starts, and the collection sees the
    claims up to an interval later: until an interval past the end of the provisioning delay,
    fewer owners than expected are not yet a late instance."""
    if serving is None:
        return expected
    just_due = pending_ready_at is not None and now < pending_ready_at + timedelta(seconds=interval)
    return int(slo_kernel.ready_instances(expected, serving, just_due))


def learn_throughput(state: ScalerState, samples: Sequence[MetricSample], ready_capacity: int | None,
                     settled: bool = True, most: Callable[[], float] = lambda: math.inf,
                     span: tuple[int, float, float] | None = None, steady_ceiling: float = 0.0) -> ScalerState:
    """Fold the last interval's per-instance throughput into the state if it was saturated.

    Where ownership is collected, the instances that really served (the live owners) divide
    the events processed, not the count assumed ready after the provisioning delay, and an
    interval in which owners changed teaches nothing. A reading far below the learned rate waits
    for the next one to confirm it (``slo_kernel.UNCONFIRMED_DROP``), unless the interval's own
    readings corroborate it (``most``: the instances' worth the bounds allow) and the capacity
    has long been steady (``settled``, ``slo_kernel.settled_for_drop``): then it is learned at once.
    ``span``: ``throughput_span`` where the caller has it already; ``steady_ceiling``: the
    longest delay a clipped one may follow to (``slo_kernel.saturation_lag``)."""
    held_back = state.throughput_unconfirmed
    if held_back is not None:
        state = state.changed(throughput_unconfirmed=None)  # it waits one learning step, no more
    span, cadence, interval = throughput_span(state, samples) if span is None else span
    owners = serving_owners(samples)
    if any(serving_owners(samples[:end]) == 0 for end in range(len(samples) - span + 1, len(samples))):
        owners = 0  # (over a cadence's span: owners steady throughout)
    if owners == 0:
        return state
    observed, saturated, corroborated = interval_throughput(
        samples if span == 1 else [samples[-1 - span], samples[-1]], owners or ready_capacity,
        by_owner=owners is not None,
        lag_seconds=float(slo_kernel.saturation_lag(state.checkpoint_delay_seconds, state.checkpoint_delay_clipped,
                                                    steady_ceiling)) if state.checkpoint_delay_seconds else 0.0,
        cadence=cadence, interval=interval, most=most,
        # (a drop is learned at once only from one interval's readings: under a cadence checkpoints
        # move in lumps and partitions stand still between them, so no interval can prove one)
        throughput=_number(state.throughput_per_instance) if span == 1 else math.nan)
    if observed is None:
        return state
    throughput, floor, waits, learned = slo_kernel.learned_throughput(  # (a batch of one as plain numbers)
        _number(state.throughput_per_instance), _number(state.throughput_floor), _number(held_back), float(observed),
        bool(saturated), True, corroborated and settled)
    before, shown_at = slo_kernel.remembered_drop(
        _number(state.throughput_before_drop), _moment(state.throughput_drop_shown_at),
        _number(state.throughput_per_instance), float(observed), bool(saturated), True, corroborated and settled,
        samples[-1].collected_at.timestamp())
    return state.changed(throughput_per_instance=_known(throughput), throughput_floor=_known(floor),
                   throughput_unconfirmed=_known(waits), throughput_observations=state.throughput_observations + int(learned),
                   throughput_before_drop=_known(before), throughput_drop_shown_at=_time(shown_at))


def let_go_of_drop(state: ScalerState, now: datetime) -> ScalerState:
    """The state once a drop learned at once is ``slo_kernel.DROP_MEMORY_SECONDS`` old with no
    saturated reading showing it since: the rate before it is back (``slo_kernel.let_go``)."""
    if state.throughput_before_drop is None:
        return state
    throughput, before, shown_at = slo_kernel.let_go(
        _number(state.throughput_per_instance), state.throughput_before_drop, _moment(state.throughput_drop_shown_at),
        now.timestamp())
    return state.changed(throughput_per_instance=_known(throughput), throughput_before_drop=_known(before),
                   throughput_drop_shown_at=_time(shown_at))


def _moment(value: datetime | None) -> float:
    """Seconds since the epoch (NaN: none), as the kernel reads times."""
    return math.nan if value is None else value.timestamp()


def _time(seconds: float) -> datetime | None:
    """The moment ``seconds`` since the epoch names (None for NaN)."""
    seconds = float(seconds)
    return None if math.isnan(seconds) else datetime.fromtimestamp(seconds, UTC)


def throughput_span(state: ScalerState, samples: Sequence[MetricSample], interval: float | None = None) -> tuple[int, float, float]:
    """Over how many collection intervals the throughput is read, the checkpoint cadence allowed
    for (``slo_kernel.cadence_allowance``; 0: none) and the collection interval: one interval
    without a cadence; with one, enough intervals to hold it (``slo_kernel.cadence_span``), as a
    checkpoint moves a cadence's work at once (``interval``: ``sample_interval``, if known)."""
    interval = sample_interval(samples) if interval is None else interval
    cadence = float(slo_kernel.cadence_allowance(_number(state.checkpoint_cadence_seconds), interval))
    span = slo_kernel.cadence_span(cadence, interval, len(samples) - 1)
    return span, (cadence if span > 1 else 0.0), interval


def raise_throughput_floor(state: ScalerState, samples: Sequence[MetricSample], most_instances: int) -> ScalerState:
    """Raise the lower bound of the per-instance rate from an interval that cannot teach the rate
    itself (capacity changing, new instances starting) while nothing is learned yet.

    A cold start (a first deployment onto a busy hub, a plan left at its minimum) adds
    instances every interval, so no interval is steady and the rate would stay unknown while the
    backlog grows. The events processed divided by the most instances that could have served
    the interval (``most_instances``: the larger of the two samples' capacities) never exceed
    what one instance can do, so they are a safe bound to size from at once."""
    observed, _, _ = interval_throughput(samples, most_instances)
    if observed is None:
        return state
    _, floor, _, _ = slo_kernel.learned_throughput(  # (a batch of one as plain numbers)
        math.nan, _number(state.throughput_floor), math.nan, float(observed), False, True)
    return state.changed(throughput_floor=_known(floor))


def _most_instances(target: TargetPolicy, sample: MetricSample) -> float:
    """How many instances' worth the highest allowed count serves on the sample's largest hub
    (``slo_kernel.most_instances``; infinite without partitions)."""
    partitions = partition_count(sample)
    if not partitions:
        return math.inf
    highest = allowed_counts(target, partitions)[-1]
    return float(slo_kernel.most_instances(partitions, highest, slo_kernel.per_instance_table(partitions, highest)))


def _number(value: float | None) -> float:
    """A state value as the kernel's batch of one, a plain number (NaN: none)."""
    return math.nan if value is None else float(value)


def _known(value: float) -> float | None:
    """The kernel's plain number as a state value (``None``: none)."""
    value = float(value)
    return None if math.isnan(value) else value


# --- the engine ------------------------------------------------------------------------------


def action_tokens(target: TargetPolicy, state: ScalerState, now: datetime) -> float:
    """Tokens left in the action budget: refilled at ``max_actions_per_hour``, at most that many."""
    elapsed = None if state.action_tokens_at is None else (now - state.action_tokens_at).total_seconds()
    return float(slo_kernel.action_tokens(float(target.slo.max_actions_per_hour), _number(state.action_tokens),
                                          _number(elapsed)))


def _bounded(proposal: Proposal, in_force: BoundsInForce, capacity: int, counts: Sequence[int], raised: bool,
             lowered: bool) -> Proposal:
    """The proposal once the bounds in force have had their say (``slo_kernel.gates`` says
    whether they ``raised`` or ``lowered`` it).

    A capacity outside them (someone resized the plan, or the bounds changed: a new policy or a
    schedule profile) is brought inside: the bounds are a promise, not a limit on the engine's
    own steps. The minimum of a profile about to open is asked for one provisioning delay early.
    A proposal that a profile's bound cuts short is named after the profile (``profile:NAME``);
    a correction of the fixed bounds is ``below_min_bound`` or ``above_max_bound``."""
    low, high = counts[0], counts[-1]
    if raised:
        code = f"profile:{in_force.min_from}" if in_force.min_from else "below_min_bound"
        why = (f"profile {in_force.min_from}: at least {low} instances" if in_force.min_from
               else f"below the min bound: at least {low} instances, the plan has {capacity}")
        return replace(proposal, capacity=low, direction=UP, reason_code=code, reasons=(*proposal.reasons, why))
    if lowered:
        code = f"profile:{in_force.max_from}" if in_force.max_from else "above_max_bound"
        why = (f"profile {in_force.max_from}: at most {high} instances" if in_force.max_from
               else f"above the max bound: at most {high} instances, the plan has {capacity}")
        return replace(proposal, capacity=high, direction=DOWN, reason_code=code, reasons=(*proposal.reasons, why))
    if proposal.capacity is None:
        return proposal
    if in_force.max_from and proposal.direction == UP and proposal.capacity > high:
        return replace(proposal, reason_code=f"profile:{in_force.max_from}",
                       reasons=(*proposal.reasons, f"profile {in_force.max_from}: at most {high} instances"))
    if in_force.min_from and proposal.direction == DOWN and proposal.capacity < low:
        return replace(proposal, reason_code=f"profile:{in_force.min_from}",
                       reasons=(*proposal.reasons, f"profile {in_force.min_from}: at least {low} instances"))
    return proposal


#: Reason codes of a decision the look-ahead changed (``forecast: on``).
FORECAST_FLOOR = "forecast_floor"
FORECAST_HOLD = "forecast_hold"


def _looked_ahead(target: TargetPolicy, proposal: Proposal, capacity: int, outlook: forecast.Outlook,
                  throughput: float | None, backlog: float) -> tuple[Proposal, dict]:
    """The mode's proposal once the look-ahead has had its say (docs/forecast.md), and what it
    expected for the log. It may raise the floor before a predicted rise or hold a scale-in whose
    next rise comes within the dwell; the count it returns is never below the proposal's, so no
    scale-in comes from it. ``shadow``: the proposal unchanged, the would-be count in the metrics."""
    slo = target.slo
    provisioning = math.ceil(slo.provisioning_delay_seconds / 60)
    expected = np.asarray(outlook.expected, dtype=float)
    ahead = expected[:provisioning + forecast.FLOOR_WINDOW_MINUTES]
    metrics: dict = {"forecast": target.forecast, "forecast_trusted": outlook.trusted}
    if not outlook.trusted:
        metrics["forecast_untrusted"] = "; ".join(outlook.reasons)[:512]
    if len(ahead):
        metrics["forecast_expected_peak"] = round(float(ahead.max()), 3)
        metrics["forecast_expected_peak_in_minutes"] = int(ahead.argmax())
    decided = capacity if proposal.capacity is None else proposal.capacity
    if not throughput or not outlook.trusted:
        return proposal, {**metrics, "forecast_acted": False}
    look = forecast.look_ahead(decided, capacity, expected, outlook.trusted, target.forecast, provisioning,
                               math.ceil(slo.min_dwell_seconds / 60), throughput * 60,
                               age_budget_minutes=max(0.0, slo.max_event_age_seconds - slo.safety_seconds) / 60,
                               backlog=backlog, window_minutes=forecast.FLOOR_WINDOW_MINUTES)
    metrics.update(forecast_would_scale_to=look.would_be, forecast_raised_floor=look.raised_floor,
                   forecast_held_scale_in=look.held_scale_in, forecast_acted=look.acted)
    if not look.acted:
        return proposal, metrics
    peak = metrics.get("forecast_expected_peak")
    if look.held_scale_in:
        why = (f"look-ahead: a rise to {peak:g} events/min expected within the dwell "
               f"({slo.min_dwell_seconds / 60:g} min); the scale-in to {decided} waits")
        return replace(proposal, capacity=None, direction=HOLD, reason_code=FORECAST_HOLD,
                       reasons=(*proposal.reasons, why)), metrics
    why = (f"look-ahead: {peak:g} events/min expected in {metrics.get('forecast_expected_peak_in_minutes')} min; "
           f"{look.count} instances serving by then")
    direction = UP if look.count > capacity else DOWN if look.count < capacity else HOLD
    return replace(proposal, capacity=None if direction == HOLD else look.count, direction=direction,
                   reason_code=FORECAST_FLOOR, reasons=(*proposal.reasons, why)), metrics


def _hold(target: TargetPolicy, decision_id: str, now: datetime, capacity: int | None, code: str,
          reasons: Sequence[str], metrics: dict, state: ScalerState) -> Decision:
    new_state = state.changed(last_reason_code=code)
    return Decision(decision_id, target.name, now, capacity, None, HOLD, code, tuple(reasons), metrics, new_state)


def evaluate(target: TargetPolicy, state: ScalerState, history: Iterable[MetricSample], now: datetime, *,
             clock_skew: timedelta = MAX_CLOCK_SKEW, pause: Hold | None = None,
             outlook: forecast.Outlook | None = None) -> Decision:
    """Decide the target capacity for ``target`` from its recent samples.

    Never scales in when a source failed or the window is short of samples; a scale-out uses
    whatever data is there. Samples more than ``clock_skew`` ahead of ``now`` are ignored (the
    evaluate service passes the tolerance it parses with). The bounds are those in force at
    ``now`` (schedule profiles, ``profiles.py``); a ``pause`` in force turns what would act
    into a hold that says what it would have done. ``outlook`` (the arrivals the target's look-ahead
    expects; read only when its policy says ``forecast: shadow`` or ``on``) is applied after the
    mode's proposal and before the bounds and the gates. Returns a decision whose ``state`` is the
    state to persist. One function of about a hundred lines on purpose: reading the window,
    learning, the mode, the look-ahead, the gates (``slo_kernel.gates``) and each verdict's
    reason are the evaluation's steps in their order, and read top to bottom.
    """
    in_force = bounds_in_force(target, now, timedelta(seconds=target.slo.provisioning_delay_seconds))
    target = with_bounds(target, in_force)
    profile_notes = [in_force.describe()] if in_force.profile or in_force.early else []
    samples = window_samples(history, target.name, now, target.window_seconds or 600, clock_skew)
    if not samples:
        return _hold(target, decision_id_for(target.name, f"empty@{now.isoformat()}"), now, state.capacity,
                     "no_samples", ["no samples in the window"], {}, state)
    latest = samples[-1]
    decision_id = decision_id_for(target.name, latest.sample_id)
    capacity = latest.capacity if latest.capacity is not None else state.capacity
    if capacity is None:
        return _hold(target, decision_id, now, None, "capacity_unknown",
                     [f"plan capacity unknown: {latest.capacity_error or 'not in sample'}"], {}, state)
    pending = state.pending_ready_at is not None and now < state.pending_ready_at
    ready_capacity = min(state.ready_capacity or capacity, capacity) if pending else capacity
    interval = sample_interval(samples)
    ready_capacity = ready_from_owners(ready_capacity, serving_instances(latest, capacity), state.pending_ready_at, now, interval)
    state = state.changed(capacity=capacity, ready_capacity=ready_capacity, last_sample_at=latest.collected_at)
    # Capacity must have been steady over the interval for its throughput to mean anything.
    # Checkpoints trail by the checkpoint delay, so the interval's start must be that much past it.
    steady_since = max((t for t in (state.pending_ready_at, state.last_action_at) if t is not None), default=None)
    # With a checkpoint cadence the throughput is read over a span, and the checkpoints at its start
    # moved up to a cadence before: that much earlier still (``throughput_span``).
    span, cadence, _ = spanned = throughput_span(state, samples, interval)
    max_age = target.slo.max_event_age_seconds
    # (a delay at its ceiling is only a lower bound: as long as it may follow to, ``slo_kernel.learning_trail``)
    trail = timedelta(seconds=float(slo_kernel.learning_trail(
        _number(state.checkpoint_delay_seconds), max_age * slo_kernel.CHECKPOINT_DELAY_CEILING,
        max_age * slo_kernel.CHECKPOINT_DELAY_STEADY_CEILING, sample_interval(samples))) + cadence)
    if not pending and (steady_since is None or len(samples) < 2 or samples[-1 - span].collected_at - trail >= steady_since):
        settled = steady_since is None or len(samples) < 2 or bool(slo_kernel.settled_for_drop(
            (samples[-2].collected_at - steady_since).total_seconds(), trail.total_seconds()))
        state = learn_throughput(state, samples, ready_capacity, settled,
                                 functools.partial(_most_instances, target, latest), spanned,
                                 max_age * slo_kernel.CHECKPOINT_DELAY_STEADY_CEILING)
    elif state.throughput_per_instance is None and len(samples) >= 2 and not cadence:
        # (with a checkpoint cadence one interval's checkpoints move lumps of earlier work: 28.7/s read
        # where the truth is 16.7/s; the floor then rises from the spans alone)
        state = raise_throughput_floor(state, samples, max(capacity, samples[-2].capacity or 0))
    state = let_go_of_drop(state, latest.collected_at)
    doubt = slo_kernel.QUEUE_FLOOR_DOUBT if slo_queue.is_queue_target(target) else slo_kernel.FLOOR_DOUBT
    learned = _known(slo_kernel.serving_throughput(_number(state.throughput_per_instance), _number(state.throughput_floor),
                                                   doubt))
    throughput = learned or target.slo.events_per_instance_per_second
    throughput_source = "learned" if state.throughput_per_instance else "configured" if throughput else None
    if throughput is None and state.throughput_floor:
        # Not learned yet: the best rate instances have shown is a lower bound, enough to act
        # safely; scaling in on it raises the load per instance until saturation teaches the rate.
        throughput, throughput_source = state.throughput_floor, "lower bound"

    partitions = partition_count(latest)
    counts = allowed_counts(target, partitions)
    failed = [f"{source.name}: {source.error}" for s in samples[-1:] for source in s.sources if not source.ok]
    if latest.capacity_error:
        failed.append(f"capacity: {latest.capacity_error}")

    mode = mode_of(target)
    proposal = mode.propose(target, Situation(samples, now, capacity, ready_capacity, state, throughput, counts,
                                                      throughput_source, interval))
    state = proposal.state or state
    metrics = {"capacity": capacity, "ready_capacity": ready_capacity, "backlog": latest.backlog,
               "partitions": partitions, "throughput_per_instance": throughput, "throughput_source": throughput_source,
               **proposal.metrics}
    if profile_notes:
        metrics["profile"] = in_force.min_from if in_force.early else in_force.profile
        proposal = replace(proposal, reasons=(*proposal.reasons, *profile_notes))
    if outlook is not None and target.forecast != "off":
        proposal, looked = _looked_ahead(target, proposal, capacity, outlook, throughput, latest.backlog)
        metrics.update(looked)
    # The gates, in the kernel's one order (a batch of one as plain numbers).
    upward = proposal.capacity is not None and proposal.direction == UP
    downward = proposal.capacity is not None and not upward
    proposed = capacity if proposal.capacity is None else proposal.capacity
    since_action = None if state.last_action_at is None else (now - state.last_action_at).total_seconds()
    tokens = action_tokens(target, state, now)
    wanted, upward, raised, lowered, verdict = slo_kernel.gates(
        capacity, proposed, upward, downward, snap_up(counts, max(proposed, capacity + 1)) if upward else capacity,
        snap_down(counts, min(proposed, capacity - 1)) if downward else capacity, counts[0], counts[-1],
        _number(since_action), float(target.scale_up.cooldown_seconds), float(target.scale_down.cooldown_seconds), tokens,
        mode.budgets_scale_in, bool(failed), pause is not None)
    proposal = _bounded(proposal, in_force, capacity, counts, bool(raised), bool(lowered))
    wanted = int(wanted)
    if verdict == slo_kernel.NO_CHANGE:
        return _hold(target, decision_id, now, capacity, proposal.reason_code, proposal.reasons, metrics, state)
    if verdict == slo_kernel.SOURCE_FAILED:
        return _hold(target, decision_id, now, capacity, "source_failed",
                     [*proposal.reasons, "no scale-in while a source failed: " + "; ".join(failed)], metrics, state)
    if verdict == slo_kernel.AT_BOUND:
        bound = "max" if upward else "min"
        return _hold(target, decision_id, now, capacity, f"at_{bound}_bound",
                     [*proposal.reasons, f"already at the {bound} bound ({capacity})"], metrics, state)
    if verdict == slo_kernel.PAUSED:  # what it would do, cooldowns aside (a paused target takes no actions)
        return _hold(target, decision_id, now, capacity, pause.code,
                     [paused_reason(pause, capacity, wanted), *proposal.reasons, pause.describe()],
                     {**metrics, "would_scale_to": wanted}, state)
    if verdict == slo_kernel.COOLDOWN:
        cooldown = target.scale_up.cooldown_seconds if upward else target.scale_down.cooldown_seconds
        cooldown_until = state.last_action_at + timedelta(seconds=cooldown)
        return _hold(target, decision_id, now, capacity, "cooldown",
                     [*proposal.reasons, f"cooldown until {cooldown_until.isoformat()}"],
                     {**metrics, "cooldown_until": cooldown_until.isoformat()}, state)
    if verdict == slo_kernel.ACTION_BUDGET:
        return _hold(target, decision_id, now, capacity, "action_budget",
                     [*proposal.reasons, f"action budget: {tokens:.2f} of {target.slo.max_actions_per_hour:g} per hour left; "
                      f"a scale-in needs {slo_kernel.SCALE_IN_TOKENS:g} (itself and the scale-out likely to follow)"],
                     metrics, state)
    state = state.changed(action_tokens=float(slo_kernel.tokens_after_action(tokens)), action_tokens_at=now)

    if upward:
        pending_ready_at = now + timedelta(seconds=target.slo.provisioning_delay_seconds)
        new_state = state.changed(capacity=wanted, ready_capacity=ready_capacity, pending_ready_at=pending_ready_at)
    else:
        new_state = state.changed(capacity=wanted, ready_capacity=min(ready_capacity, wanted), pending_ready_at=state.pending_ready_at)
    new_state = new_state.changed(last_action_at=now, last_direction=proposal.direction,
                        last_decision_id=decision_id, last_reason_code=proposal.reason_code)
    return Decision(decision_id, target.name, now, capacity, wanted, proposal.direction, proposal.reason_code,
                    proposal.reasons, metrics, new_state)
