"""The SLO mode on a Service Bus queue: the same goal as ``slo.py`` (keep the oldest unprocessed
message younger than the SLO, scale in to the cheapest count that holds), read from what a queue
offers instead of sequence numbers and checkpoints.

- The oldest message's age is read directly: the collector peeks the queue's first message and
  the sample carries its enqueued time (no checkpoint delay to learn).
- Arrival and completion rates come from Azure Monitor (``IncomingMessages``,
  ``CompleteMessage`` per minute); they trail by a minute or two, so the forecast takes the
  larger of the window's mean and the latest minute, raised by ``headroom``.
- All instances compete for one queue, so ``n`` instances serve ``n`` times the per-instance
  throughput: no partition ownership caps a count, every count in the bounds is useful.
- The per-instance throughput is learned from intervals where the queue stayed busy: completions
  per minute over the ready instances (``interval_throughput``, which the engine calls for
  samples without partitions).

Several queues in one target are pooled (the instances serve them all): arrivals and backlogs
add up and the oldest age is the oldest of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scaling.domain import slo_kernel as kernel
from scaling.domain.decisions import DOWN, HOLD, UP
from scaling.domain.policy import TargetPolicy
from scaling.domain.proposal import Proposal, Situation, scale_out_drain, timing
from scaling.domain.samples import MetricSample, SourceReading

KIND = "servicebus"
NO_RATE = 1e-9
#: Azure Monitor reports a minute one to three minutes late: completions teach the throughput only
#: when the capacity was the same over this long before the sample (else they belong to another count).
RATE_STEADY_SECONDS = 300.0


def is_queue_target(target: TargetPolicy) -> bool:
    """Whether the SLO mode reads this target as queues (the policy never mixes kinds in mode slo)."""
    return bool(target.sources) and all(source.kind == KIND for source in target.sources)


def _queues(sample: MetricSample) -> list[SourceReading]:
    return [source for source in sample.sources if source.ok and source.kind == KIND and source.active_messages is not None]


@dataclass(frozen=True, slots=True)
class QueueOutlook:
    """What the engine knows of a target's queues at the latest sample: arrival rates (messages/s)
    over the rate window and at the latest sample (``None`` when Azure Monitor had no complete
    minute yet), the active messages and the oldest one's age (s)."""

    arrival_rate: float | None
    recent_arrival_rate: float | None
    completion_rate: float | None
    backlog: float
    age_seconds: float


def _pooled_rate(queues: Sequence[SourceReading], field: str) -> float | None:
    values = [getattr(queue, field) for queue in queues]
    known = [value for value in values if value is not None]
    return sum(known) / 60.0 if known else None


def queue_outlook(samples: Sequence[MetricSample], rate_window_seconds: float) -> QueueOutlook | None:
    """The latest sample's queues pooled, their rates averaged over the window (``None`` when the
    latest sample read no queue)."""
    latest = samples[-1]
    queues = _queues(latest)
    if not queues:
        return None
    window = [sample for sample in samples
              if (latest.collected_at - sample.collected_at).total_seconds() < rate_window_seconds]
    rates = [rate for rate in (_pooled_rate(_queues(sample), "incoming_per_minute") for sample in window) if rate is not None]
    return QueueOutlook(
        arrival_rate=sum(rates) / len(rates) if rates else None,
        recent_arrival_rate=_pooled_rate(queues, "incoming_per_minute"),
        completion_rate=_pooled_rate(queues, "completed_per_minute"),
        backlog=float(sum(queue.active_messages or 0 for queue in queues)),
        age_seconds=max(queue.oldest_age_seconds(latest.collected_at) for queue in queues),
    )


