"""The benchmark's peers as batches: a whole knob sweep (every setting a column of one ``Physics``)
decided with numpy over the columns, instead of one ``simulate`` per setting.

Each ``*Batch`` here is the peer of looped.py of the same name with one array slot per setting,
doing the same floating-point operations in the same order, so ``simulate_peers`` gives every
setting the ``RunResult`` that ``simulate(arrivals, <peer>(setting), scenario)`` gives it, bit for
bit (a column's world does not depend on its batch: world/physics.py). tests/unit/test_simulation_batched_peers.py
compares them. The world's minute runs once for all settings of all peers; what stays per setting
in Python is only the load balancer's draws when a count changes (``Ownership``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from scaling.domain.lag import balanced_counts, effective_capacity
from scaling.simulation.peers.flink import FlinkSettings, need, next_parallelism, rate_bounds
from scaling.simulation.world.physics import Physics
from scaling.simulation.world.scenario import RunResult, Scenario

#: What a batch's ``decide`` returns for a setting that holds (looped.py's ``None``).
HOLD = -1


class PeerBatch(Protocol):
    """Settings of one peer, one column each: ``decide`` returns each one's wish (``HOLD``: none)."""

    algorithm: str
    knobs: list[str]

    def decide(self, minute: int, capacity: np.ndarray, backlog: np.ndarray, true_backlog: np.ndarray) -> np.ndarray: ...


class KedaHpaBatch:
    """``peers.KedaHpa`` for several thresholds: desired = ceil(total lag / threshold), the HPA's
    tolerance, scale-in stabilization over the recommendations of the last minutes, scale-out limit."""

    algorithm = "keda-hpa"

    def __init__(self, thresholds: Sequence[float], partitions: int, knobs: Sequence[str], *, tolerance: float = 0.1,
                 stabilization_minutes: float = 5.0, syncs_per_minute: int = 4) -> None:
        self.threshold = np.asarray(thresholds, dtype=float)
        self.knobs = list(knobs)
        self.partitions = partitions
        self.tolerance = tolerance
        self.stabilization = stabilization_minutes
        self.syncs = syncs_per_minute
        self.recommendations: deque[tuple[float, np.ndarray]] = deque()  # (moment, one per setting)

    def decide(self, minute: int, capacity: np.ndarray, backlog: np.ndarray, true_backlog: np.ndarray) -> np.ndarray:
        total = np.minimum(backlog, self.partitions * self.threshold)
        current = capacity
        for sync in range(self.syncs):
            moment = minute + sync / self.syncs
            ratio = total / (current * self.threshold)
            wanted = np.ceil(total / self.threshold).astype(np.int64)
            recommendation = np.where(np.abs(ratio - 1.0) <= self.tolerance, current, wanted)
            recommendation = np.minimum(np.maximum(recommendation, 1), self.partitions)
            while self.recommendations and self.recommendations[0][0] <= moment - self.stabilization:
                self.recommendations.popleft()
            self.recommendations.append((moment, recommendation))
            desired = recommendation
            held = np.max([r for _, r in self.recommendations], axis=0)
            desired = np.where(desired < current, np.minimum(current, held), desired)
            desired = np.where(desired > current, np.minimum(desired, np.maximum(current + 4, 2 * current)), desired)
            current = desired
        return current


class FunctionsTargetBatch:
    """``peers.FunctionsTargetBased`` for several targets: ceil(unprocessed / target) rounded up to
    a count that spreads the partitions, voted on several times a minute."""

    algorithm = "functions-target"

    def __init__(self, targets: Sequence[float], partitions: int, knobs: Sequence[str], *, votes_per_minute: int = 6,
                 max_step: int = 4, scale_in_quiet_minutes: float = 3.0) -> None:
        self.target = np.asarray(targets, dtype=float)
        self.knobs = list(knobs)
        self.partitions = partitions
        self.counts = np.asarray(balanced_counts(partitions), dtype=np.int64)
        self.votes = votes_per_minute
        self.max_step = max_step
        self.quiet = scale_in_quiet_minutes
        self.last_scale_out = np.full(len(self.target), -math.inf)

    def decide(self, minute: int, capacity: np.ndarray, backlog: np.ndarray, true_backlog: np.ndarray) -> np.ndarray:
        desired = np.maximum(np.ceil(backlog / self.target).astype(np.int64), 1)
        index = np.searchsorted(self.counts, desired)  # the first count >= desired
        desired = np.where(index < len(self.counts), self.counts[np.minimum(index, len(self.counts) - 1)], self.partitions)
        current = capacity
        for vote in range(self.votes):
            moment = minute + vote / self.votes
            out = desired > current
            quiet = (desired < current) & (moment - self.last_scale_out >= self.quiet)
            self.last_scale_out = np.where(out, moment, self.last_scale_out)
            current = np.where(out, np.minimum(desired, current + self.max_step), np.where(quiet, desired, current))
        return current


