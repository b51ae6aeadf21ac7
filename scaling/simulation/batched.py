"""Many threshold-rule candidates simulated at once, the candidate being an array dimension.

``simulate_batch(arrivals, targets, scenario)`` gives, for every target (a ``rules``-mode
``TargetPolicy`` that ``supports`` accepts), the same ``RunResult`` as
``simulate(arrivals, EngineAutoscaler(target), scenario)``: one Python loop over minutes, numpy
over candidates x partitions inside. It mirrors, operation for operation where floating point
matters, the world (``World.advance``, ``serve``'s water-filling, provisioning delay, the
checkpoint delay, the observed integer sequence numbers) and the engine's rules mode
(``_rules_proposal``: windows by collection time, ``min_samples``, ``metric_value``, the
aggregates with Python's left-to-right sum, tiers, up if any rule says so, down only if all
agree; ``evaluate``: ``allowed_counts``, ``snap_up``/``snap_down``, bounds, cooldown since the
last action). tests/unit/test_simulation_batched.py compares it with the engine-driven run.

Not covered (``supports`` returns False and callers use the engine): the SLO mode, the
``lag_seconds`` metric (it needs the engine's learned throughput), rules naming a source other
than the simulated hub's, ``min_samples`` below 1 and ``min_instances`` below 1.

The per-minute total backlog series (``RunResult.backlog``) is summed over partitions in another
order than ``World`` sums it, so it agrees to within rounding; everything else is bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scaling.domain.engine import allowed_counts, snap_down, snap_up
from scaling.domain.policy import TargetPolicy
from scaling.simulation.world import DRAINED, RunResult, Scenario, arrival_minutes, scored_result

#: The simulated sample's only source (``observation_sample``'s default).
SIMULATED_SOURCE = "hub"
_AGGREGATES = {"average": 0, "maximum": 1, "latest": 2}


def supports(target: TargetPolicy) -> bool:
    """Whether ``simulate_batch`` reproduces the engine for this target exactly."""
    if target.mode != "rules" or not target.rules or target.bounds.min_instances < 1:
        return False  # (below 1 the world would ignore an action the engine counts for its cooldown)
    for rule in target.rules:
        if rule.metric not in ("backlog", "backlog_per_instance"):
            return False
        if rule.source not in (None, SIMULATED_SOURCE) or rule.min_samples < 1:
            return False
        for how in (rule.aggregate, rule.scale_up_aggregate, rule.scale_down_aggregate):
            if how is not None and how not in _AGGREGATES:
                return False
    return True


class _Tables:
    """Per-candidate constants: capacity-indexed lookups for steps, snapping and thresholds."""

    def __init__(self, targets: Sequence[TargetPolicy], scenario: Scenario) -> None:
        partitions = scenario.partitions
        count = len(targets)
        all_counts = [allowed_counts(target, partitions) for target in targets]
        top = max([scenario.initial_capacity, 1, *(c[-1] for c in all_counts)])
        self.top = top = top + 1  # capacities and wanted counts are looked up in 0..top
        sizes = range(top + 1)
        self.snap_up = np.array([[snap_up(c, x) for x in sizes] for c in all_counts], dtype=np.int64)
        self.snap_down = np.array([[snap_down(c, x) for x in sizes] for c in all_counts], dtype=np.int64)
        self.up_size = np.array([[t.scale_up.size(x) for x in sizes] for t in targets], dtype=np.int64)
        self.down_size = np.array([[t.scale_down.size(x) for x in sizes] for t in targets], dtype=np.int64)
        self.cooldown_up = np.array([t.scale_up.cooldown_seconds for t in targets], dtype=float)
        self.cooldown_down = np.array([t.scale_down.cooldown_seconds for t in targets], dtype=float)
        slots = max(len(t.rules) for t in targets)
        interval_seconds = 60 * scenario.collection_interval_minutes
        self.active = np.zeros((slots, count), dtype=bool)
        self.per_instance = np.zeros((slots, count), dtype=bool)
        self.length = np.zeros((slots, count), dtype=np.int64)  # samples a full window holds
        self.min_samples = np.zeros((slots, count), dtype=np.int64)
        self.up_how = np.zeros((slots, count), dtype=np.int64)
        self.down_how = np.zeros((slots, count), dtype=np.int64)
        self.up_threshold = np.full((slots, count, top + 1), np.inf)
        self.down_threshold = np.full((slots, count, top + 1), -np.inf)
        for column, target in enumerate(targets):
            for slot, rule in enumerate(target.rules):
                self.active[slot, column] = True
                self.per_instance[slot, column] = rule.metric == "backlog_per_instance"
                # Samples at now, now - k, ... with collected_at > now - window: j*k*60 < window.
                self.length[slot, column] = max(-(-int(rule.window_seconds) // interval_seconds), 0)
                self.min_samples[slot, column] = rule.min_samples
                self.up_how[slot, column] = _AGGREGATES[rule.scale_up_aggregate or rule.aggregate]
                self.down_how[slot, column] = _AGGREGATES[rule.scale_down_aggregate or rule.aggregate]
                for capacity in sizes:
                    up, down = rule.thresholds_for(capacity)
                    if up is not None:
                        self.up_threshold[slot, column, capacity] = up
                    if down is not None:
                        self.down_threshold[slot, column, capacity] = down
        self.history = max(int(self.length.max()), 1)


class _Owners:
    """Who owns which partition for each candidate's serving count (``p mod n``), kept up to date
    as serving counts change (rarely). Arrays are (partitions, candidates): ``local`` the owning
    instance, ``owner`` its slot in the flattened batch (``i * C + c``), ``share`` each
    partition's first-round share, ``rate / partitions its owner has``."""

    def __init__(self, count: int, partitions: int, rate: float) -> None:
        index = np.arange(partitions)
        sizes = np.arange(1, partitions + 1)
        self.partitions = partitions
        self.by_count = index[:, None] % sizes[None, :]  # column n - 1: owners with n instances
        owned = np.stack([np.bincount(column, minlength=partitions)[column] for column in self.by_count.T], axis=1)
        self.share_by_count = rate / owned  # the same division ``serve`` makes in its first round
        self.columns = np.arange(count)
        self.serving = np.zeros(count, dtype=np.int64)
        self.local = np.zeros((partitions, count), dtype=np.int64)
        self.owner = np.zeros((partitions, count), dtype=np.int64)
        self.share = np.zeros((partitions, count))

    def update(self, serving: np.ndarray) -> None:
        changed = np.flatnonzero(serving != self.serving)
        if changed.size:
            column = np.minimum(serving[changed], self.partitions) - 1  # n >= P: one partition each
            self.local[:, changed] = self.by_count[:, column]
            self.owner[:, changed] = self.by_count[:, column] * len(self.columns) + changed[None, :]
            self.share[:, changed] = self.share_by_count[:, column]
            self.serving = serving.copy()


