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

import numpy as np

from scaling.domain import slo_kernel as kernel
from scaling.domain.decisions import DOWN, HOLD, UP
from scaling.domain.policy import TargetPolicy
from scaling.domain.proposal import Proposal, Situation, scale_out_drain, timing
from scaling.domain.samples import MetricSample, SourceReading
from scaling.domain.slo_kernel.queue import queue_scale_in_hold, scale_in_dwell

KIND = "servicebus"
#: Azure Monitor reports a minute one to three minutes late, and new instances serve a provisioning
#: delay (up to four minutes) after they are asked for: completions teach the throughput only when
#: the capacity was the same for longer than this before the sample (else they may count the work
#: of another count: one instance's completions over thirteen taught 1.3/s instead of 16.7/s).
RATE_STEADY_SECONDS = 420.0


def is_queue_target(target: TargetPolicy) -> bool:
    """Whether the SLO mode reads this target as queues (the policy never mixes kinds in mode slo)."""
    return bool(target.sources) and all(source.kind == KIND for source in target.sources)


def _queues(sample: MetricSample) -> list[SourceReading]:
    return [source for source in sample.sources if source.ok and source.kind == KIND and source.active_messages is not None]


def _pooled_rate(queues: Sequence[SourceReading], field: str) -> float | None:
    values = [getattr(queue, field) for queue in queues]
    known = [value for value in values if value is not None]
    return sum(known) / 60.0 if known else None


def _rate(sample: MetricSample) -> float | None:
    """The pooled Azure Monitor arrival rate a sample read (messages/s; ``None``: no minute yet)."""
    return _pooled_rate(_queues(sample), "incoming_per_minute")


def _seconds(sample: MetricSample) -> float:
    return sample.collected_at.timestamp()


@dataclass(frozen=True, slots=True)
class Readiness:
    """Which instances serve at the latest sample and when each scale-out in flight will: a
    queue shows no owners, so every scale-out is tracked on its own from the capacity the
    samples read (a count asked for after one sample serves a provisioning delay later; a
    scale-in acts at once). Another scale-out does not restart the wait of the ones before it."""

    ready: int
    #: (seconds after the latest sample, instances serving from then on), ascending.
    steps: tuple[tuple[float, int], ...] = ()

    def serving(self, offset: float) -> int:
        """Instances serving ``offset`` seconds after the latest sample (negative: before it)."""
        count = self.ready
        for at, ready in self.steps:
            if at <= offset:
                count = ready
        return count

    def services(self, throughput: float) -> list[tuple[float, float]]:
        """The service rate from each change on, as the kernel's ``age_path`` takes it."""
        return kernel.schedule_services(self.ready, self.steps, throughput)


def readiness(samples: Sequence[MetricSample], capacity: int, provisioning_seconds: float, fallback_ready: int) -> Readiness:
    """Per-scale-out readiness from the samples' capacities (``Readiness``). Before the window's
    first sample nothing is known: a count it already shows counts as ready only once a whole
    provisioning delay has passed since that sample, else as ``fallback_ready`` (the engine's)."""
    timed = [(_seconds(sample), sample.capacity) for sample in samples if sample.capacity is not None]
    if not timed:
        return Readiness(min(fallback_ready, capacity))
    first_time, first_count = timed[0]
    latest = timed[-1][0]
    # (when it was asked for, the count asked for): a change a sample shows was asked for after the one before.
    requests = [(before[0], after[1]) for before, after in zip(timed, timed[1:], strict=False) if after[1] != before[1]]

    def ready_at(moment: float) -> int:
        horizon = moment - provisioning_seconds
        count = first_count if first_time <= horizon else min(first_count, fallback_ready)
        for asked_at, asked in requests:
            count = asked if asked_at <= horizon else min(count, asked)
        return max(min(count, capacity), 0)

    ready = ready_at(latest)
    due = sorted({asked_at + provisioning_seconds - latest for asked_at, asked in requests
                  if asked_at + provisioning_seconds > latest})
    steps, previous = [], ready
    for offset in due:
        count = ready_at(latest + offset)
        if count != previous:
            steps.append((offset, count))
            previous = count
    if previous < capacity and not first_time <= latest - provisioning_seconds and fallback_ready < capacity:
        # The window starts within a provisioning delay: what it cannot place is due a delay after its start.
        steps.append((max(first_time + provisioning_seconds - latest, 0.0), capacity))
    return Readiness(ready, tuple(steps))