def interval_throughput(samples: Sequence[MetricSample], ready_capacity: int) -> tuple[float | None, bool]:
    """Messages per second per ready instance at the latest sample, and whether the queue was busy.

    The completion rate is Azure Monitor's latest complete minute, which trails the sample, so it
    counts only when the capacity was the same in every sample of the last ``RATE_STEADY_SECONDS``.
    Only a busy queue tells the real rate: the interval counts as saturated when the queue held more
    than a minute's arrivals and more messages than instances at both of the last two samples
    (every instance had work). Otherwise the rate is a lower bound (the engine keeps it as the
    throughput floor).
    """
    earlier, later = samples[-2], samples[-1]
    queues_before, queues_after = _queues(earlier), _queues(later)
    completed = _pooled_rate(queues_after, "completed_per_minute")
    if not queues_before or not queues_after or completed is None or ready_capacity <= 0:
        return None, False
    recent = [s for s in samples if (later.collected_at - s.collected_at).total_seconds() <= RATE_STEADY_SECONDS]
    if any(s.capacity != later.capacity for s in recent) or len(recent) < 2:
        return None, False
    arrivals_per_minute = (_pooled_rate(queues_after, "incoming_per_minute") or 0.0) * 60.0
    busy = min(sum(q.active_messages or 0 for q in queues_before), sum(q.active_messages or 0 for q in queues_after))
    saturated = completed > 0 and busy > max(arrivals_per_minute, ready_capacity)
    return completed / ready_capacity, saturated


def age_after(age: float, backlog: float, arrival_rate: float, service_rate: float, seconds: float) -> float:
    """The oldest message's age after ``seconds`` at constant rates (a fluid model of a FIFO queue):
    the head waits one second per second and moves ``service / arrivals`` seconds of arrival time
    per second; it is 0 once the backlog and what arrives meanwhile are served."""
    if seconds <= 0:
        return age
    if service_rate * seconds >= backlog + arrival_rate * seconds:
        return 0.0
    if arrival_rate <= NO_RATE:
        return age + seconds
    if age <= 0 and service_rate >= arrival_rate:
        return 0.0
    return max(age + (1.0 - service_rate / arrival_rate) * seconds, 0.0)


def _throughput_unknown(target: TargetPolicy, situation: Situation, outlook: QueueOutlook) -> Proposal:
    capacity, ready = situation.capacity, situation.ready_capacity
    limit = target.slo.max_event_age_seconds - target.slo.safety_seconds
    if ready < capacity:
        return Proposal(None, HOLD, "throughput_unknown_waiting",
                        (f"per-instance throughput not known yet; waiting for {capacity - ready} new instances",), {})
    if outlook.backlog > 0 and outlook.age_seconds > limit / 2:
        return Proposal(capacity + target.scale_up.size(capacity), UP, "throughput_unknown_queue_aging",
                        (f"per-instance throughput not learned yet; the oldest message is {outlook.age_seconds:.0f}s old "
                         f"(half the {limit:.0f}s limit is {limit / 2:.0f}s)",), {})
    return Proposal(None, HOLD, "throughput_unknown",
                    ("per-instance throughput not learned yet (needs a minute with the queue busy)",), {})


