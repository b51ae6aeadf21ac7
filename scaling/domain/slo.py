"""The SLO-driven, rate-aware mode (the project's default).

Backlog alone is a late and noisy signal. The collected sequence numbers also tell the arrival
rate per partition and, together with the checkpoints, how long the oldest unprocessed event has
waited. With the learned per-instance throughput, the engine predicts each partition's oldest
event age under a candidate capacity (a fluid model: the age grows by ``1 - service/arrivals``
per second) and:

- scales out only when, without acting now, the age would pass the SLO minus a safety margin
  before new instances could help (next evaluation + provisioning delay);
- scales out to the smallest allowed count that serves the forecast arrivals and drains what
  piled up;
- scales in to the smallest allowed count that is expected to hold for ``min_dwell_seconds``
  before the age would call for a scale-out again. A count that serves *less* than the arrival
  rate is allowed: the backlog then grows slowly within the SLO budget, and the next scale-out
  drains it. Alternating between two neighbouring counts this way costs what the arrivals need
  on average instead of the next count up, while the dwell time bounds how often it acts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from scaling.domain.decisions import DOWN, HOLD, UP, ScalerState
from scaling.domain.engine import Proposal
from scaling.domain.lag import partitions_per_instance
from scaling.domain.policy import TargetPolicy
from scaling.domain.samples import MetricSample

NO_RATE = 1e-9
#: How fast the learned checkpoint delay may creep up per evaluation (seconds), and its ceiling
#: as a fraction of the SLO: a delay is learned from the lowest ages seen, so it must not drift
#: far while consumers stay saturated.
CHECKPOINT_DELAY_DRIFT = 0.5
CHECKPOINT_DELAY_CEILING = 0.25


@dataclass(frozen=True, slots=True)
class PartitionOutlook:
    """What the engine knows of one partition: its arrival rates, backlog and oldest-event age."""

    key: str
    arrival_rate: float
    recent_arrival_rate: float
    backlog: int
    age_seconds: float


def _seconds(moment: datetime) -> float:
    return moment.timestamp()


def oldest_event_age(times: Sequence[float], last_enqueued: Sequence[int], checkpoint: int | None,
                     beginning: int, arrival_rate: float) -> float:
    """Seconds the oldest unprocessed event has waited at the last sample time.

    The oldest unprocessed event has sequence number ``checkpoint + 1``; its arrival time is
    read off the history of last-enqueued sequence numbers (interpolated between samples, or
    extrapolated at the arrival rate when it is older than the history).
    """
    oldest = (checkpoint + 1) if checkpoint is not None and checkpoint >= 0 else max(beginning, 0)
    if not last_enqueued or last_enqueued[-1] < oldest:
        return 0.0
    for index, position in enumerate(last_enqueued):
        if position >= oldest:
            if index == 0:
                rate = max(arrival_rate, NO_RATE)
                arrived = times[0] - (position - oldest) / rate
            else:
                previous = last_enqueued[index - 1]
                span = max(position - previous, 1)
                arrived = times[index - 1] + (oldest - previous) / span * (times[index] - times[index - 1])
            return max(times[-1] - arrived, 0.0)
    return 0.0


def partition_outlooks(samples: Sequence[MetricSample], rate_window_seconds: float) -> dict[str, list[PartitionOutlook]]:
    """Per Event Hubs source, each partition's rates, backlog and age from the samples."""
    latest = samples[-1]
    outlooks: dict[str, list[PartitionOutlook]] = {}
    latest_time = _seconds(latest.collected_at)
    for source in latest.sources:
        if not source.ok or not source.partitions:
            continue
        series = [(s.collected_at, next((x for x in s.sources if x.name == source.name and x.ok), None)) for s in samples]
        series = [(_seconds(time), reading) for time, reading in series if reading is not None]
        times = [time for time, _ in series]
        base_index = 0
        for index, time in enumerate(times):
            if latest_time - time >= rate_window_seconds:
                base_index = index
        recent_index = max(len(times) - 2, 0)
        by_partition = [(time, {p.partition_id: p.last_enqueued for p in reading.partitions}) for time, reading in series]
        result = []
        for partition in source.partitions:
            positions = []
            position_times = []
            for time, readings in by_partition:
                position = readings.get(partition.partition_id)
                if position is not None:
                    positions.append(position)
                    position_times.append(time)

            def rate_since(index: int, positions=positions, position_times=position_times) -> float:
                index = min(index, len(positions) - 1)
                elapsed = position_times[-1] - position_times[index]
                if elapsed <= 0:
                    return 0.0
                return max(positions[-1] - positions[index], 0) / elapsed

            arrival = rate_since(base_index)
            recent = rate_since(recent_index)
            age = oldest_event_age(position_times, positions, partition.checkpoint, partition.beginning, max(arrival, recent))
            result.append(PartitionOutlook(f"{source.name}/{partition.partition_id}", arrival, recent, partition.backlog, age))
        outlooks[source.name] = result
    return outlooks


