"""Synthetic targets and samples for the storage benchmark and tests (no Azure imports)."""

from __future__ import annotations

from datetime import datetime, timedelta

from scaling.domain.policy import Bounds, PlanSettings, Policy, Rule, SourceSettings, Step, TargetPolicy
from scaling.domain.samples import MetricSample, PartitionReading, SourceReading

SUBSCRIPTION = "00000000-0000-0000-0000-000000000001"


def plan_id(name: str, group: str = "rg-consumers", subscription: str = SUBSCRIPTION) -> str:
    return f"/subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.Web/serverfarms/{name}"


def rules_target(
    name: str = "orders",
    *,
    up_above: float = 1000.0,
    down_below: float = 100.0,
    window_seconds: int = 300,
    min_samples: int = 3,
    up_cooldown: int = 0,
    down_cooldown: int = 120,
    min_instances: int = 1,
    max_instances: int = 8,
    plan_name: str | None = None,
) -> TargetPolicy:
    """A rules-mode target over one Service Bus queue (no partitions, so every count is allowed)."""
    source = SourceSettings(kind="servicebus", name="queue", fully_qualified_namespace="example.servicebus.windows.net",
                            queue_name="work", namespace_resource_id=(
                                f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-consumers/providers/"
                                "Microsoft.ServiceBus/namespaces/example"))
    rule = Rule(name="queue", metric="backlog", aggregate="average", window_seconds=window_seconds,
                min_samples=min_samples, scale_up_above=up_above, scale_down_below=down_below,
                scale_up_aggregate="average", scale_down_aggregate="maximum")
    return TargetPolicy(
        name=name,
        plan=PlanSettings(plan_id(plan_name or f"plan-{name}")),
        sources=(source,),
        bounds=Bounds(min_instances=min_instances, max_instances=max_instances, cap_at_partitions=False,
                      balanced_counts=False),
        mode="rules",
        rules=(rule,),
        scale_up=Step(step=1, cooldown_seconds=up_cooldown),
        scale_down=Step(step=1, cooldown_seconds=down_cooldown),
    )


def policy_of(*targets: TargetPolicy) -> Policy:
    return Policy(targets=tuple(targets))


def queue_sample(target: str, collected_at: datetime, backlog: int, capacity: int | None = None, *, ok: bool = True) -> MetricSample:
    """A sample with one Service Bus source whose active message count is ``backlog``."""
    source = SourceReading(name="queue", kind="servicebus", ok=ok, error=None if ok else "timed out",
                           active_messages=backlog if ok else None)
    return MetricSample(target=target, collected_at=collected_at, capacity=capacity, sources=(source,))


def hub_sample(target: str, collected_at: datetime, backlogs: list[int], capacity: int | None = None,
               *, position: int = 1_000_000) -> MetricSample:
    """A sample with one Event Hubs source, one partition per backlog value (large samples)."""
    partitions = tuple(
        PartitionReading.measure(str(index), 0, position + backlog, position, owner=f"worker-{index % 7}")
        for index, backlog in enumerate(backlogs)
    )
    return MetricSample(target=target, collected_at=collected_at, capacity=capacity,
                        sources=(SourceReading(name="hub", kind="eventhub", partitions=partitions),))


def minute_series(target: str, start: datetime, backlogs: list[int], capacity: int | None = None,
                  step: timedelta = timedelta(minutes=1)) -> list[MetricSample]:
    return [queue_sample(target, start + index * step, backlog, capacity) for index, backlog in enumerate(backlogs)]