def _serve(demand: np.ndarray, owners: _Owners, rate: float, done: np.ndarray, scratch: np.ndarray,
           capped: np.ndarray, check_full: bool) -> np.ndarray:
    """``world.serve`` for every candidate (column) at once, with the same floating-point operations.

    The first round runs on the whole batch: for a candidate with an instance per partition it
    gives ``minimum(demand, rate)``, which is all ``serve`` does for it, and such a candidate
    never goes on. Only candidates with a partition capped by its share take further rounds,
    together, owner slots flattened (their j-th column's instance i is slot ``i * k + j``);
    those that settle leave, so each sees exactly the rounds ``serve`` would run for it alone.
    A candidate with every partition capped has no room left (each owner gave ``rate / k`` to
    each of its ``k`` partitions; the rounding is far below the 1e-9 ``serve`` stops at) and is
    done after the first round unless ``check_full`` asks to check that too.
    ``done``, ``scratch`` and ``capped`` are (partitions, candidates) buffers; the result is ``done``.
    """
    partitions, count = demand.shape
    owner = owners.owner
    if demand.min() > 0:
        np.minimum(demand, owners.share, out=done)
    else:
        active = demand > 0
        sharing = np.bincount(owner[active], minlength=owner.size)
        share = np.where(sharing > 0, rate / np.maximum(sharing, 1), 0.0)
        done[...] = np.where(active, np.minimum(demand, share[owner]), 0.0)
    np.greater(np.subtract(demand, done, out=scratch), 1e-9, out=capped)  # (implies demand > 0, so active)
    some = capped.any(axis=0)
    if not check_full:
        some &= ~capped.all(axis=0)
    columns = np.flatnonzero(some)
    if not columns.size:
        return done
    served = done
    wanted, done, local = demand[:, columns], done[:, columns], owners.local[:, columns]
    owner = local * len(columns) + np.arange(len(columns))[None, :]
    room = np.maximum(float(rate) - np.bincount(owner.ravel(), weights=done.ravel(), minlength=owner.size), 0.0)
    active = capped[:, columns] & (room[owner] > 1e-9)
    while True:
        going = active.any(axis=0)
        if not going.all():
            finished = ~going
            served[:, columns[finished]] = done[:, finished]
            if not going.any():
                return served
            room = room.reshape(partitions, len(columns))[:, going].ravel()
            columns, wanted, done, active, local = columns[going], wanted[:, going], done[:, going], active[:, going], local[:, going]
            owner = local * len(columns) + np.arange(len(columns))[None, :]
        size = owner.size
        sharing = np.bincount(owner[active], minlength=size)
        share = np.where(sharing > 0, room / np.maximum(sharing, 1), 0.0)
        give = np.where(active, np.minimum(wanted - done, share[owner]), 0.0)
        done = done + give
        room = np.maximum(room - np.bincount(owner.ravel(), weights=give.ravel(), minlength=size), 0.0)
        active &= (wanted - done > 1e-9) & (room[owner] > 1e-9)


