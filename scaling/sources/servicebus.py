"""Service Bus: the active message count of a queue or a topic subscription, and for a queue with
``metrics_resource_id`` (the SLO mode) the oldest message's enqueued time and the arrival and
completion rates.

Three small interfaces, one SDK adapter each:

- ``MessageCounter``: ``azure.mgmt.servicebus.aio.ServiceBusManagementClient``'s GET of the queue
  or topic subscription (``countDetails.activeMessageCount``), on the namespace the policy's
  ``namespaceResourceId`` (or ``metricsResourceId``) names. A control-plane read: a reader role on
  the namespace (``Microsoft.ServiceBus/namespaces/queues/read``,
  ``.../topics/subscriptions/read``), no data-plane right at all. Only a source with nothing but a
  connection string (``connectionFromEnv``, local use) still counts through the data plane's
  ``ServiceBusAdministrationClient`` (runtime properties, which need Manage).
- ``OldestMessagePeeker``: ``ServiceBusReceiver.peek_messages`` on a fresh receiver (a receiver
  peeks on from where it last peeked), one message: its ``enqueued_time_utc``. Needs Listen
  (Azure Service Bus Data Receiver, assigned on that queue only); peeking locks and removes nothing.
- ``QueueMetricsReader``: Azure Monitor's ``IncomingMessages`` and ``CompleteMessage`` (Total per
  minute, ``EntityName`` = the queue) through ``azure.monitor.query.aio.MetricsQueryClient``.
  Needs Monitoring Reader on the namespace. Platform metrics land a minute or more late, so the
  latest minute that has both values is used and its age is noted in the reading.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from scaling.domain.policy import SourceSettings
from scaling.domain.resource_ids import NamespaceId
from scaling.domain.samples import SourceReading
from scaling.sources.base import CallGate, ReadError, connection_from_env, error_text, minute_totals
from scaling.sources.eventhub import normalize_namespace

KIND = "servicebus"


class MessageCounter(Protocol):
    """Counts the messages waiting in one entity of one namespace."""

    async def queue_active_messages(self, queue_name: str) -> int: ...

    async def subscription_active_messages(self, topic_name: str, subscription_name: str) -> int: ...


@dataclass(frozen=True, slots=True)
class QueueRates:
    """A queue's messages per minute as Azure Monitor counted them in ``minute`` (``None`` when no
    minute has both metrics yet)."""

    incoming_per_minute: float | None
    completed_per_minute: float | None
    minute: datetime | None = None


class OldestMessagePeeker(Protocol):
    """When the oldest message still in a queue was enqueued (``None`` when the queue is empty)."""

    async def oldest_enqueued_at(self, queue_name: str) -> datetime | None: ...


class QueueMetricsReader(Protocol):
    """A queue's latest complete minute of arrivals and completions."""

    async def queue_rates(self, resource_id: str, queue_name: str, now: datetime) -> QueueRates: ...


INCOMING = "IncomingMessages"
COMPLETED = "CompleteMessage"
#: How far back the metrics query looks: Azure Monitor's delay plus a few minutes to spare.
METRICS_LOOKBACK = timedelta(minutes=10)


def enqueued_time(message: Any) -> datetime | None:
    """A peeked ``ServiceBusReceivedMessage``'s enqueued time, as an aware UTC datetime."""
    moment = getattr(message, "enqueued_time_utc", None)
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def rates_from_metrics(result: Any, now: datetime) -> QueueRates:
    """The latest minute that ended by ``now`` and has both metrics' ``total`` in a
    ``MetricsQueryResult`` (``metrics`` of ``Metric`` with ``name`` and ``timeseries`` of
    ``TimeSeriesElement`` whose ``data`` are ``MetricValue`` with ``timestamp`` and ``total``).
    A minute Azure Monitor has not ingested yet has no total; several time series (the filter
    matched more than one entity) are summed."""
    totals = minute_totals(result, (INCOMING, COMPLETED), now)
    both = sorted(set(totals[INCOMING]) & set(totals[COMPLETED]))
    if not both:
        return QueueRates(None, None)
    minute = both[-1]
    return QueueRates(max(totals[INCOMING][minute], 0.0), max(totals[COMPLETED][minute], 0.0), minute)


