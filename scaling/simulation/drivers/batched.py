"""Many threshold-rule candidates simulated at once, the candidate being an array dimension.

``simulate_batch(arrivals, targets, scenario)`` gives, for every target (a ``rules``-mode
``TargetPolicy`` that ``supports`` accepts), the same ``RunResult`` as
``simulate(arrivals, EngineAutoscaler(target), scenario)``: one Python loop over minutes, numpy
over candidates x partitions inside. The world is the same ``Physics`` the loop runs (as a batch
of one); what is mirrored here, operation for operation where floating point matters, is what
the autoscaler reads (the observed integer sequence numbers) and the engine's rules mode
(``_rules_proposal``: windows by collection time, ``min_samples``, ``metric_value``, the
aggregates with Python's left-to-right sum, tiers, up if any rule says so, down only if all
agree; ``allowed_counts`` and ``snap_up``/``snap_down`` precomputed per capacity). The gates
(bounds, cooldowns, in their one order) are the kernel's ``slo_kernel.gates``, which the engine
calls with a batch of one.
tests/unit/test_simulation_batched.py compares it with the engine-driven run.

Not covered (``supports`` returns False): the SLO mode (``batched_slo.py`` batches it), and, for
which callers use the engine, the ``lag_seconds`` metric (it needs the engine's learned
throughput), rules naming a source other than the simulated hub's, ``min_samples`` below 1 and
``min_instances`` below 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from scaling.domain import slo_kernel
from scaling.domain.engine import allowed_counts, snap_down, snap_up
from scaling.domain.policy import TargetPolicy
from scaling.simulation.world.physics import Physics
from scaling.simulation.world.scenario import RunResult, Scenario

#: The simulated sample's only source (``observation_sample``'s default).
SIMULATED_SOURCE = "hub"
_AGGREGATES = {"average": 0, "maximum": 1, "latest": 2}


def checked_batch(targets: Sequence[TargetPolicy], knobs: Sequence[str] | None, supports: Callable[[TargetPolicy], bool],
                  simulator: str) -> tuple[list[TargetPolicy], list[str]]:
    """The batch's targets and knobs as lists; a ``ValueError`` naming the first target the
    simulator cannot reproduce."""
    targets = list(targets)
    unsupported = [target.name for target in targets if not supports(target)]
    if unsupported:
        raise ValueError(f"{simulator} cannot reproduce the engine for {unsupported[0]!r} (see supports())")
    return targets, list(knobs) if knobs is not None else [""] * len(targets)


def supports(target: TargetPolicy) -> bool:
    """Whether ``simulate_batch`` reproduces the engine for this target exactly."""
    if target.mode != "rules" or not target.rules or target.bounds.min_instances < 1 or target.profiles:
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
        self.lowest = np.array([c[0] for c in all_counts], dtype=np.int64)
        self.highest = np.array([c[-1] for c in all_counts], dtype=np.int64)
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


def simulate_batch(arrivals: np.ndarray, targets: Sequence[TargetPolicy], scenario: Scenario, *,
                   score_from: int = 0, algorithm: str = "candidate", knobs: Sequence[str] | None = None,
                   trace_of: Sequence[int] | None = None) -> list[RunResult]:
    """One ``RunResult`` per target, as ``simulate(arrivals, EngineAutoscaler(target), scenario)``
    (``arrivals`` (minutes, traces) and ``trace_of``: each target on its own trace, ``Physics``).
    One function because the engine's state per candidate (the windows, the thresholds and steps
    at the current capacity, the last action) is arrays the minute loop and ``capacity_changed``
    update in place; the rules' aggregates are ``_window_aggregates``, the gates ``slo_kernel.gates``."""
    targets, knobs = checked_batch(targets, knobs, supports, "simulate_batch")
    if not targets:
        return []
    tables = _Tables(targets, scenario)
    count = len(targets)
    world = Physics(arrivals, scenario, count, trace_of)
    minutes, interval = len(world.arrivals), scenario.collection_interval_minutes
    columns = np.arange(count)
    requested = world.requested  # updated in place by world.request

    # The engine, per candidate: the metric values of the samples in the longest window (oldest
    # first), the last action, and what the current capacity implies (thresholds, snapped steps).
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
    last_action = np.full(count, np.nan)  # second of the last action (NaN: none yet)

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

    for _ in range(minutes):
        world.advance()
        now = world.minute
        if now % interval:
            continue

        # --- observe: the sample's backlog, from integer sequence numbers as collect reads them ------
        # last_enqueued - checkpoint = (floor(w * cum + 1e-6) - 1) - (floor(checkpointed + 1e-6) - 1);
        # an empty partition or no checkpoint yet (-1) come out as partition_backlog counts them.
        observed = world.checkpoint_positions(world.scratch)
        np.subtract(world.enqueued_at(now), observed, out=observed)
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
        average, biggest, newest = _window_aggregates(values, inside, divisor)
        up_value = np.where(up_average, average, np.where(up_maximum, biggest, newest))
        down_value = np.where(down_average, average, np.where(down_maximum, biggest, newest))
        up = (enough & (up_value > up_threshold)).any(axis=0)
        down = ~up & ((enough & (down_value < down_threshold)) | ~tables.active).all(axis=0)

        # --- the gates, the kernel's one order (bounds, snapping, cooldowns); the request ---------
        # Only candidates whose snapped step moves the capacity and whose cooldown that way is
        # over, or whose capacity is outside the bounds and one cooldown is over, can act (the
        # gates hold the others at a bound or in their cooldown): the gates run on those alone.
        moment = now * 60.0
        since = moment - last_action
        up_free = slo_kernel.cooldown_over(since, tables.cooldown_up)
        down_free = slo_kernel.cooldown_over(since, tables.cooldown_down)
        outside = (requested < tables.lowest) | (requested > tables.highest)
        rows = np.flatnonzero((up & up_moves & up_free) | (down & down_moves & down_free)
                              | (outside & (up_free | down_free)))
        if not rows.size:
            continue
        at = requested[rows]
        # (the proposal before snapping, as the engine's mode proposes it)
        step = np.minimum(at, tables.top)
        proposed = np.where(up[rows], at + tables.up_size[rows, step], at - tables.down_size[rows, step])
        wanted, _, _, _, verdict = slo_kernel.gates(
            at, proposed, up[rows], down[rows], up_wanted[rows], down_wanted[rows], tables.lowest[rows],
            tables.highest[rows], since[rows], tables.cooldown_up[rows], tables.cooldown_down[rows],
            np.inf, False)
        acting = verdict == slo_kernel.ACTS
        if not acting.any():
            continue
        rows = rows[acting]
        world.request(rows, wanted[acting])
        last_action[rows] = moment
        capacity_changed(rows)

    return world.results(algorithm=algorithm, knobs=knobs, score_from=score_from)


def _window_aggregates(values: np.ndarray, inside: np.ndarray,
                       divisor: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each rule's average (summed oldest first, as Python's ``sum`` adds), largest and newest
    value over its window (``inside``): (rules, candidates) each."""
    masked = np.where(inside, values, 0.0)
    running = masked[:, 0]
    for position_in_window in range(1, values.shape[1]):
        running = running + masked[:, position_in_window]
    return running / divisor, np.where(inside, values, -np.inf).max(axis=1), values[:, -1]
