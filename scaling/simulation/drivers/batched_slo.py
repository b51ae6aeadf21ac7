"""Many SLO-mode candidates simulated at once: a driver of the SLO kernel over a sweep.

``simulate_slo_batch(arrivals, targets, scenario)`` gives, for every target that ``supports``
accepts, the same ``RunResult`` as ``simulate(arrivals, EngineAutoscaler(target), scenario)``:
one Python loop over collection times on the same world ``Physics`` the loop runs, every
candidate a column. The decision is ``scaling.domain.slo_kernel``'s, the one the engine calls
with a batch of one: who serves, the observed and learned throughput, the SLO step
(``slo_kernel.slo_step``: the checkpoint delay, predicted ages, the holds, the scale-out and
scale-in counts sized by owner load) and the gates. What this driver does itself is what the
engine does per message:

- read the world as ``collect`` would (the sequence numbers, checkpoints, ownership by name,
  and from the last samples' owners and checkpoints the moved partitions' stand-still, which the
  step learns the rebalance pause from) into the step's arrays, keep each candidate's state as arrays (NaN for none), and work out
  the window of samples;
- ``evaluate``'s bookkeeping around the step: learning only once capacity has been steady for
  the checkpoint delay (``_learns``, with timedelta's rounding), the configured prior and the
  lower bound, snapping to ``allowed_counts`` (tables built with the engine's ``snap_up``), then
  the gates in the kernel's one order (``slo_kernel.gates``, the engine's batch of one): a
  capacity outside the bounds brought inside, cooldowns, the action budget's tokens for a scale-in.

Two exact shortcuts keep it fast: partitions with equal shares of arrivals run as two rows
(``share_rows.py``), and a scale-in is worked out only where the cooldown and the budget would
let it act. Sample times are whole seconds since the Unix epoch, as ``minute_time`` makes them,
so that the age arithmetic rounds as the engine's does. tests/unit/test_simulation_batched_slo.py
runs this driver beside the engine in the loop.

Not covered (``supports`` returns False; callers use the engine): other modes, a minimum below
one instance, and times that are not whole seconds (provisioning delay, cooldowns, windows).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from datetime import timedelta

import numpy as np

from scaling.domain import slo_kernel
from scaling.domain.engine import allowed_counts, snap_up
from scaling.domain.policy import TargetPolicy
from scaling.simulation.drivers.batched import checked_batch
from scaling.simulation.drivers.outlook import SeriesOf, SweepLookAhead, widened
from scaling.simulation.drivers.share_rows import ShareRows
from scaling.simulation.peers.looped import EPOCH
from scaling.simulation.world.physics import Physics
from scaling.simulation.world.scenario import RunResult, Scenario

_EPOCH_SECONDS = EPOCH.timestamp()


def supports(target: TargetPolicy) -> bool:
    """Whether ``simulate_slo_batch`` reproduces the engine for this target exactly."""
    # profiles: the engine's (the look-ahead, forecast shadow or on, runs here too: outlook.py)
    if target.mode != "slo" or target.bounds.min_instances < 1 or target.profiles:
        return False
    if target.slo.stall_scale_to_minimum:  # (a stall's scale-in to the minimum: the engine's)
        return False
    slo = target.slo
    seconds = (slo.provisioning_delay_seconds, slo.rate_window_seconds, target.window_seconds, slo.scale_in_peak_seconds,
               target.scale_up.cooldown_seconds, target.scale_down.cooldown_seconds)
    return all(float(value).is_integer() for value in seconds)


def batch_key(target: TargetPolicy) -> tuple:
    """Targets simulated together must see the same samples: the same window and rate window."""
    return (float(target.window_seconds or 600), float(target.slo.rate_window_seconds))


class _Candidates:
    """Per-candidate settings as arrays, and count lookups (allowed counts, snapping, steps)."""

    def __init__(self, targets: Sequence[TargetPolicy], scenario: Scenario) -> None:
        partitions = scenario.partitions
        all_counts = [tuple(allowed_counts(target, partitions)) for target in targets]
        top = max([scenario.initial_capacity, 1, *(c[-1] for c in all_counts)]) + 1
        self.top = top  # capacities and wanted counts are looked up in 0..top
        sizes = range(top + 1)
        width = max(len(c) for c in all_counts)
        # Candidates mostly share their bounds and steps: build each distinct table row once.
        self.snap_up = _rows_by(all_counts, lambda c: [snap_up(c, x) for x in sizes])
        self.up_size = _rows_by([t.scale_up for t in targets], lambda step: [step.size(x) for x in sizes])
        self.lowest = np.array([c[0] for c in all_counts], dtype=np.int64)
        self.highest = np.array([c[-1] for c in all_counts], dtype=np.int64)
        # Allowed counts ascending, padded with a count above every capacity (never chosen).
        self.levels = _rows_by(all_counts, lambda c: [*c, *[top + 1] * (width - len(c))])
        self.valid_level = self.levels <= top
        #: Partitions the busiest instance owns, per instance count (as the float the division uses).
        self.per_instance = slo_kernel.per_instance_table(partitions, top)
        #: How many allowed counts lie below each capacity.
        self.below = _rows_by(all_counts, lambda c: [sum(1 for n in c if n < x) for x in sizes])
        slo = [target.slo for target in targets]
        #: The settings the SLO step reads, and the counts it chooses from.
        self.knobs = slo_kernel.StepKnobs.of(slo)
        self.counts = slo_kernel.StepCounts(self.levels, self.valid_level, self.lowest, self.highest, top)
        self.budget = np.array([float(s.max_actions_per_hour) for s in slo])
        self.peak = np.array([float(s.scale_in_peak_seconds) for s in slo])
        self.prior = np.array([np.nan if s.events_per_instance_per_second is None else s.events_per_instance_per_second
                               for s in slo])
        self.cooldown_up = np.array([float(t.scale_up.cooldown_seconds) for t in targets])
        self.cooldown_down = np.array([float(t.scale_down.cooldown_seconds) for t in targets])


def _rows_by(keys: Sequence, build) -> np.ndarray:
    """An integer table with one row per key, each distinct key's row built once."""
    built: dict = {}
    return np.array([built[key] if key in built else built.setdefault(key, build(key)) for key in keys], dtype=np.int64)


