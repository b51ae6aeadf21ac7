"""Many SLO-mode candidates simulated at once: a driver of the SLO kernel over a sweep.

``simulate_slo_batch(arrivals, targets, scenario)`` gives, for every target that ``supports``
accepts, the same ``RunResult`` as ``simulate(arrivals, EngineAutoscaler(target), scenario)``:
one Python loop over collection times on the same world ``Physics`` the loop runs, every
candidate a column. The arithmetic of the decision is ``scaling.domain.slo_kernel``'s, the one
the engine calls with a batch of one: who serves, the observed and learned throughput, rates,
ages and the checkpoint delay, predicted ages, the scale-out and scale-in counts sized by owner
load, the action budget. What this driver does itself is what the engine does per message:

- read the world as ``collect`` would (the sequence numbers, checkpoints, ownership by name),
  keep each candidate's state as arrays (NaN for none), and work out the window of samples;
- ``evaluate``'s order of gates: learning only once capacity has been steady for the checkpoint
  delay (``_learns``, with timedelta's rounding), the configured prior and the lower bound, the
  rule while the throughput is unknown, the hold while partitions have no live owner, snapping to
  ``allowed_counts`` (tables built with the engine's ``snap_up``), then the gates in the kernel's
  one order (``slo_kernel.gates``, the engine's batch of one): a capacity outside the bounds
  brought inside, cooldowns, the action budget's tokens for a scale-in.

Two exact shortcuts keep it fast: partitions with equal shares of arrivals run as two rows
(``share_rows.py``), and a scale-in is worked out only where the cooldown and the budget would
let it act. Sample times are whole seconds since the Unix epoch, as ``minute_time`` makes them,
so that the age arithmetic rounds as the engine's does. tests/unit/test_simulation_batched_slo.py
runs this driver beside the engine in the loop.

Not covered (``supports`` returns False; callers use the engine): other modes, a minimum below
one instance, and times that are not whole seconds (provisioning delay, cooldowns, windows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta

import numpy as np

from scaling.domain import slo_kernel
from scaling.domain.engine import allowed_counts, snap_up
from scaling.domain.policy import TargetPolicy
from scaling.simulation.drivers.batched import checked_batch
from scaling.simulation.drivers.share_rows import ShareRows
from scaling.simulation.peers.looped import EPOCH
from scaling.simulation.world.physics import Physics
from scaling.simulation.world.scenario import RunResult, Scenario

_EPOCH_SECONDS = EPOCH.timestamp()


def supports(target: TargetPolicy) -> bool:
    """Whether ``simulate_slo_batch`` reproduces the engine for this target exactly."""
    # profiles: the engine's; the look-ahead (forecast shadow or on) only runs in the engine's loop.
    if target.mode != "slo" or target.bounds.min_instances < 1 or target.profiles or target.forecast != "off":
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
        self.max_age = np.array([s.max_event_age_seconds for s in slo])
        self.safety = np.array([s.safety_seconds for s in slo])
        self.dwell = np.array([s.min_dwell_seconds for s in slo])
        self.headroom_factor = np.array([1.0 + s.headroom for s in slo])
        self.budget = np.array([float(s.max_actions_per_hour) for s in slo])
        self.provisioning = np.array([float(s.provisioning_delay_seconds) for s in slo])
        self.peak = np.array([float(s.scale_in_peak_seconds) for s in slo])
        self.peak_full_noise = np.array([float(s.scale_in_peak_full_noise) for s in slo])
        self.prior = np.array([np.nan if s.events_per_instance_per_second is None else s.events_per_instance_per_second
                               for s in slo])
        self.cooldown_up = np.array([float(t.scale_up.cooldown_seconds) for t in targets])
        self.cooldown_down = np.array([float(t.scale_down.cooldown_seconds) for t in targets])
        self.limit = self.max_age - self.safety
        #: Over how long a scale-out drains (``slo_kernel.drain_seconds`` with a measured rate):
        #: the horizon of ``carried_age_limits``.
        self.horizon = slo_kernel.drain_seconds(self.dwell, self.max_age, True, 0.0)
        self.delay_ceiling = self.max_age * slo_kernel.CHECKPOINT_DELAY_CEILING
        self.delay_steady_ceiling = self.max_age * slo_kernel.CHECKPOINT_DELAY_STEADY_CEILING


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
                       knobs: Sequence[str] | None = None, trace_of: Sequence[int] | None = None) -> list[RunResult]:
    """One ``RunResult`` per target, as ``simulate(arrivals, EngineAutoscaler(target), scenario)``
    (``score_from``: one minute for all, or one per target; ``arrivals`` (minutes, traces) and
    ``trace_of``: each target on its own trace, ``Physics``).

    One loop on purpose, long as it is: every candidate's engine state lives in arrays this loop
    updates in place minute by minute, in the order ``engine.evaluate`` and ``slo.propose`` take
    their steps (the equivalence tests hold it to them); helpers would pass a dozen arrays each
    way and hide that order."""
    targets, knobs = checked_batch(targets, knobs, supports, "simulate_slo_batch")
    if not targets:
        return []
    if len({batch_key(t) for t in targets}) > 1:
        raise ValueError("simulate_slo_batch needs one window and rate window for the whole batch (see batch_key())")
    settings = _Candidates(targets, scenario)
    count, partitions = len(targets), scenario.partitions
    world = Physics(arrivals, scenario, count, trace_of)
    minutes, interval = len(world.arrivals), scenario.collection_interval_minutes
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
    delay = np.full(count, np.nan)
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
    stalling = np.zeros(count, dtype=bool)  # the last decision was a stall's hold (state.last_reason_code)
    owned_by: slo_kernel.Owners | None = None  # the sizing's owners, as last read
    row_of = layout.row_of if layout.groups is not None else None  # (each partition's row, where rows stand for several)
    most = slo_kernel.most_instances(partitions, settings.highest, per_instance)  # instances' worth at the highest count

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
        names_before = names_now
        owned_by = slo_kernel.Owners.read(owners_now, owned_by)  # for the learning and the sizing
        live_owners = owned_by.live  # distinct live owners
        previous_checkpoints, previous_partition_backlog = checkpoints.copy(), partition_backlog
        world.checkpoint_positions(checkpoints)
        enqueued_now = world.enqueued_at(now)
        partition_backlog = np.maximum(enqueued_now - checkpoints, 0.0)
        backlog_ring[seen % window_samples] = partition_backlog
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
            trail = np.where(np.isnan(delay), 60.0, delay)
            called = ~pending & (np.isnan(steady) | _learns(trail, steady, moment - interval_seconds))  # learn_throughput runs
            held_back = unconfirmed
            unconfirmed = np.where(called, np.nan, unconfirmed)  # (it waits one learning step, no more)
            learning = called & owners_steady & (live_owners > 0)  # (no live owner: nothing served)
            if learning.any():
                checkpointed = oldest > 0
                processed = oldest_sum - previous_oldest_sum  # (partitions without a checkpoint add 0 - 0)
                # A busy partition held over two intervals' arrivals at both ends; one without a
                # checkpoint is unmeasured (and one without a live owner measures no owner).
                arrived_each = enqueued_now - world.enqueued_at(now - interval)
                # (beyond what checkpoints as far behind as the learned delay explain)
                lag = np.where(np.isnan(delay) | (delay == 0), 0.0, delay)
                if lag.any():  # (only where the checkpoints keep pace: engine.interval_throughput)
                    lag = np.where(slo_kernel.checkpoints_keep_pace(checkpoints, previous_checkpoints, partition_backlog), lag, 0.0)
                busy = slo_kernel.busy_partitions(previous_partition_backlog, partition_backlog, arrived_each, lag,
                                                  interval_seconds) & (checkpoints > 0)
                observed, saturated = slo_kernel.observed_throughput(
                    processed, interval_seconds, np.maximum(live_owners, 1), checkpoints - previous_checkpoints, busy,
                    checkpoints <= 0, owned_by)
                learned = learning & checkpointed.any(axis=0)
                throughput, floor, waits, _ = slo_kernel.learned_throughput(throughput, floor, held_back, observed, saturated,
                                                                           learned)
                unconfirmed = np.where(learned, waits, unconfirmed)
            # engine.raise_throughput_floor: an unsteady interval while nothing is learned raises
            # the lower bound, over the most instances that could have served it.
            bounding = ~called & np.isnan(throughput) & (oldest > 0).any(axis=0)
            if bounding.any():
                observed = (oldest_sum - previous_oldest_sum) / interval_seconds / np.maximum(capacity, previous_capacity)
                _, floor, _, _ = slo_kernel.learned_throughput(throughput, floor, np.full(count, np.nan), observed,
                                                               np.zeros(count, dtype=bool), bounding)
        rate = np.where(np.isnan(throughput), np.where(np.isnan(settings.prior), floor, settings.prior),
                        slo_kernel.serving_throughput(throughput, floor))
        known = rate > 0  # (NaN compares False: not known)

        # --- the proposal -----------------------------------------------------------------------
        proposal = np.zeros(count, dtype=np.int64)  # wanted count; 0 holds
        upward = np.zeros(count, dtype=bool)
        unknown = ~known
        if unknown.any():
            previous_total = previous_backlog_sum if samples >= 2 else np.zeros(count)
            rising = unknown & (ready >= capacity) & (backlog_sum > 0) & (backlog_sum > previous_total)
            at = np.minimum(capacity, settings.top)
            proposal = np.where(rising, capacity + settings.up_size[columns, at], proposal)
            upward |= rising

        down_rows = np.zeros(0, dtype=np.int64)
        stall = np.zeros(count, dtype=bool)
        if known.any():
            rate = np.where(known, rate, 1.0)
            window = positions[now - interval * (samples - 1): now + 1: interval]  # (samples, partition), oldest first
            times = _EPOCH_SECONDS + 60.0 * np.arange(now - interval * (samples - 1), now + 1, interval)
            base = samples - 1 - rate_lag if samples - 1 >= rate_lag else 0
            recent = max(samples - 2, 0)
            arrival = slo_kernel.rate_since(times, window, base)
            recent_rate = slo_kernel.rate_since(times, window, recent)
            candidate_window = window
            if traces is not None:  # each candidate's trace's: (row, candidate), positions (sample, row, candidate)
                arrival, recent_rate, candidate_window = arrival[:, traces], recent_rate[:, traces], window[:, :, traces]
            ages = slo_kernel.oldest_event_ages(times, candidate_window, oldest, np.maximum(arrival, recent_rate))
            # Hot partitions (slo.propose): more than one instance serves, over the rate window and
            # the last interval, against a learned or configured throughput: set aside.
            measured = ~np.isnan(throughput) | ~np.isnan(settings.prior)
            hot = slo_kernel.hot_partitions(arrival, recent_rate, rate, measured, most, row_of)
            any_hot = hot.any()
            if any_hot:
                ages = np.where(hot, 0.0, ages)

            # slo.propose: a quiet spell (too few arrivals to show the delay) changes no learned delay,
            # and while every instance the bounds allow serves and the backlog in view stays flat over
            # the rate window, the delay follows an age that stays above it.
            enough_history = (samples - 1) * interval_seconds >= rate_window
            earlier = backlog_ring[(seen - (samples - 1 - base)) % window_samples]
            by_partition = arrival if row_of is None else arrival[row_of]
            if by_partition.ndim == 1:  # (shared by the candidates)
                by_partition = np.broadcast_to(by_partition[:, None], partition_backlog.shape)
            now_backlog, arrival_in_view, recent_in_view = partition_backlog, arrival, recent_rate
            if any_hot:
                hot_partition = hot if row_of is None else hot[row_of]
                now_backlog = np.where(hot_partition, 0.0, partition_backlog)
                earlier = np.where(hot_partition, 0.0, earlier)
                by_partition = np.where(hot_partition, 0.0, by_partition)
                arrival_in_view = np.where(hot, 0.0, arrival[:, None] if arrival.ndim == 1 else arrival)
                recent_in_view = np.where(hot, 0.0, recent_rate[:, None] if recent_rate.ndim == 1 else recent_rate)
            dense = slo_kernel.dense_arrivals(arrival_in_view, recent_in_view, delay, sample_interval, row_of)
            steady = enough_history & (ready >= capacity) & (capacity >= settings.highest)
            if steady.any():
                in_view = partition_backlog if not any_hot else np.where(hot if row_of is None else hot[row_of], 0.0,
                                                                         partition_backlog)
                steady &= slo_kernel.checkpoints_keep_pace(checkpoints, previous_checkpoints, in_view) if samples >= 2 \
                    else np.zeros(count, dtype=bool)
            if steady.any():
                steady &= slo_kernel.backlog_flat(now_backlog, earlier, by_partition, sample_interval * slo_kernel.FLAT_TOLERANCE)
            learned_delay = slo_kernel.learned_checkpoint_delay(ages.max(axis=0), delay, sample_interval, settings.delay_ceiling,
                                                                dense, steady, settings.delay_steady_ceiling)
            delay = np.where(known, learned_delay, delay)
            react = learned_delay + sample_interval + settings.provisioning
            forecast = slo_kernel.forecast_rates(arrival, recent_rate, settings.headroom_factor)
            waiting = backlog
            if any_hot:
                forecast = np.where(hot, 0.0, forecast)
                waiting = np.where(hot, 0.0, backlog)
            age = np.maximum(ages - learned_delay, 0.0)
            first = np.minimum(slo_kernel.pending_seconds(ready, capacity, pending_at - moment, sample_interval,
                                                          settings.provisioning), react)
            # sizing.distinct_shares: at least half the forecasts distinct (never with equal-share rows)
            by_draw = np.zeros(count, dtype=bool) if layout.groups is not None else slo_kernel.distinct_shares(forecast)
            sizing = (hot if any_hot else None, owned_by, rate, per_instance, by_draw, layout)
            loads = _owner_loads(forecast, slice(None), *sizing)
            served = loads.service(forecast, capacity)
            served_ready = served  # (the same where every instance asked for serves: most candidates)
            short_of = np.flatnonzero(ready != capacity)
            if short_of.size:
                served_ready = served.copy()
                served_ready[:, short_of] = loads.service(forecast[:, short_of], ready[short_of], short_of)
            then = slo_kernel.age_at_reaction(age, waiting, forecast, served_ready, served, first, react)
            serving_from = first  # (the stall's test below names its own ``first``)
            worst_predicted = np.maximum(0.0, then.max(axis=0))
            # slo.propose holds while some partitions have no live owner (others have one).
            unowned = (owners_now < 0).any(axis=0) & (live_owners > 0)
            # slo.propose: a stall (more instances did not raise the processed rate while the
            # backlog in view grows, or one recognised before goes on) holds the count.
            growing = slo_kernel.backlog_growing(now_backlog, earlier, by_partition, sample_interval)
            if samples >= 3 and (growing & known & ~unowned).any():
                slot = seen - (samples - 1)
                first, second = checkpointed_ring[slot % window_samples], checkpointed_ring[(slot + 1) % window_samples]
                before_last, last = checkpointed_ring[(seen - 1) % window_samples], checkpointed_ring[seen % window_samples]
                stall = known & ~unowned & slo_kernel.stalled(
                    serving_ring[(slot + 1) % window_samples], serving_ring[seen % window_samples],
                    (second - first) / interval_seconds, (last - before_last) / interval_seconds, growing, stalling,
                    slo_kernel.column_sums(arrival_in_view[:, None] if arrival_in_view.ndim == 1 else arrival_in_view, row_of), most)
            carried = slo_kernel.carried_age_limits(settings.limit, forecast, rate, settings.horizon, row_of)
            risk = known & (then > carried).any(axis=0) & ~unowned & ~stall
            # absorb (slo_kernel.absorb): a burst the count carries within the limit is no reason to scale out
            absorbing = _Absorbing(times, window, traces, enqueued_total, partitions, now, interval, samples, settings, oldest,
                                   served_ready, served, serving_from, learned_delay, sample_interval, hot if any_hot else None)
            relaxed = np.flatnonzero(risk & (absorbing.weight > 0))
            if relaxed.size:
                need = absorbing.need(relaxed, forecast[:, relaxed], react[relaxed])
                risk[relaxed[slo_kernel.carries(need, served[:, relaxed])]] = False
            if risk.any():
                rows = np.flatnonzero(risk)
                since = learned_delay[rows]
                wanted_rate = forecast[:, rows]
                drain = slo_kernel.drain_seconds(settings.dwell[rows], settings.max_age[rows], measured[rows],
                                                 worst_predicted[rows])
                if layout.groups is None:
                    need = slo_kernel.scale_out_need(wanted_rate, waiting[:, rows], settings.provisioning[rows], since,
                                                     settings.safety[rows], drain)
                    need = absorbing.sized(need, rows, wanted_rate, settings.provisioning[rows] + since)  # absorb
                    loads = _owner_loads(need, rows, *sizing)
                else:  # the need holds each partition's own backlog: equal shares no longer mean equal rows
                    hot_partition = hot[row_of][:, rows] if any_hot else None
                    held = partition_backlog[:, rows] if hot_partition is None else np.where(hot_partition, 0.0,
                                                                                               partition_backlog[:, rows])
                    need = slo_kernel.scale_out_need(wanted_rate[row_of], held, settings.provisioning[rows], since,
                                                     settings.safety[rows], drain)
                    need = absorbing.sized(need, rows, wanted_rate, settings.provisioning[rows] + since, checkpoints, row_of)
                    loads = slo_kernel.OwnerLoads(need, hot_partition, owned_by.of_columns(rows), rate[rows], per_instance,
                                                  by_draw[rows])
                proposal[rows] = slo_kernel.scale_out_counts(settings.levels[rows], settings.valid_level[rows], capacity[rows],
                                                             settings.highest[rows], settings.top, [(loads, need)])
                upward[rows] = True

            # Scale-in: worked out only where the cooldown and the action budget would let it act.
            if enough_history:
                eligible = (known & ~risk & ~unowned & ~stall & _scale_in_allowed(settings, tokens, tokens_at, last_action, moment)
                            & (settings.lowest < capacity))
                eligible &= ~growing  # slo.propose: no scale-in while the backlog in view grows
                if eligible.any():
                    # slo.propose: a scale-in holds against the busiest interval of the history too.
                    # (each candidate's busiest interval among those ending within its scale_in_peak_seconds)
                    start = np.clip(samples - 1 - np.floor(settings.peak / interval_seconds).astype(np.int64), 0, samples - 2)
                    peaks = slo_kernel.later_peaks(times, window)
                    peak = (peaks[start, :] if traces is None else peaks[start, :, traces]).T  # (rows, candidates)
                    # ... and, while the arrivals clearly rise, at the rate halfway through the dwell.
                    rise, noise = absorbing.rise, absorbing.noise
                    calm = slo_kernel.calm_rates(forecast, peak, settings.headroom_factor, rise, settings.dwell,
                                                 noise, settings.peak_full_noise)
                    calm = absorbing.calm(calm)  # absorb
                    if any_hot:
                        calm = np.where(hot, 0.0, calm)
                    rows = np.flatnonzero(eligible)  # loads and counts for these candidates only
                    chosen, _ = slo_kernel.scale_in_counts(
                        settings.levels[rows], settings.below[rows, np.minimum(capacity[rows], settings.top)], capacity[rows],
                        settings.top, settings.limit[rows], settings.dwell[rows], sample_interval + settings.provisioning[rows],
                        [(_owner_loads(calm[:, rows], rows, *sizing), calm[:, rows], age[:, rows])])
                    down_rows = rows[chosen >= 0]
                    proposal[down_rows] = chosen[chosen >= 0]

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
        pending_at[rows[rising]] = moment + settings.provisioning[rows[rising]]
        falling = rows[~rising]
        ready_state[falling] = np.minimum(ready[falling], wanted[~rising])
        last_action[rows] = moment
        world.request(rows, wanted)

    return world.results(algorithm=algorithm, knobs=knobs, score_from=score_from)


def _owner_loads(values: np.ndarray, columns: np.ndarray | slice, hot: np.ndarray | None, owners: slo_kernel.Owners,
                 rate: np.ndarray, per_instance: np.ndarray, by_draw: np.ndarray, layout: ShareRows) -> slo_kernel.OwnerLoads:
    """The kernel's owner loads of ``values`` for the chosen candidates (``values`` holds their
    columns only), on the share rows (each group of equal shares as its extremes)."""
    chosen = isinstance(columns, np.ndarray)
    return slo_kernel.OwnerLoads(values, None if hot is None else hot[:, columns], owners.of_columns(columns) if chosen else owners,
                                 rate[columns], per_instance, by_draw[columns],
                                 row_of=layout.row_of if layout.groups is not None else None,
                                 equal_shares=layout.groups is not None and len(layout.groups) == 1)


def _scale_in_allowed(settings: _Candidates, tokens: np.ndarray, tokens_at: np.ndarray, last_action: np.ndarray,
                      moment: float) -> np.ndarray:
    """Per candidate: whether the scale-down cooldown has passed and the action budget has room
    for a scale-in (``engine.evaluate``: it needs 2 tokens, itself and the likely scale-out)."""
    return (slo_kernel.cooldown_over(moment - last_action, settings.cooldown_down)
            & slo_kernel.budget_allows_scale_in(slo_kernel.action_tokens(settings.budget, tokens, moment - tokens_at)))


class _Absorbing:
    """What ``slo.propose`` reads and asks of ``slo_kernel.absorb`` at one evaluation, for every
    candidate: the arrivals' trend and noise (``absorb_weight``), the rate over the last
    SLO-long window, the busiest such window's, and the need of a count (``absorbed_need``)."""

    def __init__(self, times, window, traces, enqueued_total, partitions, now, interval, samples, settings, oldest,
                 served_ready, served, serving_from, delay, sample_interval, hot):
        self.times, self.window, self.traces, self.settings = times, window, traces, settings
        self.oldest, self.served_ready, self.served, self.serving_from = oldest, served_ready, served, serving_from
        self.delay, self.shortest, self.hot = delay, sample_interval, hot
        self.rise, self.noise = _trend(times, enqueued_total, partitions, now, interval, samples, traces)
        count = len(settings.max_age)
        totals = enqueued_total[now - interval * (samples - 1): now + 1: interval] - partitions
        ended = slo_kernel.bursts_ended(times, totals) if traces is None else \
            np.array([slo_kernel.bursts_ended(times, totals[:, trace]) for trace in range(totals.shape[1])])[traces]
        self.weight = np.broadcast_to(np.where(ended, slo_kernel.absorb_weight(self.noise), 0.0), (count,))
        self.rises = np.broadcast_to(self.rise, (count,))
        self._rates: dict | None = None

    def _history(self, columns, row_of=None):
        """Positions (samples x rows[ x the columns' traces]) and each column's trace's."""
        window = self.window if row_of is None else self.window[:, row_of]
        return window if self.traces is None else window[:, :, self.traces[columns]]

    def rates(self):
        """Per candidate, the rate over the last SLO-long window and the busiest such window's of
        the history (rows x candidates; worked out once per evaluation)."""
        if self._rates is None:
            settings, times, window = self.settings, self.times, self.window
            sustained = np.zeros((window.shape[1], len(settings.max_age)))
            window_peak = np.zeros_like(sustained)
            for seconds in np.unique(settings.max_age):
                chosen = np.flatnonzero(settings.max_age == seconds)
                start = slo_kernel.window_index(times, float(seconds))
                rate = slo_kernel.rate_since(times, window, start)
                peak = slo_kernel.later_window_peaks(times, window, len(times) - 1 - start)[0]
                sustained[:, chosen] = rate[:, None] if self.traces is None else rate[:, self.traces[chosen]]
                window_peak[:, chosen] = peak[:, None] if self.traces is None else peak[:, self.traces[chosen]]
            self._rates = (sustained, window_peak)
        return self._rates

    def need(self, columns, forecast, until_serving, checkpoints=None, row_of=None):
        """``slo_kernel.absorbed_need`` for the ``columns`` (rows, or partitions with ``row_of``,
        x columns), as ``slo._absorbed_need``: the ready instances serve until those in flight do."""
        settings = self.settings
        sustained = self.rates()[0][:, columns]
        weight = self.weight[columns]
        rates = slo_kernel.blended(forecast, (sustained if row_of is None else sustained[row_of])
                                   * settings.headroom_factor[columns], weight)
        first = self.serving_from[columns]
        ready, asked = self.served_ready[:, columns], self.served[:, columns]
        if row_of is not None:
            ready, asked = ready[row_of], asked[row_of]
        meanwhile = ready * np.minimum(first, until_serving) + asked * np.maximum(until_serving - first, 0.0)
        oldest = self.oldest[:, columns] if checkpoints is None else checkpoints[:, columns]
        need = slo_kernel.absorbed_need(self.times, self._history(columns, row_of), oldest, rates, meanwhile, until_serving,
                                        settings.limit[columns] + self.delay[columns], self.shortest)
        if self.hot is None:
            return need
        hot = self.hot[:, columns]
        return np.where(hot if row_of is None else hot[row_of], 0.0, need)

    def sized(self, need, columns, forecast, until_serving, checkpoints=None, row_of=None):
        """The scale-out's ``need`` blended with the absorbed one where the weight is above 0."""
        weight = self.weight[columns]
        absorbing = np.flatnonzero(weight > 0)
        if not absorbing.size:
            return need
        need = need.copy()
        chosen = columns[absorbing]
        wanted = forecast[:, absorbing] if row_of is None else forecast[row_of][:, absorbing]
        absorbed = self.need(chosen, wanted, until_serving[absorbing], checkpoints, row_of)
        need[:, absorbing] = slo_kernel.blended(need[:, absorbing], absorbed, weight[absorbing])
        return need

    def calm(self, calm):
        """The scale-in's ``calm`` rates blended with the busiest SLO-long window's."""
        absorbing = np.flatnonzero(self.weight > 0)
        if not absorbing.size:
            return calm
        settings = self.settings
        sustained, window_peak = self.rates()
        absorbed = slo_kernel.absorbed_calm_rates(sustained[:, absorbing], window_peak[:, absorbing],
                                                  settings.headroom_factor[absorbing], self.rises[absorbing],
                                                  settings.dwell[absorbing])
        calm = calm.copy()
        calm[:, absorbing] = slo_kernel.blended(calm[:, absorbing], absorbed, self.weight[absorbing])
        if self.hot is not None:
            calm = np.where(self.hot, 0.0, calm)
        return calm


def _trend(times, enqueued_total, partitions, now, interval, samples, traces):
    """``slo_kernel.trend`` of the hub's arrivals over the window (as the engine reads them: the
    partitions' last enqueued sequence numbers summed), per candidate (each its trace's)."""
    totals = enqueued_total[now - interval * (samples - 1): now + 1: interval] - partitions
    if traces is None:
        return slo_kernel.trend(times, totals)
    rise, noise = np.array([slo_kernel.trend(times, totals[:, trace]) for trace in range(totals.shape[1])]).T
    return rise[traces], noise[traces]
