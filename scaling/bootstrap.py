"""The composition root: the one place that turns app settings into services and SDK clients.

Adapters (``sources/``, ``storage/``, ``plans/``) build their own clients from settings
(``factory.py`` in each); only here are they handed to the use cases in ``services/``. The
blueprints ask for their service here on first use (``build_*_service``) and cache it for the
life of the worker; tests and the local demo build theirs with ``*_for(settings, ...)`` and
install them through each blueprint's ``set_service``. Settings are validated when the
Functions host loads the app (``validate_at_startup``), so a wrong value fails the start-up with
a message naming the setting rather than every invocation later.

Imports of services and adapters happen inside the builders: a blueprint loads only what its
own function needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from scaling.domain.policy import PlanSettings, SourceSettings
from scaling.settings import Settings

if TYPE_CHECKING:
    from scaling.services.collect import AutoscaleSettingsReader, CapacityReader, Collector
    from scaling.services.dead_letters import DeadLetterService
    from scaling.services.evaluate import EvaluateService
    from scaling.services.namespace import CombinedCollector, NamespaceCollector
    from scaling.services.scale import ScaleService
    from scaling.services.telemetry import Telemetry
    from scaling.storage.base import TableNames

#: Variables the Functions host (Azure or Core Tools) sets; their presence means "running in a host".
HOST_MARKERS = ("AZURE_FUNCTIONS_ENVIRONMENT", "WEBSITE_INSTANCE_ID", "FUNCTIONS_WORKER_RUNTIME")


def running_in_functions_host(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return any(environ.get(name) for name in HOST_MARKERS)


def validate_at_startup(environ: Mapping[str, str] | None = None) -> Settings | None:
    """Parse every setting now when a Functions host is loading the app (raises ``SettingsError``
    naming the setting); outside a host (tests, tools) do nothing."""
    if not running_in_functions_host(environ):
        return None
    return Settings.from_environment(environ)


def utc_now() -> datetime:
    return datetime.now(UTC)


def telemetry_for(environ: Mapping[str, str] | None = None) -> Telemetry:
    """Azure Monitor (configured once per process) when ``APPLICATIONINSIGHTS_CONNECTION_STRING``
    is set, with the managed identity; the no-op telemetry otherwise (local runs, tests)."""
    from scaling.telemetry.monitor import telemetry_from_environment

    return _or_none(telemetry_from_environment(os.environ if environ is None else environ))


def _or_none(telemetry: Telemetry | None) -> Telemetry:
    from scaling.services.telemetry import NO_TELEMETRY

    return NO_TELEMETRY if telemetry is None else telemetry


# --- services from settings (tests, the local demo, and the blueprints below) -----------------


class UnwiredCapacityReader:
    """Stands in until a real capacity reader is passed: every read fails with a clear error,
    so samples carry ``capacity_error`` instead of the collector crashing."""

    async def current_capacity(self, plan: PlanSettings) -> int:
        from scaling.sources.base import ReadError

        raise ReadError(f"no capacity reader is configured for plan {plan.name!r}")


def collector_for(
    settings: Settings,
    credential: Any = None,
    *,
    capacity_reader: CapacityReader | None = None,
    environ: Mapping[str, str] | None = None,
    clock: Callable[[], datetime] = utc_now,
    partition_source_for: Callable[[SourceSettings], Any] | None = None,
    queue_for: Callable[[SourceSettings], Any] | None = None,
    telemetry: Telemetry | None = None,
    arm_client_kwargs: Mapping[str, Any] | None = None,
    peek_and_rates_for: Callable[[SourceSettings], Any] | None = None,
    controllers: AutoscaleSettingsReader | None = None,
) -> Collector:
    """The collector for ``settings.policy`` over the real source readers.

    ``credential`` is an async token credential (one is created, and closed by
    ``Collector.aclose``, when ``None`` and some source needs one); ``capacity_reader`` is the
    plan adapter (without it every sample reports a ``capacity_error``), and ``controllers``
    lists the plans' enabled autoscale settings (the plan adapter too; without it, none);
    ``partition_source_for`` replaces the Event Hubs client per source and ``queue_for`` the
    Service Bus and Azure Monitor clients (the local demo's simulated hub and queue);
    ``arm_client_kwargs`` go to the Service Bus management client (a local ARM endpoint's
    ``connection_verify``); ``peek_and_rates_for`` replaces only a queue's peek and Azure Monitor
    rates, its count still going through that client (the demo's queue).
    """
    from scaling.services.collect import Collector
    from scaling.sources.factory import build_source_readers

    sources = build_source_readers(settings, credential, environ=environ, partition_source_for=partition_source_for,
                                   queue_for=queue_for, arm_client_kwargs=arm_client_kwargs,
                                   peek_and_rates_for=peek_and_rates_for)
    return Collector(
        settings.policy,
        sources.readers,
        capacity_reader or UnwiredCapacityReader(),
        concurrency=settings.collect_concurrency,
        timeout_seconds=settings.collect_timeout_seconds,
        clock=clock,
        closers=sources.closers,
        controllers=controllers,
        telemetry=_or_none(telemetry),
    )


def evaluate_service_for(
    settings: Settings,
    credential: Any = None,
    *,
    store: Any = None,
    clock: Callable[[], datetime] = utc_now,
    names: TableNames | None = None,
    telemetry: Telemetry | None = None,
) -> EvaluateService:
    """The evaluate service: Table storage (unless ``store``), the policy, retention from settings."""
    from scaling.services.evaluate import EvaluateService
    from scaling.services.namespace import NamespaceEvaluateService
    from scaling.storage.base import TableNames
    from scaling.storage.factory import build_table_storage

    store = store if store is not None else build_table_storage(settings, credential, names=names or TableNames())
    namespaces = None
    if settings.policy.namespaces:
        namespaces = NamespaceEvaluateService(store, settings.policy, clock=clock,
                                              clock_skew=timedelta(seconds=settings.clock_skew_seconds),
                                              reconcile_grace=timedelta(seconds=settings.reconcile_grace_seconds),
                                              telemetry=_or_none(telemetry))
    return EvaluateService(
        store,
        settings.policy,
        clock=clock,
        retention_days=settings.history_retention_days,
        clock_skew=timedelta(seconds=settings.clock_skew_seconds),
        reconcile_grace=timedelta(seconds=settings.reconcile_grace_seconds),
        dry_run=settings.dry_run,
        telemetry=_or_none(telemetry),
        external_changes_limit=settings.external_changes_per_hour,
        namespaces=namespaces,
    )


def scale_service_for(
    settings: Settings,
    credential: Any = None,
    *,
    store: Any = None,
    plans: Any = None,
    clock: Callable[[], datetime] = utc_now,
    names: TableNames | None = None,
    telemetry: Telemetry | None = None,
) -> ScaleService:
    """The scale service: Table storage and the ARM adapter (unless ``store``/``plans``),
    ``SCALER_DRY_RUN``."""
    from scaling.plans.factory import build_scale_adapter
    from scaling.services.scale import ScaleService
    from scaling.storage.base import TableNames
    from scaling.storage.factory import build_credential, build_table_storage

    if plans is None:
        plans = build_scale_adapter(settings, credential if credential is not None else build_credential(settings))
    return ScaleService(
        store if store is not None else build_table_storage(settings, credential, names=names or TableNames()),
        plans,
        settings.policy,
        dry_run=settings.dry_run,
        clock=clock,
        telemetry=_or_none(telemetry),
        clock_skew=timedelta(seconds=settings.clock_skew_seconds),
        controllers=plans if hasattr(plans, "enabled_autoscale_settings") else None,
    )


# --- services from the app settings (the blueprints) ------------------------------------------


def _settings_and_credential() -> tuple[Settings, Any]:
    """The settings now, and a synchronous credential for Table/Queue storage and ARM (the
    user-assigned managed identity in Azure). Each blueprint caches the service built from them."""
    from scaling.storage.factory import build_credential

    settings = Settings.from_environment()
    return settings, build_credential(settings)


def namespace_collector_for(settings: Settings, credential: Any, *, metrics_client: Any = None,
                            clock: Callable[[], datetime] = utc_now, **arm_client_kwargs: Any) -> NamespaceCollector:
    """The namespace targets' collector: the Event Hubs management adapter (sync credential) and
    Azure Monitor's metrics client (``metrics_client``, else one on the app's identity)."""
    from scaling.plans.factory import build_namespace_adapter
    from scaling.services.namespace import NamespaceCollector
    from scaling.sources.factory import build_namespace_metrics

    adapter = build_namespace_adapter(settings, credential, **arm_client_kwargs)
    metrics, closers = build_namespace_metrics(settings, metrics_client)
    return NamespaceCollector(settings.policy, adapter, metrics, clock=clock, timeout_seconds=settings.collect_timeout_seconds,
                              closers=(adapter.close, *closers))


def build_collect_service() -> Collector | CombinedCollector:
    from scaling.plans.factory import build_plan_adapter
    from scaling.services.namespace import CombinedCollector

    settings, credential = _settings_and_credential()
    plans = build_plan_adapter(settings, credential)
    collector = collector_for(settings, capacity_reader=plans, controllers=plans, telemetry=telemetry_for())
    if not settings.policy.namespaces:
        return collector
    return CombinedCollector(collector, namespace_collector_for(settings, credential))


def build_evaluate_service() -> EvaluateService:
    return evaluate_service_for(*_settings_and_credential(), telemetry=telemetry_for())


def build_scale_service() -> ScaleService:
    service = scale_service_for(*_settings_and_credential(), telemetry=telemetry_for())
    service.competing_controllers()  # at start-up: an operator reads the conflict in the log at once
    return service


def build_dead_letter_service() -> DeadLetterService:
    from scaling.services.dead_letters import DeadLetterService
    from scaling.storage.factory import build_table_storage

    settings, credential = _settings_and_credential()
    return DeadLetterService(build_table_storage(settings, credential), telemetry=telemetry_for())