@dataclass(frozen=True, slots=True)
class QueueOutlook:
    """What the engine knows of a target's queues at the latest sample (rates in messages/s;
    ``None``: not known):

    - Azure Monitor's arrival rate over the rate window, at the latest sample, the lower of the
      last two (a level that lasted, not a one-minute spike) and the busiest of the last
      ``scale_in_peak_seconds``, and the trend of its readings (``slo_kernel.trend``);
    - the arrivals the active message count's growth implies over the last two intervals (the
      lower of the two): the count is read directly at every sample, so it shows a surge while
      Azure Monitor still reports minutes before it;
    - the active messages and the oldest one's age (s)."""

    arrival_rate: float | None
    recent_arrival_rate: float | None
    completion_rate: float | None
    backlog: float
    age_seconds: float
    level_rate: float | None = None
    growth_rate: float | None = None
    peak_arrival_rate: float | None = None
    rise: float = 0.0
    noise: float = 0.0

    def signals(self) -> list[float]:
        """The arrival rates known now, each a reading the forecast may rest on."""
        return [rate for rate in (self.arrival_rate, self.level_rate, self.growth_rate) if rate is not None]


def _growth_rates(samples: Sequence[MetricSample], readiness_now: Readiness, throughput: float | None) -> list[float]:
    """Arrivals per interval as the active count implies them: its growth plus what the serving
    instances completed where the queue stayed busy (more than an interval's service waiting at
    both ends), else its growth alone (a lower bound: completions are not negative)."""
    read = [(_seconds(sample), float(sum(queue.active_messages or 0 for queue in _queues(sample))), sample.capacity)
            for sample in samples if _queues(sample)]
    rates = []
    for (start, before, asked), (end, after, _) in zip(read, read[1:], strict=False):
        elapsed = end - start
        if elapsed <= 0:
            continue
        rate = max(after - before, 0.0) / elapsed
        if throughput:
            # (no more served then than were asked for then, nor than are ready now)
            service = min(readiness_now.ready, asked if asked is not None else readiness_now.ready) * throughput
            if min(before, after) > service * elapsed:
                rate = (after - before) / elapsed + service
        rates.append(max(rate, 0.0))
    return rates


def queue_outlook(samples: Sequence[MetricSample], rate_window_seconds: float, peak_seconds: float = 0.0,
                  readiness_now: Readiness | None = None, throughput: float | None = None) -> QueueOutlook | None:
    """The latest sample's queues pooled (``QueueOutlook``; ``None`` when it read no queue)."""
    latest = samples[-1]
    queues = _queues(latest)
    if not queues:
        return None
    now = _seconds(latest)
    known = [(_seconds(sample), rate) for sample in samples if (rate := _rate(sample)) is not None]
    window = [rate for moment, rate in known if now - moment < rate_window_seconds]
    peak = [rate for moment, rate in known if now - moment <= peak_seconds]
    recent = _rate(latest)
    rise = noise = 0.0
    if len(known) >= 4:
        times = np.array([moment for moment, _ in known])
        totals = np.concatenate(([0.0], np.cumsum([rate * (b - a) for (a, _), (b, rate) in zip(known, known[1:], strict=False)])))
        rise, noise = kernel.trend(times, totals)
    growth = _growth_rates(samples, readiness_now or Readiness(latest.capacity or 0), throughput)
    return QueueOutlook(
        arrival_rate=sum(window) / len(window) if window else None,
        recent_arrival_rate=recent,
        completion_rate=_pooled_rate(queues, "completed_per_minute"),
        backlog=float(sum(queue.active_messages or 0 for queue in queues)),
        age_seconds=max(queue.oldest_age_seconds(latest.collected_at) for queue in queues),
        level_rate=min(rate for _, rate in known[-2:]) if known else None,
        growth_rate=min(growth[-2:]) if len(growth) >= 2 else None,
        peak_arrival_rate=max(peak) if peak else recent,
        rise=rise,
        noise=noise,
    )


