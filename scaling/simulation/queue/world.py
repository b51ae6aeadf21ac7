"""A queue-shaped simulated world: one Service Bus queue, competing consumers on a plan, a trace.

The partitioned hub of ``physics.py`` is the wrong shape for Service Bus: a queue has no
partitions and no owners; every instance takes the next message, so ``n`` serving instances
complete up to ``n x mu`` messages a minute, first in, first out. The rest follows the same
``Scenario`` as the hub's world and is scored by ``scenario.scored_result`` like every other run:
``events_per_instance_per_minute`` as ``mu`` times the consumers' speed (``throughput_wave``,
``slowdowns``), ``provisioning_delay_minutes`` or a draw from ``provisioning_delay_range`` per
scale-out, ``instance_failures_per_day`` (an instance stops serving and is restored a provisioning
delay later; the same draws from ``seed`` as the hub's), ``initial_capacity``, ``slo_minutes``.
The partition knobs (``QUEUE_IGNORES``: partitions, skew, checkpoints, hot-spot rotation,
assignment, rebalance pause, ownership expiry) have no queue counterpart; ``simulate --source
servicebus`` refuses them as flags, and a named scenario's values for them do not apply.

What the autoscaler observes is what the Service Bus source collects (``QueueObservation``):
the active message count, the oldest active message's enqueued time (peek), and Azure Monitor's
``IncomingMessages`` and ``CompleteMessage`` for the minute ``metrics_lag_minutes`` back (the
metrics trail the queue).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol

import numpy as np

from scaling.domain.policy import SEED_STEP, Bounds, PlanSettings, SourceSettings, TargetPolicy, seed_rules
from scaling.domain.samples import MetricSample, SourceReading
from scaling.simulation.peers.looped import EPOCH, SIMULATED_PLAN, EngineAutoscaler
from scaling.simulation.world.loop import drive
from scaling.simulation.world.scenario import RunResult, Scenario, scored_result
from scaling.simulation.world.service import DRAINED

#: Azure Monitor's platform metrics usually land one to three minutes after the minute they count.
METRICS_LAG_MINUTES = 1
QUEUE_NAME = "jobs"
NAMESPACE = "sim-queue.servicebus.windows.net"
NAMESPACE_ID = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/sim/providers/"
                "Microsoft.ServiceBus/namespaces/sim-queue")


@dataclass(frozen=True, slots=True)
class QueueObservation:
    """What the autoscaler sees at the end of a minute: the queue as the Service Bus source reads it
    (times in simulated minutes; rates ``None`` until Azure Monitor has a minute to report)."""

    minute: int
    capacity: int
    active_messages: int
    oldest_enqueued_minute: float | None
    incoming_per_minute: float | None
    completed_per_minute: float | None
    true_backlog: float


#: Scenario fields a queue has no counterpart for (a named scenario's values for them do not apply).
QUEUE_IGNORES = ("partitions", "skew", "checkpoint_delay_seconds", "checkpoint_interval_seconds",
                 "hot_spot_rotation_minutes", "assignment", "rebalance_pause_seconds", "ownership_expiry_seconds")


def failure_plan(scenario: Scenario, minutes: int) -> list[int]:
    """The minutes an instance fails, drawn as the hub's world draws them (``Physics``)."""
    per_day = scenario.instance_failures_per_day
    if per_day <= 0:
        return []
    draws = np.random.default_rng([int(scenario.seed), 23])
    plan, moment = [], 0.0
    while True:
        moment += draws.exponential(1440.0 / per_day)
        if moment >= minutes:
            return plan
        plan.append(int(moment))
        draws.random()  # (which instance: any serves the one queue alike)


class QueueAutoscaler(Protocol):
    def decide(self, observation: QueueObservation) -> int | None: ...


