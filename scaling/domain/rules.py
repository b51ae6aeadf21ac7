"""The ``rules`` mode: threshold rules over a window (the seed design and what Azure Monitor can
express, plus per-instance and lag-seconds metrics, tiers and combined rules).

Scale out when any rule says so (by the largest step asked), scale in only when every rule
agrees. The engine applies bounds, cooldowns and the action budget afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from scaling.domain.decisions import DOWN, HOLD, UP
from scaling.domain.policy import Rule, TargetPolicy
from scaling.domain.proposal import Proposal, Situation
from scaling.domain.samples import MetricSample


def metric_value(rule: Rule, sample: MetricSample, throughput_per_instance: float | None) -> float | None:
    """The rule's metric for one sample, or ``None`` when it cannot be computed."""
    sources = [source for source in sample.sources if source.ok and (rule.source is None or source.name == rule.source)]
    if not sources:
        return None
    backlog = float(sum(source.backlog for source in sources))
    if rule.metric == "backlog":
        return backlog
    if sample.capacity is None:  # per-instance metrics mean nothing without the capacity
        return None
    capacity = sample.capacity
    if rule.metric == "backlog_per_instance":
        return backlog / max(capacity, 1)
    if throughput_per_instance is None or throughput_per_instance <= 0:
        return None
    return backlog / (throughput_per_instance * max(capacity, 1))


def aggregate(values: Sequence[float], how: str) -> float:
    if how == "maximum":
        return max(values)
    if how == "latest":
        return values[-1]
    return sum(values) / len(values)


def propose(target: TargetPolicy, situation: Situation) -> Proposal:
    """Each rule votes on its own window (up, down or hold); the votes combine as above."""
    samples, now, capacity, throughput = situation.samples, situation.now, situation.capacity, situation.throughput
    up_votes: list[tuple[int, str]] = []
    down_votes: list[str] = []
    holds: list[str] = []
    metrics: dict = {}
    hold_code = "within_thresholds"
    for rule in target.rules:
        start = now - timedelta(seconds=rule.window_seconds)
        in_window = [s for s in samples if s.collected_at > start]
        values = [v for v in (metric_value(rule, s, throughput) for s in in_window) if v is not None]
        up_threshold, down_threshold = rule.thresholds_for(capacity)
        if len(values) < rule.min_samples:
            holds.append(f"{rule.name}: only {len(values)} of {rule.min_samples} samples in the {rule.window_seconds}s window")
            hold_code = "too_few_samples"
            continue
        up_value = aggregate(values, rule.scale_up_aggregate or rule.aggregate)
        down_value = aggregate(values, rule.scale_down_aggregate or rule.aggregate)
        metrics.setdefault("rules", {})[rule.name] = {"metric": rule.metric, "scale_up_value": round(up_value, 3),
                              "scale_down_value": round(down_value, 3), "samples": len(values),
                              "scale_up_above": up_threshold, "scale_down_below": down_threshold}
        if up_threshold is not None and up_value > up_threshold:
            up_votes.append((target.scale_up.size(capacity),
                             f"{rule.name}: {rule.scale_up_aggregate or rule.aggregate} {rule.metric} {up_value:.1f} > {up_threshold:g}"))
        elif down_threshold is not None and down_value < down_threshold:
            down_votes.append(f"{rule.name}: {rule.scale_down_aggregate or rule.aggregate} {rule.metric} {down_value:.1f} < {down_threshold:g}")
        else:
            holds.append(f"{rule.name}: {rule.metric} {up_value:.1f} within thresholds")
    if up_votes:
        step = max(size for size, _ in up_votes)
        return Proposal(capacity + step, UP, "rule_scale_up", tuple(reason for _, reason in up_votes), metrics)
    if down_votes and len(down_votes) == len(target.rules):
        return Proposal(capacity - target.scale_down.size(capacity), DOWN, "rule_scale_down", tuple(down_votes), metrics)
    if down_votes:
        holds.append("scale-in needs every rule to agree")
        hold_code = "rules_disagree" if hold_code == "within_thresholds" else hold_code
    return Proposal(None, HOLD, hold_code, tuple(holds), metrics)
