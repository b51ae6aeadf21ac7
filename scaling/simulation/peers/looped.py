"""The algorithms the benchmark compares, each behind the simulator's ``Autoscaler`` interface.

Peers follow their documented defaults (docs/peers.md). Their own control loops run faster
than the one-minute collection (HPA every 15 s, the Functions scale controller every 10 s); they
are stepped that many times a minute on the same observation, which is all they would see.
The seed rule and the project's policies run the real rule engine, fed the same MetricSample
values the functions use.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np

from scaling.domain.decisions import Decision, ScalerState
from scaling.domain.engine import evaluate
from scaling.domain.forecast import Outlook
from scaling.domain.lag import balanced_counts, effective_capacity
from scaling.domain.policy import SEED_STEP, Bounds, PlanSettings, SourceSettings, TargetPolicy, seed_rules
from scaling.domain.samples import MetricSample, PartitionReading, SourceReading
from scaling.simulation.peers.batched import HOLD, FlinkBatch
from scaling.simulation.peers.flink import FlinkSettings
from scaling.simulation.world.loop import Observation, Scenario

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
SIMULATED_PLAN = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/sim/providers/Microsoft.Web/serverfarms/sim"


def observed_backlog(observation: Observation) -> np.ndarray:
    """Per-partition backlog from the observation with the platform's lag rules (vectorised)."""
    last, checkpoint = observation.last_enqueued, observation.checkpoint
    lag = np.where(checkpoint < 0, last + 1, last - checkpoint)
    return np.where(last < 0, 0, np.maximum(lag, 0))


def minute_time(minute: float) -> datetime:
    return EPOCH + timedelta(minutes=minute)


# --- peers --------------------------------------------------------------------------------------


class HorizontalPodAutoscaler:
    """The HPA on one AverageValue metric, stepped ``syncs_per_minute`` times on a minute's metric:
    a tolerance band, the highest recommendation of the scale-down stabilization window, and
    scale-up at most the larger of 4 replicas or 100% per sync. KEDA's scalers feed it."""

    def __init__(self, target: float, maximum: int, *, tolerance: float = 0.1,
                 stabilization_minutes: float = 5.0, syncs_per_minute: int = 4) -> None:
        self.target = target
        self.maximum = maximum
        self.tolerance = tolerance
        self.stabilization = stabilization_minutes
        self.syncs = syncs_per_minute
        self.recommendations: deque[tuple[float, int]] = deque()

    def desired(self, total: float, current: int, minute: float) -> int:
        for sync in range(self.syncs):
            moment = minute + sync / self.syncs
            ratio = total / (current * self.target)
            recommendation = current if abs(ratio - 1.0) <= self.tolerance else math.ceil(total / self.target)
            recommendation = min(max(recommendation, 1), self.maximum)
            while self.recommendations and self.recommendations[0][0] <= moment - self.stabilization:
                self.recommendations.popleft()
            self.recommendations.append((moment, recommendation))
            desired = recommendation
            if desired < current:
                desired = min(current, max(r for _, r in self.recommendations))
            if desired > current:
                desired = min(desired, max(current + 4, 2 * current))
            current = desired
        return current


class KedaHpa:
    """KEDA's azure-eventhub scaler feeding the HPA: desired = ceil(total lag / threshold)."""

    def __init__(self, threshold: float, partitions: int, **hpa) -> None:
        self.threshold = threshold
        self.partitions = partitions
        self.hpa = HorizontalPodAutoscaler(threshold, partitions, **hpa)

    def decide(self, observation: Observation) -> int | None:
        total = min(float(observed_backlog(observation).sum()), self.partitions * self.threshold)
        return self.hpa.desired(total, observation.capacity, observation.minute)


class ScaleController:
    """The Functions scale controller's votes within one minute: toward ``desired`` at most
    ``max_step`` more instances a vote, a scale-in only ``scale_in_quiet_minutes`` after the last
    scale-out. Both Functions peers (Event Hubs and Service Bus) vote through it."""

    def __init__(self, *, votes_per_minute: int = 6, max_step: int = 4, scale_in_quiet_minutes: float = 3.0) -> None:
        self.votes = votes_per_minute
        self.max_step = max_step
        self.quiet = scale_in_quiet_minutes
        self.last_scale_out = -math.inf

    def vote(self, desired: int, current: int, minute: float) -> int:
        for vote in range(self.votes):
            moment = minute + vote / self.votes
            if desired > current:
                current = min(desired, current + self.max_step)
                self.last_scale_out = moment
            elif desired < current and moment - self.last_scale_out >= self.quiet:
                current = desired
        return current


