"""Service Bus: the active message count of a queue or a topic subscription, and for a queue with
``metrics_resource_id`` (the SLO mode) the oldest message's enqueued time and the arrival and
completion rates.

Three small interfaces, one SDK adapter each:

- ``MessageCounter``: ``azure.servicebus.aio.management.ServiceBusAdministrationClient``'s runtime
  properties (identity, or a connection string from the variable ``connectionFromEnv`` names,
  locally). Needs the Manage right (Azure Service Bus Data Owner).
- ``OldestMessagePeeker``: ``ServiceBusReceiver.peek_messages`` on a fresh receiver (a receiver
  peeks on from where it last peeked), one message: its ``enqueued_time_utc``. Needs Listen
  (Azure Service Bus Data Receiver); peeking locks and removes nothing.
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
from scaling.domain.samples import SourceReading
from scaling.sources.base import CallGate, connection_from_env, error_text
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
    totals: dict[str, dict[datetime, float]] = {INCOMING: {}, COMPLETED: {}}
    for metric in getattr(result, "metrics", None) or ():
        per_minute = totals.get(getattr(metric, "name", None))
        if per_minute is None:
            continue
        for series in getattr(metric, "timeseries", None) or ():
            for point in getattr(series, "data", None) or ():
                total, stamp = getattr(point, "total", None), getattr(point, "timestamp", None)
                if total is None or stamp is None:
                    continue
                stamp = stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)
                if stamp + timedelta(minutes=1) <= now:
                    per_minute[stamp] = per_minute.get(stamp, 0.0) + float(total)
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
    """One administration client per namespace (or connection-string variable), reused."""

    def __init__(
        self,
        credential: Any = None,
        environ: Mapping[str, str] | None = None,
        client_factory: Callable[[SourceSettings, str | None], Any] | None = None,
        peeker_factory: Callable[[SourceSettings, str | None], Any] | None = None,
        metrics_factory: Callable[[], Any] | None = None,
    ) -> None:
        self.credential = credential
        self.environ = os.environ if environ is None else environ
        self._factory = client_factory or self._sdk_client
        self._peeker_factory = peeker_factory or self._sdk_peeker
        self._metrics_factory = metrics_factory or self._sdk_metrics
        self._counters: dict[str, ServiceBusAdminCounter] = {}
        self._peekers: dict[str, ServiceBusPeeker] = {}
        self._metrics: MonitorQueueMetrics | None = None

    def connection_string(self, source: SourceSettings) -> str | None:
        return connection_from_env(source, self.environ)

    def counter_for(self, source: SourceSettings) -> ServiceBusAdminCounter:
        connection = self.connection_string(source)
        key = f"env:{source.connection_from_env}" if connection else normalize_namespace(source.fully_qualified_namespace or "")
        if key not in self._counters:
            self._counters[key] = ServiceBusAdminCounter(self._factory(source, connection))
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

        if connection_string:
            return ServiceBusAdministrationClient.from_connection_string(connection_string)
        if self.credential is None:
            raise LookupError(f"source {source.name!r} uses identity but no credential was given")
        return ServiceBusAdministrationClient(normalize_namespace(source.fully_qualified_namespace or ""), self.credential)

    async def aclose(self) -> None:
        owned: list[Any] = [*self._counters.values(), *self._peekers.values(), *([self._metrics] if self._metrics else [])]
        self._counters, self._peekers, self._metrics = {}, {}, None
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
            count_call = gate.call("get_queue_runtime_properties", lambda: counter.queue_active_messages(source.queue_name or ""))
        else:
            count_call = gate.call("get_subscription_runtime_properties",
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
