"""Plan helpers: SKU instance limits, clamping, resource ids, the capped Retry-After."""

from __future__ import annotations

import asyncio

import pytest

from scaling.domain.policy import Bounds, PlanSettings
from scaling.plans.appservice import BoundedRetryPolicy
from scaling.plans.base import (
    PlanError,
    PlanInfo,
    UnsupportedPlanError,
    clamp_capacity,
    plan_kind,
    plan_settings,
    tier_instance_limit,
)
from scaling.plans.memory import InMemoryPlans
from scaling.storage.synthetic import plan_id


@pytest.mark.parametrize(
    ("tier", "sku", "limit"),
    [
        ("Basic", "B1", 3), ("Standard", "S2", 10), ("Premium", "P1", 30), ("PremiumV2", "P1v2", 30),
        ("PremiumV3", "P1v3", 30), ("Premium0V3", "P0v3", 30), ("PremiumMV3", "P1mv3", 30), ("Isolated", "I1", 100),
        ("IsolatedV2", "I1v2", 100), ("ElasticPremium", "EP1", 100), ("Free", "F1", 1), ("Shared", "D1", 1),
        ("Mystery", "M1", None),
    ],
)
def test_tier_instance_limits(tier, sku, limit):
    assert tier_instance_limit(tier, sku) == limit


@pytest.mark.parametrize("tier", ["Dynamic", "FlexConsumption"])
def test_platform_scaled_plans_are_refused(tier):
    with pytest.raises(UnsupportedPlanError, match="scaled by the platform"):
        tier_instance_limit(tier, "Y1")


def test_plan_kind():
    assert plan_kind("ElasticPremium", "EP2") == "elastic"
    assert plan_kind("PremiumV3", "P1v3") == "dedicated"


@pytest.mark.parametrize(
    ("requested", "bounds", "plan_max", "plan_min", "expected"),
    [
        (5, Bounds(1, 8), 10, 1, 5),
        (12, Bounds(1, 8), 10, 1, 8),  # policy bound
        (9, Bounds(1, 20), 3, 1, 3),  # Basic: 3
        (0, Bounds(2, 8), 10, 1, 2),  # policy minimum
        (1, Bounds(1, 8), 100, 3, 3),  # an Elastic plan's always-ready instances
    ],
)
def test_clamp_capacity(requested, bounds, plan_max, plan_min, expected):
    plan = PlanInfo("id", 1, "X", "Tier", plan_max, minimum_capacity=plan_min)
    assert clamp_capacity(requested, bounds, plan) == expected


def test_resource_ids_are_validated():
    plan = plan_settings(plan_id("p1", "rg1"))
    assert (plan.name, plan.resource_group) == ("p1", "rg1")
    with pytest.raises(PlanError, match="not an App Service Plan resource id"):
        plan_settings("/subscriptions/x/resourceGroups/y/providers/Microsoft.Storage/storageAccounts/z")


def test_retry_after_is_capped():
    class Response:
        class http_response:  # noqa: N801 - mimics azure-core's attribute
            headers = {"Retry-After": "3600"}

    policy = BoundedRetryPolicy(max_retry_after=7)
    assert policy.get_retry_after(Response()) == 7


def test_in_memory_plans_serve_the_collectors_capacity_reader():
    plans = InMemoryPlans()
    plans.add(plan_id("p1"), 4)
    assert asyncio.run(plans.current_capacity(PlanSettings(plan_id("p1")))) == 4
