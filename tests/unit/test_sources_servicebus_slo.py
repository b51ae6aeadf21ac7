"""The Service Bus source's SLO inputs: the oldest message's enqueued time (peek) and Azure
Monitor's per-minute arrivals and completions.

No Service Bus or Azure Monitor emulator exists, so the SDK clients are stand-ins with the SDK's
shapes: a receiver whose ``peek_messages`` returns objects with ``enqueued_time_utc`` (as
``ServiceBusReceivedMessage``), and a ``query_resource`` returning ``MetricsQueryResult``-shaped
objects (``metrics`` -> ``Metric(name, timeseries)`` -> ``TimeSeriesElement(data)`` ->
``MetricValue(timestamp, total)``, the attribute names of azure-monitor-query 1.4). The real
``ServiceBusClient`` is built offline to check the wiring.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from azure.servicebus.aio import ServiceBusClient

from scaling.domain.policy import SourceSettings
from scaling.sources.base import CallGate
from scaling.sources.servicebus import (
    COMPLETED,
    INCOMING,
    MonitorQueueMetrics,
    QueueRates,
    ServiceBusAdminCounter,
    ServiceBusClients,
    ServiceBusManagementCounter,
    ServiceBusPeeker,
    ServiceBusReader,
    rates_from_metrics,
)
from tests.unit.test_sources_adapters import FakeAdministrationClient, StaticTokenCredential

NOW = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC)
NAMESPACE_ID = "/subscriptions/0/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/jobs-ns"
SB_CONNECTION = "Endpoint=sb://jobs-ns.servicebus.windows.net/;SharedAccessKeyName=listen;SharedAccessKey=bm90LWEta2V5"


# --- stand-ins with the SDK's shapes --------------------------------------------------------------


@dataclass
class PeekedMessage:
    """``ServiceBusReceivedMessage``'s attribute the source reads."""

    enqueued_time_utc: datetime | None
    sequence_number: int = 1


class Receiver:
    def __init__(self, messages: list[PeekedMessage], log: list) -> None:
        self.messages, self.log = messages, log

    async def __aenter__(self) -> Receiver:
        self.log.append("open")
        return self

    async def __aexit__(self, *exc) -> None:
        self.log.append("close")

    async def peek_messages(self, max_message_count: int = 1, *, sequence_number: int = 0) -> list[PeekedMessage]:
        self.log.append(("peek", max_message_count, sequence_number))
        return self.messages[:max_message_count]


class BusClient:
    """``ServiceBusClient``'s ``get_queue_receiver``/``close``."""

    def __init__(self, messages: list[PeekedMessage]) -> None:
        self.messages, self.log, self.closed = messages, [], False

    def get_queue_receiver(self, queue_name: str) -> Receiver:
        self.log.append(("receiver", queue_name))
        return Receiver(self.messages, self.log)

    async def close(self) -> None:
        self.closed = True


@dataclass
class MetricValue:
    timestamp: datetime
    total: float | None = None


@dataclass
class TimeSeriesElement:
    data: list[MetricValue]
    metadata_values: dict = field(default_factory=dict)


@dataclass
class Metric:
    name: str
    timeseries: list[TimeSeriesElement]


@dataclass
class MetricsQueryResult:
    metrics: list[Metric]
    granularity: timedelta = timedelta(minutes=1)


def minute(offset: int) -> datetime:
    """The start of the minute ``offset`` minutes from 12:00 (NOW is 12:00:30)."""
    return datetime(2026, 3, 1, 12, 0, tzinfo=UTC) + timedelta(minutes=offset)


def result(incoming: dict[int, float | None], completed: dict[int, float | None], *, series: int = 1) -> MetricsQueryResult:
    def metric(name: str, values: dict[int, float | None]) -> Metric:
        points = [MetricValue(minute(offset), total) for offset, total in values.items()]
        return Metric(name, [TimeSeriesElement(list(points)) for _ in range(series)])

    return MetricsQueryResult([metric(INCOMING, incoming), metric(COMPLETED, completed), metric("ActiveMessages", {-1: 5.0})])


class MetricsClient:
    """``MetricsQueryClient``'s ``query_resource``/``close``."""

    def __init__(self, answer: MetricsQueryResult | Exception) -> None:
        self.answer, self.calls, self.closed = answer, [], False

    async def query_resource(self, resource_uri, metric_names, **kwargs):
        self.calls.append((resource_uri, list(metric_names), kwargs))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    async def close(self) -> None:
        self.closed = True


