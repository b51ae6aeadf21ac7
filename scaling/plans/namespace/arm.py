"""The Event Hubs namespace adapter over ``azure.mgmt.eventhub.EventHubManagementClient``: the
namespace target's "plan" is the namespace, its capacity ``sku.capacity`` (throughput units).

- ``get_plan`` / ``read_namespace``: ``namespaces.get``; capacity, tier and auto-inflate
  (``isAutoInflateEnabled``, ``maximumThroughputUnits``).
- ``set_capacity``: ``namespaces.update`` (PATCH) with ``sku`` only, sent once per attempt (the
  client's retries off for it). When the reply fails in a way the write may have landed (no
  answer, 408/409/429/5xx) the namespace is read back first: if it has the capacity, the write is
  done; only otherwise is it sent again, at most ``retry_total`` more times. Exactly one write
  per decision whatever happens to the replies (the scale service's claim covers redeliveries).

``RoutingPlanAdapter`` sends each resource id to its adapter, so one scale service writes App
Service Plans and namespaces with the same outbox, idempotency record and dead letters.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scaling.domain.namespace.sizing import STANDARD_MAX_TUS
from scaling.domain.resource_ids import EVENT_HUB, parse_namespace_id
from scaling.plans.appservice import (
    CLIENT_ERRORS,
    DEFAULT_ARM_ENDPOINT,
    AppServicePlanAdapter,
    _may_have_landed,
    retry_settings,
    subscription_client,
)
from scaling.plans.base import PlanError, PlanInfo, PlanNotFoundError, UnsupportedPlanError

logger = logging.getLogger(__name__)

NAMESPACE_KIND = "eventhubs_namespace"
EVENT_HUBS_PROVIDER = "/providers/microsoft.eventhub/namespaces/"
#: TUs only exist on Basic and Standard; Premium (processing units) and Dedicated are out of scope.
TU_TIERS = ("basic", "standard")


@dataclass(frozen=True, slots=True)
class NamespaceInfo:
    """The namespace as ARM reports it: what collect puts in the namespace sample."""

    resource_id: str
    capacity: int
    sku_tier: str
    auto_inflate: bool
    auto_inflate_max: int | None


def is_namespace_id(resource_id: str) -> bool:
    return EVENT_HUBS_PROVIDER in resource_id.lower()


class EventHubsNamespaceAdapter:
    """Reads and writes a namespace's throughput units; one management client per subscription."""

    def __init__(self, credential: Any, *, base_url: str = DEFAULT_ARM_ENDPOINT, retry_total: int = 4,
                 retry_backoff_factor: float = 0.8, retry_backoff_max: float = 20.0, max_retry_after: float = 60.0,
                 retry_timeout: float = 120.0, sleep: Callable[[float], None] = time.sleep, **client_kwargs: Any) -> None:
        self.credential = credential
        self.base_url = base_url.rstrip("/")
        self.retry = retry_settings(retry_total, retry_backoff_factor, retry_backoff_max, max_retry_after, retry_timeout)
        self.sleep = sleep
        self.client_kwargs = client_kwargs
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()
        # The App Service adapter's error translation, retry-after parsing and back-off, reused.
        self._errors = AppServicePlanAdapter(credential, base_url=base_url, retry_total=retry_total,
                                             retry_backoff_factor=retry_backoff_factor, retry_backoff_max=retry_backoff_max,
                                             max_retry_after=max_retry_after)

    def _client(self, subscription_id: str) -> Any:
        from azure.mgmt.eventhub import EventHubManagementClient

        with self._lock:
            client = self._clients.get(subscription_id)
            if client is None:
                client = subscription_client(EventHubManagementClient, self.credential, subscription_id, self.base_url,
                                             self.retry, self.client_kwargs)
                self._clients[subscription_id] = client
            return client

    # --- reads -------------------------------------------------------------------------------------

    def read_namespace(self, resource_id: str) -> NamespaceInfo:
        return self._info(resource_id, self._get(resource_id))

    async def current_namespace(self, resource_id: str) -> NamespaceInfo:
        """``read_namespace`` for the collector (async)."""
        return await asyncio.to_thread(self.read_namespace, resource_id)

    def get_plan(self, resource_id: str) -> PlanInfo:
        info = self.read_namespace(resource_id)
        return PlanInfo(resource_id, info.capacity, info.sku_tier, info.sku_tier, STANDARD_MAX_TUS, NAMESPACE_KIND, 1)

    def enabled_autoscale_settings(self, resource_id: str) -> tuple[str, ...]:
        """Azure Monitor autoscale does not drive namespaces (auto-inflate is read with the namespace)."""
        return ()

    # --- the write ---------------------------------------------------------------------------------

    def set_capacity(self, resource_id: str, capacity: int) -> PlanInfo:
        if capacity < 1:
            raise PlanError(f"capacity must be at least 1 TU, got {capacity}")
        model = self._get(resource_id)
        info = self._info(resource_id, model)
        if info.capacity == capacity:
            return self.get_plan(resource_id)
        attempt = 0
        while True:
            attempt += 1
            try:
                self._patch_once(resource_id, model.sku.name, model.sku.tier, capacity)
                break
            except PlanError as error:
                if not _may_have_landed(error) or attempt > self.retry["retry_total"]:
                    raise
                try:
                    confirmed = self.read_namespace(resource_id)
                except PlanError:
                    confirmed = None
                if confirmed is not None and confirmed.capacity == capacity:
                    logger.warning("namespace %s: the write of %s TUs answered %s, but the namespace has them: applied",
                                   resource_id, capacity, error)
                    break
                wait = self._errors._backoff(attempt, error)
                logger.warning("namespace %s: the write of %s TUs failed (%s; attempt %d); sending it again in %.1f s",
                               resource_id, capacity, error, attempt, wait)
                self.sleep(wait)
        logger.info("namespace %s: %s -> %s TUs", resource_id, info.capacity, capacity)
        return PlanInfo(resource_id, capacity, info.sku_tier, info.sku_tier, STANDARD_MAX_TUS, NAMESPACE_KIND, 1)

    def _patch_once(self, resource_id: str, sku_name: str, sku_tier: str, capacity: int) -> None:
        from azure.mgmt.eventhub.models import EHNamespace, Sku

        parts = self._parts(resource_id)
        try:
            self._client(parts.subscription_id).namespaces.update(
                parts.resource_group, parts.name, EHNamespace(sku=Sku(name=sku_name, tier=sku_tier, capacity=capacity)),
                retry_total=0)
        except CLIENT_ERRORS as error:
            raise self._translate(error, resource_id, f"setting {capacity} TUs") from error

    # --- helpers -------------------------------------------------------------------------------------

    @staticmethod
    def _parts(resource_id: str) -> Any:
        parts = parse_namespace_id(resource_id, EVENT_HUB)
        if parts is None:
            raise PlanError(f"{resource_id!r} is not an Event Hubs namespace resource id "
                            "(/subscriptions/ID/resourceGroups/RG/providers/Microsoft.EventHub/namespaces/NAME)")
        return parts

    def _get(self, resource_id: str) -> Any:
        parts = self._parts(resource_id)
        try:
            return self._client(parts.subscription_id).namespaces.get(parts.resource_group, parts.name)
        except CLIENT_ERRORS as error:
            raise self._translate(error, resource_id, "reading") from error

    def _translate(self, error: Exception, resource_id: str, doing: str) -> PlanError:
        translated = self._errors._translate(error, resource_id, doing)
        if isinstance(translated, PlanNotFoundError):
            return PlanNotFoundError(f"namespace {resource_id} not found (404) while {doing}: check the policy's "
                                     "namespaces[].resource_id and that the identity can read it", status_code=404)
        return translated

    @staticmethod
    def _info(resource_id: str, model: Any) -> NamespaceInfo:
        sku = model.sku
        tier = (getattr(sku, "tier", None) or getattr(sku, "name", None) or "") if sku is not None else ""
        if tier.lower() not in TU_TIERS:
            raise UnsupportedPlanError(f"namespace {resource_id}: tier {tier!r} is not sized in throughput units "
                                       "(Basic or Standard only)")
        maximum = getattr(model, "maximum_throughput_units", None)
        return NamespaceInfo(resource_id, int(sku.capacity or 1), tier, bool(getattr(model, "is_auto_inflate_enabled", False)),
                             int(maximum) if maximum else None)

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()
        self._errors.close()


class RoutingPlanAdapter:
    """One ``PlanAdapter`` for the scale service: namespaces to the namespace adapter, everything
    else (App Service Plans) to the plan adapter."""

    def __init__(self, plans: Any, namespaces: EventHubsNamespaceAdapter) -> None:
        self.plans = plans
        self.namespaces = namespaces

    def _for(self, resource_id: str) -> Any:
        return self.namespaces if is_namespace_id(resource_id) else self.plans

    def get_plan(self, resource_id: str) -> PlanInfo:
        return self._for(resource_id).get_plan(resource_id)

    def set_capacity(self, resource_id: str, capacity: int) -> PlanInfo:
        return self._for(resource_id).set_capacity(resource_id, capacity)

    def enabled_autoscale_settings(self, resource_id: str) -> tuple[str, ...]:
        adapter = self._for(resource_id)
        reader = getattr(adapter, "enabled_autoscale_settings", None)
        return tuple(reader(resource_id)) if reader else ()

    def close(self) -> None:
        for adapter in (self.plans, self.namespaces):
            closer = getattr(adapter, "close", None)
            if closer:
                closer()