def interval_throughput(samples: Sequence[MetricSample], ready_capacity: int) -> tuple[float | None, bool]:
    """Messages per second per ready instance at the latest sample, and whether the queue was busy.

    The completion rate is Azure Monitor's latest complete minute, which trails the sample, so it
    measures the rate only when the capacity was the same in every sample of the last
    ``RATE_STEADY_SECONDS`` and the one before them (the change is older than that). Only a busy queue tells the real rate: the interval counts as
    saturated when the queue held more than a minute's arrivals and more messages than instances
    at both of the last two samples (every instance had work). Otherwise the rate is a lower bound
    (the engine keeps it as the throughput floor): while the capacity changed, over the most
    instances any sample of that stretch asked for (no more served the minute it counts), so a
    count that climbs does not keep the bound from rising.
    """
    earlier, later = samples[-2], samples[-1]
    queues_before, queues_after = _queues(earlier), _queues(later)
    completed = _pooled_rate(queues_after, "completed_per_minute")
    if not queues_before or not queues_after or completed is None or ready_capacity <= 0:
        return None, False
    recent = [s for s in samples if (later.collected_at - s.collected_at).total_seconds() <= RATE_STEADY_SECONDS]
    older = samples[-len(recent) - 1] if len(samples) > len(recent) else None
    if older is None or any(s.capacity != later.capacity for s in (older, *recent)) or len(recent) < 2:
        most = max([ready_capacity, *(s.capacity or 0 for s in recent), *(s.capacity or 0 for s in samples[-len(recent) - 1:])])
        return completed / most, False
    arrivals_per_minute = (_pooled_rate(queues_after, "incoming_per_minute") or 0.0) * 60.0
    busy = min(sum(q.active_messages or 0 for q in queues_before), sum(q.active_messages or 0 for q in queues_after))
    saturated = completed > 0 and busy > max(arrivals_per_minute, ready_capacity)
    return completed / ready_capacity, saturated


def _reading(outlook: QueueOutlook, schedule: Readiness, hold: float) -> kernel.QueueReading:
    """The queue's outlook as the step reads it: a batch of one (NaN: not known)."""
    def known(rate: float | None) -> np.ndarray:
        return np.array([math.nan if rate is None else rate])

    signals = outlook.signals()
    return kernel.QueueReading(
        age=np.array([outlook.age_seconds]), backlog=np.array([outlook.backlog]), arrival_rate=known(outlook.arrival_rate),
        recent_rate=known(outlook.recent_arrival_rate), signal=known(max(signals) if signals else None),
        peak=known(outlook.peak_arrival_rate), rise=np.array([outlook.rise]), noise=np.array([outlook.noise]),
        schedules=[(schedule.ready, schedule.steps)], scale_in_hold=np.array([hold]))


def scale_in_hold_seconds(target: TargetPolicy) -> float:
    """How long the queue's scale-in must hold (``slo_kernel.queue_scale_in_hold``)."""
    return float(queue_scale_in_hold(target.slo.min_dwell_seconds, target.slo.max_actions_per_hour))


