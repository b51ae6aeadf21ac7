"""Builds the plan adapter from settings: ARM at ``settings.arm_endpoint`` (``ARM_ENDPOINT``)
with the credential the composition root (``scaling.bootstrap``) passes in."""

from __future__ import annotations

from typing import Any

from scaling.plans.appservice import AppServicePlanAdapter
from scaling.plans.namespace.arm import EventHubsNamespaceAdapter, RoutingPlanAdapter
from scaling.settings import Settings


def build_plan_adapter(settings: Settings, credential: Any, **client_kwargs: Any) -> AppServicePlanAdapter:
    """The ARM adapter; also the collector's ``CapacityReader`` (``current_capacity``)."""
    return AppServicePlanAdapter(credential, base_url=settings.arm_endpoint, **client_kwargs)


def build_namespace_adapter(settings: Settings, credential: Any, **client_kwargs: Any) -> EventHubsNamespaceAdapter:
    """The Event Hubs management adapter (namespace targets' TUs) at the same ARM endpoint."""
    return EventHubsNamespaceAdapter(credential, base_url=settings.arm_endpoint, **client_kwargs)


def build_scale_adapter(settings: Settings, credential: Any, **client_kwargs: Any) -> AppServicePlanAdapter | RoutingPlanAdapter:
    """What the scale service writes through: the plan adapter, routed with the namespace adapter
    when the policy has namespace targets."""
    plans = build_plan_adapter(settings, credential, **client_kwargs)
    if not settings.policy.namespaces:
        return plans
    return RoutingPlanAdapter(plans, build_namespace_adapter(settings, credential, **client_kwargs))