class FunctionsTargetBased:
    """Functions target-based scaling: ceil(unprocessed / target), rounded to spread partitions."""

    def __init__(self, target_per_instance: float, partitions: int, **controller) -> None:
        self.target = target_per_instance
        self.partitions = partitions
        self.counts = balanced_counts(partitions)
        self.controller = ScaleController(**controller)

    def decide(self, observation: Observation) -> int | None:
        total = float(observed_backlog(observation).sum())
        desired = max(math.ceil(total / self.target), 1)
        desired = next((count for count in self.counts if count >= desired), self.partitions)
        return self.controller.vote(desired, observation.capacity, observation.minute)


class AzureMonitorStyle:
    """One average rule per direction on backlog per instance over a 5-minute window, change by a
    count, one shared 5-minute cooldown, and the flapping check on scale-in."""

    def __init__(self, scale_out_above: float, *, scale_in_below: float | None = None, step: int = 1,
                 window_minutes: int = 5, cooldown_minutes: int = 5, maximum: int = 32) -> None:
        self.upper = scale_out_above
        self.lower = scale_out_above / 4 if scale_in_below is None else scale_in_below
        self.step = step
        self.window: deque[float] = deque(maxlen=window_minutes)
        self.cooldown = cooldown_minutes
        self.maximum = maximum
        self.last_action = -math.inf

    def decide(self, observation: Observation) -> int | None:
        total = float(observed_backlog(observation).sum())
        current = observation.capacity
        self.window.append(total)
        if len(self.window) < self.window.maxlen or observation.minute - self.last_action < self.cooldown:
            return None
        average_total = sum(self.window) / len(self.window)
        per_instance = average_total / current
        if per_instance > self.upper and current < self.maximum:
            self.last_action = observation.minute
            return min(current + self.step, self.maximum)
        if per_instance < self.lower and current > 1:
            target = max(current - self.step, 1)
            if average_total / target >= self.upper:  # flapping: the scale-in would trigger a scale-out
                return None
            self.last_action = observation.minute
            return target
        return None


class Flink:
    """The Flink Kubernetes Operator's job autoscaler on one consumer group (flink.py): the batch
    of ``batched.FlinkBatch`` with one setting, fed from the observation (the arrivals from
    the sequence numbers, the lag as collect reads it, the busy-time rates of the consumers)."""

    def __init__(self, settings: FlinkSettings, partitions: int, *, interval_minutes: int = 1) -> None:
        self.batch = FlinkBatch([settings], partitions, interval_minutes=interval_minutes)
        self.enqueued = 0  # events enqueued by the last observation

    def decide(self, observation: Observation) -> int | None:
        enqueued = int((observation.last_enqueued + 1).sum())
        arrived, self.enqueued = float(enqueued - self.enqueued), enqueued
        processed = np.array([np.nan if observation.processed is None else observation.processed])
        true_rate = np.array([np.nan if observation.true_rate_per_instance is None else observation.true_rate_per_instance])
        self.batch.measure(observation.minute, arrived, processed, true_rate)
        lag = np.array([float(observed_backlog(observation).sum())])
        wanted = int(self.batch.decide(observation.minute, np.array([observation.capacity], dtype=np.int64), lag,
                                       np.array([observation.true_backlog]))[0])
        return None if wanted == HOLD else wanted


class Clairvoyant:
    """Knows future arrivals: the smallest partition-balanced count that covers the mean arrival
    rate ahead plus the current backlog drained over SLO - 1 minutes."""

    def __init__(self, arrivals: np.ndarray, scenario: Scenario, horizon: int) -> None:
        self.cumulative = np.concatenate(([0.0], np.cumsum(arrivals)))
        self.minutes = len(arrivals)
        self.scenario = scenario
        self.horizon = horizon
        self.levels = [(effective_capacity(scenario.partitions, n, scenario.events_per_instance_per_minute), n)
                       for n in balanced_counts(scenario.partitions)]
        self.backlog = 0.0

    def _mean(self, start: int, end: int) -> float:
        start, end = min(start, self.minutes), min(end, self.minutes)
        return (self.cumulative[end] - self.cumulative[start]) / (end - start) if end > start else 0.0

    def decide(self, observation: Observation) -> int | None:
        minute, delay = observation.minute, self.scenario.provisioning_delay_minutes
        drain = observation.true_backlog / max(self.scenario.slo_minutes - 1, 1)
        need = max(self._mean(minute + delay, minute + delay + self.horizon), self._mean(minute, minute + delay + 1)) + drain
        for capacity, count in self.levels:
            if capacity >= need:
                return count
        return self.levels[-1][1]


