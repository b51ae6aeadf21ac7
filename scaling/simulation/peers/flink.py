"""The Flink Kubernetes Operator's job autoscaler (DS2) on one consumer group: its settings and
formulas, as docs/peers.md documents them.

The consumer group is the job's one source vertex: its parallelism is the instance count, at most
the partition count. Every minute (the operator evaluates every 60 s) the peer
- collects, once ``stabilization`` minutes have passed since the last rescale (or the start), the
  arrival rate, the processed rate and the true processing rate per instance; the latter as busy
  time measures it: what an instance processes while it has backlog, the busiest instance setting
  the busy fraction (``Physics.busy_time_rates``);
- decides nothing before ``window`` minutes of samples are in;
- scales when the true processing capacity lies outside [the need at utilization
  ``target + boundary``, the need at ``target - boundary``] (``rate_bounds``), to
  ``ceil(N x need at the target / true capacity)`` clamped by the max factors (``next_parallelism``),
  aligned to the partitions (``aligned_parallelism``);
- delays a scale-down by ``scale_down_interval`` minutes, then takes the largest count recommended
  meanwhile; a scale-up or a no-change recommendation clears it.

These are pure functions over numbers or numpy arrays (one element per setting): the loop peer
(``looped.Flink``) is the batch (``batched.FlinkBatch``) of one setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np


@dataclass(frozen=True, slots=True)
class FlinkSettings:
    """``job.autoscaler.*`` in minutes and fractions; the defaults are the documented ones."""

    utilization_target: float = 0.7
    #: The utilization bounds are ``target +- boundary`` (clamped to [0, 1]).
    utilization_boundary: float = 0.3
    metrics_window_minutes: int = 15
    stabilization_minutes: int = 5
    catch_up_minutes: float = 30.0
    restart_minutes: float = 5.0
    scale_down_interval_minutes: int = 60
    scale_down_max_factor: float = 0.6
    scale_up_max_factor: float = 100000.0
    #: While the lag takes longer than this to process, the bounds become 1.0 and 0.0.
    backlog_lag_threshold_minutes: float = 5.0

    def __post_init__(self) -> None:
        problems = []
        if not 0 < self.utilization_target <= 1:
            problems.append(f"utilization_target must be in (0, 1], got {self.utilization_target}")
        if self.metrics_window_minutes < 1 or self.stabilization_minutes < 0 or self.scale_down_interval_minutes < 0:
            problems.append("metrics_window_minutes must be >= 1, stabilization and scale-down interval >= 0")
        if self.catch_up_minutes <= 0 or self.restart_minutes < 0:
            problems.append("catch_up_minutes must be > 0 and restart_minutes >= 0")
        if not 0 <= self.scale_down_max_factor <= 1 or self.scale_up_max_factor < 0:
            problems.append("scale_down_max_factor must be in [0, 1] and scale_up_max_factor >= 0")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def label(self) -> str:
        """The benchmark's knob text: the four swept settings."""
        return (f"target={self.utilization_target:g} window={self.metrics_window_minutes}m "
                f"catch-up={self.catch_up_minutes:g}m scale-down={self.scale_down_interval_minutes}m")


#: The documented defaults (always in the benchmark's sweep).
FLINK_DEFAULTS = FlinkSettings()


def need(lag, rate, catch_up, restart, utilization, *, with_restart: bool = True):
    """Events per minute the job must process: the lag caught up within ``catch_up`` minutes, the
    arrivals of a restart caught up too (``with_restart``), and the arrival rate at ``utilization``
    (``inf`` at utilization 0: no capacity is too much)."""
    utilization = np.asarray(utilization, dtype=float)
    at_utilization = np.divide(rate, utilization, out=np.full(np.broadcast(np.asarray(rate), utilization).shape, np.inf),
                               where=utilization > 0)
    caught_up = lag / catch_up + rate * restart / catch_up if with_restart else lag / catch_up
    return caught_up + at_utilization


def rate_bounds(lag, rate, processed, utilization_target, boundary, catch_up, restart, lag_threshold):
    """(scale-up threshold, scale-down threshold): the true capacity (events per minute) below the
    first or above the second is outside the utilization bounds. While the lag takes longer than
    ``lag_threshold`` minutes at the processed rate, the bounds are 1.0 and 0.0 (no scale-down)."""
    backlogged = lag > lag_threshold * processed
    upper = np.where(backlogged, 1.0, np.minimum(utilization_target + boundary, 1.0))
    lower = np.where(backlogged, 0.0, np.maximum(utilization_target - boundary, 0.0))
    return need(lag, rate, catch_up, restart, upper, with_restart=False), need(lag, rate, catch_up, restart, lower)


def next_parallelism(current, target_rate, true_capacity, partitions: int, scale_down_max_factor, scale_up_max_factor):
    """``ceil(N x target / true capacity)``, the factor clamped to ``[1 - down max, 1 + up max]``,
    the count to ``[1, partitions]``, then aligned to the partitions (``aligned_parallelism``)."""
    factor = np.clip(np.divide(target_rate, true_capacity), 1.0 - np.asarray(scale_down_max_factor),
                     1.0 + np.asarray(scale_up_max_factor))
    wanted = np.clip(np.ceil(factor * current), 1, partitions).astype(np.int64)
    current = np.clip(np.asarray(current, dtype=np.int64), 1, partitions)
    return alignment_table(partitions)[current, wanted]


def aligned_parallelism(target: int, partitions: int, current: int) -> int:
    """The source parallelism aligned to the partitions: the first count at or above ``target``
    that divides the partitions or gives fewer partitions per subtask (whole division) than
    ``target`` does (32 partitions: 5 -> 6, 9 -> 11, 12 -> 16, 17 -> 32). A scale-down looks no
    higher than ``current`` (reaching it blocks the scale-down); failing that, the count just
    above where the partitions per subtask would rise; never across ``current``."""
    if target == current:
        return target
    rising = target > current
    ceiling = partitions if rising else min(current, partitions)
    for count in range(target, ceiling + 1):
        if partitions % count == 0 or partitions // count < partitions // target:
            return count
    count = target
    while count > 0 and partitions // count <= partitions // target:
        count -= 1
    count = max(count + (1 if count and partitions % count else 0), 1)
    if (rising and count <= current) or (not rising and count >= current):
        return current
    return count


@cache
def alignment_table(partitions: int) -> np.ndarray:
    """``aligned_parallelism(target, partitions, current)`` at ``[current, target]`` (1-based)."""
    table = np.zeros((partitions + 1, partitions + 1), dtype=np.int64)
    for current in range(1, partitions + 1):
        for target in range(1, partitions + 1):
            table[current, target] = aligned_parallelism(target, partitions, current)
    return table


def sweep(targets=(0.5, 0.6, 0.7, 0.8, 0.9), windows=(5, 15), catch_ups=(5.0, 30.0),
          scale_down_intervals=(0, 30, 60)) -> list[FlinkSettings]:
    """The benchmark's sweep of the four main knobs (the documented defaults among them)."""
    settings = [FlinkSettings(utilization_target=target, metrics_window_minutes=window, catch_up_minutes=catch_up,
                              scale_down_interval_minutes=interval)
                for target in targets for window in windows for catch_up in catch_ups for interval in scale_down_intervals]
    if FLINK_DEFAULTS not in settings:
        settings.insert(0, FLINK_DEFAULTS)
    return settings
