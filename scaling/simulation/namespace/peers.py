"""Who sizes what in the ``namespace`` scenario (scaling/simulation/namespace/world.py):

- ``AutoInflate``: Event Hubs' own auto-inflate, as documented: it only raises TUs, when the
  namespace throttles, up to its maximum, and never lowers them. Modelled generously: in a
  throttled minute it raises at once to what that minute's offered ingress and attempted reads
  need (not one TU at a time).
- ``JointThroughputUnits``: this project's namespace target (``domain/namespace/sizing.py``:
  ingress and egress with headroom, never below the consumers' planned catch-up reads, scale-down
  only when it holds, late in the billed hour), fed the namespace's per-minute metrics.
- ``NamespaceAwareEngine``: this project's consumer engine (``domain/engine.py``, exactly as the
  benchmark's project-default) with the namespace rule: no scale-out while the namespace is
  egress bound (``egress_bound_hold``).

``run_namespace`` drives one pairing of a TU sizer and a consumer autoscaler over a trace.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from scaling.domain.decisions import ScalerState
from scaling.domain.engine import evaluate
from scaling.domain.namespace.sizing import (
    ConsumerCatchUp,
    NamespaceReading,
    NamespaceStatus,
    TuSettings,
    egress_bound_hold,
    egress_tus,
    ingress_tus,
    is_egress_bound,
    size_namespace,
)
from scaling.domain.samples import MetricSample
from scaling.simulation.namespace.world import EVENTS_PER_REQUEST, NamespaceResult, NamespaceScenario, NamespaceWorld, score
from scaling.simulation.peers.looped import EngineAutoscaler, KedaHpa, minute_time, simulated_target
from scaling.simulation.world.loop import Observation
from scaling.simulation.world.scenario import Scenario

#: The consumers' standard scenario (what ``simulated_target`` shapes the target after).
STANDARD = Scenario()


class AutoInflate:
    """Raises TUs when throttled, to what the throttled minute needed, up to ``maximum``; never lowers."""

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum

    def decide(self, world: NamespaceWorld) -> int | None:
        series, scenario = world.series, world.scenario
        throttled = series.rejected[-1] > 0 or series.read_capped[-1]
        if not throttled:
            return None
        offered = series.offered[-1] / 60.0
        fleet = world.fleet
        attempted_reads = min(fleet.backlog + 0.0, fleet.capacity(world.minute)) * scenario.groups / 60.0
        need = max(ingress_tus(offered * scenario.event_bytes, offered),
                   egress_tus(attempted_reads * scenario.event_bytes, attempted_reads))
        wanted = min(self.maximum, max(world.tus_requested + 1, math.ceil(need - 1e-9)))
        return wanted if wanted > world.tus_requested else None


class NamespaceAwareEngine(EngineAutoscaler):
    """The project's engine, holding its scale-outs while the namespace is egress bound."""

    def __init__(self, target, status: Callable[[], NamespaceStatus | None]) -> None:
        super().__init__(target)
        self.status = status
        self.held_while_bound = 0

    def decide(self, observation: Observation) -> int | None:
        sample: MetricSample = self.sample(observation)
        self.history.append(sample)
        old = self.state
        decision = evaluate(self.target, old, self.history, sample.collected_at)
        held = egress_bound_hold(decision, self.status(), old, sample.collected_at)
        if held.direction != decision.direction:
            self.held_while_bound += 1
        self.state = held.state or old
        return held.target_capacity if held.acts else None


