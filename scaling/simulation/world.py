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
from collections.abc import Callable
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
    def numeric(cell: str) -> bool:
        try:
            float(cell)
        except ValueError:
            return False
        return True

    has_header = bool(rows) and len(rows[0]) >= 2 and not numeric(rows[0][1].strip())
    values = []
    for number, row in enumerate(rows[1:] if has_header else rows, start=2 if has_header else 1):
        if len(row) >= 2 and row[1].strip():
            if not numeric(row[1].strip()):
                raise ValueError(f"{path}: line {number}: arrival count {row[1]!r} is not a number")
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
    if seconds_per_row <= 0 or 60 % seconds_per_row:
        raise ValueError(f"seconds per row must divide 60 (1, 2, 3, 4, 5, 6, 10, 12, 15, 20 or 30), got {seconds_per_row}")
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

    def summary(self, scenario: Scenario) -> dict:
        """The run's numbers as ``simulate``, the demo and the benchmark report them."""
        return {
            "minutes": self.minutes,
            "cost": self.cost,
            "fluid_lower_bound": self.fluid_lower_bound,
            "cost_ratio": round(self.cost_ratio, 4),
            "slo_violation_minutes": self.slo_violation_minutes,
            "meets_slo": self.meets_slo(scenario),
            "scale_actions": self.scale_actions,
            "p99_age_minutes": round(self.p99_age_minutes, 3),
            "max_age_minutes": round(self.max_age_minutes, 3),
            "final_backlog": round(self.final_backlog, 1),
        }


