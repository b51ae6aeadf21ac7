"""The App Service Plan adapter contract, its errors and the SKU instance limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from scaling.domain.policy import Bounds, PlanSettings

DEDICATED = "dedicated"
ELASTIC = "elastic"

#: Most instances a plan of each pricing tier can run (App Service limits). Premium covers
#: PremiumV2/V3/V4 and the memory-optimised variants; Isolated covers IsolatedV2 (App Service
#: Environment); Elastic Premium is the maximum burst of a Functions Premium plan.
TIER_INSTANCE_LIMITS = {
    "free": 1,
    "shared": 1,
    "basic": 3,
    "standard": 10,
    "premium": 30,
    "isolated": 100,
    "elasticpremium": 100,
}
UNSUPPORTED_TIERS = ("dynamic", "flexconsumption")


class PlanError(RuntimeError):
    """Reading or resizing a plan failed (after the client's bounded retries)."""

    def __init__(self, message: str, *, status_code: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        #: Seconds the server asked to wait before trying again (Retry-After), if it said.
        self.retry_after = retry_after


class PlanNotFoundError(PlanError):
    """The plan does not exist (or the identity cannot see it)."""


class UnsupportedPlanError(PlanError):
    """A plan the autoscaler cannot resize (Consumption, Flex Consumption, an unknown tier)."""


@dataclass(frozen=True, slots=True)
class PlanInfo:
    """A plan as ARM reports it.

    ``capacity`` is what the autoscaler controls: the instance count (``sku.capacity``) of a
    Dedicated plan, the maximum burst (``maximumElasticWorkerCount``) of an Elastic Premium plan.
    ``minimum_capacity`` is the floor ARM accepts (an Elastic plan's always-ready instances).
    """

    resource_id: str
    capacity: int
    sku_name: str
    sku_tier: str
    max_instances: int
    kind: str = DEDICATED
    minimum_capacity: int = 1


class PlanAdapter(Protocol):
    def get_plan(self, resource_id: str) -> PlanInfo: ...

    def set_capacity(self, resource_id: str, capacity: int) -> PlanInfo: ...


class ControllerReader(Protocol):
    """Other controllers of a plan: the enabled Azure Monitor autoscale settings targeting it."""

    def enabled_autoscale_settings(self, resource_id: str) -> tuple[str, ...]: ...


def tier_instance_limit(tier: str | None, sku_name: str | None = None) -> int | None:
    """The tier's instance limit, or ``None`` when the tier is unknown."""
    key = (tier or "").replace(" ", "").lower()
    if key in UNSUPPORTED_TIERS:
        raise UnsupportedPlanError(f"plans of tier {tier!r} are scaled by the platform, not by this autoscaler")
    if key.startswith("elastic") or (sku_name or "").upper().startswith("EP"):
        return TIER_INSTANCE_LIMITS["elasticpremium"]
    if key.startswith("premium"):
        return TIER_INSTANCE_LIMITS["premium"]
    if key.startswith("isolated"):
        return TIER_INSTANCE_LIMITS["isolated"]
    return TIER_INSTANCE_LIMITS.get(key)


def plan_kind(tier: str | None, sku_name: str | None) -> str:
    key = (tier or "").lower()
    return ELASTIC if key.startswith("elastic") or (sku_name or "").upper().startswith("EP") else DEDICATED


def clamp_capacity(requested: int, bounds: Bounds, plan: PlanInfo) -> int:
    """The policy bounds first, then what the SKU can run and what ARM accepts as a minimum."""
    wanted = max(bounds.min_instances, min(bounds.max_instances, requested))
    wanted = min(wanted, plan.max_instances)
    return max(wanted, plan.minimum_capacity, 1)


def plan_settings(resource_id: str) -> PlanSettings:
    plan = PlanSettings(resource_id=resource_id)
    if not plan.subscription_id or not plan.resource_group or "/providers/microsoft.web/serverfarms/" not in resource_id.lower():
        raise PlanError(f"{resource_id!r} is not an App Service Plan resource id "
                        "(/subscriptions/ID/resourceGroups/RG/providers/Microsoft.Web/serverfarms/NAME)")
    return plan
