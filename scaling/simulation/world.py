"""The simulated world of the benchmark: a partitioned hub, consumers on a plan, and a trace.

One-minute steps. Each partition is owned by one instance (partition ``p`` by instance
``p mod n``); an instance serves at most ``mu`` events a minute, shared among its partitions
without waste. Scale-outs serve after the provisioning delay, scale-ins at once; cost is billed
per requested instance-minute. The autoscaler sees what ``collect`` would: last-enqueued
sequence numbers now and checkpoints ``checkpoint_delay_seconds`` behind what was processed. See docs/benchmark.md.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

#: Backlog (events) below which a partition counts as drained; the fluid model leaves fractions.
DRAINED = 0.5


@dataclass(frozen=True, slots=True)
class Scenario:
    """The standard scenario of ../shared/BENCHMARK.md unless a run says otherwise."""

    peak_instances: float = 24.0
    events_per_instance_per_minute: float = 1000.0
    partitions: int = 32
    provisioning_delay_minutes: int = 2
    collection_interval_minutes: int = 1
    checkpoint_delay_seconds: float = 0.0
    slo_minutes: float = 5.0
    initial_capacity: int = 1
    max_violation_fraction: float = 0.001
    skew: float = 0.0

    def partition_weights(self) -> np.ndarray:
        """Share of events per partition: uniform, or geometric with ``skew`` for hot partitions."""
        if self.skew <= 0:
            return np.full(self.partitions, 1.0 / self.partitions)
        raw = np.power(1.0 + self.skew, -np.arange(self.partitions, dtype=float))
        return raw / raw.sum()


def load_trace(path: str | Path) -> np.ndarray:
    """Arrival counts from a two-column CSV (index, count), in file order."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    values = []
    for row in rows[1:] if rows and not rows[0][-1].strip().lstrip("-").isdigit() else rows:
        if len(row) >= 2 and row[1].strip():
            values.append(float(row[1]))
    if not values:
        raise ValueError(f"{path}: no arrival counts found")
    array = np.asarray(values, dtype=float)
    if (array < 0).any():
        raise ValueError(f"{path}: negative arrival counts")
    return array


def per_minute(counts: np.ndarray, seconds_per_row: int) -> np.ndarray:
    """Sum a finer trace (for example per second) into minutes."""
    if seconds_per_row >= 60:
        return counts
    rows_per_minute = 60 // seconds_per_row
    usable = len(counts) // rows_per_minute * rows_per_minute
    return counts[:usable].reshape(-1, rows_per_minute).sum(axis=1)


def scale_trace(counts: np.ndarray, scenario: Scenario) -> np.ndarray:
    """Scale so that the busiest minute needs ``peak_instances`` instances of ``mu`` events."""
    peak = counts.max()
    if peak <= 0:
        raise ValueError("the trace has no arrivals")
    return counts * (scenario.peak_instances * scenario.events_per_instance_per_minute / peak)


@dataclass(frozen=True, slots=True)
class Observation:
    """What the autoscaler sees at the end of a minute (sequence numbers as Event Hubs reports)."""

    minute: int
    capacity: int
    last_enqueued: np.ndarray
    checkpoint: np.ndarray
    true_backlog: float


class Autoscaler(Protocol):
    """Anything that turns observations into an absolute target capacity (or ``None`` to hold)."""

    def decide(self, observation: Observation) -> int | None: ...


@dataclass(slots=True)
class RunResult:
    algorithm: str
    knob: str
    minutes: int
    cost: float
    fluid_lower_bound: float
    slo_violation_minutes: int
    p99_age_minutes: float
    max_age_minutes: float
    scale_actions: int
    final_backlog: float
    capacity: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    serving: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    backlog: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    age: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    arrivals: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))

    @property
    def cost_ratio(self) -> float:
        return self.cost / self.fluid_lower_bound if self.fluid_lower_bound > 0 else math.inf

    def meets_slo(self, scenario: Scenario) -> bool:
        return self.slo_violation_minutes <= scenario.max_violation_fraction * self.minutes


def serve(demand: np.ndarray, instances: int, rate: float) -> np.ndarray:
    """Events each partition gets this minute: every instance shares ``rate`` among the
    partitions it owns (``p mod n``), a quiet partition's unused share going to busy ones."""
    partitions = len(demand)
    if instances >= partitions:
        return np.minimum(demand, rate)
    owner = np.arange(partitions) % instances
    served = np.zeros(partitions)
    room = np.full(instances, float(rate))
    active = demand > 0
    while active.any():
        sharing = np.bincount(owner[active], minlength=instances)
        share = np.where(sharing > 0, room / np.maximum(sharing, 1), 0.0)
        give = np.where(active, np.minimum(demand - served, share[owner]), 0.0)
        served += give
        room = np.maximum(room - np.bincount(owner, weights=give, minlength=instances), 0.0)
        active = active & (demand - served > 1e-9) & (room[owner] > 1e-9)
    return served