# --- Azure Monitor's answer ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(result({-3: 100, -2: 120, -1: 90}, {-3: 80, -2: 110, -1: 95}), QueueRates(90, 95, minute(-1)),
                     id="latest-complete-minute"),
        pytest.param(result({-2: 120, -1: 90, 0: 10}, {-2: 110, -1: 95, 0: 5}), QueueRates(90, 95, minute(-1)),
                     id="minute-still-running-is-ignored"),
        pytest.param(result({-2: 120, -1: 90}, {-2: 110, -1: None}), QueueRates(120, 110, minute(-2)),
                     id="minute-not-ingested-for-one-metric"),
        pytest.param(result({-2: 0, -1: 0}, {-2: 0, -1: 0}), QueueRates(0, 0, minute(-1)), id="idle-queue-reports-zeros"),
        pytest.param(result({-1: None}, {-1: None}), QueueRates(None, None), id="nothing-ingested-yet"),
        pytest.param(result({}, {}), QueueRates(None, None), id="no-points"),
        pytest.param(MetricsQueryResult([]), QueueRates(None, None), id="no-metrics"),
        pytest.param(result({-1: 40}, {-1: 30}, series=2), QueueRates(80, 60, minute(-1)), id="several-series-add-up"),
    ],
)
def test_rates_come_from_the_latest_minute_with_both_metrics(answer, expected) -> None:
    assert rates_from_metrics(answer, NOW) == expected


def test_naive_metric_timestamps_are_read_as_utc() -> None:
    naive = MetricsQueryResult([Metric(INCOMING, [TimeSeriesElement([MetricValue(minute(-1).replace(tzinfo=None), 7)])]),
                                Metric(COMPLETED, [TimeSeriesElement([MetricValue(minute(-1).replace(tzinfo=None), 6)])])])
    assert rates_from_metrics(naive, NOW) == QueueRates(7, 6, minute(-1))


def test_metrics_query_asks_for_the_queue_totals_per_minute() -> None:
    client = MetricsClient(result({-1: 60}, {-1: 30}))
    rates = asyncio.run(MonitorQueueMetrics(client).queue_rates(NAMESPACE_ID, "o'clock", NOW))
    assert rates == QueueRates(60, 30, minute(-1))
    ((resource, names, kwargs),) = client.calls
    assert (resource, names) == (NAMESPACE_ID, [INCOMING, COMPLETED])
    assert kwargs["filter"] == "EntityName eq 'o''clock'"
    assert (kwargs["granularity"], kwargs["aggregations"]) == (timedelta(minutes=1), ["Total"])
    start, end = kwargs["timespan"]
    assert end == NOW and start < NOW - timedelta(minutes=3)


# --- peek --------------------------------------------------------------------------------------------


def test_peek_opens_a_fresh_receiver_each_time_and_reads_one_message() -> None:
    """A receiver peeks on from the last message it peeked, so each read needs its own."""
    enqueued = NOW - timedelta(seconds=42)
    client = BusClient([PeekedMessage(enqueued), PeekedMessage(NOW)])
    peeker = ServiceBusPeeker(client)
    assert asyncio.run(peeker.oldest_enqueued_at("jobs")) == enqueued
    assert asyncio.run(peeker.oldest_enqueued_at("jobs")) == enqueued
    assert client.log.count(("receiver", "jobs")) == 2 and client.log.count("close") == 2
    assert ("peek", 1, 0) in client.log


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        pytest.param([], None, id="empty-queue"),
        pytest.param([PeekedMessage(None)], None, id="no-enqueued-time"),
        pytest.param([PeekedMessage(datetime(2026, 3, 1, 11, 59))], datetime(2026, 3, 1, 11, 59, tzinfo=UTC), id="naive-is-utc"),
    ],
)
def test_peek_edge_cases(messages, expected) -> None:
    assert asyncio.run(ServiceBusPeeker(BusClient(messages)).oldest_enqueued_at("jobs")) == expected


# --- the reader ----------------------------------------------------------------------------------


def slo_queue(**changes) -> SourceSettings:
    values = {"kind": "servicebus", "name": "jobs", "fully_qualified_namespace": "jobs-ns.servicebus.windows.net",
              "queue_name": "jobs", "metrics_resource_id": NAMESPACE_ID}
    values.update(changes)
    return SourceSettings(**values)


def reader_with(bus: BusClient, metrics: MetricsClient, admin: FakeAdministrationClient | None = None) -> ServiceBusReader:
    counter = ServiceBusAdminCounter(admin or FakeAdministrationClient())
    return ServiceBusReader(lambda s: counter, peeker_for=lambda s: ServiceBusPeeker(bus),
                            metrics_for=lambda s: MonitorQueueMetrics(metrics))