class JointThroughputUnits:
    """The project's namespace target in the loop: ``size_namespace`` over the last hour's minutes."""

    def __init__(self, settings: TuSettings, consumers: Callable[[], list[ConsumerCatchUp]]) -> None:
        self.settings = settings
        self.consumers = consumers
        self.last_raise_at = None

    def decide(self, world: NamespaceWorld) -> int | None:
        now = minute_time(world.minute)
        hold = int(self.settings.lookback_seconds // 60) + 1
        minutes = tuple(world.minutes)[-hold:]
        reading = NamespaceReading(world.tus_requested, minutes=minutes, serving=world.tus_serving)
        decision = size_namespace(reading, self.consumers(), self.settings, now, self.last_raise_at)
        if not decision.acts:
            return None
        if decision.target_capacity > world.tus_requested:
            self.last_raise_at = now
        return decision.target_capacity


def planned_reads(engine: EngineAutoscaler, groups: int) -> list[ConsumerCatchUp]:
    """Each group's planned catch-up read rate (events/s): the count it asked for times what one
    instance reads (learned, or the best rate seen so far)."""
    state: ScalerState = engine.state
    rate = state.throughput_per_instance or state.throughput_floor
    if state.capacity is None or not rate:
        return []
    return [ConsumerCatchUp(f"group-{index}", state.capacity * rate) for index in range(groups)]


@dataclass(frozen=True, slots=True)
class Pairing:
    """One row of the scenario: a TU sizer and a consumer autoscaler."""

    algorithm: str
    knob: str


def tu_settings(scenario: NamespaceScenario, **changes) -> TuSettings:
    """The namespace target's settings for the scenario: its bounds, and its producers' batch
    (``EVENTS_PER_REQUEST``, as an operator who knows their producers sets it)."""
    return replace(TuSettings(min_tus=scenario.min_tus, max_tus=scenario.max_tus,
                              events_per_throttled_request=float(EVENTS_PER_REQUEST)), **changes)


def run_namespace(arrivals: np.ndarray, scenario: NamespaceScenario, algorithm: str, knob: float | None = None, *,
                  settings: TuSettings | None = None,
                  on_minute: Callable[[NamespaceWorld, dict], None] | None = None) -> tuple[NamespaceResult, NamespaceWorld]:
    """Run ``algorithm`` (``joint``, ``autoinflate+project``, ``autoinflate+keda``; ``project-unaware``:
    our TU sizing with the consumer engine that ignores the namespace, for the egress test)."""
    world = NamespaceWorld(arrivals, scenario)
    target = simulated_target(STANDARD, name="consumers")
    status_box: dict = {"status": None}
    settings = settings or tu_settings(scenario)
    if algorithm == "joint":
        consumers = NamespaceAwareEngine(target, lambda: status_box["status"])
        sizer = JointThroughputUnits(settings, lambda: planned_reads(consumers, scenario.groups))
    elif algorithm == "project-unaware":
        consumers = EngineAutoscaler(target)
        sizer = JointThroughputUnits(settings, lambda: planned_reads(consumers, scenario.groups))
    elif algorithm == "autoinflate+project":
        consumers = EngineAutoscaler(target)
        sizer = AutoInflate(settings.max_tus)
    elif algorithm == "autoinflate+keda":
        consumers = KedaHpa(float(knob or 64), scenario.partitions)
        sizer = AutoInflate(settings.max_tus)
    else:
        raise ValueError(f"unknown namespace algorithm {algorithm!r}")
    while not world.done:
        record = world.advance()
        status_box["status"] = NamespaceStatus("namespace", f"minute-{world.minute}",
                                               is_egress_bound(record, world.tus_serving), minute_time(world.minute))
        wanted = consumers.decide(world.observe())
        if on_minute is not None:
            on_minute(world, {"egress_bound": status_box["status"].egress_bound, "consumer_wanted": wanted,
                              "consumer_before": world.fleet.requested})
        if wanted is not None:
            world.fleet.request(wanted, world.minute)
        tus = sizer.decide(world)
        if tus is not None:
            world.request_tus(tus)
    return score(world, algorithm, "" if knob is None else f"{knob:g}"), world


#: The peers of the ``namespace`` scenario and their knobs (KEDA's threshold swept over a factor of 100).
NAMESPACE_ALGORITHMS: tuple[tuple[str, tuple[float | None, ...]], ...] = (
    ("joint", (None,)),
    ("autoinflate+project", (None,)),
    ("autoinflate+keda", (300.0, 1_000.0, 3_000.0, 10_000.0, 30_000.0)),
)


def started_for(arrivals: np.ndarray, scenario: NamespaceScenario) -> NamespaceScenario:
    """The scenario with the namespace starting at the TUs its first ten minutes need with 20%
    headroom (as an operator would have created it): every algorithm starts there, so no one is
    scored on a first minute nobody could have served."""
    need = float(np.max(arrivals[:10], initial=0.0)) / scenario.ingress_events_per_tu_minute * 1.2
    return replace(scenario, initial_tus=min(max(math.ceil(need), scenario.min_tus, scenario.initial_tus), scenario.max_tus))


def run_all(arrivals: np.ndarray, scenario: NamespaceScenario, trace: str = "") -> list[dict]:
    """Every algorithm and knob of the scenario on one trace, as rows."""
    scenario = started_for(arrivals, scenario)
    rows = []
    for algorithm, knobs in NAMESPACE_ALGORITHMS:
        for knob in knobs:
            result, _ = run_namespace(arrivals, scenario, algorithm, knob)
            rows.append({"trace": trace, "scenario": "namespace", **result.row()})
    return rows


