"""What a policy mode sees and what it proposes: the types the modes (``rules.py``, ``slo.py``)
share with the engine, kept apart from both so that neither imports the other."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from scaling.domain.decisions import ScalerState
from scaling.domain.policy import TargetPolicy
from scaling.domain.samples import MetricSample


@dataclass(frozen=True, slots=True)
class Situation:
    """The engine's reading of one evaluation, handed to the mode: the window's samples (oldest
    first, de-duplicated), the capacity asked for and the part of it serving already, the state
    with this evaluation's learning folded in, the per-instance throughput to plan with (``None``
    when unknown) and the instance counts the policy allows (ascending)."""

    samples: Sequence[MetricSample]
    now: datetime
    capacity: int
    ready_capacity: int
    state: ScalerState
    throughput: float | None
    counts: Sequence[int]
    #: Where ``throughput`` comes from: ``learned``, ``configured`` or ``lower bound`` (a floor, not a measure).
    throughput_source: str | None = None
    #: The samples' ``sample_interval``, where the engine worked it out already (None: from the samples).
    interval: float | None = None

    @property
    def throughput_measured(self) -> bool:
        """Whether ``throughput`` is a measure (learned or configured), not only a lower bound."""
        return self.throughput_source in ("learned", "configured")


@dataclass(frozen=True, slots=True)
class Proposal:
    """One mode's wish before bounds and cooldowns: a capacity, or ``None`` to hold."""

    capacity: int | None
    direction: str
    reason_code: str
    reasons: tuple[str, ...]
    metrics: dict
    state: ScalerState | None = None


@dataclass(frozen=True, slots=True)
class Timing:
    """The clock of one evaluation, as the SLO modes read it (seconds): the age limit (the SLO
    less the safety margin), the usual gap between samples, the time since the latest sample,
    and how long the scale-out in flight still needs before its instances serve."""

    limit: float
    interval: float
    since_latest: float
    pending_seconds: float


def sample_interval(samples: Sequence[MetricSample]) -> float:
    """The median gap between samples (60 s until there are two)."""
    if len(samples) < 2:
        return 60.0
    gaps = sorted((b.collected_at - a.collected_at).total_seconds() for a, b in zip(samples, samples[1:], strict=False))
    return max(gaps[len(gaps) // 2], 1.0)

def serving_instances(sample: MetricSample, capacity: int) -> int | None:
    """How many of ``capacity`` instances serve, as the latest collected ownership shows: all of
    them once a source has as many live owners (or every partition has one, when there are more
    instances than partitions), else its live owners (the fewest over the sources). New instances
    count as ready when they own partitions, not when the provisioning delay is assumed over, and
    an instance that failed stops counting when the survivors take its partitions, and when no
    instance is left (no live owner at all) none serves. ``None`` when a source with partitions
    collects no ownership (no ownership to go by). Here, not in the engine, so that the SLO mode
    reads the same count."""
    from scaling.domain import slo_kernel  # (numpy: loaded on the first evaluation, not at start-up)

    serving = None
    for source in sample.sources:
        if not source.ok or not source.partitions:
            continue
        if source.owners is None:
            return None
        count = int(slo_kernel.serving_count(capacity, source.owners, len(source.partitions)))
        serving = count if serving is None else min(serving, count)
    return serving


def timing(target: TargetPolicy, situation: Situation) -> Timing:
    from scaling.domain import slo_kernel  # (numpy: loaded on the first evaluation, not at start-up)

    latest, state = situation.samples[-1], situation.state
    interval = sample_interval(situation.samples) if situation.interval is None else situation.interval
    # Instances not serving yet: expected when the provisioning delay ends, or (late, or lost and
    # being restored, as the owners show) by the next collection (``slo_kernel.pending_seconds``).
    due = math.nan if state.pending_ready_at is None else (state.pending_ready_at - latest.collected_at).total_seconds()
    pending_seconds = float(slo_kernel.pending_seconds(situation.ready_capacity, situation.capacity, due, interval,
                                                       float(target.slo.provisioning_delay_seconds)))
    return Timing(limit=target.slo.max_event_age_seconds - target.slo.safety_seconds,
                  interval=interval,
                  since_latest=max((situation.now - latest.collected_at).total_seconds(), 0.0),
                  pending_seconds=pending_seconds)


def scale_out_drain(target: TargetPolicy, situation: Situation, predicted_age: float) -> tuple[float, tuple[str, ...]]:
    """Over how many seconds a scale-out drains (``slo_kernel.drain_seconds``) and, when that is
    within the SLO because the rate is only a lower bound, the reason that says so: an operator
    sees why a cold start jumps as far as it does. Both SLO modes (partitions and queues) say it."""
    from scaling.domain import slo_kernel

    slo = target.slo
    drain = float(slo_kernel.drain_seconds(slo.min_dwell_seconds, slo.max_event_age_seconds, situation.throughput_measured,
                                           predicted_age))
    usual = float(slo_kernel.drain_seconds(slo.min_dwell_seconds, slo.max_event_age_seconds, True, predicted_age))
    if drain >= usual:
        return drain, ()
    return drain, (f"draining within the SLO ({drain:.0f}s): the rate is only a lower bound and the oldest event is "
                   "predicted past the SLO itself",)