def test_a_queue_for_the_slo_mode_carries_age_and_rates() -> None:
    enqueued = NOW - timedelta(seconds=95)
    reader = reader_with(BusClient([PeekedMessage(enqueued)]), MetricsClient(result({-1: 600}, {-1: 540})))
    reading = asyncio.run(reader.read(slo_queue(), CallGate(4, 1.0), NOW))
    assert (reading.ok, reading.active_messages, reading.oldest_enqueued_at) == (True, 17, enqueued)
    assert (reading.incoming_per_minute, reading.completed_per_minute) == (600, 540)
    assert reading.oldest_age_seconds(NOW) == 95
    assert reading.notes == ("azure monitor rates of the minute from 11:59Z (90s before collection)",)


def test_a_queue_without_metrics_id_is_only_counted() -> None:
    bus, metrics = BusClient([PeekedMessage(NOW)]), MetricsClient(result({-1: 1}, {-1: 1}))
    reading = asyncio.run(reader_with(bus, metrics).read(slo_queue(metrics_resource_id=None), CallGate(), NOW))
    assert (reading.active_messages, reading.oldest_enqueued_at, reading.incoming_per_minute) == (17, None, None)
    assert bus.log == [] and metrics.calls == []


def test_a_failed_peek_fails_the_reading() -> None:
    class Refused(BusClient):
        def get_queue_receiver(self, queue_name):
            raise PermissionError("Unauthorized: Listen claim required")

    reading = asyncio.run(reader_with(Refused([]), MetricsClient(result({}, {}))).read(slo_queue(), CallGate(), NOW))
    assert (reading.ok, reading.error) == (False, "peek: PermissionError: Unauthorized: Listen claim required")


def test_failed_metrics_leave_the_rates_unset_with_a_note() -> None:
    """The age can still call for a scale-out, so the reading stays usable."""
    enqueued = NOW - timedelta(seconds=5)
    reader = reader_with(BusClient([PeekedMessage(enqueued)]), MetricsClient(PermissionError("AuthorizationFailed")))
    reading = asyncio.run(reader.read(slo_queue(), CallGate(), NOW))
    assert (reading.ok, reading.oldest_enqueued_at, reading.incoming_per_minute, reading.completed_per_minute) == (
        True, enqueued, None, None)
    assert reading.notes == ("azure monitor rates unavailable: PermissionError: AuthorizationFailed",)


def test_no_complete_minute_yet_is_noted() -> None:
    reading = asyncio.run(reader_with(BusClient([]), MetricsClient(result({0: 3}, {0: 3}))).read(slo_queue(), CallGate(), NOW))
    assert (reading.ok, reading.oldest_enqueued_at, reading.incoming_per_minute) == (True, None, None)
    assert "no complete minute" in reading.notes[0]


def test_an_enqueue_time_ahead_of_the_collector_clock_counts_as_now() -> None:
    reader = reader_with(BusClient([PeekedMessage(NOW + timedelta(seconds=3))]), MetricsClient(result({}, {})))
    reading = asyncio.run(reader.read(slo_queue(), CallGate(), NOW))
    assert reading.oldest_enqueued_at == NOW and reading.oldest_age_seconds(NOW) == 0


# --- the clients ----------------------------------------------------------------------------------


def test_peekers_are_real_clients_cached_per_namespace_and_closed() -> None:
    clients = ServiceBusClients(credential=StaticTokenCredential(), environ={"SB": SB_CONNECTION})
    by_identity = clients.peeker_for(slo_queue())
    assert clients.peeker_for(slo_queue(name="other", queue_name="other")) is by_identity
    by_connection = clients.peeker_for(slo_queue(connection_from_env="SB", fully_qualified_namespace=None))
    assert by_connection is not by_identity
    assert isinstance(by_identity.client, ServiceBusClient) and isinstance(by_connection.client, ServiceBusClient)
    asyncio.run(clients.aclose())


def test_metrics_need_a_credential() -> None:
    clients = ServiceBusClients(credential=None, environ={"SB": SB_CONNECTION})
    with pytest.raises(LookupError, match="metricsResourceId"):
        clients.metrics_for(slo_queue(connection_from_env="SB"))


