"""The policy file: one entry per target App Service Plan, read by the rule engine, the
simulator and the tuning job alike.

The model (every field, its description and bounds) is scaling/domain/policy_model.py (the target
and the policy) with policy_rules.py (rules, steps, bounds, SLO) and policy_sources.py; turning a
document into a ``Policy`` with errors that name the field path and the reason, for example
``targets[0].rules[1].scale_down_below must be lower than scale_up_above``, and the JSON Schema
are scaling/domain/policy_document.py. This module is the API the rest of the code uses: loading,
writing (the tuning job's recommendations are policy files) and small helpers.
Schema and examples: docs/policy.md, policy.schema.json.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from scaling.domain.policy_document import PolicyError, policy_json_schema, validate_document
from scaling.domain.policy_fields import (
    AGGREGATES,
    CHECKPOINT_STRATEGIES,
    EXTERNAL_CHANGE_POLICIES,
    KEDA_ALIASES,
    METRICS,
    MODES,
    PLAN_KINDS,
    POLICY_VERSION,
    SOURCE_KINDS,
)
from scaling.domain.policy_model import Policy, TargetPolicy
from scaling.domain.policy_profiles import FixedWindow, Profile, Recurrence
from scaling.domain.policy_rules import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    SEED_STEP,
    Bounds,
    Rule,
    SeedThresholds,
    SloSettings,
    Step,
    Tier,
    seed_rules,
)
from scaling.domain.policy_sources import PlanSettings, SourceSettings

__all__ = [
    "AGGREGATES", "CHECKPOINT_STRATEGIES", "DEFAULT_SCALE_DOWN", "DEFAULT_SCALE_UP", "EXTERNAL_CHANGE_POLICIES",
    "KEDA_ALIASES", "METRICS", "MODES", "PLAN_KINDS", "POLICY_VERSION", "SEED_STEP", "SOURCE_KINDS", "Bounds",
    "FixedWindow", "PlanSettings", "Policy", "PolicyError", "Profile", "Recurrence", "Rule", "SeedThresholds", "SloSettings", "SourceSettings", "Step",
    "TargetPolicy", "Tier", "load_policy", "load_policy_text", "policy_from_dict", "policy_json_schema",
    "policy_to_dict", "seed_rules", "target_to_dict", "with_slo",
]


def policy_from_dict(document: Any) -> Policy:
    """The policy a parsed JSON document describes; ``PolicyError`` names each wrong field."""
    return validate_document(document)


def load_policy_text(text: str, *, origin: str = "policy") -> Policy:
    try:
        document = json.loads(text)
    except ValueError as error:
        raise PolicyError(f"{origin} is not valid JSON: {error}") from error
    return policy_from_dict(document)


def load_policy(path: str | Path) -> Policy:
    return load_policy_text(Path(path).read_text(encoding="utf-8"), origin=str(path))


# --- writing (the tuning job's recommendations are policy files) -------------------------------


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _fields(value: Any, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {key: getattr(value, key) for key in value.__dataclass_fields__ if key not in skip}


def target_to_dict(target: TargetPolicy) -> dict[str, Any]:
    """The canonical (snake_case) document of one target."""
    document: dict[str, Any] = {
        "name": target.name,
        "plan": {"resource_id": target.plan.resource_id, "kind": target.plan.kind},
        "sources": [_drop_none(_fields(source)) for source in target.sources],
        "bounds": _fields(target.bounds),
        "on_external_change": target.on_external_change,
    }
    if target.forecast != "off":
        document["forecast"] = target.forecast
    if target.profiles:
        document["profiles"] = [_profile_to_dict(profile) for profile in target.profiles]
    if target.preset:
        document["preset"] = target.preset
        seed = target.rules[0]
        document["seed"] = {"scale_up_above": seed.scale_up_above, "scale_down_below": seed.scale_down_below}
        return document
    document["mode"] = target.mode
    document["slo"] = _drop_none(_fields(target.slo))
    if target.rules:
        document["rules"] = [
            _drop_none({**_fields(rule, skip=("tiers",)), "tiers": [_fields(tier) for tier in rule.tiers] or None})
            for rule in target.rules
        ]
    document["scale_up"] = _step_to_dict(target.scale_up)
    document["scale_down"] = _step_to_dict(target.scale_down)
    return document


def _profile_to_dict(profile: Profile) -> dict[str, Any]:
    document = _drop_none({"name": profile.name, "min_instances": profile.min_instances,
                           "max_instances": profile.max_instances})
    if profile.recurrence is not None:
        document["recurrence"] = {**_fields(profile.recurrence), "days": list(profile.recurrence.days)}
    if profile.fixed is not None:
        document["fixed"] = {"start": profile.fixed.start.isoformat(), "end": profile.fixed.end.isoformat()}
    return document


def _step_to_dict(step: Step) -> dict[str, Any]:
    """``step`` or ``step_percent``, never both (the parser refuses both)."""
    size = {"step_percent": step.step_percent} if step.step_percent is not None else {"step": step.step}
    return {**size, "cooldown_seconds": step.cooldown_seconds}


def policy_to_dict(policy: Policy) -> dict[str, Any]:
    document: dict[str, Any] = {"version": policy.version, "targets": [target_to_dict(target) for target in policy.targets]}
    if policy.namespaces:
        document["namespaces"] = [{**_fields(namespace), "consumer_targets": list(namespace.consumer_targets)}
                                  for namespace in policy.namespaces]
    return document


def with_slo(target: TargetPolicy, **changes: Any) -> TargetPolicy:
    """A copy of ``target`` with some SLO settings changed (used by tuning and benchmarks)."""
    return replace(target, slo=replace(target.slo, **changes))