class QueueWorld:
    """One queue and its competing consumers, one minute at a time (``advance``, ``observe``,
    ``request`` as ``World``): arrivals spread evenly within a minute, the serving instances complete
    up to ``serving x mu`` of what waits, oldest first; a scale-out serves after the provisioning
    delay, a scale-in at once."""

    def __init__(self, arrivals: np.ndarray, scenario: Scenario, *, metrics_lag_minutes: int = METRICS_LAG_MINUTES) -> None:
        if metrics_lag_minutes < 0:
            raise ValueError("metrics_lag_minutes must not be negative")
        self.scenario = scenario
        self.arrivals = np.asarray(arrivals, dtype=float)
        self.cumulative = np.concatenate(([0.0], np.cumsum(self.arrivals)))
        self.lag = metrics_lag_minutes
        minutes = len(self.arrivals)
        self.minute = 0
        self.requested = scenario.initial_capacity
        self.ready = scenario.initial_capacity
        self._pending: list[tuple[int, int]] = []  # (minute it serves from, count)
        self.speed = scenario.speed_factors(minutes)
        # The hub's draws (``Physics``): the k-th scale-out or restore takes the k-th delay; failures from their own seed.
        low, high = scenario.delay_range
        draws = np.random.default_rng([int(scenario.seed), 17])
        self._delays = draws.integers(low, high + 1, size=max(minutes, 1)) if high > low else None
        self._scale_outs = 0
        self._failures = failure_plan(scenario, minutes)
        self._restores: list[int] = []  # minutes a failed instance is back
        self.failed = 0
        self.processed = 0.0
        self.backlog = 0.0
        self.scale_actions = 0
        self.capacity_series = np.zeros(minutes, dtype=np.int64)
        self.serving_series = np.zeros(minutes, dtype=np.int64)
        self.backlog_series = np.zeros(minutes)
        self.age_series = np.zeros(minutes)
        self.completed_series = np.zeros(minutes)
        # Plain-number copies for the minute loop (numpy's per-call overhead is most of a minute's cost).
        self._arrivals, self._curve, self._speed = self.arrivals.tolist(), self.cumulative.tolist(), self.speed.tolist()
        self._completed: list[float] = []
        self._head = 1  # the curve's first point above what was processed (it only moves forward)
        self._oldest: float | None = None

    def _oldest_arrival(self) -> float:
        """When the oldest unprocessed message arrived (minutes; ``arrival_minutes`` of the
        processed position, read off the curve from where the last minute left it)."""
        curve, position, head = self._curve, self.processed, self._head
        while head < len(curve) - 1 and curve[head] <= position:
            head += 1
        self._head = head
        low, high = curve[head - 1], curve[head]
        return head - 1 + ((position - low) / max(high - low, 1e-12) if high > low else 0.0)

    @property
    def done(self) -> bool:
        return self.minute >= len(self.arrivals)

    def advance(self) -> float:
        """Process one minute; returns the oldest unprocessed message's age (minutes) at its end."""
        minute = self.minute
        for ready_at, count in [item for item in self._pending if item[0] <= minute]:
            self.ready = max(self.ready, count)
            self._pending.remove((ready_at, count))
        while self._restores and self._restores[0] <= minute:
            self._restores.pop(0)
            self.failed -= 1
        while self._failures and self._failures[0] <= minute:
            self._failures.pop(0)
            if min(self.ready, self.requested) - self.failed > 0:  # an instance serving dies; the plan restores it
                self.failed += 1
                self._restores = sorted([*self._restores, minute + self._next_delay()])
        serving = max(min(self.ready, self.requested) - self.failed, 0)
        waiting = self.backlog + self._arrivals[minute]
        completed = min(waiting, serving * self.scenario.events_per_instance_per_minute * self._speed[minute])
        self.processed += completed
        self.backlog = waiting - completed
        self.minute = now = minute + 1
        age, self._oldest = 0.0, None
        if self.backlog > DRAINED:
            self._oldest = self._oldest_arrival()
            age = now - self._oldest
        self._completed.append(completed)
        self.capacity_series[minute] = self.requested
        self.serving_series[minute] = serving
        self.backlog_series[minute] = self.backlog
        self.age_series[minute] = age
        self.completed_series[minute] = completed
        return age

    def observe(self) -> QueueObservation:
        reported = self.minute - 1 - self.lag
        return QueueObservation(
            minute=self.minute, capacity=self.requested, active_messages=round(self.backlog),
            oldest_enqueued_minute=self._oldest,
            incoming_per_minute=self._arrivals[reported] if reported >= 0 else None,
            completed_per_minute=self._completed[reported] if reported >= 0 else None,
            true_backlog=self.backlog,
        )

    def request(self, wanted: int) -> bool:
        """A scale action at the current minute; returns whether the requested count changed."""
        wanted = max(int(wanted), 1)
        if wanted == self.requested:
            return False
        if wanted > self.requested:
            self._pending.append((self.minute + self._next_delay(), wanted))
        else:
            self.ready = min(self.ready, wanted)
            self._pending = [(ready_at, min(count, wanted)) for ready_at, count in self._pending]
        self.requested = wanted
        if self.minute:
            self.scale_actions += 1
        return True

    def _next_delay(self) -> int:
        """The provisioning delay of the next scale-out or restore (minutes)."""
        if self._delays is None:
            return self.scenario.delay_range[1]
        delay = int(self._delays[self._scale_outs % len(self._delays)])
        self._scale_outs += 1
        return delay

    def result(self, *, algorithm: str = "", knob: str = "", score_from: int = 0) -> RunResult:
        """Score the minutes run so far; checks that no message was lost."""
        minutes = self.minute
        arrived = self.cumulative[minutes]
        if abs(arrived - self.processed - self.backlog) > 1e-6 * max(arrived, 1.0):
            raise AssertionError(f"messages not conserved: {arrived - self.processed - self.backlog}")
        return scored_result(self.scenario, algorithm=algorithm, knob=knob, score_from=score_from,
                             arrivals=self.arrivals[:minutes], capacity=self.capacity_series[:minutes].copy(),
                             serving=self.serving_series[:minutes].copy(), backlog=self.backlog_series[:minutes].copy(),
                             age=self.age_series[:minutes].copy(), scale_actions=self.scale_actions,
                             final_backlog=float(self.backlog))


