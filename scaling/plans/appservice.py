"""The App Service Plan adapter over ``azure.mgmt.web.WebSiteManagementClient``.

- ``get_plan``: ``app_service_plans.get``; capacity is ``sku.capacity`` (Dedicated) or
  ``maximumElasticWorkerCount`` (Elastic Premium).
- ``set_capacity``: ``app_service_plans.begin_create_or_update`` with the plan as read and only
  that number changed. Nothing is written when the plan already has the capacity. The PUT is
  sent once per attempt, never retried blindly by the client: when its reply fails (a timeout,
  a reset, a 5xx, 408, 409 or 429) the write may have landed all the same, so the plan is read
  back first, and only if it does not have the capacity is the PUT sent again, after a back-off
  (or the server's Retry-After), at most ``retry_total`` more times.
- Transient ARM failures (429 with Retry-After, 408/5xx, 409 "another operation is in
  progress") are retried by the azure-core retry policy, bounded in count and total time, and a
  Retry-After longer than ``max_retry_after`` is capped. A 404 becomes ``PlanNotFoundError``.
- ``current_capacity`` (async) is the collector's ``CapacityReader``.

Authentication is a token credential (``DefaultAzureCredential`` with the user-assigned
identity in Azure); ``base_url`` is the ARM endpoint (``ARM_ENDPOINT``).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
)
from azure.core.pipeline.policies import RetryPolicy

from scaling.domain.policy import PlanSettings
from scaling.plans.base import (
    DEDICATED,
    ELASTIC,
    PlanError,
    PlanInfo,
    PlanNotFoundError,
    UnsupportedPlanError,
    plan_kind,
    plan_settings,
    tier_instance_limit,
)

logger = logging.getLogger(__name__)

DEFAULT_ARM_ENDPOINT = "https://management.azure.com"
#: Besides azure-core's defaults (408, 429, 500, 502, 503, 504): ARM answers 409 while another
#: operation on the plan is in progress.
EXTRA_RETRY_STATUSES = (409,)
#: What the management client raises besides ``AzureError``: ``DeserializationError`` and a
#: malformed header in the LRO poller are ``ValueError``s, a malformed body a ``TypeError`` or
#: ``KeyError``. All become ``PlanError`` so the scale service records them like any ARM failure.
CLIENT_ERRORS = (AzureError, ValueError, TypeError, KeyError, AttributeError)
#: After the subscription's autoscale-settings list was refused, how long to list only the plan's
#: resource group before asking the subscription again.
SUBSCRIPTION_LIST_RETRY_SECONDS = 3600.0


#: Headers that carry a server's requested delay, and the unit of each (seconds or milliseconds).
RETRY_AFTER_HEADERS = (("retry-after", 1.0), ("retry-after-ms", 1000.0), ("x-ms-retry-after-ms", 1000.0))


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a Retry-After value (seconds, possibly fractional, or an HTTP date);
    ``None`` when it is neither (azure-core raises ``ValueError`` there), so the caller backs off
    as if no header had come. Negative values and past dates mean "now" (0)."""
    text = (value or "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:  # "-0000": UTC by RFC 5322
            when = when.replace(tzinfo=UTC)
        seconds = (when - now).total_seconds()
    if math.isnan(seconds):
        return None
    return max(seconds, 0.0)


class BoundedRetryPolicy(RetryPolicy):
    """azure-core's retry policy with the server's Retry-After capped at ``max_retry_after`` and a
    malformed one ignored (the default back-off applies) instead of failing the call."""

    def __init__(self, *, max_retry_after: float = 60.0, clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_retry_after = max_retry_after
        self.clock = clock

    def get_retry_after(self, response: Any) -> float | None:
        headers = {str(name).lower(): value for name, value in response.http_response.headers.items()}
        for header, per_second in RETRY_AFTER_HEADERS:
            if headers.get(header):
                value = parse_retry_after(headers[header], self.clock())
                return None if value is None else min(value / per_second, self.max_retry_after)
        return None


#: Statuses after which a PUT may have been applied, or may succeed if sent again.
UNSETTLED_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


def _may_have_landed(error: PlanError) -> bool:
    """Whether a failed write is worth reading back and sending again: no answer at all (a
    timeout or a reset connection) or a transient status; never a 4xx that says no."""
    return error.status_code is None or error.status_code in UNSETTLED_STATUSES


def _error_text(error: Exception) -> str:
    message = getattr(error, "message", None) or str(error)
    return " ".join(message.split())[:500]


def retry_settings(retry_total: int, retry_backoff_factor: float, retry_backoff_max: float, max_retry_after: float,
                   retry_timeout: float) -> dict[str, Any]:
    """An ARM adapter's retry options as ``BoundedRetryPolicy`` takes them (a status retry counts
    against the same total)."""
    return dict(retry_total=retry_total, retry_status=retry_total, retry_backoff_factor=retry_backoff_factor,
                retry_backoff_max=retry_backoff_max, max_retry_after=max_retry_after, timeout=retry_timeout)


def subscription_client(client_class: Callable[..., Any], credential: Any, subscription_id: str, base_url: str,
                        retry: dict[str, Any], client_kwargs: dict[str, Any], **options: Any) -> Any:
    """A management client for one subscription, as every ARM adapter builds it: the cloud's
    token scope, the bounded retry policy (``retry``: the adapter's settings) and its options."""
    kwargs = {"credential_scopes": [f"{base_url}/.default"], **client_kwargs}
    return client_class(credential, subscription_id, base_url=base_url,
                        retry_policy=BoundedRetryPolicy(retry_on_status_codes=list(EXTRA_RETRY_STATUSES), **retry),
                        **options, **kwargs)


class AppServicePlanAdapter:
    """Reads and resizes App Service Plans; one management client per subscription."""

    def __init__(
        self,
        credential: Any,
        *,
        base_url: str = DEFAULT_ARM_ENDPOINT,
        retry_total: int = 4,
        retry_backoff_factor: float = 0.8,
        retry_backoff_max: float = 20.0,
        max_retry_after: float = 60.0,
        retry_timeout: float = 120.0,
        polling_interval: float = 5.0,
        lro_timeout: float = 300.0,
        sleep: Callable[[float], None] = time.sleep,
        **client_kwargs: Any,
    ) -> None:
        self.credential = credential
        self.base_url = base_url.rstrip("/")
        self.retry = retry_settings(retry_total, retry_backoff_factor, retry_backoff_max, max_retry_after, retry_timeout)
        self.polling_interval = polling_interval
        self.lro_timeout = lro_timeout
        self.sleep = sleep
        self.client_kwargs = client_kwargs
        self._clients: dict[str, Any] = {}
        self._monitors: dict[str, Any] = {}
        #: Subscriptions whose autoscale-settings list was refused, and when (monotonic seconds).
        self._subscription_refused: dict[str, float] = {}
        self._lock = threading.Lock()

    def _client(self, subscription_id: str) -> Any:
        from azure.mgmt.web import WebSiteManagementClient

        with self._lock:
            client = self._clients.get(subscription_id)
            if client is None:
                client = subscription_client(WebSiteManagementClient, self.credential, subscription_id, self.base_url,
                                             self.retry, self.client_kwargs, polling_interval=self.polling_interval)
                self._clients[subscription_id] = client
            return client

    # --- the PlanAdapter protocol ------------------------------------------------------------------

    def get_plan(self, resource_id: str) -> PlanInfo:
        plan = plan_settings(resource_id)
        return self._info(resource_id, self._get(plan))

    def set_capacity(self, resource_id: str, capacity: int) -> PlanInfo:
        if capacity < 1:
            raise PlanError(f"capacity must be at least 1, got {capacity}")
        plan = plan_settings(resource_id)
        model = self._get(plan)
        info = self._info(resource_id, model)
        if info.capacity == capacity:
            return info
        if info.kind == ELASTIC:
            model.maximum_elastic_worker_count = capacity
        else:
            model.sku.capacity = capacity
        attempt = 0
        while True:
            attempt += 1
            try:
                result = self._put_once(plan, model, resource_id, capacity)
                break
            except PlanError as error:
                if not _may_have_landed(error) or attempt > self.retry["retry_total"]:
                    raise
                confirmed = self._read_back(plan, resource_id, capacity)
                if confirmed is not None:
                    logger.warning("plan %s: the write of capacity %s answered %s, but the plan has it: applied",
                                   resource_id, capacity, error)
                    return confirmed
                wait = self._backoff(attempt, error)
                logger.warning("plan %s: the write of capacity %s failed (%s; attempt %d); the plan does not have it: "
                               "sending it again in %.1f s", resource_id, capacity, error, attempt, wait)
                self.sleep(wait)
        logger.info("plan %s: %s capacity %s -> %s", resource_id, info.kind, info.capacity, capacity)
        return self._info(resource_id, result)

    def _put_once(self, plan: PlanSettings, model: Any, resource_id: str, capacity: int) -> Any:
        """One PUT (the client's retry policy off for it) and its long-running operation."""
        try:
            poller = self._client(plan.subscription_id).app_service_plans.begin_create_or_update(
                plan.resource_group, plan.name, model, retry_total=0)
            result = poller.result(timeout=self.lro_timeout)
        except CLIENT_ERRORS as error:
            raise self._translate(error, resource_id, f"setting capacity {capacity}") from error
        if result is None or not poller.done():
            raise PlanError(f"plan {resource_id}: setting capacity {capacity} did not finish within {self.lro_timeout:g}s")
        return result

    def _read_back(self, plan: PlanSettings, resource_id: str, capacity: int) -> PlanInfo | None:
        """The plan, if it has ``capacity`` now; ``None`` if not, or if it cannot be read."""
        try:
            info = self._info(resource_id, self._get(plan))
        except PlanError:
            return None
        return info if info.capacity == capacity else None

    def _backoff(self, attempt: int, error: PlanError) -> float:
        """The server's Retry-After (capped), else the policy's exponential back-off."""
        if error.retry_after is not None:
            return min(error.retry_after, self.retry["max_retry_after"])
        return min(self.retry["retry_backoff_factor"] * (2 ** (attempt - 1)), self.retry["retry_backoff_max"])

    # --- other controllers on the plan (domain/conflict.py) ----------------------------------------

    def enabled_autoscale_settings(self, resource_id: str) -> tuple[str, ...]:
        """Names of the enabled Azure Monitor autoscale settings whose target is the plan.

        A setting may live in any resource group of the subscription, so the subscription's
        settings are listed (``Microsoft.Insights/autoscaleSettings/read`` at subscription scope,
        docs/deploy.md). Where that is refused (the role is assigned on the plan's resource group
        only, as ``azd up`` does), the plan's resource group is listed instead, as before, and the
        subscription is asked again an hour later (a role granted meanwhile is picked up)."""
        plan = plan_settings(resource_id)
        monitor = self._monitor(plan.subscription_id)
        settings = None
        if self._subscription_list_allowed(plan.subscription_id):
            try:
                settings = list(monitor.autoscale_settings.list_by_subscription())
            except CLIENT_ERRORS as error:
                if getattr(error, "status_code", None) not in (401, 403):
                    raise self._translate(error, resource_id, "listing the autoscale settings of its subscription") from error
                with self._lock:
                    self._subscription_refused[plan.subscription_id] = time.monotonic()
                logger.warning("listing the autoscale settings of subscription %s was refused (%s); listing plan %s's "
                               "resource group only (docs/deploy.md: the Autoscale Settings Reader role at "
                               "subscription scope finds a setting kept anywhere)", plan.subscription_id,
                               getattr(error, "status_code", "?"), resource_id)
        if settings is None:
            try:
                settings = list(monitor.autoscale_settings.list_by_resource_group(plan.resource_group))
            except CLIENT_ERRORS as error:
                raise self._translate(error, resource_id, "listing the autoscale settings of its resource group") from error
        wanted = resource_id.rstrip("/").lower()
        return tuple(sorted(setting.name for setting in settings if setting.enabled
                            and (setting.target_resource_uri or "").rstrip("/").lower() == wanted))

    def _subscription_list_allowed(self, subscription_id: str) -> bool:
        """Whether to list the subscription's settings: not when it was refused within the hour."""
        with self._lock:
            refused = self._subscription_refused.get(subscription_id)
        return refused is None or time.monotonic() - refused >= SUBSCRIPTION_LIST_RETRY_SECONDS

    async def current_autoscale_settings(self, plan: PlanSettings) -> tuple[str, ...]:
        """``enabled_autoscale_settings`` for the collector (async)."""
        return await asyncio.to_thread(self.enabled_autoscale_settings, plan.resource_id)

    def _monitor(self, subscription_id: str) -> Any:
        from azure.mgmt.monitor import MonitorManagementClient

        with self._lock:
            client = self._monitors.get(subscription_id)
            if client is None:
                kwargs = {"credential_scopes": [f"{self.base_url}/.default"], **self.client_kwargs}
                client = MonitorManagementClient(self.credential, subscription_id, base_url=self.base_url,
                                                 retry_policy=BoundedRetryPolicy(**self.retry), **kwargs)
                self._monitors[subscription_id] = client
            return client

    # --- the collector's CapacityReader ---------------------------------------------------------

    def read_capacity(self, plan: PlanSettings) -> int:
        return self.get_plan(plan.resource_id).capacity

    async def current_capacity(self, plan: PlanSettings) -> int:
        """The capacity the autoscaler controls (async, for ``scaling.services.collect``)."""
        return await asyncio.to_thread(self.read_capacity, plan)

    def close(self) -> None:
        with self._lock:
            clients = [*self._clients.values(), *self._monitors.values()]
            self._clients, self._monitors = {}, {}
        for client in clients:
            client.close()

    # --- helpers --------------------------------------------------------------------------------

    def _get(self, plan: PlanSettings) -> Any:
        try:
            return self._client(plan.subscription_id).app_service_plans.get(plan.resource_group, plan.name)
        except CLIENT_ERRORS as error:
            raise self._translate(error, plan.resource_id, "reading") from error

    def _translate(self, error: Exception, resource_id: str, doing: str) -> PlanError:
        if isinstance(error, ResourceNotFoundError):
            return PlanNotFoundError(f"plan {resource_id} not found (404) while {doing}: check the policy's "
                                     "plan.resource_id and that the identity can read it", status_code=404)
        if isinstance(error, ClientAuthenticationError):
            return PlanError(f"plan {resource_id}: not authorised while {doing}: {_error_text(error)}",
                             status_code=getattr(error, "status_code", None))
        if isinstance(error, HttpResponseError):
            response = getattr(error, "response", None)
            headers = {str(name).lower(): value for name, value in (getattr(response, "headers", None) or {}).items()}
            retry_after = parse_retry_after(headers.get("retry-after"), datetime.now(UTC))
            return PlanError(f"plan {resource_id}: ARM answered {error.status_code} while {doing} "
                             f"(after retries): {_error_text(error)}", status_code=error.status_code,
                             retry_after=retry_after)
        return PlanError(f"plan {resource_id}: {type(error).__name__} while {doing} (after retries): {_error_text(error)}")

    @staticmethod
    def _info(resource_id: str, model: Any) -> PlanInfo:
        sku = model.sku
        if sku is None:
            raise UnsupportedPlanError(f"plan {resource_id} has no sku in ARM's answer")
        tier, name = sku.tier or "", sku.name or ""
        limit = tier_instance_limit(tier, name)
        if limit is None:
            limit = model.maximum_number_of_workers
        if not limit:
            raise UnsupportedPlanError(f"plan {resource_id}: unknown tier {tier!r} (sku {name!r}) and no maximumNumberOfWorkers")
        kind = plan_kind(tier, name)
        if kind == ELASTIC:
            minimum = max(int(sku.capacity or 1), 1)
            capacity = model.maximum_elastic_worker_count
            capacity = int(capacity) if capacity is not None else minimum
            return PlanInfo(resource_id, capacity, name, tier, int(limit), ELASTIC, minimum)
        capacity = sku.capacity if sku.capacity is not None else model.number_of_workers
        return PlanInfo(resource_id, int(capacity or 1), name, tier, int(limit), DEDICATED, 1)