def propose(target: TargetPolicy, situation: Situation) -> Proposal:
    """Scale out when the queue's oldest message would pass the SLO before new instances help;
    otherwise scale in to the smallest count expected to hold ``min_dwell_seconds``.

    It reads the samples into a ``slo_kernel.QueueReading`` (a batch of one) for
    ``slo_kernel.slo_step``, which decides, and words the outcome."""
    samples, capacity = situation.samples, situation.capacity
    slo, throughput, counts = target.slo, situation.throughput, situation.counts
    schedule = readiness(samples, capacity, slo.provisioning_delay_seconds, situation.ready_capacity)
    outlook = queue_outlook(samples, slo.rate_window_seconds, slo.scale_in_peak_seconds, schedule, throughput)
    if outlook is None:
        return Proposal(None, HOLD, "no_queue_data", ("no Service Bus queue read in the latest sample",), {})
    clock = timing(target, situation)
    limit, interval = clock.limit, clock.interval
    known = throughput is not None and throughput > 0
    step_state = kernel.StepState(
        throughput=np.array([float(throughput) if known else math.nan]), measured=np.array([situation.throughput_measured]),
        capacity=np.array([capacity]), ready=np.array([schedule.ready]), pending_seconds=np.zeros(1),
        delay=np.array([math.nan]), stalling=np.zeros(1, dtype=bool), up_size=np.array([target.scale_up.size(capacity)]),
        below=np.array([sum(1 for count in counts if count < capacity)]), backlog_total=np.zeros(1),
        previous_backlog_total=np.zeros(1), unowned=np.zeros(1, dtype=np.int64), pause=np.array([math.nan]),
        # (a queue falls behind when its oldest message passes half the limit: its age is read directly)
        falling_behind=np.array([outlook.backlog > 0 and outlook.age_seconds > limit / 2]))
    top = max(capacity, counts[-1]) + 1
    outcome = kernel.slo_step(
        [], step_state, kernel.StepKnobs.one(slo), kernel.StepCounts.one(tuple(counts), top), interval=interval,
        since_latest=clock.since_latest,
        enough_history=(samples[-1].collected_at - samples[0].collected_at).total_seconds() >= slo.rate_window_seconds,
        stall_readings=lambda: None, queue=_reading(outlook, schedule, scale_in_hold_seconds(target)))
    return _proposal(target, situation, outlook, schedule, outcome, limit)