def test_one_metrics_client_serves_every_namespace_and_is_closed() -> None:
    made: list[MetricsClient] = []
    clients = ServiceBusClients(credential=None, metrics_factory=lambda: made.append(MetricsClient(result({}, {}))) or made[-1])
    assert clients.metrics_for(slo_queue()) is clients.metrics_for(slo_queue(fully_qualified_namespace="b.servicebus.windows.net"))
    asyncio.run(clients.aclose())
    assert len(made) == 1 and made[0].closed


# --- the factory -------------------------------------------------------------------------------------


def slo_policy_settings():
    from scaling.domain.policy import policy_from_dict
    from scaling.settings import Settings, StorageSettings
    from tests.unit.test_sources_adapters import AZURITE, PLAN

    document = {"targets": [{"name": "jobs", "plan": {"resource_id": PLAN.format("jobs")}, "mode": "slo",
                             "sources": [{"kind": "servicebus", "name": "jobs", "queueName": "jobs",
                                          "connectionFromEnv": "JOBS_SB", "metricsResourceId": NAMESPACE_ID}]}]}
    return Settings(policy=policy_from_dict(document), storage=StorageSettings(AZURITE, None, None, None, None, None),
                    collect_concurrency=3, collect_timeout_seconds=2.5, ownership_expiry_seconds=45)


def test_the_factory_wires_peek_and_metrics_for_an_slo_queue_and_azure_monitor_uses_identity() -> None:
    """A connection string serves the peek only: the count (management plane, on the namespace
    ``metricsResourceId`` names) and Azure Monitor take none, so the factory creates the identity
    credential even for a source with ``connectionFromEnv``."""
    from azure.identity.aio import DefaultAzureCredential

    from scaling.sources.factory import build_source_readers

    readers = build_source_readers(slo_policy_settings(), environ={"JOBS_SB": SB_CONNECTION})
    reader = next(r for r in readers.readers if r.kind == "servicebus")
    source = slo_policy_settings().policy.targets[0].sources[0]
    assert isinstance(reader.peeker_for(source).client, ServiceBusClient)
    assert isinstance(reader.counter_for.__self__.credential, DefaultAzureCredential)
    counter = reader.counter_for(source)
    assert isinstance(counter, ServiceBusManagementCounter) and counter.namespace.resource_id == NAMESPACE_ID
    assert len(readers.closers) == 1  # the credential the factory created
    asyncio.run(reader.aclose())
    for close in readers.closers:
        asyncio.run(close())


def test_the_factory_hands_every_service_bus_call_to_a_stand_in_when_given() -> None:
    from scaling.sources.factory import build_source_readers

    class Queue:
        async def queue_active_messages(self, queue_name):
            return 3

        async def oldest_enqueued_at(self, queue_name):
            return NOW - timedelta(seconds=20)

        async def queue_rates(self, resource_id, queue_name, now):
            return QueueRates(30.0, 25.0, minute(-1))

    stand_in = Queue()
    readers = build_source_readers(slo_policy_settings(), environ={}, queue_for=lambda source: stand_in)
    assert readers.closers == ()  # no credential: nothing reaches Azure
    reader = next(r for r in readers.readers if r.kind == "servicebus")
    reading = asyncio.run(reader.read(slo_policy_settings().policy.targets[0].sources[0], CallGate(), NOW))
    assert (reading.active_messages, reading.oldest_age_seconds(NOW), reading.incoming_per_minute) == (3, 20, 30.0)


def test_a_peek_and_rates_stand_in_leaves_the_count_on_the_management_client() -> None:
    """The demo's wiring: the simulated queue answers the peek and the rates (no local data plane
    or Azure Monitor), the count goes through the real management client (the local ARM endpoint)."""
    from scaling.sources.factory import build_source_readers

    class PeekAndRates:
        async def oldest_enqueued_at(self, queue_name):
            return NOW

        async def queue_rates(self, resource_id, queue_name, now):
            return QueueRates(None, None)

    stand_in = PeekAndRates()
    readers = build_source_readers(slo_policy_settings(), StaticTokenCredential(), environ={},
                                   peek_and_rates_for=lambda source: stand_in)
    reader = next(r for r in readers.readers if r.kind == "servicebus")
    source = slo_policy_settings().policy.targets[0].sources[0]
    assert reader.peeker_for(source) is stand_in and reader.metrics_for(source) is stand_in
    counter = reader.counter_for(source)
    assert isinstance(counter, ServiceBusManagementCounter) and counter.namespace.resource_id == NAMESPACE_ID
    assert readers.closers == ()  # the credential was given, so the factory owns none
    asyncio.run(reader.aclose())