def simulate_batch(arrivals: np.ndarray, targets: Sequence[TargetPolicy], scenario: Scenario, *,
                   score_from: int = 0, algorithm: str = "candidate", knobs: Sequence[str] | None = None) -> list[RunResult]:
    """One ``RunResult`` per target, as ``simulate(arrivals, EngineAutoscaler(target), scenario)``."""
    targets = list(targets)
    if not targets:
        return []
    unsupported = [t.name for t in targets if not supports(t)]
    if unsupported:
        raise ValueError(f"simulate_batch cannot reproduce the engine for {unsupported[0]!r} (see supports())")
    knobs = list(knobs) if knobs is not None else [""] * len(targets)
    tables = _Tables(targets, scenario)
    arrivals = np.asarray(arrivals, dtype=float)
    minutes = len(arrivals)
    count, partitions = len(targets), scenario.partitions
    weights = scenario.partition_weights()
    safe_weights = np.where(weights > 0, weights, 1.0)[:, None]
    uniform = bool(np.all(weights == weights[0]))
    cumulative = np.concatenate(([0.0], np.cumsum(arrivals)))
    rate = scenario.events_per_instance_per_minute
    interval = scenario.collection_interval_minutes
    delay = scenario.provisioning_delay_minutes
    whole, partial = divmod(scenario.checkpoint_delay_seconds / 60.0, 1.0)
    whole = int(whole)
    columns = np.arange(count)
    owners = _Owners(count, partitions, rate)

    # The world, per candidate.
    backlog = np.zeros((partitions, count))
    demand = np.zeros((partitions, count))
    done, scratch, capped = np.zeros((partitions, count)), np.zeros((partitions, count)), np.zeros((partitions, count), dtype=bool)
    waiting = np.zeros((partitions, count), dtype=bool)
    # processed after each of the last minutes, oldest first; the oldest buffer takes the next minute
    recent = [np.zeros((partitions, count)) for _ in range(whole + 2)]
    processed = recent[-1]
    # Rounding in a full owner's room stays below serve's 1e-9 cut unless rates are huge.
    check_full = partitions * rate * 1e-15 >= 1e-9
    requested = np.full(count, scenario.initial_capacity, dtype=np.int64)
    ready = requested.copy()
    pending = np.zeros((count, delay + 1), dtype=np.int64)  # count ready at minute m in slot m % (delay + 1)
    capacity_series = np.zeros((minutes, count), dtype=np.int64)
    serving_series = np.zeros((minutes, count), dtype=np.int64)
    backlog_series = np.zeros((minutes, count))
    age_series = np.zeros((minutes, count))
    arrival_shares = (arrivals[:, None] * weights[None, :])[:, :, None]  # (minute, partition, 1)
    # What collect reads: last enqueued sequence number + 1 per partition, per minute.
    enqueued = np.floor(weights[None, :] * cumulative[:, None] + 1e-6)[:, :, None]

    # The engine, per candidate: the metric values of the samples in the longest window (oldest
    # first), the last action, and what the current capacity implies (thresholds, snapped steps).
    actions = np.zeros(count, dtype=np.int64)
    history = tables.history
    window_backlog = np.zeros((history, count))
    window_per_instance = np.zeros((history, count))
    per_instance = tables.per_instance[:, None, :]
    up_average, up_maximum = tables.up_how == 0, tables.up_how == 1
    down_average, down_maximum = tables.down_how == 0, tables.down_how == 1
    positions_in_window = np.arange(history)[None, :, None]
    up_threshold = np.zeros(tables.active.shape)
    down_threshold = np.zeros(tables.active.shape)
    up_wanted = np.zeros(count, dtype=np.int64)
    down_wanted = np.zeros(count, dtype=np.int64)
    up_moves = np.zeros(count, dtype=bool)  # whether the snapped step changes the capacity
    down_moves = np.zeros(count, dtype=bool)
    up_free = np.full(count, -np.inf)  # second from which the cooldown allows the direction
    down_free = np.full(count, -np.inf)

    def capacity_changed(rows: np.ndarray) -> None:
        at = np.minimum(requested[rows], tables.top)
        up_threshold[:, rows] = tables.up_threshold[:, rows, at]
        down_threshold[:, rows] = tables.down_threshold[:, rows, at]
        up_wanted[rows] = tables.snap_up[rows, np.minimum(requested[rows] + tables.up_size[rows, at], tables.top)]
        down_wanted[rows] = tables.snap_down[rows, np.clip(requested[rows] - tables.down_size[rows, at], 0, tables.top)]
        up_moves[rows] = up_wanted[rows] > requested[rows]
        down_moves[rows] = down_wanted[rows] < requested[rows]

    capacity_changed(columns)
    samples = 0
    inside = enough = divisor = None

    for minute in range(minutes):
        slot = minute % (delay + 1)
        arriving = pending[:, slot]
        if arriving.any():
            ready = np.where(arriving > 0, np.maximum(ready, arriving), ready)
            pending[:, slot] = 0
        serving = np.minimum(ready, requested)
        owners.update(serving)
        np.add(backlog, arrival_shares[minute], out=demand)
        served = _serve(demand, owners, rate, done, scratch, capped, check_full)
        np.subtract(demand, served, out=backlog)
        processed = np.add(processed, served, out=recent[0])
        recent = [*recent[1:], processed]
        now = minute + 1
        np.greater(backlog, DRAINED, out=waiting)
        if waiting.any():
            # The oldest unprocessed event: ``advance`` takes the largest age over waiting
            # partitions; the age falls as the position rises, so the smallest position gives it.
            # Division by one positive weight keeps the order, so uniform weights divide the minimum.
            if uniform:
                position = np.where(waiting, processed, np.inf).min(axis=0) / weights[0]
            else:
                position = np.where(waiting, processed / safe_weights, np.inf).min(axis=0)
            some = np.isfinite(position)
            age_series[minute, some] = now - arrival_minutes(cumulative, position[some])
        capacity_series[minute] = requested
        serving_series[minute] = serving
        backlog_series[minute] = backlog.sum(axis=0)
        if now % interval:
            continue

        # --- observe: the sample's backlog, from integer sequence numbers as collect reads them ------
        latest = recent[-1 - whole]
        observed = scratch
        if partial:  # latest - partial * (latest - earlier)
            np.subtract(latest, recent[-2 - whole], out=observed)
            np.multiply(partial, observed, out=observed)
            np.subtract(latest, observed, out=observed)
            np.add(observed, 1e-6, out=observed)
        else:
            np.add(latest, 1e-6, out=observed)
        # last_enqueued - checkpoint = (floor(w * cum + 1e-6) - 1) - (floor(checkpointed + 1e-6) - 1);
        # an empty partition or no checkpoint yet (-1) come out as partition_backlog counts them.
        np.floor(observed, out=observed)
        np.subtract(enqueued[now], observed, out=observed)
        total = np.maximum(observed, 0.0, out=observed).sum(axis=0)
        window_backlog[:-1] = window_backlog[1:]
        window_backlog[-1] = total
        window_per_instance[:-1] = window_per_instance[1:]
        window_per_instance[-1] = total / np.maximum(requested, 1)
        if samples < history:
            samples += 1
            in_window = np.minimum(tables.length, samples)  # (rules, candidates)
            inside = in_window[:, None, :] > (history - 1 - positions_in_window)  # (rules, position, candidates)
            enough = tables.active & (in_window >= tables.min_samples)
            divisor = np.maximum(in_window, 1)

        # --- the rules: aggregates over each rule's window, summed oldest first like Python's sum ---
        values = np.where(per_instance, window_per_instance[None], window_backlog[None])
        masked = np.where(inside, values, 0.0)
        running = masked[:, 0]
        for position_in_window in range(1, history):
            running = running + masked[:, position_in_window]
        average = running / divisor
        biggest = np.where(inside, values, -np.inf).max(axis=1)
        newest = values[:, -1]
        up_value = np.where(up_average, average, np.where(up_maximum, biggest, newest))
        down_value = np.where(down_average, average, np.where(down_maximum, biggest, newest))
        up = (enough & (up_value > up_threshold)).any(axis=0)
        down = ~up & ((enough & (down_value < down_threshold)) | ~tables.active).all(axis=0)

        # --- evaluate: snapping and bounds (precomputed per capacity), cooldowns; the request ------
        # Acts when the snapped, bounded count differs and now >= last action + cooldown (seconds).
        moment = now * 60.0
        go = (up & up_moves & (moment >= up_free)) | (down & down_moves & (moment >= down_free))
        if not go.any():
            continue
        rows = np.flatnonzero(go)
        wanted = np.where(up[rows], up_wanted[rows], down_wanted[rows])
        rising = wanted > requested[rows]
        if rising.any():
            pending[rows[rising], (now + delay) % (delay + 1)] = wanted[rising]
        if not rising.all():
            falling, lower = rows[~rising], wanted[~rising]
            ready[falling] = np.minimum(ready[falling], lower)
            pending[falling] = np.minimum(pending[falling], lower[:, None])
        requested[rows] = wanted
        up_free[rows] = moment + tables.cooldown_up[rows]
        down_free[rows] = moment + tables.cooldown_down[rows]
        if now - 1 >= score_from:
            actions[rows] += 1
        capacity_changed(rows)

    # The last backlog summed per candidate like ``World`` sums it (the series above is summed in
    # another order: equal to within rounding).
    final_backlog = np.ascontiguousarray(backlog.T).sum(axis=1)
    capacity_series, serving_series = capacity_series.T.copy(), serving_series.T.copy()
    backlog_series, age_series = backlog_series.T.copy(), age_series.T.copy()
    return [
        scored_result(scenario, algorithm=algorithm, knob=knobs[column], score_from=score_from, arrivals=arrivals,
                      capacity=capacity_series[column], serving=serving_series[column], backlog=backlog_series[column],
                      age=age_series[column], scale_actions=int(actions[column]), final_backlog=float(final_backlog[column]))
        for column in range(count)
    ]
