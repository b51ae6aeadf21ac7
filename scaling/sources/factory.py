"""Builds the real source readers from settings: SDK clients, checkpoint readers, one reader per
source kind. The composition root (``scaling.bootstrap.collector_for``) hands them to the
collector service.

No I/O happens here, so building is cheap and safe at the first invocation; a configuration
problem (a ``connectionFromEnv``/``storageConnectionFromEnv`` variable that is not set) raises
``SettingsError`` naming the variable and the policy field that refers to it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scaling.domain.policy import SourceSettings
from scaling.settings import Settings, SettingsError
from scaling.sources.base import SourceReader
from scaling.sources.checkpoints import checkpoint_reader_for
from scaling.sources.eventhub import EventHubBinding, EventHubClients, EventHubReader
from scaling.sources.servicebus import ServiceBusClients, ServiceBusReader, reads_slo_inputs


class BlobContainers:
    """One ``azure.storage.blob.aio.ContainerClient`` per (account, container), reused."""

    def __init__(self, credential_for: Callable[[], Any], environ: Mapping[str, str]) -> None:
        self._credential_for = credential_for
        self._environ = environ
        self._containers: dict[tuple[str, str], Any] = {}

    def container_for(self, source: SourceSettings, field_path: str) -> Any:
        from azure.storage.blob.aio import ContainerClient

        if source.storage_connection_from_env:
            connection = self._environ.get(source.storage_connection_from_env)
            if not connection:
                raise SettingsError(f"{source.storage_connection_from_env} ({field_path}.storageConnectionFromEnv) is not set")
            key = (f"env:{source.storage_connection_from_env}", source.blob_container)
            if key not in self._containers:
                self._containers[key] = ContainerClient.from_connection_string(connection, source.blob_container)
        else:
            account_url = (source.checkpoint_account_url or "").rstrip("/")
            key = (account_url, source.blob_container)
            if key not in self._containers:
                self._containers[key] = ContainerClient(account_url, source.blob_container, credential=self._credential_for())
        return self._containers[key]

    async def aclose(self) -> None:
        containers, self._containers = list(self._containers.values()), {}
        await asyncio.gather(*(container.close() for container in containers), return_exceptions=True)


def _uses_identity(source: SourceSettings) -> bool:
    if not source.connection_from_env:
        return True
    if source.kind == "servicebus":
        # The management plane (counts) and Azure Monitor take no connection string.
        return source.service_bus_namespace is not None or reads_slo_inputs(source)
    return not source.storage_connection_from_env


@dataclass(frozen=True, slots=True)
class SourceReaders:
    """The readers for every configured source kind, and what closes the credential created for
    them (the readers close their own SDK clients)."""

    readers: tuple[SourceReader, ...]
    closers: tuple[Callable[[], Any], ...]


def build_source_readers(
    settings: Settings,
    credential: Any = None,
    *,
    environ: Mapping[str, str] | None = None,
    partition_source_for: Callable[[SourceSettings], Any] | None = None,
    queue_for: Callable[[SourceSettings], Any] | None = None,
    arm_client_kwargs: Mapping[str, Any] | None = None,
    peek_and_rates_for: Callable[[SourceSettings], Any] | None = None,
) -> SourceReaders:
    """The source readers for ``settings.policy``.

    ``credential`` is an async token credential; when ``None`` and some source needs one, a
    ``DefaultAzureCredential`` (``azure.identity.aio``, with ``AZURE_CLIENT_ID`` as the managed
    identity when set) is created, and its ``close`` is among the returned closers.
    ``partition_source_for`` replaces the Event Hubs client per source (the local demo's
    simulated hub); ``queue_for`` replaces every Service Bus client per source with one object
    that counts, peeks and reports rates (the demo's simulated queue); everything else is built
    from the settings as in Azure. Service Bus counts are read from ARM at ``settings.arm_endpoint``;
    ``arm_client_kwargs`` go to that management client (a local endpoint's ``connection_verify``).
    ``peek_and_rates_for`` replaces only the data-plane peek and the Azure Monitor rates (what no
    local endpoint serves), so that the counts still go through the real management client (the
    demo's queue, counted through the local ARM endpoint).
    """
    environ = os.environ if environ is None else environ
    owned: list[Callable[[], Any]] = []
    holder: dict[str, Any] = {"credential": credential}

    def credential_for() -> Any:
        if holder["credential"] is None:
            from azure.identity.aio import DefaultAzureCredential

            kwargs = {"managed_identity_client_id": settings.client_id} if settings.client_id else {}
            holder["credential"] = DefaultAzureCredential(**kwargs)
            owned.append(holder["credential"].close)
        return holder["credential"]

    needs_identity = any(_uses_identity(s) for t in settings.policy.targets for s in t.sources
                         if not (queue_for and s.kind == "servicebus"))
    hubs = EventHubClients(credential_for() if needs_identity else None, environ)
    buses = ServiceBusClients(credential_for() if needs_identity else None, environ, arm_endpoint=settings.arm_endpoint,
                              arm_client_kwargs=arm_client_kwargs)
    containers = BlobContainers(credential_for, environ)

    bindings: dict[SourceSettings, EventHubBinding] = {}
    for t_index, target in enumerate(settings.policy.targets):
        for s_index, source in enumerate(target.sources):
            path = f"targets[{t_index}].sources[{s_index}]"
            try:
                if source.kind == "eventhub":
                    if source not in bindings:
                        namespace = hubs.namespace(source)
                        container = containers.container_for(source, path)
                        bindings[source] = EventHubBinding(
                            partitions=partition_source_for(source) if partition_source_for else hubs.source_for(source),
                            checkpoints=checkpoint_reader_for(source.checkpoint_strategy, container),
                            namespace=namespace,
                        )
                elif source.kind == "servicebus" and queue_for is None:
                    buses.counter_for(source)
                    if reads_slo_inputs(source) and peek_and_rates_for is None:
                        buses.peeker_for(source)
            except LookupError as error:
                raise SettingsError(f"{error} ({path})") from None
            except ValueError as error:
                if isinstance(error, SettingsError):
                    raise
                raise SettingsError(f"{path}: {error}") from None

    readers = (
        EventHubReader(bindings.__getitem__, ownership_expiry_seconds=settings.ownership_expiry_seconds,
                       closers=(hubs.aclose, containers.aclose)),
        ServiceBusReader(queue_for, peeker_for=queue_for, metrics_for=queue_for) if queue_for else
        ServiceBusReader(buses.counter_for, closers=(buses.aclose,), peeker_for=peek_and_rates_for or buses.peeker_for,
                         metrics_for=peek_and_rates_for or buses.metrics_for),
    )
    return SourceReaders(readers, tuple(owned))


def build_namespace_metrics(settings: Settings, metrics_client: Any = None) -> tuple[Any, list[Callable[[], Any]]]:
    """The namespace targets' Azure Monitor reader (``MonitorNamespaceMetrics``) and what closes it:
    ``metrics_client`` when given (a local endpoint's), else a ``MetricsQueryClient`` on an async
    ``DefaultAzureCredential`` (the user-assigned identity ``AZURE_CLIENT_ID`` when set)."""
    from scaling.sources.namespace import MonitorNamespaceMetrics

    closers: list[Callable[[], Any]] = []
    if metrics_client is None:
        from azure.identity.aio import DefaultAzureCredential
        from azure.monitor.query.aio import MetricsQueryClient

        credential = DefaultAzureCredential(**({"managed_identity_client_id": settings.client_id} if settings.client_id else {}))
        metrics_client = MetricsQueryClient(credential)
        closers.append(credential.close)
    reader = MonitorNamespaceMetrics(metrics_client)
    return reader, [reader.close, *closers]
