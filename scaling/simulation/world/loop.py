"""The simulated world of the benchmark run one minute at a time, with an autoscaler in the loop.

A partitioned hub, consumers on a plan, and a trace: the world's rules (ownership, water-filling
service, provisioning delay, failures, checkpoints, cost and the oldest event's age, with the
stress knobs of docs/benchmark-contract.md) are ``Physics``'s (physics.py), and ``World`` is a batch of one. Here
live what the loop adds: loading and scaling traces, what the autoscaler observes (what
``collect`` would read), and ``simulate``. See docs/benchmark.md.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from scaling.simulation.world.arrival_curves import arrival_minutes
from scaling.simulation.world.physics import Physics
from scaling.simulation.world.scenario import RunResult, Scenario, scored_result
from scaling.simulation.world.service import DRAINED, serve

#: Importers of this module's former contents find them here too.
__all__ = ["DRAINED", "Autoscaler", "Physics", "Observation", "RunResult", "Scenario", "World", "arrival_minutes",
           "load_trace", "per_minute", "scale_trace", "scored_result", "serve", "simulate"]


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
    #: Per partition, the instance that owns it as collect reads the ownership blobs (-1: no live owner).
    owners: np.ndarray | None = None
    #: The consumers' own metrics of the last minute (``Physics.busy_time_rates``): events processed,
    #: and the true processing rate per instance as busy time measures it (nan: nothing processed).
    #: Only a peer that reads its consumers' metrics (``peers.Flink``) uses them; collect does not see them.
    processed: float | None = None
    true_rate_per_instance: float | None = None

    @property
    def live_owners(self) -> int:
        """How many instances own partitions (what collect reports as ``owners``)."""
        if self.owners is None:
            return 0
        return len(set(self.owners[self.owners >= 0].tolist()))


class Autoscaler(Protocol):
    """Anything that turns observations into an absolute target capacity (or ``None`` to hold)."""

    def decide(self, observation: Observation) -> int | None: ...


class World:
    """The simulated hub and plan as a batch of one, one minute at a time: ``advance()``
    processes a minute, ``observe()`` tells what ``collect`` would read, ``request(n)`` is a
    scale action. The physics is ``Physics``'s, the same the batched simulators run.

    The benchmark loop (``simulate``), the peers and the local demo all drive this world.
    """

    def __init__(self, arrivals: np.ndarray, scenario: Scenario) -> None:
        self.scenario = scenario
        self.physics = physics = Physics(arrivals, scenario, 1)
        self.arrivals, self.weights, self.cumulative = physics.arrivals, physics.weights, physics.cumulative
        self.capacity_series = physics.capacity_series[:, 0]
        self.serving_series = physics.serving_series[:, 0]
        self.backlog_series = physics.backlog_series[:, 0]
        self.age_series = physics.age_series[:, 0]
        self._only = np.zeros(1, dtype=np.int64)
        self._checkpoints = np.zeros((scenario.partitions, 1))

    @property
    def minute(self) -> int:
        """Minutes processed so far (the next minute to process)."""
        return self.physics.minute

    @property
    def done(self) -> bool:
        return self.physics.done

    @property
    def requested(self) -> int:
        """The capacity the plan was last asked for (billed from the request)."""
        return int(self.physics.requested[0])

    @property
    def backlog(self) -> np.ndarray:
        """Events waiting per partition."""
        return self.physics.backlog[:, 0]

    def advance(self) -> float:
        """Process one minute of arrivals; returns the oldest unprocessed event's age (minutes)."""
        self.physics.advance()
        return float(self.age_series[self.physics.minute - 1])

    def last_enqueued(self) -> np.ndarray:
        """Per-partition last enqueued sequence number (-1 for a partition that never had an event)."""
        return self.physics.enqueued[self.physics.minute, :, 0].astype(np.int64) - 1

    def checkpoints(self) -> np.ndarray:
        """Per-partition checkpoint (-1 before the first event), as the scenario's consumers write
        them (a delay behind what was processed, or every checkpoint interval)."""
        return self.physics.checkpoint_positions(self._checkpoints)[:, 0].astype(np.int64) - 1

    def observe(self) -> Observation:
        processed, true_rates = self.physics.busy_time_rates()
        return Observation(minute=self.minute, capacity=self.requested, last_enqueued=self.last_enqueued(),
                           checkpoint=self.checkpoints(), true_backlog=float(self.physics.total_backlog()[0]),
                           owners=self.physics.owners(0), processed=float(processed[0]),
                           true_rate_per_instance=float(true_rates[0]))

    def request(self, wanted: int) -> bool:
        """Apply a scale action at the current minute; returns whether capacity changed."""
        wanted = max(int(wanted), 1)
        if wanted == self.requested:
            return False
        self.physics.request(self._only, np.array([wanted], dtype=np.int64))
        return True

    def result(self, *, algorithm: str = "", knob: str = "", score_from: int = 0) -> RunResult:
        """Score the minutes run so far (from ``score_from``); checks that no event was lost."""
        return self.physics.results(algorithm=algorithm, knobs=[knob], score_from=score_from)[0]


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
    return drive(World(arrivals, scenario), autoscaler, scenario, algorithm=algorithm, knob=knob, score_from=score_from,
                 on_minute=on_minute)


def drive(world, autoscaler, scenario: Scenario, *, algorithm: str = "", knob: str = "", score_from: int = 0,
          on_minute: Callable | None = None) -> RunResult:
    """The loop of every simulated world (a hub's ``World``, a queue's): a minute at a time, the
    autoscaler observing at each collection and its wish requested at once."""
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