def simulate(
    arrivals: np.ndarray,
    autoscaler: Autoscaler,
    scenario: Scenario,
    *,
    algorithm: str = "",
    knob: str = "",
    score_from: int = 0,
    on_minute: Callable[[int, Observation, int | None], None] | None = None,
) -> RunResult:
    """Replay ``arrivals`` (events per minute) with ``autoscaler`` in the loop.

    Minutes before ``score_from`` run (to warm state up) but are not scored, so that a policy
    tuned on the first part of a trace is scored on the rest only.
    """
    minutes = len(arrivals)
    mu = scenario.events_per_instance_per_minute
    weights = scenario.partition_weights()
    partitions = scenario.partitions
    cumulative = np.concatenate(([0.0], np.cumsum(arrivals)))
    backlog = np.zeros(partitions)
    processed = np.zeros(partitions)
    whole_minutes, partial = divmod(scenario.checkpoint_delay_seconds / 60.0, 1.0)
    positions = [np.zeros(partitions)] * (int(whole_minutes) + 2)
    requested = scenario.initial_capacity
    pending: list[tuple[int, int]] = []  # (ready minute, count) for scale-outs in flight
    ready = scenario.initial_capacity
    capacity_series = np.zeros(minutes, dtype=int)
    serving_series = np.zeros(minutes, dtype=int)
    backlog_series = np.zeros(minutes)
    age_series = np.zeros(minutes)
    actions = 0
    for minute in range(minutes):
        while pending and pending[0][0] <= minute:
            ready = max(ready, pending.pop(0)[1])
        serving = min(ready, requested)
        demand = backlog + arrivals[minute] * weights
        served = serve(demand, serving, mu)
        backlog = demand - served
        processed += served
        now = minute + 1
        # Oldest unprocessed event per partition: where its cumulative arrivals reach `processed`.
        waiting = backlog > DRAINED
        age = 0.0
        if waiting.any():
            position = processed[waiting] / weights[waiting]
            index = np.searchsorted(cumulative, position, side="right")
            index = np.clip(index, 1, len(cumulative) - 1)
            low, high = cumulative[index - 1], cumulative[index]
            arrived = index - 1 + np.where(high > low, (position - low) / np.maximum(high - low, 1e-12), 0.0)
            age = float(np.max(now - arrived))
        capacity_series[minute] = requested
        serving_series[minute] = serving
        backlog_series[minute] = backlog.sum()
        age_series[minute] = age
        # Consumers checkpoint a little behind what they processed (processing is even within a minute).
        positions = [*positions[1:], processed.copy()]
        checkpointed = positions[-1 - int(whole_minutes)] - partial * (positions[-1 - int(whole_minutes)] - positions[-2 - int(whole_minutes)])
        if (minute + 1) % scenario.collection_interval_minutes:
            continue
        observation = Observation(
            minute=now,
            capacity=requested,
            last_enqueued=np.floor(weights * cumulative[now] + 1e-6).astype(np.int64) - 1,
            checkpoint=np.floor(checkpointed + 1e-6).astype(np.int64) - 1,
            true_backlog=float(backlog.sum()),
        )
        wanted = autoscaler.decide(observation)
        if on_minute is not None:
            on_minute(minute, observation, wanted)
        if wanted is None or wanted == requested:
            continue
        wanted = max(int(wanted), 1)
        actions += minute >= score_from
        if wanted > requested:
            pending.append((now + scenario.provisioning_delay_minutes, wanted))
            pending.sort()
        else:
            ready = min(ready, wanted)
            pending = [(at, min(count, wanted)) for at, count in pending]
        requested = wanted
    scored = slice(score_from, minutes)
    total_arrivals = float(arrivals[scored].sum())
    conservation = float(cumulative[-1] - processed.sum() - backlog.sum())
    if abs(conservation) > 1e-6 * max(cumulative[-1], 1.0):
        raise AssertionError(f"events not conserved: {conservation}")
    ages = age_series[scored]
    return RunResult(
        algorithm=algorithm,
        knob=knob,
        minutes=minutes - score_from,
        cost=float(capacity_series[scored].sum()),
        fluid_lower_bound=total_arrivals / mu,
        slo_violation_minutes=int((ages > scenario.slo_minutes).sum()),
        p99_age_minutes=float(np.percentile(ages, 99)) if len(ages) else 0.0,
        max_age_minutes=float(ages.max()) if len(ages) else 0.0,
        scale_actions=int(actions),
        final_backlog=float(backlog.sum()),
        capacity=capacity_series,
        serving=serving_series,
        backlog=backlog_series,
        age=age_series,
        arrivals=np.asarray(arrivals, dtype=float),
    )