def arrival_minutes(cumulative: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """When the event at each (fractional) position of the cumulative arrivals curve arrived, in
    minutes: arrivals are spread evenly within a minute."""
    index = np.clip(np.searchsorted(cumulative, positions, side="right"), 1, len(cumulative) - 1)
    low, high = cumulative[index - 1], cumulative[index]
    return index - 1 + np.where(high > low, (positions - low) / np.maximum(high - low, 1e-12), 0.0)


def scored_result(scenario: Scenario, *, algorithm: str, knob: str, score_from: int, arrivals: np.ndarray,
                  capacity: np.ndarray, serving: np.ndarray, backlog: np.ndarray, age: np.ndarray,
                  scale_actions: int, final_backlog: float) -> RunResult:
    """A run's numbers from its minute series, scoring only the minutes from ``score_from``."""
    scored = slice(score_from, len(capacity))
    ages = age[scored]
    return RunResult(
        algorithm=algorithm,
        knob=knob,
        minutes=len(capacity) - score_from,
        cost=float(capacity[scored].sum()),
        fluid_lower_bound=float(arrivals[scored].sum()) / scenario.events_per_instance_per_minute,
        slo_violation_minutes=int((ages > scenario.slo_minutes).sum()),
        p99_age_minutes=float(np.percentile(ages, 99)) if len(ages) else 0.0,
        max_age_minutes=float(ages.max()) if len(ages) else 0.0,
        scale_actions=scale_actions,
        final_backlog=final_backlog,
        capacity=capacity,
        serving=serving,
        backlog=backlog,
        age=age,
        arrivals=arrivals,
    )


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


class World:
    """The simulated hub and plan, one minute at a time: ``advance()`` processes a minute,
    ``observe()`` tells what ``collect`` would read, ``request(n)`` is a scale action.

    The benchmark loop (``simulate``) and the local demo both drive this same world.
    """

    def __init__(self, arrivals: np.ndarray, scenario: Scenario) -> None:
        self.scenario = scenario
        self.arrivals = np.asarray(arrivals, dtype=float)
        self.weights = scenario.partition_weights()
        self.cumulative = np.concatenate(([0.0], np.cumsum(self.arrivals)))
        partitions = scenario.partitions
        self.backlog = np.zeros(partitions)
        self.processed = np.zeros(partitions)
        self._whole, self._partial = divmod(scenario.checkpoint_delay_seconds / 60.0, 1.0)
        self._positions = [np.zeros(partitions)] * (int(self._whole) + 2)
        self.requested = scenario.initial_capacity
        self.ready = scenario.initial_capacity
        self.pending: list[tuple[int, int]] = []  # (ready minute, count) for scale-outs in flight
        self.minute = 0
        minutes = len(self.arrivals)
        self.capacity_series = np.zeros(minutes, dtype=int)
        self.serving_series = np.zeros(minutes, dtype=int)
        self.backlog_series = np.zeros(minutes)
        self.age_series = np.zeros(minutes)
        self.action_minutes: list[int] = []

    @property
    def done(self) -> bool:
        return self.minute >= len(self.arrivals)

    @property
    def serving(self) -> int:
        """Instances processing now: requested ones, less scale-outs still provisioning."""
        while self.pending and self.pending[0][0] <= self.minute:
            self.ready = max(self.ready, self.pending.pop(0)[1])
        return min(self.ready, self.requested)

    def advance(self) -> float:
        """Process one minute of arrivals; returns the oldest unprocessed event's age (minutes)."""
        minute = self.minute
        serving = self.serving
        demand = self.backlog + self.arrivals[minute] * self.weights
        served = serve(demand, serving, self.scenario.events_per_instance_per_minute)
        self.backlog = demand - served
        self.processed += served
        self.minute = now = minute + 1
        # Oldest unprocessed event per partition: where its cumulative arrivals reach `processed`.
        waiting = self.backlog > DRAINED
        age = 0.0
        if waiting.any():
            arrived = arrival_minutes(self.cumulative, self.processed[waiting] / self.weights[waiting])
            age = float(np.max(now - arrived))
        self.capacity_series[minute] = self.requested
        self.serving_series[minute] = serving
        self.backlog_series[minute] = self.backlog.sum()
        self.age_series[minute] = age
        self._positions = [*self._positions[1:], self.processed.copy()]
        return age

    def last_enqueued(self) -> np.ndarray:
        """Per-partition last enqueued sequence number (-1 for a partition that never had an event)."""
        return np.floor(self.weights * self.cumulative[self.minute] + 1e-6).astype(np.int64) - 1

    def checkpoints(self) -> np.ndarray:
        """Per-partition checkpoint: consumers checkpoint ``checkpoint_delay_seconds`` behind what
        they processed (processing is even within a minute); -1 before the first event."""
        whole = int(self._whole)
        latest, earlier = self._positions[-1 - whole], self._positions[-2 - whole]
        checkpointed = latest - self._partial * (latest - earlier)
        return np.floor(checkpointed + 1e-6).astype(np.int64) - 1

    def observe(self) -> Observation:
        return Observation(minute=self.minute, capacity=self.requested, last_enqueued=self.last_enqueued(),
                           checkpoint=self.checkpoints(), true_backlog=float(self.backlog.sum()))

    def request(self, wanted: int) -> bool:
        """Apply a scale action at the current minute; returns whether capacity changed."""
        wanted = max(int(wanted), 1)
        if wanted == self.requested:
            return False
        if wanted > self.requested:
            self.pending.append((self.minute + self.scenario.provisioning_delay_minutes, wanted))
            self.pending.sort()
        else:
            self.ready = min(self.ready, wanted)
            self.pending = [(at, min(count, wanted)) for at, count in self.pending]
        self.requested = wanted
        self.action_minutes.append(self.minute - 1)
        return True

    def result(self, *, algorithm: str = "", knob: str = "", score_from: int = 0) -> RunResult:
        """Score the minutes run so far (from ``score_from``); checks that no event was lost."""
        minutes = self.minute
        conservation = float(self.cumulative[minutes] - self.processed.sum() - self.backlog.sum())
        if abs(conservation) > 1e-6 * max(self.cumulative[minutes], 1.0):
            raise AssertionError(f"events not conserved: {conservation}")
        return scored_result(
            self.scenario, algorithm=algorithm, knob=knob, score_from=score_from, arrivals=self.arrivals[:minutes],
            capacity=self.capacity_series[:minutes], serving=self.serving_series[:minutes],
            backlog=self.backlog_series[:minutes], age=self.age_series[:minutes],
            scale_actions=sum(1 for minute in self.action_minutes if minute >= score_from),
            final_backlog=float(self.backlog.sum()),
        )


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
    world = World(arrivals, scenario)
    while not world.done:
        world.advance()
        if world.minute % scenario.collection_interval_minutes:
            continue
        observation = world.observe()
        wanted = autoscaler.decide(observation)
        if on_minute is not None:
            on_minute(world.minute - 1, observation, wanted)
        if wanted is not None:
            world.request(wanted)
    return world.result(algorithm=algorithm, knob=knob, score_from=score_from)
