"""What a simulated run is set in, and how it is scored.

``Scenario`` holds every parameter of the simulated world; the one minute-step physics
(``physics.py``) reads nothing else, so a new knob of the world is a field here and its rule
there. ``RunResult`` and ``scored_result`` turn a run's minute series into the numbers
``simulate``, the demo, the benchmark and the tuning job report. See docs/benchmark.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

ASSIGNMENTS = ("modulo", "balanced")

#: docs/benchmark-contract.md's named sets: the knobs that differ from the standard scenario.
NAMED_SCENARIOS: dict[str, dict] = {
    "standard": {},
    "realistic": {"checkpoint_interval_seconds": 30.0, "skew": 0.015, "hot_spot_rotation_minutes": 360,
                  "throughput_wave": (0.10, 480.0), "slowdowns": ((4000.0, 180.0, 0.70, 10080.0),),
                  "provisioning_delay_range": (1, 4), "instance_failures_per_day": 2.0, "assignment": "balanced",
                  "rebalance_pause_seconds": 20.0, "seed": 1},
    "hot": {"checkpoint_interval_seconds": 30.0, "skew": 0.10, "assignment": "balanced", "rebalance_pause_seconds": 20.0,
            "seed": 1},
}


@dataclass(frozen=True, slots=True)
class Scenario:
    """The standard scenario of docs/benchmark-contract.md unless a run says otherwise."""

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
    # The stress knobs of docs/benchmark-contract.md ("Stress scenarios"); each at its neutral value
    # leaves the standard scenario as it was. The autoscaler is told none of them.
    #: Each partition's consumer checkpoints every N seconds (phases spread evenly); 0: at the processed position.
    checkpoint_interval_seconds: float = 0.0
    #: Every N minutes the partition weights shift by one partition (the hot spot moves); 0: never.
    hot_spot_rotation_minutes: int = 0
    #: Consumer speed times ``1 + amplitude * sin(2 pi t / period)``: (amplitude, period minutes).
    throughput_wave: tuple[float, float] = (0.0, 0.0)
    #: Windows of slower consumers: (first start minute, duration minutes, speed factor, repeat every minutes or 0).
    slowdowns: tuple[tuple[float, float, float, float], ...] = ()
    #: Each scale-out's (and each restored instance's) delay drawn uniformly from [lo, hi] whole
    #: minutes; ``None``: always ``provisioning_delay_minutes``.
    provisioning_delay_range: tuple[int, int] | None = None
    #: Instance failures per day (Poisson); a failed instance's partitions stall until
    #: ``ownership_expiry_seconds`` pass, then move to survivors; the plan restores it after a provisioning delay.
    instance_failures_per_day: float = 0.0
    ownership_expiry_seconds: float = 60.0
    #: Which instance owns which partition: ``modulo`` (``p mod n``) or ``balanced`` (the processor's
    #: load balancer: floor or ceil of P/n each, the fewest partitions move on a change).
    assignment: str = "modulo"
    #: When the serving count changes, every partition whose owner changes pauses this long.
    rebalance_pause_seconds: float = 0.0
    #: Seed of every draw above (delays, failures, which partitions move).
    seed: int = 1

    def __post_init__(self) -> None:
        problems = []
        if self.assignment not in ASSIGNMENTS:
            problems.append(f"assignment must be one of {', '.join(ASSIGNMENTS)}, got {self.assignment!r}")
        if self.checkpoint_interval_seconds < 0 or self.rebalance_pause_seconds < 0 or self.ownership_expiry_seconds < 0:
            problems.append("checkpoint_interval_seconds, rebalance_pause_seconds and ownership_expiry_seconds must be >= 0")
        if self.hot_spot_rotation_minutes < 0 or self.instance_failures_per_day < 0:
            problems.append("hot_spot_rotation_minutes and instance_failures_per_day must be >= 0")
        amplitude, period = self.throughput_wave
        if not 0 <= amplitude < 1 or (amplitude > 0 and period <= 0):
            problems.append("throughput_wave needs 0 <= amplitude < 1 and a positive period")
        for start, duration, factor, repeat in self.slowdowns:
            if duration <= 0 or not 0 < factor <= 10 or repeat < 0 or start < 0 or (repeat and repeat < duration):
                problems.append(f"slowdown {(start, duration, factor, repeat)}: needs start >= 0, duration > 0, "
                                "0 < factor <= 10 and repeat 0 or at least the duration")
        if self.provisioning_delay_range is not None:
            low, high = self.provisioning_delay_range
            if not 0 <= low <= high:
                problems.append(f"provisioning_delay_range needs 0 <= lo <= hi, got {self.provisioning_delay_range}")
        if problems:
            raise ValueError("; ".join(problems))

    @classmethod
    def named(cls, name: str, **overrides) -> Scenario:
        """One of docs/benchmark-contract.md's named sets (``standard``, ``realistic``, ``hot``), with overrides."""
        if name not in NAMED_SCENARIOS:
            raise ValueError(f"unknown scenario {name!r}: choose one of {', '.join(NAMED_SCENARIOS)}")
        return cls(**{**NAMED_SCENARIOS[name], **overrides})

    @property
    def delay_range(self) -> tuple[int, int]:
        """The provisioning delays a scale-out may take, in whole minutes."""
        if self.provisioning_delay_range is None:
            return self.provisioning_delay_minutes, self.provisioning_delay_minutes
        return int(self.provisioning_delay_range[0]), int(self.provisioning_delay_range[1])

    def base_weights(self) -> np.ndarray:
        """Share of events per partition before any rotation: uniform, or geometric with ``skew``."""
        if self.skew <= 0:
            return np.full(self.partitions, 1.0 / self.partitions)
        raw = np.power(1.0 + self.skew, -np.arange(self.partitions, dtype=float))
        return raw / raw.sum()

    def partition_weights(self) -> np.ndarray:
        """Share of events per partition at minute 0 (``weights_at`` for later minutes)."""
        return self.base_weights()

    def weights_at(self, minutes: np.ndarray) -> np.ndarray:
        """(minutes, partitions) shares: the weights shifted by one partition every
        ``hot_spot_rotation_minutes`` (partition ``p`` takes the share ``p - shift`` had)."""
        weights = self.partition_weights()
        minutes = np.asarray(minutes, dtype=np.int64)
        if self.hot_spot_rotation_minutes <= 0:
            return np.broadcast_to(weights, (len(minutes), len(weights)))
        shift = minutes // int(self.hot_spot_rotation_minutes)
        index = (np.arange(len(weights))[None, :] - shift[:, None]) % len(weights)
        return weights[index]

    def speed_factors(self, minutes: int) -> np.ndarray:
        """Per minute, the consumers' speed relative to ``events_per_instance_per_minute``."""
        moments = np.arange(minutes, dtype=float)
        factor = np.ones(minutes)
        amplitude, period = self.throughput_wave
        if amplitude > 0:
            factor *= 1.0 + amplitude * np.sin(2 * np.pi * moments / period)
        for start, duration, slower, repeat in self.slowdowns:
            since = moments - start
            inside = (since >= 0) & ((since % repeat if repeat else since) < duration)
            factor = np.where(inside, factor * slower, factor)
        return factor


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
    #: SLO-violation minutes over the partitions whose arrivals stay within one instance's
    #: throughput in every minute (``Physics.servable``); ``None`` when every partition is.
    servable_partitions_violation_minutes: int | None = None
    #: Minutes in which a partition's oldest event is past the SLO while an instance of its own
    #: would have kept it within (``Physics``'s dedicated ages): the violations some count could
    #: have avoided. ``None`` when every partition is servable.
    avoidable_violation_minutes: int | None = None
    #: Per minute, the oldest event's age over the partitions an instance of their own would have
    #: kept within the SLO that minute (what ``avoidable_violation_minutes`` counts); ``None`` when
    #: every partition is servable (then it is ``age``).
    reachable_age: np.ndarray | None = field(repr=False, default=None)

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
            **({} if self.servable_partitions_violation_minutes is None else {
                "servable_partitions_violation_minutes": self.servable_partitions_violation_minutes,
                "servable_partitions_meet_slo": self.servable_partitions_violation_minutes
                <= scenario.max_violation_fraction * self.minutes}),
            **({} if self.avoidable_violation_minutes is None else {
                "avoidable_violation_minutes": self.avoidable_violation_minutes}),
        }


def scored_result(scenario: Scenario, *, algorithm: str, knob: str, score_from: int, arrivals: np.ndarray,
                  capacity: np.ndarray, serving: np.ndarray, backlog: np.ndarray, age: np.ndarray,
                  scale_actions: int, final_backlog: float, servable_age: np.ndarray | None = None,
                  reachable_age: np.ndarray | None = None) -> RunResult:
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
        servable_partitions_violation_minutes=(int((servable_age[scored] > scenario.slo_minutes).sum())
                                               if servable_age is not None else None),
        avoidable_violation_minutes=(int((reachable_age[scored] > scenario.slo_minutes).sum())
                                     if reachable_age is not None else None),
        reachable_age=reachable_age,
    )