# --- the real rule engine in the loop --------------------------------------------------------------


def simulated_target(scenario: Scenario, *, name: str = "simulated", mode: str = "slo", **changes) -> TargetPolicy:
    """A target shaped like the scenario's hub and plan (bounds from the scenario, nothing tuned)."""
    source = SourceSettings(kind="eventhub", name="hub", fully_qualified_namespace="sim.servicebus.windows.net",
                            event_hub_name="hub", checkpoint_account_url="https://sim.blob.core.windows.net")
    target = TargetPolicy(name=name, plan=PlanSettings(SIMULATED_PLAN), sources=(source,),
                          bounds=Bounds(min_instances=1, max_instances=scenario.partitions), mode=mode)
    return replace(target, **changes)


def seed_target(scenario: Scenario, scale_up_above: float, scale_down_below: float) -> TargetPolicy:
    """The seed rule exactly: +1/-1 steps on any count (no partition balancing), 10-minute cooldown."""
    target = simulated_target(scenario, name="seed", mode="rules", rules=seed_rules(scale_up_above, scale_down_below),
                              scale_up=SEED_STEP, scale_down=SEED_STEP, preset="seed")
    return replace(target, bounds=replace(target.bounds, balanced_counts=False))


def observation_sample(target: str, observation: Observation, source_name: str = "hub", *,
                       start: datetime = EPOCH) -> MetricSample:
    """The MetricSample that ``collect`` would have produced for this observation (minute 0 of
    the trace is ``start``; schedule profiles read the wall clock off it)."""
    last = observation.last_enqueued.tolist()
    checkpoints = observation.checkpoint.tolist()
    owners = observation.owners.tolist() if observation.owners is not None else None
    names = _partition_ids(len(last))
    owner_names = [None] * len(last) if owners is None else [None if owner < 0 else _instance_name(owner) for owner in owners]
    partitions = tuple(map(PartitionReading.measure, names, itertools.repeat(0, len(last)), last,
                           [checkpoint if checkpoint >= 0 else None for checkpoint in checkpoints], owner_names))
    collected_at = start + timedelta(minutes=observation.minute) if start != EPOCH else minute_time(observation.minute)
    return MetricSample(target=target, collected_at=collected_at, capacity=observation.capacity,
                        sources=(SourceReading(name=source_name, kind="eventhub", partitions=partitions,
                                               owners=observation.live_owners if owners is not None else None),))


@functools.lru_cache(maxsize=8)
def _partition_ids(partitions: int) -> tuple[str, ...]:
    """The simulated hub's partition ids, "0" up (made once: every sample names them)."""
    return tuple(str(index) for index in range(partitions))


@functools.lru_cache(maxsize=256)
def _instance_name(index: int) -> str:
    """A simulated instance's name as collect reads it off the ownership blobs."""
    return f"instance-{index}"


class EngineAutoscaler:
    """Drives the real ``evaluate`` with simulated samples, keeping only the window it needs."""

    def __init__(self, target: TargetPolicy, on_decision: Callable[[MetricSample, Decision], None] | None = None, *,
                 start: datetime = EPOCH, outlook: Callable[[Observation], Outlook] | None = None) -> None:
        self.target = target
        #: What the target's look-ahead is told each minute (``lookahead.py``; a target with
        #: ``forecast: shadow`` or ``on``), as the evaluate service builds it from the stored profile.
        self.outlook = outlook
        self.start = start
        self.state = ScalerState(target=target.name)
        window_minutes = max(int(target.window_seconds // 60) + 2, 3)
        self.history: deque[MetricSample] = deque(maxlen=window_minutes)
        self.on_decision = on_decision

    def sample(self, observation: Observation) -> MetricSample:
        """What ``collect`` would have produced for the observation."""
        return observation_sample(self.target.name, observation, start=self.start)

    def decide(self, observation: Observation) -> int | None:
        sample = self.sample(observation)
        self.history.append(sample)
        outlook = self.outlook(observation) if self.outlook is not None else None
        decision = evaluate(self.target, self.state, self.history, sample.collected_at, outlook=outlook)
        self.state = decision.state or self.state
        if self.on_decision is not None:
            self.on_decision(sample, decision)
        return decision.target_capacity if decision.acts else None
