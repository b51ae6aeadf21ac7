"""The policy model's decision settings: rule tiers and rules, scale steps, instance bounds, the
SLO mode's settings and the seed preset. Each field's annotation carries its description and
bounds (the schema is generated from them; the defaults come from ``knobs.py``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, model_validator

from scaling.domain.knobs import KNOB
from scaling.domain.policy_fields import (
    DOCUMENT_CONFIG,
    MAX_INSTANCES,
    MAX_TIERS,
    NUMBER,
    Aggregate,
    Capacity,
    Name,
    Threshold,
    check_threshold_pair,
    document_keys,
    document_object,
    invalid,
    knob,
)


@dataclass(frozen=True, slots=True)
class Tier:
    """Thresholds that apply while the current capacity is within ``[min_capacity, max_capacity]``."""

    __pydantic_config__ = DOCUMENT_CONFIG

    min_capacity: Annotated[Capacity, Field(description="lowest current instance count this tier applies to")] = 1
    max_capacity: Annotated[Capacity, Field(description="highest current instance count this tier applies to")] = MAX_INSTANCES
    scale_up_above: Annotated[Threshold | None, Field(description="scale out while the metric is above this (required)")] = None
    scale_down_below: Annotated[Threshold | None, Field(
        description="scale in while the metric is below this (required, lower than scale_up_above)")] = None

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> Tier:
        if self.max_capacity < self.min_capacity:
            raise invalid("max_capacity", "must not be lower than {0}", "min_capacity")
        check_threshold_pair(self.scale_up_above, self.scale_down_below)
        if self.scale_up_above is None or self.scale_down_below is None:
            raise invalid(None, "needs both {0} and {1}", "scale_up_above", "scale_down_below")
        return self


@dataclass(frozen=True, slots=True)
class Rule:
    """A threshold rule over a window of samples."""

    __pydantic_config__ = DOCUMENT_CONFIG

    name: Annotated[Name, Field(description="names the rule in decisions (default: ruleN by position)")] = ""
    metric: Annotated[Literal["backlog", "backlog_per_instance", "lag_seconds"], knob("rules.metric")] = \
        KNOB["rules.metric"].default  # type: ignore[assignment]
    aggregate: Annotated[Aggregate, knob("rules.aggregate")] = KNOB["rules.aggregate"].default  # type: ignore[assignment]
    window_seconds: Annotated[int, knob("rules.window_seconds"), NUMBER] = KNOB["rules.window_seconds"].default
    min_samples: Annotated[int, knob("rules.min_samples"), NUMBER] = KNOB["rules.min_samples"].default
    scale_up_above: Annotated[Threshold | None, Field(description="scale out while the aggregate is above this")] = None
    scale_down_below: Annotated[Threshold | None, Field(
        description="scale in while the aggregate is below this (lower than scale_up_above)")] = None
    scale_up_aggregate: Annotated[Aggregate | None, Field(description="overrides aggregate for scaling out")] = None
    scale_down_aggregate: Annotated[Aggregate | None, Field(description="overrides aggregate for scaling in")] = None
    tiers: Annotated[tuple[Tier, ...], Field(max_length=MAX_TIERS,
        description="thresholds by current instance count; the first matching tier wins")] = ()
    source: Annotated[Name | None, Field(description="restrict the rule to this source of the target (default: all)")] = None

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> Rule:
        check_threshold_pair(self.scale_up_above, self.scale_down_below)
        ordered = sorted(self.tiers, key=lambda tier: tier.min_capacity)
        for first, second in zip(ordered, ordered[1:], strict=False):
            if second.min_capacity <= first.max_capacity:
                raise invalid("tiers", f"overlap at capacity {second.min_capacity}")
        if self.scale_up_above is None and self.scale_down_below is None and not self.tiers:
            raise invalid(None, "needs {0}, {1} or {2}", "scale_up_above", "scale_down_below", "tiers")
        return self

    def thresholds_for(self, capacity: int) -> tuple[float | None, float | None]:
        for tier in self.tiers:
            if tier.min_capacity <= capacity <= tier.max_capacity:
                return tier.scale_up_above, tier.scale_down_below
        return self.scale_up_above, self.scale_down_below


@dataclass(frozen=True, slots=True)
class Step:
    """How far one action moves, and how long after the previous action it may happen."""

    __pydantic_config__ = DOCUMENT_CONFIG

    step: Annotated[int, knob("scale_up.step", "instances added or removed per action"), NUMBER] = KNOB["scale_up.step"].default
    step_percent: Annotated[Annotated[float, knob("scale_up.step_percent", ""), NUMBER] | None, Field(
        description=KNOB["scale_up.step_percent"].meaning)] = None
    #: ``None``: the direction's default (``TargetPolicy`` fills it in), in code as in a document.
    cooldown_seconds: Annotated[int, knob("scale_up.cooldown_seconds",
        "seconds since the previous action of any direction (default: up 0, down 300)"), NUMBER] = None  # type: ignore[assignment]

    @model_validator(mode="before")
    @classmethod
    def _document(cls, data: Any) -> Any:
        data = document_object(cls, data)
        if isinstance(data, dict) and "step" in data and "step_percent" in data:
            raise invalid(None, "sets both {0} and {1}; choose one", "step", "step_percent")
        return data

    def size(self, capacity: int) -> int:
        if self.step_percent is not None:
            return max(1, math.ceil(capacity * self.step_percent / 100))
        return self.step


#: Scale out whenever needed; scale in no sooner than 5 minutes after any action, so that new
#: instances are seen serving before the engine judges what they can do (``knobs.KNOBS``).
DEFAULT_SCALE_UP = Step(step=KNOB["scale_up.step"].default, cooldown_seconds=KNOB["scale_up.cooldown_seconds"].default)
DEFAULT_SCALE_DOWN = Step(step=KNOB["scale_down.step"].default,
                          cooldown_seconds=KNOB["scale_down.cooldown_seconds"].default)


@dataclass(frozen=True, slots=True)
class Bounds:
    """The instance counts the autoscaler may choose from."""

    __pydantic_config__ = DOCUMENT_CONFIG

    min_instances: Annotated[int, knob("bounds.min_instances"), NUMBER] = KNOB["bounds.min_instances"].default
    max_instances: Annotated[int, knob("bounds.max_instances"), NUMBER] = KNOB["bounds.max_instances"].default
    cap_at_partitions: Annotated[StrictBool, knob("bounds.cap_at_partitions")] = KNOB["bounds.cap_at_partitions"].default
    balanced_counts: Annotated[StrictBool, knob("bounds.balanced_counts")] = KNOB["bounds.balanced_counts"].default

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> Bounds:
        if self.max_instances < self.min_instances:
            raise invalid("max_instances", "must not be lower than {0}", "min_instances")
        return self


@dataclass(frozen=True, slots=True)
class SloSettings:
    """The SLO-driven mode: keep the oldest unprocessed event younger than ``max_event_age_seconds``.

    ``events_per_instance_per_second`` is a prior; the engine learns the real throughput from
    saturated periods. ``provisioning_delay_seconds`` is how long new instances take to serve.
    ``min_dwell_seconds`` is the shortest time a scale-in must be expected to hold, at the
    forecast and, on noisy traffic (``scale_in_peak_full_noise``), at the busiest collection interval
    of the last ``scale_in_peak_seconds`` (a lull between bursts is no reason to scale in, and scale
    out again at the next burst; on quiet traffic a busier interval minutes ago is a passed trend).
    ``max_actions_per_hour`` is an action budget (a token bucket): scale-outs are never held
    back, but a scale-in waits until the budget covers it and the scale-out likely to follow,
    because every action rebalances partitions and makes consumers process events twice.
    """

    __pydantic_config__ = DOCUMENT_CONFIG

    max_event_age_seconds: Annotated[float, knob("slo.max_event_age_seconds"), NUMBER] = \
        KNOB["slo.max_event_age_seconds"].default
    events_per_instance_per_second: Annotated[Annotated[float, knob("slo.events_per_instance_per_second", ""), NUMBER] | None,
                                              Field(description=KNOB["slo.events_per_instance_per_second"].meaning)] = None
    provisioning_delay_seconds: Annotated[float, knob("slo.provisioning_delay_seconds"), NUMBER] = \
        KNOB["slo.provisioning_delay_seconds"].default
    safety_seconds: Annotated[float, knob("slo.safety_seconds"), NUMBER] = KNOB["slo.safety_seconds"].default
    min_dwell_seconds: Annotated[float, knob("slo.min_dwell_seconds"), NUMBER] = KNOB["slo.min_dwell_seconds"].default
    headroom: Annotated[float, knob("slo.headroom"), NUMBER] = KNOB["slo.headroom"].default
    max_actions_per_hour: Annotated[float, knob("slo.max_actions_per_hour"), NUMBER] = \
        KNOB["slo.max_actions_per_hour"].default
    rate_window_seconds: Annotated[float, knob("slo.rate_window_seconds"), NUMBER] = \
        KNOB["slo.rate_window_seconds"].default
    history_seconds: Annotated[float, knob("slo.history_seconds"), NUMBER] = KNOB["slo.history_seconds"].default
    scale_in_peak_seconds: Annotated[float, knob("slo.scale_in_peak_seconds"), NUMBER] = \
        KNOB["slo.scale_in_peak_seconds"].default
    scale_in_peak_full_noise: Annotated[float, knob("slo.scale_in_peak_full_noise"), NUMBER] = \
        KNOB["slo.scale_in_peak_full_noise"].default
    stall_scale_to_minimum: Annotated[StrictBool, knob("slo.stall_scale_to_minimum")] = \
        KNOB["slo.stall_scale_to_minimum"].default

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> SloSettings:
        if self.safety_seconds >= self.max_event_age_seconds:
            raise invalid("safety_seconds", "must be lower than {0}", "max_event_age_seconds")
        return self


@dataclass(frozen=True, slots=True)
class SeedThresholds:
    """The two thresholds of preset ``seed``."""

    __pydantic_config__ = DOCUMENT_CONFIG

    scale_up_above: Annotated[Threshold, Field(
        description="scale out by one while the 10-minute average backlog is above this")] = 1000.0
    scale_down_below: Annotated[Threshold, Field(
        description="scale in by one while the 10-minute maximum backlog is below this")] = 100.0

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> SeedThresholds:
        check_threshold_pair(self.scale_up_above, self.scale_down_below)
        return self


def seed_rules(scale_up_above: float = 1000.0, scale_down_below: float = 100.0) -> tuple[Rule, ...]:
    """The seed design: 10-minute window, at least 5 samples, average above the upper threshold
    scales up by one, maximum below the lower threshold scales down by one."""
    return (
        Rule(
            name="seed",
            metric="backlog",
            aggregate="average",
            window_seconds=600,
            min_samples=5,
            scale_up_above=scale_up_above,
            scale_down_below=scale_down_below,
            scale_up_aggregate="average",
            scale_down_aggregate="maximum",
        ),
    )


SEED_STEP = Step(step=1, cooldown_seconds=600)