def _proposal(target: TargetPolicy, situation: Situation, outlook: QueueOutlook, schedule: Readiness,
              outcome: kernel.StepOutcome, limit: float) -> Proposal:
    """The step's outcome for the queue as a proposal: the count, the reasons, the metrics.

    Long for the words: each outcome says why in its own sentence."""
    slo, capacity, throughput = target.slo, situation.capacity, situation.throughput
    code = int(outcome.reason[0])
    reason_code = kernel.REASONS[code]
    direction = (DOWN, HOLD, UP)[int(outcome.direction[0]) + 1]  # (the step's -1, 0, 1)
    wanted = None if direction == HOLD else int(outcome.wanted[0])
    if code == kernel.UNKNOWN_WAITING:
        return Proposal(None, HOLD, reason_code, (f"per-instance throughput not known yet; waiting for "
                                                  f"{capacity - schedule.ready} new instances",), {})
    if code == kernel.UNKNOWN_GROWING:
        return Proposal(wanted, UP, "throughput_unknown_queue_aging",
                        (f"per-instance throughput not learned yet; the oldest message is {outlook.age_seconds:.0f}s old "
                         f"(half the {limit:.0f}s limit is {limit / 2:.0f}s)",), {})
    if code == kernel.UNKNOWN:
        return Proposal(None, HOLD, reason_code,
                        ("per-instance throughput not learned yet (needs a minute with the queue busy)",), {})
    predicted, react = float(outcome.predicted_age[0]), float(outcome.react[0])
    if math.isnan(predicted):  # (Azure Monitor has reported no complete minute yet)
        if direction == UP:
            return Proposal(wanted, UP, reason_code,
                            (f"oldest message {outlook.age_seconds:.0f}s old (limit {limit:.0f}s); "
                             "arrival rate not reported by Azure Monitor yet",), {"oldest_age_seconds": outlook.age_seconds})
        return Proposal(None, HOLD, reason_code,
                        ("holding: Azure Monitor has not reported the queue's arrival rate yet",),
                        {"oldest_age_seconds": round(outlook.age_seconds, 1)})
    signals = outlook.signals()
    forecast = max(signals) * (1.0 + slo.headroom)
    arrivals = outlook.arrival_rate if outlook.arrival_rate is not None else max(signals)
    metrics = {
        "arrival_rate": round(arrivals, 3),
        "completion_rate": None if outlook.completion_rate is None else round(outlook.completion_rate, 3),
        "growth_rate": None if outlook.growth_rate is None else round(outlook.growth_rate, 3),
        "oldest_age_seconds": round(outlook.age_seconds, 1),
        "predicted_age_seconds": round(predicted, 1),
        "age_limit_seconds": limit,
        "reaction_seconds": round(react, 1),
        "ready_instances": schedule.ready,
    }
    rates = f"arrivals {arrivals:.1f}/s, {throughput:.2f}/s per instance"
    if outlook.growth_rate is not None and outlook.growth_rate * (1.0 + slo.headroom) >= forecast:
        rates += f" (the active count's growth says {outlook.growth_rate:.1f}/s)"
    at_risk = not math.isnan(float(outcome.need[0]))
    if at_risk:
        _, drain_note = scale_out_drain(target, situation, predicted)
        metrics["drain_seconds"] = round(float(outcome.drain_seconds[0]), 1)
        if code == kernel.IN_FLIGHT:
            return Proposal(None, HOLD, reason_code,
                            (f"oldest message would be {predicted:.0f}s old in {react:.0f}s (limit {limit:.0f}s) while "
                             f"{capacity - schedule.ready} instances start; the {capacity} asked for serve the "
                             f"{float(outcome.need[0]):.1f}/s needed ({rates})", *drain_note), metrics)
        return Proposal(wanted, UP, reason_code,
                        (f"oldest message would be {predicted:.0f}s old in {react:.0f}s (limit {limit:.0f}s); {rates}",
                         *drain_note), metrics)
    if code == kernel.RATES_UNKNOWN:
        return Proposal(None, HOLD, reason_code,
                        ("holding: no scale-in without the latest sample's arrival rate from Azure Monitor",), metrics)
    if code == kernel.TOO_FEW_SAMPLES:
        return Proposal(None, HOLD, reason_code,
                        (f"holding: rates need {slo.rate_window_seconds:.0f}s of history before any scale-in",), metrics)
    if code == kernel.AGE_OVER_LIMIT:
        return Proposal(None, HOLD, reason_code,
                        (f"holding: the oldest message is {outlook.age_seconds:.0f}s old, past the {limit:.0f}s limit; "
                         "no scale-in until it is back under (a missed SLO is no surplus)",), metrics)
    if code == kernel.IN_FLIGHT:
        return Proposal(None, HOLD, reason_code,
                        (f"holding: {capacity - schedule.ready} of {capacity} instances not serving yet; "
                         "no scale-in before they show what they do",), metrics)
    calm = float(outcome.calm_rate[0])
    metrics["calm_rate"] = round(calm, 3)
    if code == kernel.STEADY:
        held = scale_in_dwell(slo.min_dwell_seconds, scale_in_hold_seconds(target), outlook.rise)
        return Proposal(None, HOLD, reason_code,
                        (f"oldest message {outlook.age_seconds:.0f}s, predicted {predicted:.0f}s within the {limit:.0f}s "
                         f"limit; no smaller count would hold for {held:.0f}s at {calm:.1f}/s",), metrics)
    hold_seconds = float(outcome.hold_seconds[0])
    lasting = "indefinitely" if math.isinf(hold_seconds) else f"for about {hold_seconds:.0f}s"
    return Proposal(wanted, DOWN, reason_code,
                    (f"{wanted} instances keep the oldest message under {limit:.0f}s {lasting} at {calm:.1f}/s ({rates})",),
                    metrics)
