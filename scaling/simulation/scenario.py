"""What a simulated run is set in, and how it is scored.

``Scenario`` holds every parameter of the simulated world; the one minute-step kernel
(``kernel.py``) reads nothing else, so a new knob of the world is a field here and its rule
there. ``RunResult`` and ``scored_result`` turn a run's minute series into the numbers
``simulate``, the demo, the benchmark and the tuning job report. See docs/benchmark.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


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


def scored_result(scenario: Scenario, *, algorithm: str, knob: str, score_from: int, arrivals: np.ndarray,
                  capacity: np.ndarray, serving: np.ndarray, backlog: np.ndarray, age: np.ndarray,
                  scale_actions: int, final_backlog: float) -> RunResult:
    """A run's numbers from its minute series, scoring only the minutes from ``score_from``:
    cost is billed per requested instance-minute, a minute violates the SLO when its oldest
    unprocessed event is older than ``slo_minutes``."""
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
