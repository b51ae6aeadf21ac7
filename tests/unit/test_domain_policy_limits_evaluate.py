"""A policy at its limits evaluates (issue 11, item 7): every number at its upper or lower bound, the
most rules, tiers and sources, the longest names; and the decision it produces, with every rule's
numbers, fits in one Table property, so that the state commit cannot outgrow an entity."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest

from scaling.domain.decisions import ScalerState
from scaling.domain.engine import evaluate
from scaling.domain.policy import policy_from_dict
from scaling.domain.policy_fields import MAX_NAME_CHARS, MAX_RULES, MAX_SOURCES, MAX_TIERS
from scaling.storage.base import MAX_PROPERTY_CHARS
from scaling.storage.records import json_text
from tests.unit.test_domain_engine_rules import PLAN, at, series

SLO_UPPER = {"max_event_age_seconds": 86_400, "safety_seconds": 86_399.999, "events_per_instance_per_second": 1e9,
             "provisioning_delay_seconds": 3600, "min_dwell_seconds": 86_400, "headroom": 10, "max_actions_per_hour": 60,
             "rate_window_seconds": 86_400, "history_seconds": 86_400}
SLO_LOWER = {"max_event_age_seconds": 1e-9, "safety_seconds": 0, "events_per_instance_per_second": 1e-300,
             "provisioning_delay_seconds": 0, "min_dwell_seconds": 0, "headroom": 0, "max_actions_per_hour": 1e-300,
             "rate_window_seconds": 60, "history_seconds": 120}
STEPS_UPPER = {"scale_up": {"step_percent": 1000, "cooldown_seconds": 86_400}, "scale_down": {"step": 100, "cooldown_seconds": 86_400}}
STEPS_LOWER = {"scale_up": {"step_percent": 1e-300, "cooldown_seconds": 0}, "scale_down": {"step": 1, "cooldown_seconds": 0}}
BOUNDS = [{"min_instances": 100, "max_instances": 100}, {"min_instances": 1, "max_instances": 100},
          {"min_instances": 1, "max_instances": 1}]
KINDS = list(itertools.product(("backlog", "backlog_per_instance", "lag_seconds"), ("average", "maximum", "latest")))


def source(index: int) -> dict:
    """The first source is the one the samples carry (``hub``); the others have the longest names."""
    name = "hub" if index == 0 else f"{index:03d}".ljust(MAX_NAME_CHARS, "s")
    return {"name": name, "event_hub_name": "h", "fully_qualified_namespace": "n", "checkpoint_account_url": "u"}


def rules_upper() -> list[dict]:
    tiers = [{"min_capacity": k * 10, "max_capacity": k * 10 + 9, "scale_up_above": 1e12, "scale_down_below": 0}
             for k in range(MAX_TIERS)]
    return [{"name": f"{index:02d}".ljust(MAX_NAME_CHARS, "r"), "metric": metric, "aggregate": aggregate,
             "window_seconds": 86_400, "min_samples": 1440 if index % 2 else 1, "scale_up_above": 1e12,
             "scale_down_below": 1e12 - 1, "tiers": tiers}
            for index, (metric, aggregate) in zip(range(MAX_RULES), itertools.cycle(KINDS), strict=False)]


def rules_lower() -> list[dict]:
    return [{"name": f"r{index}", "metric": metric, "aggregate": aggregate, "window_seconds": 60, "min_samples": 1,
             "scale_up_above": 1e-300, "scale_down_below": 0} for index, (metric, aggregate) in enumerate(KINDS)]


def target(**changes: Any):
    document = {"name": "漢" * 56, "plan": {"resource_id": PLAN}, "sources": [source(0)], **changes}
    return policy_from_dict({"targets": [document]}).targets[0]


TARGETS = [
    pytest.param(target(slo=slo, bounds=bounds, **steps), id=f"slo-{slo_id}-{bounds_id}-{steps_id}")
    for (slo_id, slo), (bounds_id, bounds), (steps_id, steps) in itertools.product(
        (("upper", SLO_UPPER), ("lower", SLO_LOWER)), enumerate(BOUNDS), (("upper", STEPS_UPPER), ("lower", STEPS_LOWER)))
] + [
    pytest.param(target(mode="rules", rules=rules(), bounds=bounds, sources=[source(i) for i in range(MAX_SOURCES)], **steps),
                 id=f"rules-{rules.__name__}-{bounds_id}-{steps_id}")
    for rules, (bounds_id, bounds), (steps_id, steps) in itertools.product(
        (rules_upper, rules_lower), enumerate(BOUNDS[:2]), (("upper", STEPS_UPPER), ("lower", STEPS_LOWER)))
]


@pytest.mark.parametrize("policy_target", TARGETS)
@pytest.mark.parametrize("backlog", [0, 5000, 10**12])
@pytest.mark.parametrize("capacity", [1, 100, None])
def test_a_policy_at_its_limits_evaluates_and_its_decision_fits_a_property(policy_target, backlog: int,
                                                                            capacity: int | None) -> None:
    history = [replace(sample, target=policy_target.name) for sample in series([backlog] * 10, capacity)]
    decision = evaluate(policy_target, ScalerState(target=policy_target.name, capacity=capacity or 1), history, at(0))
    assert policy_target.bounds.min_instances <= (decision.target_capacity or policy_target.bounds.min_instances) \
        <= policy_target.bounds.max_instances
    assert len(json_text(list(decision.reasons))) + len(json_text(decision.metrics)) <= MAX_PROPERTY_CHARS
