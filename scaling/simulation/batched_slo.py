"""Many SLO-mode candidates simulated at once, the candidate being an array dimension.

``simulate_slo_batch(arrivals, targets, scenario)`` gives, for every target that ``supports``
accepts, the same ``RunResult`` as ``simulate(arrivals, EngineAutoscaler(target), scenario)``:
one Python loop over collection times, numpy over partitions x candidates inside, on the same
``Kernel`` the loop runs. It mirrors the engine's SLO path operation for operation where
floating point matters:

- ``evaluate``: pending and ready capacity, learning the per-instance throughput from
  saturated intervals (``interval_throughput``/``learn_throughput``, only once the capacity has
  been steady for the checkpoint delay), the configured prior and the lower bound, snapping to
  ``allowed_counts``, a capacity outside the bounds brought inside (``_bounded``), cooldowns
  since the last action, the action budget (token bucket) that holds back scale-ins, the
  provisioning delay the engine assumes;
- ``slo_proposal``: per-partition arrival rates over the rate window and the last interval,
  oldest-event ages from the sequence-number history (``oldest_event_ages``), the learned
  checkpoint delay, ``predicted_age`` over the reaction time (ready capacity first, then the
  requested one), the scale-out count that drains the backlog, and the smallest scale-in count
  expected to hold for ``min_dwell_seconds`` (at the forecast or the history's busiest interval),
  each sized by owner load (``sizing.py``: ``_Loads``).

Sample times are whole seconds since the Unix epoch, as ``minute_time`` makes them, so that the
age arithmetic rounds as the engine's does. The engine's decisions that cannot change what
happens (a scale-in held by the cooldown or the action budget) are not worked out.
tests/unit/test_simulation_batched_slo.py compares the results with the engine in the loop.

Not covered (``supports`` returns False; callers use the engine): other modes, a minimum below
one instance, and times that are not whole seconds (provisioning delay, cooldowns, windows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta

import numpy as np

from scaling.domain.engine import THROUGHPUT_LEARNING_RATE, UNCONFIRMED_DROP, allowed_counts, snap_up
from scaling.domain.lag import partitions_per_instance
from scaling.domain.policy import TargetPolicy
from scaling.domain.sizing import NEWCOMER_MARGIN
from scaling.domain.slo import CHECKPOINT_DELAY_CEILING, CHECKPOINT_DELAY_DRIFT, NO_RATE, rising_factor, rising_fraction
from scaling.simulation.batched import checked_batch
from scaling.simulation.kernel import Kernel
from scaling.simulation.peers import EPOCH
from scaling.simulation.scenario import RunResult, Scenario
from scaling.simulation.share_rows import ShareRows

_EPOCH_SECONDS = EPOCH.timestamp()


def supports(target: TargetPolicy) -> bool:
    """Whether ``simulate_slo_batch`` reproduces the engine for this target exactly."""
    if target.mode != "slo" or target.bounds.min_instances < 1 or target.profiles:  # profiles: the engine's
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
        self.per_instance = np.array([float(partitions_per_instance(partitions, n)) for n in range(top + 2)])
        self.level_per_instance = self.per_instance[self.levels]
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
        self.prior = np.array([np.nan if s.events_per_instance_per_second is None else s.events_per_instance_per_second
                               for s in slo])
        self.cooldown_up = np.array([float(t.scale_up.cooldown_seconds) for t in targets])
        self.cooldown_down = np.array([float(t.scale_down.cooldown_seconds) for t in targets])
        self.limit = self.max_age - self.safety
        self.drain = np.maximum(self.dwell / 2, self.max_age)
        self.delay_ceiling = self.max_age * CHECKPOINT_DELAY_CEILING


def _rows_by(keys: Sequence, build) -> np.ndarray:
    """An integer table with one row per key, each distinct key's row built once."""
    built: dict = {}
    return np.array([built[key] if key in built else built.setdefault(key, build(key)) for key in keys], dtype=np.int64)