def simulate_queue(arrivals: np.ndarray, autoscaler: QueueAutoscaler, scenario: Scenario, *, algorithm: str = "",
                   knob: str = "", score_from: int = 0, metrics_lag_minutes: int = METRICS_LAG_MINUTES,
                   on_minute: Callable[[int, QueueObservation, int | None], None] | None = None) -> RunResult:
    """Replay ``arrivals`` (messages per minute) through one queue with ``autoscaler`` in the loop."""
    return drive(QueueWorld(arrivals, scenario, metrics_lag_minutes=metrics_lag_minutes), autoscaler, scenario,
                 algorithm=algorithm, knob=knob, score_from=score_from, on_minute=on_minute)


# --- the real rule engine on a queue -------------------------------------------------------------


def minute_time(minute: float, start: datetime = EPOCH) -> datetime:
    return start + timedelta(minutes=minute)


def queue_source(name: str = QUEUE_NAME) -> SourceSettings:
    return SourceSettings(kind="servicebus", name=name, fully_qualified_namespace=NAMESPACE, queue_name=QUEUE_NAME,
                          metrics_resource_id=NAMESPACE_ID)


def queue_target(scenario: Scenario, *, name: str = "queue-slo", max_instances: int = 32, mode: str = "slo",
                 **changes) -> TargetPolicy:
    """A target over the simulated queue (bounds 1..``max_instances``; a queue has no partition cap)."""
    target = TargetPolicy(name=name, plan=PlanSettings(SIMULATED_PLAN), sources=(queue_source(),),
                          bounds=Bounds(min_instances=1, max_instances=max_instances, balanced_counts=False), mode=mode)
    return replace(target, **changes)


def queue_seed_target(scenario: Scenario, scale_up_above: float, scale_down_below: float, *,
                      max_instances: int = 32) -> TargetPolicy:
    """The seed rule on the queue's active message count: +1/-1 steps, 10-minute cooldown (``peers.seed_target``)."""
    return queue_target(scenario, name="seed", max_instances=max_instances, mode="rules",
                        rules=seed_rules(scale_up_above, scale_down_below), scale_up=SEED_STEP, scale_down=SEED_STEP,
                        preset="seed")


def queue_sample(target: str, observation: QueueObservation, source_name: str = QUEUE_NAME, *,
                 start: datetime = EPOCH) -> MetricSample:
    """The MetricSample the Service Bus source would have collected for this observation
    (``start``: the wall-clock moment of minute 0)."""
    oldest = None if observation.oldest_enqueued_minute is None else minute_time(observation.oldest_enqueued_minute, start)
    reading = SourceReading(name=source_name, kind="servicebus", active_messages=observation.active_messages,
                            oldest_enqueued_at=oldest, incoming_per_minute=observation.incoming_per_minute,
                            completed_per_minute=observation.completed_per_minute)
    return MetricSample(target=target, collected_at=minute_time(observation.minute, start), capacity=observation.capacity,
                        sources=(reading,))


class QueueEngineAutoscaler(EngineAutoscaler):
    """Drives the real ``evaluate`` with the queue's samples, keeping only the window it needs."""

    def sample(self, observation: QueueObservation) -> MetricSample:  # type: ignore[override]
        return queue_sample(self.target.name, observation, self.target.sources[0].name, start=self.start)


#: The seed rule's upper thresholds tried against the SLO mode (the benchmark's grid, in messages).
SEED_UPPER = (250, 500, 1000, 2000, 4000, 8000, 16000)


def compare_on_queue(arrivals: np.ndarray, scenario: Scenario, *, max_instances: int = 32,
                     seed_upper: tuple[float, ...] = SEED_UPPER,
                     metrics_lag_minutes: int = METRICS_LAG_MINUTES, start: datetime = EPOCH) -> dict[str, RunResult]:
    """The SLO mode and the seed rule (each upper threshold, lower one tenth of it, as the
    benchmark tries it) on the same queue and trace."""
    slo = QueueEngineAutoscaler(queue_target(scenario, max_instances=max_instances), start=start)
    runs = {"slo": simulate_queue(arrivals, slo, scenario, algorithm="slo", knob="default",
                                  metrics_lag_minutes=metrics_lag_minutes)}
    for upper in seed_upper:
        target = queue_seed_target(scenario, upper, upper / 10, max_instances=max_instances)
        runs[f"seed upper={upper:g}"] = simulate_queue(arrivals, QueueEngineAutoscaler(target, start=start), scenario,
                                                       algorithm="seed", knob=f"upper={upper:g}",
                                                       metrics_lag_minutes=metrics_lag_minutes)
    return runs