class ServiceBusPeeker:
    """``OldestMessagePeeker`` over ``azure.servicebus.aio.ServiceBusClient`` (or an object with
    its ``get_queue_receiver``/``close``)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def oldest_enqueued_at(self, queue_name: str) -> datetime | None:
        # A fresh receiver: a receiver's next peek starts after the last message it peeked.
        async with self.client.get_queue_receiver(queue_name) as receiver:
            messages = await receiver.peek_messages(max_message_count=1)
        return enqueued_time(messages[0]) if messages else None

    async def close(self) -> None:
        await self.client.close()


class MonitorQueueMetrics:
    """``QueueMetricsReader`` over ``azure.monitor.query.aio.MetricsQueryClient`` (or an object with
    its ``query_resource``/``close``)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def queue_rates(self, resource_id: str, queue_name: str, now: datetime) -> QueueRates:
        escaped = queue_name.replace("'", "''")
        result = await self.client.query_resource(
            resource_id, [INCOMING, COMPLETED], timespan=(now - METRICS_LOOKBACK, now),
            granularity=timedelta(minutes=1), aggregations=["Total"], filter=f"EntityName eq '{escaped}'",
        )
        return rates_from_metrics(result, now)

    async def close(self) -> None:
        await self.client.close()


#: What to grant when the management plane refuses a count (docs/deploy.md).
READER_ROLE_HINT = ("assign the autoscaler's identity the Service Bus entity reader role (custom: "
                    "Microsoft.ServiceBus/namespaces/queues/read and .../topics/subscriptions/read; infra parameter "
                    "serviceBusNamespaceIds) or Reader on the namespace")
DEFAULT_ARM_ENDPOINT = "https://management.azure.com"


def _status_and_code(error: BaseException) -> tuple[int | None, str]:
    """An azure-core ``HttpResponseError``'s status and ARM error code (duck-typed: no import)."""
    status = getattr(error, "status_code", None)
    code = getattr(error, "error", None)
    return (status if isinstance(status, int) else None), str(getattr(code, "code", "") or "")


def management_read_error(error: BaseException, what: str, namespace: NamespaceId) -> BaseException:
    """A refused or missing entity as a ``ReadError`` that says what to do; anything else as it came."""
    status, code = _status_and_code(error)
    suffix = f" {code}" if code else ""
    if status == 403:
        return ReadError(f"403{suffix}: reading {what} of Service Bus namespace {namespace.resource_id} is not "
                         f"authorized: {READER_ROLE_HINT}")
    if status == 404:
        return ReadError(f"404{suffix}: {what} does not exist in Service Bus namespace {namespace.resource_id} "
                         "(check queueName / topicName / subscriptionName and namespaceResourceId)")
    return error


def active_count(entity: Any, what: str) -> int:
    """``countDetails.activeMessageCount`` of an ``SBQueue`` or ``SBSubscription``."""
    details = getattr(entity, "count_details", None)
    count = getattr(details, "active_message_count", None)
    if count is None:
        raise ReadError(f"the management plane's reply for {what} has no countDetails.activeMessageCount")
    return int(count)


class ServiceBusManagementCounter:
    """``MessageCounter`` over ``azure.mgmt.servicebus.aio.ServiceBusManagementClient`` (or an object
    with its ``queues.get``/``subscriptions.get``) for one namespace. The client belongs to the
    namespace's subscription and may be shared: ``ServiceBusClients`` closes it."""

    def __init__(self, client: Any, namespace: NamespaceId) -> None:
        self.client = client
        self.namespace = namespace

    async def queue_active_messages(self, queue_name: str) -> int:
        what = f"queue {queue_name!r}"
        try:
            entity = await self.client.queues.get(self.namespace.resource_group, self.namespace.name, queue_name)
        except Exception as error:
            raise management_read_error(error, what, self.namespace) from None
        return active_count(entity, what)

    async def subscription_active_messages(self, topic_name: str, subscription_name: str) -> int:
        what = f"subscription {subscription_name!r} of topic {topic_name!r}"
        try:
            entity = await self.client.subscriptions.get(self.namespace.resource_group, self.namespace.name,
                                                         topic_name, subscription_name)
        except Exception as error:
            raise management_read_error(error, what, self.namespace) from None
        return active_count(entity, what)


