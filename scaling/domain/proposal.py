"""What a policy mode sees and what it proposes: the types the modes (``rules.py``, ``slo.py``)
share with the engine, kept apart from both so that neither imports the other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from scaling.domain.decisions import ScalerState
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


@dataclass(frozen=True, slots=True)
class Proposal:
    """One mode's wish before bounds and cooldowns: a capacity, or ``None`` to hold."""

    capacity: int | None
    direction: str
    reason_code: str
    reasons: tuple[str, ...]
    metrics: dict
    state: ScalerState | None = None