class AzureMonitorBatch:
    """``peers.AzureMonitorStyle`` for several (threshold, step) settings: average backlog per
    instance over a window, a shared cooldown, the flapping check on scale-in."""

    algorithm = "azure-monitor"

    def __init__(self, thresholds: Sequence[float], steps: Sequence[int], knobs: Sequence[str], *, window_minutes: int = 5,
                 cooldown_minutes: int = 5, maximum: int = 32) -> None:
        self.upper = np.asarray(thresholds, dtype=float)
        self.lower = self.upper / 4
        self.step = np.asarray(steps, dtype=np.int64)
        self.knobs = list(knobs)
        self.window: deque[np.ndarray] = deque(maxlen=window_minutes)
        self.cooldown = cooldown_minutes
        self.maximum = maximum
        self.last_action = np.full(len(self.upper), -math.inf)

    def decide(self, minute: int, capacity: np.ndarray, backlog: np.ndarray, true_backlog: np.ndarray) -> np.ndarray:
        self.window.append(backlog)
        if len(self.window) < self.window.maxlen:
            return np.full(len(self.upper), HOLD, dtype=np.int64)
        free = minute - self.last_action >= self.cooldown
        summed = 0
        for total in self.window:  # Python's sum: left to right from 0
            summed = summed + total
        average_total = summed / len(self.window)
        per_instance = average_total / capacity
        out = free & (per_instance > self.upper) & (capacity < self.maximum)
        lower = np.maximum(capacity - self.step, 1)
        into = free & ~out & (per_instance < self.lower) & (capacity > 1) & ~(average_total / lower >= self.upper)
        self.last_action = np.where(out | into, minute, self.last_action)
        return np.where(out, np.minimum(capacity + self.step, self.maximum), np.where(into, lower, HOLD))


class ClairvoyantBatch:
    """``peers.Clairvoyant`` for several horizons: the smallest spreading count that covers the mean
    arrival rate ahead plus the true backlog drained over SLO - 1 minutes."""

    algorithm = "clairvoyant"

    def __init__(self, arrivals: np.ndarray, scenario: Scenario, horizons: Sequence[int], knobs: Sequence[str],
                 trace_of: Sequence[int] | None = None) -> None:
        """``arrivals`` per minute; or (minutes, traces), ``trace_of`` each horizon's trace."""
        arrivals = np.asarray(arrivals, dtype=float)
        cumulative = np.concatenate((np.zeros((1, *arrivals.shape[1:])), np.cumsum(arrivals, axis=0)))
        # (minutes + 1, horizon): each horizon's own trace's running total
        self.cumulative = cumulative[:, None] if arrivals.ndim == 1 else cumulative[:, np.asarray(trace_of, dtype=np.int64)]
        self._columns = np.arange(self.cumulative.shape[1]) if self.cumulative.shape[1] > 1 else 0
        self.minutes = len(arrivals)
        self.scenario = scenario
        self.horizon = np.asarray(horizons, dtype=np.int64)
        self.knobs = list(knobs)
        self.levels = [(effective_capacity(scenario.partitions, n, scenario.events_per_instance_per_minute), n)
                       for n in balanced_counts(scenario.partitions)]

    def _mean(self, start, end) -> np.ndarray:
        start, end = np.minimum(start, self.minutes), np.minimum(end, self.minutes)
        span = end - start
        ahead = self.cumulative[end, self._columns] - self.cumulative[start, self._columns]
        return np.where(span > 0, ahead / np.maximum(span, 1), 0.0)

    def decide(self, minute: int, capacity: np.ndarray, backlog: np.ndarray, true_backlog: np.ndarray) -> np.ndarray:
        delay = self.scenario.provisioning_delay_minutes
        drain = true_backlog / max(self.scenario.slo_minutes - 1, 1)
        ahead = self._mean(np.full(len(self.horizon), minute + delay), minute + delay + self.horizon)
        need = np.maximum(ahead, self._mean(np.array([minute]), np.array([minute + delay + 1]))) + drain
        wanted = np.full(len(self.horizon), self.levels[-1][1], dtype=np.int64)
        for level, count in reversed(self.levels):
            wanted = np.where(level >= need, count, wanted)
        return wanted