class ServiceBusAdminCounter:
    """``MessageCounter`` over ``ServiceBusAdministrationClient`` (or an object with its
    ``get_queue_runtime_properties``/``get_subscription_runtime_properties``/``close``)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def queue_active_messages(self, queue_name: str) -> int:
        properties = await self.client.get_queue_runtime_properties(queue_name)
        return int(properties.active_message_count)

    async def subscription_active_messages(self, topic_name: str, subscription_name: str) -> int:
        properties = await self.client.get_subscription_runtime_properties(topic_name, subscription_name)
        return int(properties.active_message_count)

    async def close(self) -> None:
        await self.client.close()


class ServiceBusClients:
    """The clients the Service Bus source reads through, each built once and reused: one management
    client per subscription (counts of every namespace in it), one administration client per
    connection-string variable (local counts without a namespace id), one peeker per namespace or
    variable, one Azure Monitor client."""

    def __init__(
        self,
        credential: Any = None,
        environ: Mapping[str, str] | None = None,
        client_factory: Callable[[SourceSettings, str | None], Any] | None = None,
        peeker_factory: Callable[[SourceSettings, str | None], Any] | None = None,
        metrics_factory: Callable[[], Any] | None = None,
        *,
        management_factory: Callable[[str], Any] | None = None,
        arm_endpoint: str = DEFAULT_ARM_ENDPOINT,
        arm_client_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.credential = credential
        self.environ = os.environ if environ is None else environ
        self.arm_endpoint = arm_endpoint
        self.arm_client_kwargs = dict(arm_client_kwargs or {})
        self._factory = client_factory or self._sdk_client
        self._peeker_factory = peeker_factory or self._sdk_peeker
        self._metrics_factory = metrics_factory or self._sdk_metrics
        self._management_factory = management_factory or self._sdk_management
        self._counters: dict[str, MessageCounter] = {}
        self._admins: list[ServiceBusAdminCounter] = []
        self._management: dict[str, Any] = {}
        self._peekers: dict[str, ServiceBusPeeker] = {}
        self._metrics: MonitorQueueMetrics | None = None

    def connection_string(self, source: SourceSettings) -> str | None:
        return connection_from_env(source, self.environ)

    def counter_for(self, source: SourceSettings) -> MessageCounter:
        """The management plane whenever the namespace's resource id is known (always with
        identity: the policy requires it); the data plane's administration client only for a
        source that has nothing but a connection string."""
        namespace = source.service_bus_namespace
        if namespace is not None:
            key = namespace.resource_id.lower()
            if key not in self._counters:
                subscription = namespace.subscription_id.lower()
                if subscription not in self._management:
                    self._management[subscription] = self._management_factory(namespace.subscription_id)
                self._counters[key] = ServiceBusManagementCounter(self._management[subscription], namespace)
            return self._counters[key]
        connection = self.connection_string(source)
        if not connection:
            raise LookupError(f"source {source.name!r} names no Service Bus namespace resource id (namespaceResourceId) "
                              "and no connection string (connectionFromEnv)")
        key = f"env:{source.connection_from_env}"
        if key not in self._counters:
            admin = ServiceBusAdminCounter(self._factory(source, connection))
            self._admins.append(admin)
            self._counters[key] = admin
        return self._counters[key]

    def _key(self, source: SourceSettings, connection: str | None) -> str:
        return f"env:{source.connection_from_env}" if connection else normalize_namespace(source.fully_qualified_namespace or "")

    def peeker_for(self, source: SourceSettings) -> ServiceBusPeeker:
        connection = self.connection_string(source)
        key = self._key(source, connection)
        if key not in self._peekers:
            self._peekers[key] = ServiceBusPeeker(self._peeker_factory(source, connection))
        return self._peekers[key]

    def metrics_for(self, source: SourceSettings) -> MonitorQueueMetrics:
        """One Azure Monitor client for every namespace (metrics are read with identity only)."""
        if self._metrics is None:
            self._metrics = MonitorQueueMetrics(self._metrics_factory())
        return self._metrics

    def _sdk_management(self, subscription_id: str) -> Any:
        if self.credential is None:
            raise LookupError("Service Bus counts (namespaceResourceId) are read from the management plane with identity "
                              "but no credential was given")
        # Imported here: the management client costs ~0.2 s to import, and only collect needs it.
        from azure.mgmt.servicebus.aio import ServiceBusManagementClient

        return ServiceBusManagementClient(self.credential, subscription_id, base_url=self.arm_endpoint,
                                          **self.arm_client_kwargs)

    def _sdk_peeker(self, source: SourceSettings, connection_string: str | None) -> Any:
        from azure.servicebus.aio import ServiceBusClient

        if connection_string:
            return ServiceBusClient.from_connection_string(connection_string)
        if self.credential is None:
            raise LookupError(f"source {source.name!r} uses identity but no credential was given")
        return ServiceBusClient(normalize_namespace(source.fully_qualified_namespace or ""), self.credential)

    def _sdk_metrics(self) -> Any:
        if self.credential is None:
            raise LookupError("Azure Monitor metrics (metricsResourceId) are read with identity but no credential was given")
        from azure.monitor.query.aio import MetricsQueryClient

        return MetricsQueryClient(self.credential)

    def _sdk_client(self, source: SourceSettings, connection_string: str | None) -> Any:
        from azure.servicebus.aio.management import ServiceBusAdministrationClient

        return ServiceBusAdministrationClient.from_connection_string(connection_string or "")

    async def aclose(self) -> None:
        owned: list[Any] = [*self._admins, *self._management.values(), *self._peekers.values(),
                            *([self._metrics] if self._metrics else [])]
        self._counters, self._admins, self._management, self._peekers, self._metrics = {}, [], {}, {}, None
        await asyncio.gather(*(client.close() for client in owned), return_exceptions=True)


def reads_slo_inputs(source: SourceSettings) -> bool:
    """A queue with ``metrics_resource_id`` (required in mode slo) also collects its oldest
    message's age and its rates."""
    return bool(source.queue_name and source.metrics_resource_id)


