"""Builds the plan adapter from settings: ARM at ``settings.arm_endpoint`` (``ARM_ENDPOINT``)
with the credential the composition root (``scaling.bootstrap``) passes in."""

from __future__ import annotations

from typing import Any

from scaling.plans.appservice import AppServicePlanAdapter
from scaling.settings import Settings


def build_plan_adapter(settings: Settings, credential: Any, **client_kwargs: Any) -> AppServicePlanAdapter:
    """The ARM adapter; also the collector's ``CapacityReader`` (``current_capacity``)."""
    return AppServicePlanAdapter(credential, base_url=settings.arm_endpoint, **client_kwargs)