class FlinkBatch:
    """The Flink Kubernetes Operator's job autoscaler (flink.py) for several settings: window
    averages of the arrival, processed and true processing rates collected after each rescale's
    stabilization, the utilization bounds, the need at the target, the aligned parallelism, the
    delayed scale-down. ``measure`` takes each minute's rates, then ``decide`` the observed lag.

    ``peers.Flink`` is this batch with one setting, so the loop and the sweep cannot drift apart."""

    algorithm = "flink"

    def __init__(self, settings: Sequence[FlinkSettings], partitions: int, knobs: Sequence[str] | None = None, *,
                 interval_minutes: int = 1) -> None:
        self.settings = list(settings)
        self.knobs = list(knobs) if knobs is not None else [setting.label for setting in self.settings]
        self.partitions = partitions
        self.interval = interval_minutes

        def column(name: str, dtype=float) -> np.ndarray:
            return np.asarray([getattr(setting, name) for setting in self.settings], dtype=dtype)

        self.target, self.boundary = column("utilization_target"), column("utilization_boundary")
        self.window = column("metrics_window_minutes", np.int64)
        self.stabilization = column("stabilization_minutes", np.int64)
        self.catch_up, self.restart = column("catch_up_minutes"), column("restart_minutes")
        self.scale_down_interval = column("scale_down_interval_minutes", np.int64)
        self.down_max, self.up_max = column("scale_down_max_factor"), column("scale_up_max_factor")
        self.lag_threshold = column("backlog_lag_threshold_minutes")
        # The window's samples as running totals in a ring of rows (one a collection, the oldest
        # overwritten): a window's sum is the difference of two rows. Each setting counts its
        # samples since its last rescale's stabilization; a window holds only those.
        self.spans = -(-self.window // self.interval)
        self.samples = int(self.spans.max()) + 1
        count = len(self.settings)
        self.totals = np.zeros((self.samples, 4, count))  # arrivals, processed, true rates known, how many known
        self.head = 0  # the row of the latest totals
        self.columns = np.arange(count)
        self.collected = np.zeros(count, dtype=np.int64)
        self.stable_from = self.stabilization.copy()  # the job starts at minute 0
        self.pending_since = np.full(count, -1, dtype=np.int64)  # first scale-down recommendation (-1: none)
        self.pending_count = np.zeros(count, dtype=np.int64)  # the largest count recommended since

    def measure(self, minute: int, arrived: float | np.ndarray, processed: np.ndarray, true_rates: np.ndarray) -> None:
        """One collection's samples: events that arrived since the last one (one number, or per
        setting: each its own trace's), what each setting's consumers processed and their true
        rate per instance in the last minute. A setting keeps them only once its stabilization is
        over (the sample's interval starts after it)."""
        row = (self.head + 1) % self.samples
        known = np.isfinite(true_rates)
        sample = np.stack((np.broadcast_to(arrived / self.interval, (len(self.settings),)), processed,
                           np.where(known, true_rates, 0.0), known.astype(float)))
        np.add(self.totals[self.head], sample, out=self.totals[row])
        self.head = row
        stable = minute - self.interval >= self.stable_from
        self.collected = np.where(stable, self.collected + 1, 0)

    def _window_means(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each setting's means over its window's samples: (arrival rate, processed rate, true
        rate per instance over the samples that have one, how many have one)."""
        first = (self.head - self.spans) % self.samples
        window = self.totals[self.head] - self.totals[first, :, self.columns].T
        with np.errstate(invalid="ignore", divide="ignore"):
            return window[0] / self.spans, window[1] / self.spans, window[2] / window[3], np.rint(window[3])

    def decide(self, minute: int, capacity: np.ndarray, backlog: np.ndarray, true_backlog: np.ndarray) -> np.ndarray:
        ready = self.collected >= self.spans
        wanted = np.full(len(self.settings), HOLD, dtype=np.int64)
        if not ready.any():
            return wanted
        rate, processed, per_instance, known = self._window_means()
        ready &= known > 0
        current = np.minimum(capacity, self.partitions)
        true_capacity = current * per_instance
        lag = backlog
        with np.errstate(invalid="ignore", divide="ignore"):
            up_threshold, down_threshold = rate_bounds(lag, rate, processed, self.target, self.boundary, self.catch_up,
                                                       self.restart, self.lag_threshold)
            target = need(lag, rate, self.catch_up, self.restart, self.target)
            outside = (true_capacity < up_threshold) | (true_capacity > down_threshold)
            recommended = next_parallelism(current, target, np.where(ready, true_capacity, 1.0), self.partitions,
                                           self.down_max, self.up_max)
        unchanged = ready & (~outside | (recommended == current))
        up = ready & ~unchanged & (recommended > current)
        down = ready & ~unchanged & (recommended < current)
        self.pending_since = np.where(unchanged | up, -1, np.where(down & (self.pending_since < 0), minute, self.pending_since))
        self.pending_count = np.where(down, np.maximum(np.where(self.pending_since == minute, 0, self.pending_count),
                                                       recommended), self.pending_count)
        due = down & (minute - self.pending_since >= self.scale_down_interval)
        wanted = np.where(up, recommended, np.where(due, self.pending_count, HOLD))
        acting = wanted != HOLD
        if acting.any():  # a rescale: the pending scale-down is spent, the window starts again after stabilization
            self.stable_from = np.where(acting, minute + self.stabilization, self.stable_from)
            self.collected = np.where(acting, 0, self.collected)
            self.pending_since = np.where(acting, -1, self.pending_since)
        return wanted


def simulate_peers(arrivals: np.ndarray, batches: Sequence[PeerBatch], scenario: Scenario, *,
                   score_from: int = 0, trace_of: Sequence[int] | None = None) -> list[RunResult]:
    """Every setting of every batch as ``simulate(arrivals, <its peer>, scenario)`` scores it, in
    the batches' order: one ``Physics``, each setting a column; each collection the observed
    backlog (collect's integer lag rules, ``peers.observed_backlog``) of every column at once.
    ``arrivals`` (minutes, traces) and ``trace_of`` (each setting's trace, in the batches' order)
    run several traces of one length in the same step (``Physics``)."""
    sizes = [len(batch.knobs) for batch in batches]
    count = sum(sizes)
    physics = Physics(arrivals, scenario, count, trace_of)
    slices = [slice(start, start + size) for start, size in zip(np.cumsum([0, *sizes[:-1]]).tolist(), sizes, strict=True)]
    positions = np.zeros((scenario.partitions, count))
    interval = scenario.collection_interval_minutes
    measuring = [(batch, part) for batch, part in zip(batches, slices, strict=True) if isinstance(batch, FlinkBatch)]
    while not physics.done:
        physics.advance()
        now = physics.minute
        if now % interval:
            continue
        last = physics.enqueued_at(now).astype(np.int64) - 1
        checkpoint = physics.checkpoint_positions(positions).astype(np.int64) - 1
        lag = np.where(checkpoint < 0, last + 1, last - checkpoint)
        backlog = np.where(last < 0, 0, np.maximum(lag, 0)).sum(axis=0).astype(float)
        true_backlog = physics.total_backlog()
        capacity = physics.requested.copy()
        if measuring:
            arrived = physics.arrived_by(now) - physics.arrived_by(now - interval)
            processed, true_rates = physics.busy_time_rates()
            for batch, part in measuring:
                batch.measure(now, arrived[part], processed[part], true_rates[part])
        wanted = np.concatenate([batch.decide(now, capacity[part], backlog[part], true_backlog[part])
                                 for batch, part in zip(batches, slices, strict=True)])
        wanted = np.where(wanted == HOLD, HOLD, np.maximum(wanted, 1))  # as ``World.request``
        rows = np.flatnonzero((wanted != HOLD) & (wanted != capacity))
        if rows.size:
            physics.request(rows, wanted[rows])
    results = physics.results(algorithm="", knobs=[knob for batch in batches for knob in batch.knobs], score_from=score_from)
    for result, algorithm in zip(results, [batch.algorithm for batch in batches for _ in batch.knobs], strict=True):
        result.algorithm = algorithm
    return results