def _learns(trail: np.ndarray, steady: np.ndarray, previous_time: float) -> np.ndarray:
    """``previous sample time - timedelta(seconds=trail) >= steady`` as the engine compares
    datetimes: timedelta rounds the trail to microseconds, so values within a microsecond of the
    boundary are decided with timedelta itself."""
    room = previous_time - steady
    decided = trail <= room
    close = np.flatnonzero(np.abs(trail - room) < 1e-3)
    for column in close:
        decided[column] = timedelta(seconds=float(trail[column])) <= timedelta(seconds=float(room[column]))
    return decided


def simulate_slo_batch(arrivals: np.ndarray, targets: Sequence[TargetPolicy], scenario: Scenario, *,
                       score_from: int | Sequence[int] = 0, algorithm: str = "candidate",
                       knobs: Sequence[str] | None = None, trace_of: Sequence[int] | None = None,
                       outlook: SeriesOf | None = None) -> list[RunResult]:
    """One ``RunResult`` per target, as ``simulate(arrivals, EngineAutoscaler(target), scenario)``
    (``score_from``: one minute for all, or one per target; ``arrivals`` (minutes, traces) and
    ``trace_of``: each target on its own trace, ``Physics``).

    One loop on purpose, long as it is: every candidate's engine state lives in arrays this loop
    updates in place minute by minute, in the order ``engine.evaluate`` takes its steps (reading,
    learning, ``slo_kernel.slo_step``, the gates; the equivalence tests hold it to them); helpers
    would pass a dozen arrays each way and hide that order."""
    targets, knobs = checked_batch(targets, knobs, supports, "simulate_slo_batch")
    if not targets:
        return []
    if len({batch_key(t) for t in targets}) > 1:
        raise ValueError("simulate_slo_batch needs one window and rate window for the whole batch (see batch_key())")
    settings = _Candidates(targets, scenario)
    count, partitions = len(targets), scenario.partitions
    world = Physics(arrivals, scenario, count, trace_of)
    minutes, interval = len(world.arrivals), scenario.collection_interval_minutes
    looking = SweepLookAhead.of(targets, world, interval, outlook, partitions)  # forecast: on (outlook.py; None: off)
    interval_seconds = 60.0 * interval
    # What the samples show per partition (row) is the trace's: shared by every candidate, or,
    # with several traces, each candidate's trace's (its column of what follows).
    traces = world.trace_of
    window_seconds, rate_window = batch_key(targets[0])
    # Samples the engine sees: those inside the window, at most what EngineAutoscaler keeps.
    window_samples = min(math.ceil(window_seconds / interval_seconds), max(int(window_seconds // 60) + 2, 3))
    rate_lag = math.ceil(rate_window / interval_seconds)  # samples back to the rate window's base
    layout = ShareRows(world.weights)
    # last enqueued sequence numbers (minute, row[, trace]); events enqueued in all partitions (minute[, trace])
    positions = world.enqueued[:, layout.representative] - 1.0
    enqueued_total = world.enqueued.sum(axis=1)
    if traces is None:
        positions, enqueued_total = positions[:, :, 0], enqueued_total[:, 0]
    columns = np.arange(count)
    requested = world.requested  # updated in place by world.request
    per_instance = settings.per_instance

    # The engine's state per candidate (NaN for None).
    ready_state = np.zeros(count, dtype=np.int64)  # 0: none yet
    pending_at = np.full(count, np.nan)
    last_action = np.full(count, np.nan)
    throughput = np.full(count, np.nan)
    floor = np.full(count, np.nan)
    unconfirmed = np.full(count, np.nan)  # a low reading waiting for the next learning step
    before_drop = np.full(count, np.nan)  # the rate before a drop learned at once (slo_kernel.remembered_drop)
    drop_shown_at = np.full(count, np.nan)
    delay = np.full(count, np.nan)
    clipped = np.zeros(count, dtype=bool)  # (the delay only a lower bound: slo_kernel.delay_clipped)
    pause = np.full(count, np.nan)  # the learned rebalance pause (slo_kernel.rebalance)
    cadence = np.full(count, np.nan)  # the learned checkpoint cadence (slo_kernel.cadence)
    tokens = np.full(count, np.nan)
    tokens_at = np.full(count, np.nan)
    # What the sample shows (checkpoint positions and backlog per row, their sums), and the previous one's.
    checkpoints = np.zeros((partitions, count))
    oldest = backlog = np.zeros((layout.count, count))
    oldest_sum = backlog_sum = np.zeros(count)
    seen = 0
    capacity = requested.copy()
    names_before = np.full((partitions, count), -1, dtype=np.int64)
    partition_backlog = np.zeros((partitions, count))
    # Each partition's backlog at the samples in the window (a ring by sample number): whether it grows.
    backlog_ring = np.zeros((window_samples, partitions, count))
    # ... and the events checkpointed and the instances serving at each (slo._stall: a stall).
    checkpointed_ring = np.zeros((window_samples, count))
    serving_ring = np.zeros((window_samples, count), dtype=np.int64)
    # ... and each partition's checkpoint (the time since it moved), and the last sample at which
    # an owner changed (only candidates with a change in the window measure a pause).
    checkpoint_ring = np.zeros((window_samples, partitions, count))
    owner_changed_at = np.full(count, -window_samples - 1, dtype=np.int64)
    # ... and what the stand-still reads of each interval (``slo_kernel.interval_readings``: moved,
    # held, changed), by the sample it ends at: each interval read once, not once a minute; and the
    # last sample at which each partition's owner changed (which kept theirs over the window).
    interval_rings = tuple(np.zeros((window_samples, partitions, count), dtype=bool) for _ in range(3))
    partition_changed_at = np.full((partitions, count), -window_samples - 1, dtype=np.int64)
    # ... and what the checkpoints' cadence reads of each interval (``slo_kernel.cadence_interval``:
    # standing still everywhere, the pairs that count, their moves), per candidate, likewise.
    cadence_rings = (np.zeros((window_samples, count), dtype=bool), np.zeros((window_samples, count), dtype=np.int64),
                     np.zeros((window_samples, count), dtype=np.int64))
    stalling = np.zeros(count, dtype=bool)  # the last decision was a stall's hold (state.last_reason_code)
    owned_by: slo_kernel.Owners | None = None  # the sizing's owners, as last read
    row_of = layout.row_of if layout.groups is not None else None  # (each partition's row, where rows stand for several)

    for _ in range(minutes):
        world.advance()
        now = world.minute
        if now % interval:
            continue
        seen += 1
        samples = min(seen, window_samples)
        moment = _EPOCH_SECONDS + 60.0 * now
        previous_oldest_sum, previous_backlog_sum = oldest_sum, backlog_sum
        # Ownership as collect reads it (engine.serving_owners): an interval whose owners changed
        # (by name: a replaced instance keeps its index) teaches nothing; the live owners divide.
        # A sample with no live owner at all (the instances failed) reports 0 owners: none serves.
        owners_now = world.ownership_snapshot()
        names_now = world.owner_names(owners_now)
        owners_steady = ~(names_now != names_before).any(axis=0)
        if seen > 1:
            owner_changed_at[~owners_steady] = seen
        names_then, names_before = names_before, names_now
        owned_by = slo_kernel.Owners.read(owners_now, owned_by)  # for the learning and the sizing
        live_owners = owned_by.live  # distinct live owners
        previous_checkpoints, previous_partition_backlog = checkpoints.copy(), partition_backlog
        world.checkpoint_positions(checkpoints)
        enqueued_now = world.enqueued_at(now)
        partition_backlog = np.maximum(enqueued_now - checkpoints, 0.0)
        backlog_ring[seen % window_samples] = partition_backlog
        checkpoint_ring[seen % window_samples] = checkpoints
        if seen > 1:
            *readings, differ = slo_kernel.interval_readings(names_then, names_now, previous_checkpoints, checkpoints,
                                                             previous_partition_backlog)
            for ring, reading in zip(interval_rings, readings, strict=True):
                ring[seen % window_samples] = reading
            partition_changed_at[differ] = seen
            for ring, reading in zip(cadence_rings, slo_kernel.cadence_interval(  # (checkpoints as collect reads them: -1 none)
                    names_then, names_now, previous_checkpoints - 1.0, checkpoints - 1.0, previous_partition_backlog), strict=True):
                ring[seen % window_samples] = reading
        enqueued = (positions[now][:, None] if traces is None else positions[now][:, traces]) + 1.0
        oldest = layout.reduce(checkpoints)
        backlog = np.maximum(enqueued - oldest, 0.0)
        oldest_sum = checkpoints.sum(axis=0)
        # Each partition's backlog is enqueued - checkpointed >= 0 unless rounding put a checkpoint
        # past the last event; partition_backlog counts that as 0, so sum those few candidates exactly.
        backlog_sum = (enqueued_total[now] if traces is None else enqueued_total[now][traces]) - oldest_sum
        ahead = np.flatnonzero((oldest > enqueued).any(axis=0))
        if ahead.size:
            seen_now = enqueued_now if traces is None else enqueued_now[:, ahead]
            backlog_sum[ahead] = np.maximum(seen_now - checkpoints[:, ahead], 0.0).sum(axis=0)

        # --- evaluate: capacity and readiness ---------------------------------------------------
        previous_capacity, capacity = capacity, requested.copy()
        pending = moment < pending_at
        ready = np.where(pending, np.minimum(np.where(ready_state > 0, ready_state, capacity), capacity), capacity)
        # engine.ready_from_owners: the live owners say who serves (all, once every partition or
        # capacity has one), unless fewer show within an interval past the provisioning delay.
        sample_interval = interval_seconds if samples >= 2 else 60.0  # the engine reads it off the samples
        serving = slo_kernel.serving_count(capacity, live_owners, partitions)
        checkpointed_ring[seen % window_samples] = checkpoints.sum(axis=0)
        serving_ring[seen % window_samples] = serving
        ready = slo_kernel.ready_instances(ready, serving, moment < pending_at + sample_interval)  # (NaN: not due)
        ready_state = ready

        # --- learn the per-instance throughput from the last interval ---------------------------
        if samples >= 2:
            steady = np.fmax(pending_at, last_action)
            # (engine.throughput_span: with a checkpoint cadence, read over as many intervals as it
            # spans, steady since a cadence before its start)
            allowed = slo_kernel.cadence_allowance(cadence, interval_seconds)
            spans = slo_kernel.cadence_span(allowed, interval_seconds, samples - 1)
            trail = (slo_kernel.learning_trail(delay, settings.knobs.delay_ceiling, settings.knobs.delay_steady_ceiling,
                                               sample_interval)
                     + np.where(spans > 1, allowed, 0.0))
            called = ~pending & (np.isnan(steady) | _learns(trail, steady, moment - spans * interval_seconds))  # learn_throughput runs
            held_back = unconfirmed
            unconfirmed = np.where(called, np.nan, unconfirmed)  # (it waits one learning step, no more)
            # (no live owner: nothing served; owners steady over the span)
            learning = called & owners_steady & (live_owners > 0) & (seen - owner_changed_at >= spans)
            if learning.any():
                checkpointed = oldest > 0
                processed = oldest_sum - previous_oldest_sum  # (partitions without a checkpoint add 0 - 0)
                # A busy partition held over two intervals' arrivals at both ends; one without a
                # checkpoint is unmeasured (and one without a live owner measures no owner).
                arrived_each = enqueued_now - world.enqueued_at(now - interval)
                # (beyond what checkpoints as far behind as the learned delay explain)
                lag = np.where(np.isnan(delay) | (delay == 0), 0.0, slo_kernel.saturation_lag(  # (a clipped delay: a bound)
                    delay, clipped, settings.knobs.delay_steady_ceiling))
                if lag.any():  # (only where the checkpoints keep pace: engine.interval_throughput)
                    lag = np.where(slo_kernel.checkpoints_keep_pace(checkpoints, previous_checkpoints, partition_backlog), lag, 0.0)
                lag_arrivals = None
                if (lag > interval_seconds).any() and samples >= 3:  # (what arrived over the lag: engine._arrived_over_lag)
                    minutes = now - interval * np.arange(samples - 1, -1, -1)
                    history = np.stack([world.enqueued_at(minute) for minute in minutes])
                    history = history[:, :, 0] if history.shape[2] == 1 else history  # (one trace: shared)
                    moments = _EPOCH_SECONDS + 60.0 * minutes
                    lag_arrivals = (slo_kernel.arrived_before(moments[:-1], history[:-1], lag),
                                    slo_kernel.arrived_before(moments, history, lag))
                busy = slo_kernel.busy_partitions(previous_partition_backlog, partition_backlog, arrived_each, lag,
                                                  interval_seconds, lag_arrivals) & (checkpoints > 0)
                observed, saturated, fastest = slo_kernel.observed_throughput(
                    processed, interval_seconds, np.maximum(live_owners, 1), checkpoints - previous_checkpoints, busy,
                    checkpoints <= 0, owned_by)
                for span in np.unique(spans[learning & (spans > 1)]):  # (engine.interval_throughput over the span)
                    back = (seen - span) % window_samples
                    span_seconds = span * interval_seconds
                    busy = slo_kernel.busy_over_span(backlog_ring[back], partition_backlog,
                                                     enqueued_now - world.enqueued_at(now - interval * span), allowed,
                                                     span_seconds, interval_seconds) & (checkpoints > 0)
                    spanned, spanned_saturated, _ = slo_kernel.observed_throughput(
                        oldest_sum - checkpointed_ring[back], span_seconds, np.maximum(live_owners, 1),
                        checkpoints - checkpoint_ring[back], busy, checkpoints <= 0, owned_by)
                    observed = np.where(spans == span, spanned, observed)
                    saturated = np.where(spans == span, spanned_saturated, saturated)
                learned = learning & checkpointed.any(axis=0)
                corroborated = (saturated & (spans == 1)  # (one interval's readings only: engine.learn_throughput)
                                & (fastest < throughput * (1 - slo_kernel.UNCONFIRMED_DROP))  # (NaN: False)
                                & slo_kernel.settled_for_drop(moment - interval_seconds - steady, trail))
                if corroborated.any():  # (the measured partitions' backlog grew: engine.interval_throughput)
                    measured = checkpoints > 0
                    corroborated = corroborated & slo_kernel.corroborated_drop(
                        observed, fastest, throughput, np.where(measured, previous_partition_backlog, 0.0),
                        np.where(measured, partition_backlog, 0.0), np.where(measured, arrived_each, 0.0),
                        checkpoints - previous_checkpoints, interval_seconds,
                        slo_kernel.most_instances(partitions, settings.highest, per_instance))
                before_drop, drop_shown_at = slo_kernel.remembered_drop(before_drop, drop_shown_at, throughput, observed,
                                                                        saturated, learned, corroborated, moment)
                throughput, floor, waits, _ = slo_kernel.learned_throughput(throughput, floor, held_back, observed, saturated,
                                                                           learned, corroborated)
                unconfirmed = np.where(learned, waits, unconfirmed)
            # engine.raise_throughput_floor: an unsteady interval while nothing is learned raises
            # the lower bound, over the most instances that could have served it.
            bounding = ~called & np.isnan(throughput) & (oldest > 0).any(axis=0) & ~(spans > 1)
            if bounding.any():
                observed = (oldest_sum - previous_oldest_sum) / interval_seconds / np.maximum(capacity, previous_capacity)
                _, floor, _, _ = slo_kernel.learned_throughput(throughput, floor, np.full(count, np.nan), observed,
                                                               np.zeros(count, dtype=bool), bounding)
        # engine.let_go_of_drop: a drop learned at once and not shown since is let go.
        throughput, before_drop, drop_shown_at = slo_kernel.let_go(throughput, before_drop, drop_shown_at, moment)
        rate = np.where(np.isnan(throughput), np.where(np.isnan(settings.prior), floor, settings.prior),
                        slo_kernel.serving_throughput(throughput, floor))
        known = rate > 0  # (NaN compares False: not known)

        # --- the proposal: the kernel's one SLO step over every candidate --------------------------
        hubs, stand_still, measure = [], None, None
        if known.any():  # (the readings, worked out only where some candidate may use them)
            window = positions[now - interval * (samples - 1): now + 1: interval]  # (samples, partition), oldest first
            times = _EPOCH_SECONDS + 60.0 * np.arange(now - interval * (samples - 1), now + 1, interval)
            base = samples - 1 - rate_lag if samples - 1 >= rate_lag else 0
            arrival = slo_kernel.rate_since(times, window, base)
            recent_rate = slo_kernel.rate_since(times, window, max(samples - 2, 0))
            candidate_window = window
            if traces is not None:  # each candidate's trace's: (row, candidate), positions (sample, row, candidate)
                arrival, recent_rate, candidate_window = arrival[:, traces], recent_rate[:, traces], window[:, :, traces]
            # the hub's arrivals (events enqueued so far, all partitions) and their trend, read once if at all
            totals = enqueued_total[now - interval * (samples - 1): now + 1: interval] - partitions
            arrivals_trend = functools.cache(functools.partial(_trend, times, totals, traces))
            hubs.append(slo_kernel.HubReading(
                arrival_rate=arrival, recent_rate=recent_rate,
                ages=slo_kernel.oldest_event_ages(times, candidate_window, oldest, np.maximum(arrival, recent_rate)),
                backlog=backlog, owners=owned_by, per_instance=per_instance,
                checkpoints=functools.partial(_read, (checkpoints, previous_checkpoints) if samples >= 2 else None),
                scale_in_rates=functools.partial(_scale_in_rates, settings, times, window, traces, samples, interval_seconds,
                                                 arrivals_trend),
                partition_backlog=partition_backlog,
                earlier_backlog=backlog_ring[(seen - (samples - 1 - base)) % window_samples],
                row_of=row_of, equal_shares=layout.groups is not None and len(layout.groups) == 1,
                bursts=functools.partial(_burst_history, times, candidate_window, oldest,
                                         checkpoints if row_of is not None else None, totals, traces, arrivals_trend)))
            stand_still = functools.partial(_stand_still, samples, seen, owner_changed_at, window_samples, times, interval_rings,
                                            partition_changed_at)
            order = (seen - (samples - 1) + np.arange(samples)) % window_samples  # (the rings' samples, oldest first)
            measure = functools.partial(_cadence, times, cadence_rings, order[1:])
            hubs[0].arrivals = functools.partial(_read, (times, candidate_window))
            hubs[0].since_moved = functools.partial(_since_moved, times, checkpoint_ring, order, row_of, candidate_window,
                                                    checkpoints, np.maximum(arrival, recent_rate))
        below = settings.below[columns, np.minimum(capacity, settings.top)]
        outcome = slo_kernel.slo_step(
            hubs, slo_kernel.StepState(
                throughput=np.where(known, rate, np.nan), measured=~np.isnan(throughput) | ~np.isnan(settings.prior),
                capacity=capacity, ready=ready,
                pending_seconds=slo_kernel.pending_seconds(ready, capacity, pending_at - moment, sample_interval,
                                                           settings.knobs.provisioning),
                delay=delay, stalling=stalling, up_size=settings.up_size[columns, np.minimum(capacity, settings.top)],
                below=below, backlog_total=backlog_sum,
                previous_backlog_total=previous_backlog_sum if samples >= 2 else np.zeros(count),
                unowned=(owners_now < 0).any(axis=0) & (live_owners > 0), pause=pause, cadence=cadence),
            settings.knobs, settings.counts, interval=sample_interval, since_latest=0.0,
            enough_history=(samples - 1) * interval_seconds >= rate_window,
            stall_readings=functools.partial(_stall_readings, checkpointed_ring, serving_ring, seen, samples, interval_seconds),
            stand_still=stand_still, cadence=measure,
            # (a scale-in only where the cooldown and the action budget would let it act)
            may_scale_in=widened(looking, _scale_in_allowed(settings, tokens, tokens_at, last_action, moment), seen, rate)
            & (settings.lowest < capacity))
        clipped = slo_kernel.delay_clipped(clipped, delay, outcome.delay, settings.knobs.delay_ceiling)
        delay, pause = outcome.delay, outcome.pause
        # (slo._proposal: an at-risk scale-out from the lower bound under a cadence confirms it)
        confirmed = slo_kernel.confirms_floor(outcome.reason == slo_kernel.AT_RISK, np.isnan(throughput) & np.isnan(
            settings.prior) & ~np.isnan(floor), cadence if outcome.cadence is None else outcome.cadence, sample_interval,
            ready, capacity)
        throughput = np.where(confirmed, floor, throughput)
        cadence = cadence if outcome.cadence is None else outcome.cadence
        outcome = outcome if looking is None else looking.applied(outcome, seen, capacity, rate, backlog_sum)
        upward = outcome.direction == slo_kernel.UP
        down_rows = np.flatnonzero(outcome.direction == slo_kernel.DOWN)
        proposal = np.where(outcome.direction != slo_kernel.HOLD, outcome.wanted, 0)  # wanted count; 0 holds
        stall = outcome.reason == slo_kernel.STALL

        # --- the gates, the kernel's one order (bounds, snapping, cooldowns, the budget); the request ---
        # (scale-ins were worked out only where the cooldown and the budget let them act, so the
        # gates hold only those the bounds lower; candidates proposing nothing are left out)
        downward = np.zeros(count, dtype=bool)
        downward[down_rows] = True
        outside = (capacity < settings.lowest) | (capacity > settings.highest)
        rows = np.flatnonzero(upward | downward | outside)
        stalling = stall
        if not rows.size:
            continue
        at = capacity[rows]
        budget = slo_kernel.action_tokens(settings.budget[rows], tokens[rows], moment - tokens_at[rows])
        wanted, rising, raised, lowered, verdict = slo_kernel.gates(
            at, proposal[rows], upward[rows], downward[rows],
            settings.snap_up[rows, np.minimum(np.maximum(proposal[rows], at + 1), settings.top)], proposal[rows],
            settings.lowest[rows], settings.highest[rows], moment - last_action[rows], settings.cooldown_up[rows],
            settings.cooldown_down[rows], budget, True)
        stalling[rows] &= ~(raised | lowered)  # (the decision is the bounds', not the stall's)
        acting = verdict == slo_kernel.ACTS
        if not acting.any():
            continue
        rows, wanted, rising, budget = rows[acting], wanted[acting], rising[acting], budget[acting]
        tokens[rows] = slo_kernel.tokens_after_action(budget)
        tokens_at[rows] = moment
        pending_at[rows[rising]] = moment + settings.knobs.provisioning[rows[rising]]
        falling = rows[~rising]
        ready_state[falling] = np.minimum(ready[falling], wanted[~rising])
        last_action[rows] = moment
        world.request(rows, wanted)

    return world.results(algorithm=algorithm, knobs=knobs, score_from=score_from)


def _scale_in_rates(settings: _Candidates, times: np.ndarray, window: np.ndarray, traces: np.ndarray | None, samples: int,
                    interval_seconds: float, arrivals_trend) -> tuple:
    """What a scale-in holds against (``slo_kernel.HubReading.scale_in_rates``): each candidate's
    busiest interval among those ending within its ``scale_in_peak_seconds`` (rows, candidates),
    and the rise and noise of each trace's arrivals (``arrivals_trend``, ``_trend``)."""
    start = np.clip(samples - 1 - np.floor(settings.peak / interval_seconds).astype(np.int64), 0, samples - 2)
    peaks = slo_kernel.later_peaks(times, window)
    peak = (peaks[start, :] if traces is None else peaks[start, :, traces]).T  # (rows, candidates)
    rise, noise = arrivals_trend()
    return peak, rise, noise


def _trend(times: np.ndarray, totals: np.ndarray, traces: np.ndarray | None) -> tuple:
    """``slo_kernel.trend`` of the hub's arrivals (``totals``: events enqueued so far, all
    partitions, as the engine sums the last enqueued sequence numbers), per candidate (each its trace's)."""
    if traces is None:
        return slo_kernel.trend(times, totals)
    rise, noise = np.array([slo_kernel.trend(times, totals[:, trace]) for trace in range(totals.shape[1])]).T
    return rise[traces], noise[traces]


def _burst_history(times: np.ndarray, positions: np.ndarray, oldest: np.ndarray, partition_oldest: np.ndarray | None,
                   totals: np.ndarray, traces: np.ndarray | None, arrivals_trend) -> slo_kernel.BurstHistory:
    """What absorbing bursts reads (``slo_kernel.HubReading.bursts``): the history as the step's
    rows (``positions``: each candidate's trace's), the checkpoints, the arrivals' noise and whether
    a short burst ended, each trace's."""
    ended = slo_kernel.bursts_ended(times, totals) if traces is None else \
        np.array([slo_kernel.bursts_ended(times, totals[:, trace]) for trace in range(totals.shape[1])])[traces]
    return slo_kernel.BurstHistory(times=times, positions=positions, oldest=oldest, noise=arrivals_trend()[1], ended=ended,
                                   partition_oldest=partition_oldest)


def _read(value):
    """A reading already at hand, for a field read on demand."""
    return value


def _stall_readings(checkpointed: np.ndarray, serving: np.ndarray, seen: int, samples: int, interval_seconds: float) -> tuple | None:
    """The serving counts and processed rates of the window's first interval and its last
    (``slo_kernel.stalled``), off the rings of the samples in the window; None before three samples."""
    if samples < 3:
        return None
    size = len(checkpointed)
    slot = seen - (samples - 1)
    first, second = checkpointed[slot % size], checkpointed[(slot + 1) % size]
    before_last, last = checkpointed[(seen - 1) % size], checkpointed[seen % size]
    return ((serving[(slot + 1) % size], serving[seen % size]),
            ((second - first) / interval_seconds, (last - before_last) / interval_seconds))


def _stand_still(samples: int, seen: int, owner_changed_at: np.ndarray, window_samples: int, times: np.ndarray,
                 interval_rings: tuple, partition_changed_at: np.ndarray) -> np.ndarray | None:
    """The moved partitions' stand-still per candidate (``slo_kernel.stand_still_over``, on the
    rings of interval readings read in window order), for the candidates whose owners changed
    within the window (NaN for the others: they measure nothing); None where none did."""
    rows = np.flatnonzero(seen - owner_changed_at < samples - 1)  # a change between two samples of the window
    if samples < 3 or not rows.size:
        return None
    order = (seen - (samples - 2) + np.arange(samples - 1)) % window_samples  # (the intervals, oldest first)
    kept = partition_changed_at <= seen - (samples - 1)  # (no owner change in the window's intervals)
    if rows.size == len(owner_changed_at):  # (then no copy of the columns)
        return slo_kernel.stand_still_over(times, *(_InWindow(ring, order, None) for ring in interval_rings), kept)
    measured = np.full(len(owner_changed_at), np.nan)
    measured[rows] = slo_kernel.stand_still_over(times, *(_InWindow(ring, order, rows) for ring in interval_rings),
                                                 kept[:, rows])
    return measured


class _InWindow:
    """A ring of interval readings (by the sample each ends at) read as the window's intervals,
    oldest first, and only the ``columns`` given (None: all): one interval at a time, when read."""

    __slots__ = ("ring", "order", "columns")

    def __init__(self, ring: np.ndarray, order: np.ndarray, columns: np.ndarray | None) -> None:
        self.ring, self.order, self.columns = ring, order, columns

    def __getitem__(self, interval: int) -> np.ndarray:
        reading = self.ring[self.order[interval]]
        return reading if self.columns is None else reading[:, self.columns]


def _cadence(times: np.ndarray, cadence_rings: tuple, order: np.ndarray) -> np.ndarray:
    """The seconds between checkpoint moves per candidate (``slo_kernel.cadence_over``, on the
    rings of interval readings, ``order``: the window's intervals by the sample each ends at)."""
    return slo_kernel.cadence_over(times, *(ring[order] for ring in cadence_rings))


def _since_moved(times: np.ndarray, checkpoints: np.ndarray, order: np.ndarray, row_of: np.ndarray | None,
                 window: np.ndarray, partition_oldest: np.ndarray, rates: np.ndarray) -> tuple:
    """The seconds since each partition's checkpoint last moved (``slo_kernel.since_checkpoint_moved``)
    and, where rows stand for several partitions, each partition's own age (the engine's: its
    group's sequence numbers and rates, its own checkpoint), for ``slo_kernel.cadence_readings``."""
    since = slo_kernel.since_checkpoint_moved(times, checkpoints[order])
    if row_of is None:
        return since, None
    return since, slo_kernel.oldest_event_ages(times, window[:, row_of], partition_oldest, rates[row_of])


def _scale_in_allowed(settings: _Candidates, tokens: np.ndarray, tokens_at: np.ndarray, last_action: np.ndarray,
                      moment: float) -> np.ndarray:
    """Per candidate: whether the scale-down cooldown has passed and the action budget has room
    for a scale-in (``engine.evaluate``: it needs 2 tokens, itself and the likely scale-out)."""
    return (slo_kernel.cooldown_over(moment - last_action, settings.cooldown_down)
            & slo_kernel.budget_allows_scale_in(slo_kernel.action_tokens(settings.budget, tokens, moment - tokens_at)))