class ServiceBusReader:
    """``SourceReader`` for ``kind: servicebus``: one gated call per source for the count, plus a
    peek and a metrics query for a queue that feeds the SLO mode (all three concurrently).

    The count or the peek failing fails the reading (no age means no safe scale-in); the metrics
    failing leaves the rates unset with a note, so that the age can still call for a scale-out.
    """

    kind = KIND

    def __init__(self, counter_for: Callable[[SourceSettings], MessageCounter],
                 closers: tuple[Callable[[], Any], ...] = (), *,
                 peeker_for: Callable[[SourceSettings], OldestMessagePeeker] | None = None,
                 metrics_for: Callable[[SourceSettings], QueueMetricsReader] | None = None) -> None:
        self.counter_for = counter_for
        self.peeker_for = peeker_for
        self.metrics_for = metrics_for
        self._closers = closers

    async def read(self, source: SourceSettings, gate: CallGate, now: datetime) -> SourceReading:
        counter = self.counter_for(source)
        if source.queue_name:
            count_call = gate.call("queue count", lambda: counter.queue_active_messages(source.queue_name or ""))
        else:
            count_call = gate.call("subscription count",
                                   lambda: counter.subscription_active_messages(source.topic_name or "",
                                                                                source.subscription_name or ""))
        if not (reads_slo_inputs(source) and self.peeker_for and self.metrics_for):
            try:
                count = await count_call
            except Exception as error:
                return SourceReading(name=source.name, kind=KIND, ok=False, error=error_text(error))
            return SourceReading(name=source.name, kind=KIND, active_messages=max(count, 0))
        return await self._read_queue_for_slo(source, gate, now, count_call)

    async def _read_queue_for_slo(self, source: SourceSettings, gate: CallGate, now: datetime, count_call: Any) -> SourceReading:
        queue = source.queue_name or ""
        peeker, metrics = self.peeker_for(source), self.metrics_for(source)
        count, oldest, rates = await asyncio.gather(
            count_call,
            gate.call("peek_messages", lambda: peeker.oldest_enqueued_at(queue)),
            gate.call("query_resource", lambda: metrics.queue_rates(source.metrics_resource_id or "", queue, now)),
            return_exceptions=True)
        for what, outcome in (("", count), ("peek: ", oldest)):
            if isinstance(outcome, BaseException):
                return SourceReading(name=source.name, kind=KIND, ok=False, error=error_text_with(what, outcome))
        notes: tuple[str, ...]
        if isinstance(rates, BaseException):
            notes, rates = (f"azure monitor rates unavailable: {error_text(rates)}",), QueueRates(None, None)
        elif rates.minute is None:
            notes = ("azure monitor rates: no complete minute with IncomingMessages and CompleteMessage yet",)
        else:
            lag = max((now - rates.minute).total_seconds(), 0.0)
            notes = (f"azure monitor rates of the minute from {rates.minute:%H:%M}Z ({lag:.0f}s before collection)",)
        return SourceReading(name=source.name, kind=KIND, active_messages=max(count, 0), notes=notes,
                             oldest_enqueued_at=_not_after(oldest, now), incoming_per_minute=rates.incoming_per_minute,
                             completed_per_minute=rates.completed_per_minute)

    async def aclose(self) -> None:
        await asyncio.gather(*(close() for close in self._closers), return_exceptions=True)


def _not_after(moment: datetime | None, now: datetime) -> datetime | None:
    """Service Bus stamps enqueue times with its own clock: one a little ahead of ours is now."""
    return None if moment is None else min(moment, now)


def error_text_with(prefix: str, error: BaseException) -> str:
    return prefix + error_text(error)