class _Owners:
    """Who owns which partition, per candidate (column), as the sizing reads it once a collection:
    whether any partition has a live owner, the count whose load is exact (as many live owners,
    every partition owned; -1: none), how many partitions each owner holds (owners x
    candidates), the fewest and the most one holds, and (when a load sums by owner) each
    partition's slot (``owner * candidates + column``, ``size`` for none)."""

    #: What is worked out per candidate (one value per column).
    PER_CANDIDATE = ("ownership", "exact_count", "most", "fewest", "two")

    def __init__(self, owners: np.ndarray, live_owners: np.ndarray) -> None:
        self._owners, self._live = owners, live_owners
        self.count = count = owners.shape[1]
        self._slots: np.ndarray | None = None
        owned = owners >= 0
        self.ownership = owned.any(axis=0)
        self.exact_count = np.where(self.ownership & owned.all(axis=0), live_owners, -1)
        self.size = (int(owners.max(initial=0)) + 1) * count
        self.partitions = held = np.bincount(self.slots, minlength=self.size + 1)[:-1].reshape(-1, count)
        self.most = held.max(axis=0)
        self.fewest = np.where(held > 0, held, self.most[None, :]).min(axis=0)
        self.two = ((held == self.fewest) | (held == self.most) | (held == 0)).all(axis=0)

    @classmethod
    def read(cls, owners: np.ndarray, live_owners: np.ndarray, before: _Owners | None) -> _Owners:
        """The owners now, worked out again only for the candidates whose owners changed since
        ``before`` (the previous collection's; most candidates keep theirs from one to the next)."""
        if before is None or before.count != owners.shape[1]:
            return cls(owners, live_owners)
        changed = np.flatnonzero((owners != before._owners).any(axis=0))
        if 4 * changed.size > before.count:
            return cls(owners, live_owners)
        now = cls._blank(owners, live_owners, {name: getattr(before, name).copy() for name in cls.PER_CANDIDATE})
        held = before.partitions
        if changed.size:
            part = cls(owners[:, changed], live_owners[changed])
            rows = max(held.shape[0], part.partitions.shape[0])
            held = np.concatenate((held, np.zeros((rows - held.shape[0], now.count), dtype=held.dtype))) if rows > held.shape[0] \
                else held.copy()
            held[:, changed] = 0
            held[:part.partitions.shape[0], changed] = part.partitions
            for name in cls.PER_CANDIDATE:
                getattr(now, name)[changed] = getattr(part, name)
        now.partitions = held
        now.size = held.shape[0] * now.count
        return now

    @classmethod
    def _blank(cls, owners: np.ndarray, live_owners: np.ndarray, per_candidate: dict) -> _Owners:
        """One whose per-candidate values are given (the caller sets ``partitions`` and ``size``)."""
        made = cls.__new__(cls)
        made._owners, made._live, made.count, made._slots = owners, live_owners, owners.shape[1], None
        for name, value in per_candidate.items():
            setattr(made, name, value)
        return made

    @property
    def slots(self) -> np.ndarray:
        """Each partition's slot, flattened (partitions x candidates)."""
        if self._slots is None:
            owners, count = self._owners, self.count
            self._slots = np.where(owners >= 0, owners * count + np.arange(count)[None, :], self.size).ravel()
        return self._slots

    def of(self, columns: np.ndarray) -> _Owners:
        """The same for the chosen candidates only (owners that hold nothing there weigh nothing)."""
        part = _Owners._blank(self._owners[:, columns], self._live[columns],
                              {name: getattr(self, name)[columns] for name in self.PER_CANDIDATE})
        part.partitions = self.partitions[:, columns]
        part.size = part.partitions.shape[0] * part.count
        return part

    def summed(self, values: np.ndarray) -> np.ndarray:
        """``values`` (partitions x candidates) summed by owner (owners x candidates), in partition
        order; partitions without a live owner count for none."""
        return np.bincount(self.slots, weights=values.ravel(), minlength=self.size + 1)[:-1].reshape(-1, self.count)

    @property
    def spread(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The fewest and the most partitions an owner holds, per candidate (0 for a candidate
        without owners), when no owner of any candidate holds another number of them (as a
        balancer leaves them); else None."""
        return (self.fewest, self.most) if self.two.all() else None


class _Loads:
    """``sizing.OwnerLoads`` for every candidate (column): the busiest owner's load of ``values``
    (rows x candidates, set-aside rows already 0) at any count, exact where the candidate's live
    owners are that many and own every partition, else the ``k`` heaviest partitions' sum.

    With equal shares (one group of rows) every partition weighs its group's first row's value
    ``v``: sorted they stay as they are, the ``k`` heaviest sum to the running sum ``S(k)`` of
    ``v``, and an owner of ``c`` partitions (summed in partition order from 0) to ``S(c)``, bit
    for bit; so owners that hold as many partitions have the same load, and (``_Owners.spread``)
    only the fewest and the most held need working out."""

    def __init__(self, values: np.ndarray, hot: np.ndarray | None, layout: ShareRows, owners: _Owners,
                 rate: np.ndarray, per_instance: np.ndarray, by_draw: np.ndarray) -> None:
        if hot is not None:  # a set-aside partition weighs as much as the heaviest other one
            values = np.where(hot, values.max(axis=0), values)
        self.partitions = partitions = len(layout.row_of)
        self.count = count = values.shape[1]
        self.ownership, self.exact_count = owners.ownership, owners.exact_count
        self.rate, self.per_instance = rate, per_instance
        self.index = np.arange(count)
        self._owners = owners
        self._spread: tuple[np.ndarray, np.ndarray] | None = None
        self._kept_by: list | None = None
        self._others: np.ndarray | None = None
        self.varied = np.zeros(count, dtype=bool)  # the partitions' loads differ (sizing.OwnerLoads.lightest)
        if layout.groups is not None and len(layout.groups) == 1:
            value = values[0]
            self.heaviest = heaviest = np.empty((partitions, count))
            heaviest[0] = value
            for rank in range(1, partitions):  # S(k), added one at a time as the running sum does
                np.add(heaviest[rank - 1], value, out=heaviest[rank])
            self.total = heaviest[-1]
            self._spread = spread = owners.spread
            if spread is not None:
                most = spread[1]
                self.exact = np.where(most > 0, self._running(np.maximum(most - 1, 0) * count + self.index), 0.0)
                return
            held = owners.partitions
            self.owner_load = np.where(held > 0, self._running(np.maximum(held - 1, 0) * count + self.index), 0.0)
        else:
            by_partition = values[layout.row_of]  # (partitions, candidates)
            ranked = np.sort(by_partition, axis=0)
            self.varied = by_draw & (ranked[0] < ranked[-1])
            self.heaviest = np.cumsum(ranked[::-1], axis=0)
            self.total = self.heaviest[-1]
            self.owner_load = owners.summed(by_partition)
        self.exact = self.owner_load.max(axis=0)

    def _running(self, flat: np.ndarray) -> np.ndarray:
        """The running sums at flat (rank * candidates + column) positions."""
        return self.heaviest.take(flat)

    def _held(self, held: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Equal shares: an owner of ``held`` partitions (one count per column): ``held``, its
        load, the mean load of the partitions it does not own."""
        load = self._running(np.maximum(held - 1, 0) * self.count + self.index)
        return held, load, (self.total - load) / np.maximum(self.partitions - held, 1)

    def load(self, counts: np.ndarray, columns: np.ndarray | slice = slice(None)) -> np.ndarray:
        """The busiest owner's load at ``counts`` (one per chosen column)."""
        per_owner = self.per_instance[counts].astype(np.int64)
        index = self.index[columns]
        bound = self._running((np.minimum(per_owner, self.partitions) - 1) * self.count + index)
        live = self.exact_count[columns]
        fewer = np.flatnonzero(live > counts)
        if fewer.size:  # the survivors keep theirs and take the moving ones at the others' mean
            at = index[fewer]
            room = per_owner[fewer]
            if self._spread is not None:  # equal shares: the owners of the fewest and of the most
                if self._kept_by is None:
                    self._kept_by = [self._held(held) for held in self._spread]
                kept = np.maximum(*(load[at] + np.clip(room - held[at], 0, self.partitions) * others[at]
                                    for held, load, others in self._kept_by))
            else:
                if self._others is None:
                    self._others = (self.total[None, :] - self.owner_load) / np.maximum(
                        self.partitions - self._owners.partitions, 1)
                owners = self._owners.partitions[:, at]
                gained = np.clip(room[None, :] - owners, 0, self.partitions) * self._others[:, at]
                kept = np.where(owners > 0, self.owner_load[:, at] + gained, -np.inf).max(axis=0)
            bound[fewer] = np.minimum(bound[fewer], kept)
        more = np.flatnonzero((live > 0) & (live < counts) & self.varied[columns])
        if more.size:  # the owners keep k of theirs (k / c of their load), newcomers most of the way to the k heaviest
            at, room = index[more], per_owner[more]
            owners = self._owners.partitions[:, at]
            kept = np.where(owners > 0, self.owner_load[:, at] * np.minimum(owners, room[None, :])
                            / np.maximum(owners, 1), -np.inf).max(axis=0)
            mean = room * (self.total[at] / self.partitions)
            newcomer = mean + NEWCOMER_MARGIN * (bound[more] - mean)
            bound[more] = np.minimum(bound[more], np.maximum(kept, newcomer))
        return np.where(live == counts, self.exact[columns], bound)

    def service(self, values: np.ndarray, counts: np.ndarray, columns: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Each row's service rate at ``counts`` (one per chosen column) for ``values`` of those columns."""
        rate = self.rate[columns]
        equal = rate / self.per_instance[counts]
        load = self.load(counts, columns)
        sized = self.ownership[columns] & (load > 0)
        ratio = rate / np.where(sized, load, 1.0)
        served = np.where(sized[None, :], np.maximum(values * ratio[None, :], equal[None, :]), equal[None, :])
        return np.where(counts[None, :] > 0, served, 0.0)  # no instance serves nothing


def _scale_out(rows: np.ndarray, capacity: np.ndarray, needs: _Loads, need: np.ndarray, settings: _Candidates) -> np.ndarray:
    """``slo_proposal``'s scale-out count for the candidates ``rows`` at risk: the smallest allowed
    count above the capacity that serves every partition's ``need`` (``needs`` holds their columns
    only, in that order), else the highest. Only counts above the capacity are tried."""
    candidates = settings.levels[rows]
    width = candidates.shape[1]
    fits = settings.valid_level[rows] & (candidates > capacity[rows, None])
    pairs = np.flatnonzero(fits)
    if pairs.size:  # every (candidate, count) pair at once
        column = pairs // width
        counts = np.minimum(candidates.ravel()[pairs], settings.top + 1)
        fits.ravel()[pairs] = (needs.service(need[:, column], counts, column) >= need[:, column]).all(axis=0)
    return np.where(fits.any(axis=1), candidates[np.arange(len(rows)), fits.argmax(axis=1)], settings.highest[rows])


def _predicted_age(age: np.ndarray, backlog: np.ndarray, forecast: np.ndarray, service: np.ndarray,
                   seconds: np.ndarray) -> np.ndarray:
    """``slo.predicted_age`` with a service rate and a duration per candidate (column)."""
    growth = 1.0 - service / np.maximum(forecast, NO_RATE)
    flowing = np.where((age <= 0) & (growth <= 0), 0.0, np.maximum(age + growth * seconds, 0.0))
    idle = np.where(service * seconds >= backlog, 0.0, age + seconds)
    return np.where(seconds > 0, np.where(forecast <= NO_RATE, idle, flowing), age)


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
                       score_from: int = 0, algorithm: str = "candidate", knobs: Sequence[str] | None = None) -> list[RunResult]:
    """One ``RunResult`` per target, as ``simulate(arrivals, EngineAutoscaler(target), scenario)``."""
    targets, knobs = checked_batch(targets, knobs, supports, "simulate_slo_batch")
    if not targets:
        return []
    if len({batch_key(t) for t in targets}) > 1:
        raise ValueError("simulate_slo_batch needs one window and rate window for the whole batch (see batch_key())")
    settings = _Candidates(targets, scenario)
    count, partitions = len(targets), scenario.partitions
    world = Kernel(arrivals, scenario, count)
    minutes, interval = len(world.arrivals), scenario.collection_interval_minutes
    interval_seconds = 60.0 * interval
    window_seconds, rate_window = batch_key(targets[0])
    # Samples the engine sees: those inside the window, at most what EngineAutoscaler keeps.
    window_samples = min(math.ceil(window_seconds / interval_seconds), max(int(window_seconds // 60) + 2, 3))
    rate_lag = math.ceil(rate_window / interval_seconds)  # samples back to the rate window's base
    layout = ShareRows(world.weights)
    positions = world.enqueued[:, layout.representative, 0] - 1.0  # last enqueued sequence numbers (minute, row)
    enqueued_total = world.enqueued[:, :, 0].sum(axis=1)  # events enqueued in all partitions, per minute
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
    names_before = np.full((partitions, count), -1, dtype=np.int64)
    partition_backlog = np.zeros((partitions, count))
    owned_by: _Owners | None = None  # the sizing's owners, as last read

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
        ranked = np.sort(owners_now, axis=0)
        live_owners = (np.diff(ranked, axis=0) != 0).sum(axis=0) + 1 - (ranked[0] < 0)  # distinct owners, -1 aside
        owned_by = _Owners.read(owners_now, live_owners, owned_by)  # for the learning and the sizing
        previous_checkpoints, previous_partition_backlog = checkpoints.copy(), partition_backlog
        world.checkpoint_positions(checkpoints)
        partition_backlog = np.maximum(world.enqueued[now] - checkpoints, 0.0)
        enqueued = positions[now][:, None] + 1.0
        oldest = layout.reduce(checkpoints)
        backlog = np.maximum(enqueued - oldest, 0.0)
        oldest_sum = checkpoints.sum(axis=0)
        # Each partition's backlog is enqueued - checkpointed >= 0 unless rounding put a checkpoint
        # past the last event; partition_backlog counts that as 0, so sum those few candidates exactly.
        backlog_sum = enqueued_total[now] - oldest_sum
        ahead = np.flatnonzero((oldest > enqueued).any(axis=0))
        if ahead.size:
            backlog_sum[ahead] = np.maximum(world.enqueued[now] - checkpoints[:, ahead], 0.0).sum(axis=0)

        # --- evaluate: capacity and readiness ---------------------------------------------------
        capacity = requested.copy()
        pending = moment < pending_at
        ready = np.where(pending, np.minimum(np.where(ready_state > 0, ready_state, capacity), capacity), capacity)
        # engine.ready_from_owners: the live owners say who serves (all, once every partition or
        # capacity has one), unless fewer show within an interval past the provisioning delay.
        sample_interval = interval_seconds if samples >= 2 else 60.0  # the engine reads it off the samples
        serving = np.where(live_owners >= np.minimum(capacity, partitions), capacity, live_owners)
        just_due = moment < pending_at + sample_interval  # (NaN: no scale-out: False)
        ready = np.where((serving >= ready) | ~just_due, serving, ready)
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
                observed = processed / interval_seconds / np.maximum(live_owners, 1)
                # engine.interval_throughput by owner: each owner with a busy partition (backlog over
                # two intervals' arrivals at both ends) and a checkpoint on every partition measures one instance.
                arrived_each = world.enqueued[now] - world.enqueued[now - interval]
                busy = (np.minimum(previous_partition_backlog, partition_backlog) > 2 * arrived_each) & (checkpoints > 0)
                # (a partition without a live owner measures no owner)
                owner_busy = owned_by.summed(busy)
                owner_done = owned_by.summed(checkpoints - previous_checkpoints)
                owner_unmeasured = owned_by.summed(checkpoints <= 0)
                measuring = (owned_by.partitions > 0) & (owner_busy > 0) & (owner_unmeasured == 0) & (owner_done > 0)
                measured_owners = measuring.sum(axis=0)
                saturated = measured_owners > 0
                observed = np.where(saturated, np.where(measuring, owner_done, 0.0).sum(axis=0) / interval_seconds
                                    / np.maximum(measured_owners, 1), observed)
                learned = learning & checkpointed.any(axis=0)
                rows = learned & saturated
                # engine.UNCONFIRMED_DROP: a reading far below the learned rate waits for the next to confirm it.
                doubtful = rows & np.isnan(held_back) & (observed < throughput * (1 - UNCONFIRMED_DROP))  # (NaN: False)
                unconfirmed = np.where(doubtful, observed, unconfirmed)
                rows &= ~doubtful
                throughput = np.where(rows, np.where(np.isnan(throughput), observed, (1 - THROUGHPUT_LEARNING_RATE) * throughput
                                                     + THROUGHPUT_LEARNING_RATE * observed), throughput)
                rows = learned & ~saturated & (observed > np.where(np.isnan(floor), 0.0, floor))
                floor = np.where(rows, observed, floor)
        rate = np.where(np.isnan(throughput), np.where(np.isnan(settings.prior), floor, settings.prior), throughput)
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
        if known.any():
            rate = np.where(known, rate, 1.0)
            window = positions[now - interval * (samples - 1): now + 1: interval]  # (samples, partition), oldest first
            times = _EPOCH_SECONDS + 60.0 * np.arange(now - interval * (samples - 1), now + 1, interval)
            base = samples - 1 - rate_lag if samples - 1 >= rate_lag else 0
            recent = max(samples - 2, 0)
            latest = window[-1]
            arrival = (np.maximum(latest - window[base], 0.0) / (times[-1] - times[base])
                       if times[-1] > times[base] else np.zeros(layout.count))
            recent_rate = (np.maximum(latest - window[recent], 0.0) / (times[-1] - times[recent])
                           if times[-1] > times[recent] else np.zeros(layout.count))
            ages = _oldest_event_ages(times, window, oldest, np.maximum(arrival, recent_rate))
            # Hot partitions (slo.propose): more than one instance serves, over the rate window and
            # the last interval, against a learned or configured throughput: set aside.
            measured = ~np.isnan(throughput) | ~np.isnan(settings.prior)
            hot = (np.minimum(arrival, recent_rate)[:, None] > rate[None, :]) & measured[None, :]
            any_hot = hot.any()
            if any_hot:
                ages = np.where(hot, 0.0, ages)

            worst = ages.max(axis=0)
            creep = np.where(worst <= delay + sample_interval, CHECKPOINT_DELAY_DRIFT, 0.0)  # (NaN: none learned yet)
            learned_delay = np.where(np.isnan(delay), worst, np.minimum(worst, delay + creep))
            learned_delay = np.minimum(learned_delay, settings.delay_ceiling)
            delay = np.where(known, learned_delay, delay)
            react = learned_delay + sample_interval + settings.provisioning
            forecast = np.maximum(arrival, recent_rate)[:, None] * settings.headroom_factor
            waiting = backlog
            if any_hot:
                forecast = np.where(hot, 0.0, forecast)
                waiting = np.where(hot, 0.0, backlog)
            age = np.maximum(ages - learned_delay, 0.0)
            due = pending_at - moment  # (NaN: no scale-out in flight, so late or lost: the next collection)
            pending_seconds = np.where(ready < capacity, np.where(due > 0, due, sample_interval), 0.0)
            # (none serving: the restart takes a provisioning delay)
            pending_seconds = np.where(ready <= 0, np.maximum(pending_seconds, settings.provisioning), pending_seconds)
            first = np.minimum(pending_seconds, react)
            # sizing.distinct_shares: at least half the forecasts distinct (never with equal-share rows)
            by_draw = (np.zeros(count, dtype=bool) if layout.groups is not None
                       else 2 * ((np.diff(np.sort(forecast, axis=0), axis=0) != 0).sum(axis=0) + 1) >= partitions)
            loads = _Loads(forecast, hot if any_hot else None, layout, owned_by, rate, per_instance, by_draw)
            then = _predicted_age(age, waiting, forecast, loads.service(forecast, ready), first)
            then = _predicted_age(then, waiting, forecast, loads.service(forecast, capacity), react - first)
            worst_predicted = np.maximum(0.0, then.max(axis=0))
            # slo.propose holds while some partitions have no live owner (others have one).
            unowned = (owners_now < 0).any(axis=0) & (live_owners > 0)
            risk = known & (worst_predicted > settings.limit) & ~unowned
            if risk.any():
                rows = np.flatnonzero(risk)
                since = learned_delay[rows]
                wanted_rate = forecast[:, rows]
                need = (wanted_rate + np.maximum(waiting[:, rows] + wanted_rate * (settings.provisioning[rows] + since)
                                                 - wanted_rate * settings.safety[rows], 0.0) / settings.drain[rows])
                needs = _Loads(need, hot[:, rows] if any_hot else None, layout, owned_by.of(rows), rate[rows], per_instance,
                               by_draw[rows])
                proposal[rows] = _scale_out(rows, capacity, needs, need, settings)
                upward[rows] = True

            # Scale-in: worked out only where the cooldown and the action budget would let it act.
            enough_history = (samples - 1) * interval_seconds >= rate_window
            if enough_history:
                eligible = (known & ~risk & ~unowned & _scale_in_allowed(settings, tokens, tokens_at, last_action, moment)
                            & (settings.lowest < capacity))
                if eligible.any():
                    # slo.propose: a scale-in holds against the busiest interval of the history too.
                    # (each candidate's busiest interval among those ending within its scale_in_peak_seconds)
                    later_max = np.maximum.accumulate(np.maximum(np.diff(window, axis=0), 0.0)[::-1], axis=0)[::-1]
                    start = np.clip(samples - 1 - np.floor(settings.peak / interval_seconds).astype(np.int64), 0, samples - 2)
                    peak = later_max[start, :].T / (times[1] - times[0])  # (rows, candidates)
                    # ... and, while the arrivals clearly rise, at the rate halfway through the dwell.
                    rise = rising_fraction(times, enqueued_total[now - interval * (samples - 1): now + 1: interval] - partitions)
                    calm = np.maximum(forecast, peak * settings.headroom_factor) * rising_factor(rise, settings.dwell)
                    if any_hot:
                        calm = np.where(hot, 0.0, calm)
                    scaling_in = np.flatnonzero(eligible)  # loads and counts for these candidates only
                    calm_loads = _Loads(calm[:, scaling_in], hot[:, scaling_in] if any_hot else None, layout,
                                        owned_by.of(scaling_in), rate[scaling_in], per_instance, by_draw[scaling_in])
                    down_rows, chosen = _scale_in(scaling_in, capacity, calm_loads, calm, age, settings, sample_interval)
                    proposal[down_rows] = chosen

        # --- engine._bounded: a capacity outside the bounds (only ever the initial one) ----------
        below, above = capacity < settings.lowest, capacity > settings.highest
        if below.any() or above.any():
            raised = below & (~upward | (proposal < settings.lowest))
            proposal = np.where(raised, settings.lowest, proposal)
            upward |= raised
            outside = np.flatnonzero(above)
            upward[outside] = False
            # A scale-in to the highest count (or the engine's own, when lower), held like any
            # scale-in by the cooldown and the action budget (down_rows already passed both).
            acting = outside[_scale_in_allowed(settings, tokens, tokens_at, last_action, moment)[outside]]
            own = np.isin(acting, down_rows) & (proposal[acting] <= settings.highest[acting])
            proposal[acting] = np.where(own, proposal[acting], settings.highest[acting])
            down_rows = np.union1d(down_rows, acting)

        # --- evaluate: snapping, bounds, cooldown, the action budget; the request ----------------
        up_rows = np.flatnonzero(upward)
        if up_rows.size:
            wanted = settings.snap_up[up_rows, np.minimum(np.maximum(proposal[up_rows], capacity[up_rows] + 1), settings.top)]
            free = np.isnan(last_action[up_rows]) | (moment >= last_action[up_rows] + settings.cooldown_up[up_rows])
            keep = (wanted > capacity[up_rows]) & free
            up_rows, up_wanted = up_rows[keep], wanted[keep]
        else:
            up_wanted = up_rows
        rows = np.concatenate((up_rows, down_rows))
        if not rows.size:
            continue
        wanted = np.concatenate((up_wanted, proposal[down_rows]))
        budget = _tokens(settings.budget[rows], tokens[rows], tokens_at[rows], moment)
        tokens[rows] = np.maximum(budget - 1.0, 0.0)
        tokens_at[rows] = moment
        if up_rows.size:
            pending_at[up_rows] = moment + settings.provisioning[up_rows]
        if down_rows.size:
            ready_state[down_rows] = np.minimum(ready[down_rows], proposal[down_rows])
        last_action[rows] = moment
        world.request(rows, wanted)

    return world.results(algorithm=algorithm, knobs=knobs, score_from=score_from)


def _scale_in_allowed(settings: _Candidates, tokens: np.ndarray, tokens_at: np.ndarray, last_action: np.ndarray,
                      moment: float) -> np.ndarray:
    """Per candidate: whether the scale-down cooldown has passed and the action budget has room
    for a scale-in (``engine.evaluate``: it needs 2 tokens, itself and the likely scale-out)."""
    free = np.isnan(last_action) | (moment >= last_action + settings.cooldown_down)
    return free & (_tokens(settings.budget, tokens, tokens_at, moment) >= 2)


def _tokens(budget: np.ndarray, tokens: np.ndarray, tokens_at: np.ndarray, moment: float) -> np.ndarray:
    """``engine.action_tokens``: the budget refilled since the last action, at most the budget."""
    refilled = np.minimum(budget, tokens + np.maximum(moment - tokens_at, 0.0) / 3600.0 * budget)
    return np.where(np.isnan(tokens) | np.isnan(tokens_at), budget, refilled)


def _oldest_event_ages(times: np.ndarray, window: np.ndarray, oldest: np.ndarray, arrival_rate: np.ndarray) -> np.ndarray:
    """``slo.oldest_event_ages`` for every candidate (column of ``oldest``) against one shared
    position history ``window`` (samples x partitions, never decreasing)."""
    samples = len(times)
    below = (window[:, :, None] < oldest[None]).sum(axis=0, dtype=np.int16)
    waiting = below < samples
    first = np.where(waiting, below, 0)
    previous_index = np.maximum(first - 1, 0)
    # Gathers from the flattened (partition, sample) history, and sample times from their index:
    # the samples are evenly spaced, so times[k] = times[0] + k * step exactly (whole seconds).
    flat = np.ascontiguousarray(window.T).ravel()
    offsets = (np.arange(window.shape[1]) * samples)[:, None]
    position = flat.take(offsets + first)
    previous = flat.take(offsets + previous_index)
    span = np.maximum(position - previous, 1.0)
    step = times[1] - times[0] if samples > 1 else 0.0
    interpolated = (times[0] + previous_index * step) + (oldest - previous) / span * step
    measured = (arrival_rate > NO_RATE)[:, None]
    extrapolated = times[0] - np.where(measured, (position - oldest) / np.where(measured, arrival_rate[:, None], 1.0), 0.0)
    arrived = np.where(first == 0, extrapolated, interpolated)
    return np.where(waiting, np.maximum(times[-1] - arrived, 0.0), 0.0)


def _scale_in(rows: np.ndarray, capacity: np.ndarray, loads: _Loads, forecast: np.ndarray, age: np.ndarray,
              settings: _Candidates, interval_seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """The smallest allowed count below the capacity expected to hold for ``min_dwell_seconds``
    (``slo_proposal``'s scale-in search) for the eligible candidates ``rows`` (``loads`` holds
    their columns only, in that order); returns the candidates that found one and their counts.

    The engine tries counts ascending and takes the first that holds. How long a count holds
    never shrinks as the count grows (more service: slower growth, fewer filling partitions),
    so the first that holds is found by checking where the fluid model says it should be and
    the count below; only when those disagree with the estimate are all counts tried in turn
    (and always where a count below the capacity is sized by exact owner loads, which may hold
    where the bound of the count above does not).
    """
    columns = np.arange(len(rows))
    levels = settings.levels[rows]
    counts = np.minimum(levels, settings.top + 1)
    capacity, forecast, age = capacity[rows], forecast[:, rows], age[:, rows]
    limit, dwell = settings.limit[rows], settings.dwell[rows]
    reaction = interval_seconds + settings.provisioning[rows]
    safe_forecast = np.maximum(forecast, NO_RATE)
    flowing = forecast > NO_RATE
    below = settings.below[rows, np.minimum(capacity, settings.top)]  # allowed counts under the capacity

    def holds(level: np.ndarray, chosen: np.ndarray | slice = slice(None)) -> np.ndarray:
        serve = loads.service(forecast[:, chosen], counts[columns[chosen], level], chosen)
        growth = np.where(flowing[:, chosen], 1.0 - serve / safe_forecast[:, chosen], -1.0)
        filling = growth > 0
        margin = limit[chosen] - growth * reaction[chosen] - age[:, chosen]
        hold = np.where(filling, np.where(margin > 0, margin / np.where(filling, growth, 1.0), 0.0), np.inf).min(axis=0)
        return hold >= dwell[chosen]

    # Where it should be: growth at most (limit - age) / (reaction + dwell) on every partition,
    # i.e. a service of at least (1 - that) of each forecast, at the equal share or the owner-load ratio.
    allowed_growth = (limit - age) / (reaction + dwell)
    required = np.where(flowing, forecast * (1.0 - allowed_growth), -np.inf).max(axis=0)
    fraction = np.maximum(np.where(flowing, 1.0 - allowed_growth, 0.0).max(axis=0), 0.0)
    width = levels.shape[1]
    short = loads.rate[:, None] / settings.level_per_instance[rows] < required[:, None]  # at the equal share
    # ... unless the owner-load ratio serves enough: worked out only for those (all at once).
    pairs = np.flatnonzero(short & loads.ownership[:, None])
    if pairs.size:
        column = pairs // width
        load = loads.load(counts.ravel()[pairs], column)
        by_load = (load > 0) & (loads.rate[column] >= fraction[column] * load)
        short.ravel()[pairs[by_load]] = False
    guess = np.clip(short.sum(axis=1), 0, np.maximum(below - 1, 0))
    lower = np.flatnonzero(guess > 0)  # the guess and the count under it, in one go
    both = holds(np.concatenate((guess, guess[lower] - 1)), np.concatenate((columns, lower)))
    at_guess = both[:len(columns)]
    under_guess = np.zeros(len(columns), dtype=bool)
    under_guess[lower] = both[len(columns):]
    exact_below = (loads.exact_count > 0) & (loads.exact_count < capacity)
    found = at_guess & ~under_guess & ~exact_below
    unsure = ~found & (exact_below | ~(~at_guess & (guess == below - 1)))
    chosen = np.where(found, guess, -1)
    for level in range(width):  # (rarely needed) every count in turn, ascending
        trying = np.flatnonzero(unsure & (level < below))
        if not trying.size:
            break
        holding = trying[holds(np.full(len(trying), level), trying)]
        chosen[holding] = level
        unsure[holding] = False
    found = np.flatnonzero(chosen >= 0)
    return rows[found], levels[found, chosen[found]]