def propose(target: TargetPolicy, situation: Situation) -> Proposal:
    """Scale out when the queue's oldest message would pass the SLO before new instances help;
    otherwise scale in to the smallest count expected to hold ``min_dwell_seconds``."""
    samples, capacity, ready = situation.samples, situation.capacity, situation.ready_capacity
    slo, throughput, counts = target.slo, situation.throughput, situation.counts
    latest = samples[-1]
    outlook = queue_outlook(samples, slo.rate_window_seconds)
    if outlook is None:
        return Proposal(None, HOLD, "no_queue_data", ("no Service Bus queue read in the latest sample",), {})
    if throughput is None or throughput <= 0:
        return _throughput_unknown(target, situation, outlook)

    clock = timing(target, situation)
    limit, interval, since_latest, pending_seconds = clock.limit, clock.interval, clock.since_latest, clock.pending_seconds
    react = since_latest + interval + slo.provisioning_delay_seconds
    known = [rate for rate in (outlook.arrival_rate, outlook.recent_arrival_rate) if rate is not None]
    if not known:
        # No complete minute from Azure Monitor yet: the age alone can still call for capacity.
        if outlook.age_seconds > limit:
            return Proposal(capacity + target.scale_up.size(capacity), UP, "queue_age_over_limit",
                            (f"oldest message {outlook.age_seconds:.0f}s old (limit {limit:.0f}s); "
                             "arrival rate not reported by Azure Monitor yet",), {"oldest_age_seconds": outlook.age_seconds})
        return Proposal(None, HOLD, "queue_rates_unknown",
                        ("holding: Azure Monitor has not reported the queue's arrival rate yet",),
                        {"oldest_age_seconds": round(outlook.age_seconds, 1)})
    forecast = max(known) * (1.0 + slo.headroom)
    first = min(pending_seconds, react)
    predicted = age_after(outlook.age_seconds, outlook.backlog, forecast, ready * throughput, first)
    predicted = age_after(predicted, outlook.backlog, forecast, capacity * throughput, react - first)
    arrivals = outlook.arrival_rate if outlook.arrival_rate is not None else forecast
    metrics = {
        "arrival_rate": round(arrivals, 3),
        "completion_rate": None if outlook.completion_rate is None else round(outlook.completion_rate, 3),
        "oldest_age_seconds": round(outlook.age_seconds, 1),
        "predicted_age_seconds": round(predicted, 1),
        "age_limit_seconds": limit,
        "reaction_seconds": round(react, 1),
    }
    rates = f"arrivals {arrivals:.1f}/s, {throughput:.2f}/s per instance"

    if predicted > limit:
        # Serve the forecast and drain what will have piled up by the time new instances serve.
        # (the kernel's rules, on plain numbers: the drain and the need are the Event Hubs mode's)
        drain_seconds, drain_note = scale_out_drain(target, situation, predicted)
        needed = float(kernel.scale_out_need(forecast, outlook.backlog, slo.provisioning_delay_seconds, since_latest,
                                             slo.safety_seconds, drain_seconds))
        wanted = next((count for count in counts if count > capacity and count * throughput >= needed), counts[-1])
        metrics["drain_seconds"] = round(drain_seconds, 1)
        return Proposal(wanted, UP, "slo_at_risk",
                        (f"oldest message would be {predicted:.0f}s old in {react:.0f}s (limit {limit:.0f}s); {rates}",
                         *drain_note), metrics)

    if outlook.recent_arrival_rate is None:
        return Proposal(None, HOLD, "queue_rates_unknown",
                        ("holding: no scale-in without the latest sample's arrival rate from Azure Monitor",), metrics)
    if (latest.collected_at - samples[0].collected_at).total_seconds() < slo.rate_window_seconds:
        return Proposal(None, HOLD, "too_few_samples",
                        (f"holding: rates need {slo.rate_window_seconds:.0f}s of history before any scale-in",), metrics)
    chosen, hold_seconds = None, math.inf
    for count in (count for count in counts if count < capacity):
        growth = 1.0 - count * throughput / forecast if forecast > NO_RATE else -1.0
        if growth <= 0:
            shortest = math.inf
        else:
            margin = limit - growth * (interval + slo.provisioning_delay_seconds) - outlook.age_seconds
            shortest = margin / growth if margin > 0 else 0.0
        if shortest >= slo.min_dwell_seconds:
            chosen, hold_seconds = count, shortest
            break
    if chosen is None:
        return Proposal(None, HOLD, "slo_steady",
                        (f"oldest message {outlook.age_seconds:.0f}s, predicted {predicted:.0f}s within the {limit:.0f}s "
                         f"limit; no smaller count would hold for {slo.min_dwell_seconds:.0f}s",), metrics)
    holds = "indefinitely" if math.isinf(hold_seconds) else f"for about {hold_seconds:.0f}s"
    return Proposal(chosen, DOWN, "slo_surplus",
                    (f"{chosen} instances keep the oldest message under {limit:.0f}s {holds} ({rates})",), metrics)