def predicted_age(age: float, backlog: float, arrival_rate: float, service_rate: float, seconds: float) -> float:
    """The oldest event's age after ``seconds`` at a constant arrival and service rate (fluid model)."""
    if seconds <= 0:
        return age
    if arrival_rate <= NO_RATE:
        return 0.0 if service_rate * seconds >= backlog else age + seconds
    growth = 1.0 - service_rate / arrival_rate
    if age <= 0 and growth <= 0:
        return 0.0
    return max(age + growth * seconds, 0.0)


def service_rate(partitions: int, instances: int, throughput_per_instance: float) -> float:
    """Events per second one partition gets when its owner is shared evenly (the worst case)."""
    return throughput_per_instance / partitions_per_instance(partitions, instances)


def _sample_interval(samples: Sequence[MetricSample]) -> float:
    if len(samples) < 2:
        return 60.0
    gaps = sorted((b.collected_at - a.collected_at).total_seconds() for a, b in zip(samples, samples[1:], strict=False))
    return max(gaps[len(gaps) // 2], 1.0)


def slo_proposal(target: TargetPolicy, samples: Sequence[MetricSample], now: datetime, capacity: int,
                 ready_capacity: int, state: ScalerState, throughput: float | None, counts: Sequence[int]) -> Proposal:
    slo = target.slo
    latest = samples[-1]
    if throughput is None or throughput <= 0:
        previous = samples[-2].backlog if len(samples) >= 2 else 0
        if ready_capacity < capacity:
            return Proposal(None, HOLD, "throughput_unknown_waiting",
                            (f"per-instance throughput not known yet; waiting for {capacity - ready_capacity} new instances",), {})
        if latest.backlog > 0 and latest.backlog > previous:
            return Proposal(capacity + target.scale_up.size(capacity), UP, "throughput_unknown_backlog_growing",
                            (f"per-instance throughput not learned yet; backlog grew {previous} -> {latest.backlog}",), {})
        return Proposal(None, HOLD, "throughput_unknown",
                        ("per-instance throughput not learned yet (needs an interval with backlog on every partition)",), {})

    outlooks = partition_outlooks(samples, slo.rate_window_seconds)
    if not outlooks:
        return Proposal(None, HOLD, "no_partition_data", ("no Event Hubs source with partitions in the latest sample",), {})

    limit = slo.max_event_age_seconds - slo.safety_seconds
    interval = _sample_interval(samples)
    since_latest = max((now - latest.collected_at).total_seconds(), 0.0)
    react = since_latest + interval + slo.provisioning_delay_seconds
    pending_seconds = 0.0
    if state.pending_ready_at is not None and ready_capacity < capacity:
        pending_seconds = max((state.pending_ready_at - latest.collected_at).total_seconds(), 0.0)
    enough_history = (latest.collected_at - samples[0].collected_at).total_seconds() >= slo.rate_window_seconds

    def forecast(outlook: PartitionOutlook) -> float:
        return max(outlook.arrival_rate, outlook.recent_arrival_rate) * (1.0 + slo.headroom)

    def age_under_current_plan(outlook: PartitionOutlook, partitions: int, seconds: float) -> float:
        first = min(pending_seconds, seconds)
        age = predicted_age(outlook.age_seconds, outlook.backlog, forecast(outlook),
                            service_rate(partitions, ready_capacity, throughput), first)
        return predicted_age(age, outlook.backlog, forecast(outlook),
                             service_rate(partitions, capacity, throughput), seconds - first)

    # Checkpoints trail the consumers, so even idle consumers show an oldest event as old as the
    # checkpoint delay. Learn that delay as the floor of observed ages and read ages net of it.
    observed_worst = max(o.age_seconds for group in outlooks.values() for o in group)
    previous_delay = state.checkpoint_delay_seconds
    delay = observed_worst if previous_delay is None else min(observed_worst, previous_delay + CHECKPOINT_DELAY_DRIFT)
    delay = min(delay, slo.max_event_age_seconds * CHECKPOINT_DELAY_CEILING)
    new_state = replace(state, checkpoint_delay_seconds=delay)
    outlooks = {name: [replace(o, age_seconds=max(o.age_seconds - delay, 0.0)) for o in group]
                for name, group in outlooks.items()}
    since_latest += delay
    react += delay
    worst_now = max(o.age_seconds for group in outlooks.values() for o in group)
    worst_predicted = 0.0
    for group in outlooks.values():
        for outlook in group:
            worst_predicted = max(worst_predicted, age_under_current_plan(outlook, len(group), react))
    total_rate = sum(o.arrival_rate for group in outlooks.values() for o in group)
    metrics = {
        "arrival_rate": round(total_rate, 3),
        "oldest_age_seconds": round(worst_now, 1),
        "predicted_age_seconds": round(worst_predicted, 1),
        "age_limit_seconds": limit,
        "reaction_seconds": round(react, 1),
        "checkpoint_delay_seconds": round(delay, 1),
    }

    if worst_predicted > limit:
        drain_seconds = max(slo.min_dwell_seconds / 2, slo.max_event_age_seconds)
        wanted = counts[-1]
        for count in counts:
            if count <= capacity:
                continue
            fits = True
            for group in outlooks.values():
                for outlook in group:
                    rate = forecast(outlook)
                    backlog_then = outlook.backlog + rate * (slo.provisioning_delay_seconds + since_latest)
                    needed = rate + max(backlog_then - rate * slo.safety_seconds, 0.0) / drain_seconds
                    if service_rate(len(group), count, throughput) < needed:
                        fits = False
                        break
                if not fits:
                    break
            if fits:
                wanted = count
                break
        return Proposal(wanted, UP, "slo_at_risk",
                        (f"oldest event would be {worst_predicted:.0f}s old in {react:.0f}s (limit {limit:.0f}s); "
                         f"arrivals {total_rate:.1f}/s, {throughput:.2f}/s per instance",), metrics, new_state)

    if not enough_history:
        return Proposal(None, HOLD, "too_few_samples",
                        (f"holding: rates need {slo.rate_window_seconds:.0f}s of history before any scale-in",), metrics, new_state)
    lower = [count for count in counts if count < capacity]
    chosen = None
    hold_seconds = math.inf
    for count in lower:
        shortest = math.inf
        for group in outlooks.values():
            for outlook in group:
                rate = forecast(outlook)
                serve = service_rate(len(group), count, throughput)
                if rate <= NO_RATE:
                    continue
                growth = 1.0 - serve / rate
                if growth <= 0:
                    continue
                margin = limit - growth * (interval + slo.provisioning_delay_seconds) - outlook.age_seconds
                shortest = min(shortest, margin / growth if margin > 0 else 0.0)
        if shortest >= slo.min_dwell_seconds:
            chosen, hold_seconds = count, shortest
            break
    if chosen is None:
        return Proposal(None, HOLD, "slo_steady",
                        (f"oldest event {worst_now:.0f}s, predicted {worst_predicted:.0f}s within the {limit:.0f}s limit; "
                         f"no smaller count would hold for {slo.min_dwell_seconds:.0f}s",), metrics, new_state)
    holds = "indefinitely" if math.isinf(hold_seconds) else f"for about {hold_seconds:.0f}s"
    return Proposal(chosen, DOWN, "slo_surplus",
                    (f"{chosen} instances keep the oldest event under {limit:.0f}s {holds} "
                     f"(arrivals {total_rate:.1f}/s, {throughput:.2f}/s per instance)",), metrics, new_state)
