"""The real SDK adapters, fed objects with the SDKs' method names and return shapes (no network).

Event Hubs: no emulator runs here, so the adapter over ``EventHubConsumerClient`` is checked
against a fake client that answers like the SDK (the property dict keys of azure-eventhub 5.x).
Service Bus: the adapter over ``ServiceBusManagementClient`` (counts from the management plane)
against a fake with its ``queues.get``/``subscriptions.get`` and model shape, and the one over
``ServiceBusAdministrationClient`` (connection-string sources only) against a fake with its
runtime-properties methods. The factory is checked building the real clients offline; the real
management client against the local ARM endpoint is in tests/integration/test_collect_servicebus.py.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from azure.eventhub.aio import EventHubConsumerClient
from azure.mgmt.servicebus.aio import ServiceBusManagementClient
from azure.servicebus.aio.management import ServiceBusAdministrationClient
from azure.storage.blob.aio import ContainerClient

from scaling.bootstrap import collector_for
from scaling.domain.policy import SourceSettings, policy_from_dict
from scaling.domain.resource_ids import SERVICE_BUS, parse_namespace_id
from scaling.settings import Settings, SettingsError, StorageSettings
from scaling.sources.base import CallGate, ReadError
from scaling.sources.checkpoints import AutoCheckpointReader, AzureFunctionCheckpointReader
from scaling.sources.eventhub import EventHubClients, EventHubPartitionSource, PartitionProperties
from scaling.sources.servicebus import (
    ServiceBusAdminCounter,
    ServiceBusClients,
    ServiceBusManagementCounter,
    ServiceBusReader,
)

EH_CONNECTION = "Endpoint=sb://orders-ns.servicebus.windows.net/;SharedAccessKeyName=listen;SharedAccessKey=bm90LWEta2V5"
SB_CONNECTION = "Endpoint=sb://jobs-ns.servicebus.windows.net/;SharedAccessKeyName=manage;SharedAccessKey=bm90LWEta2V5"
AZURITE = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;"
    "BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;"
)
PLAN = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/serverfarms/{}"


class StaticTokenCredential:
    """An async token credential that never leaves the process (the clients only need the shape)."""

    closed = False

    async def get_token(self, *scopes, **kwargs):
        from azure.core.credentials import AccessToken

        return AccessToken("token", 4_102_444_800)

    async def close(self):
        self.closed = True


class FakeConsumerClient:
    """Answers like ``azure.eventhub.aio.EventHubConsumerClient`` (5.x): ids as a list of str,
    properties as a dict with the SDK's keys."""

    def __init__(self, partitions: dict[str, tuple[int, int, bool]]) -> None:
        self.partitions = partitions
        self.closed = False

    async def get_partition_ids(self) -> list[str]:
        return list(self.partitions)

    async def get_partition_properties(self, partition_id: str) -> dict:
        beginning, last, empty = self.partitions[partition_id]
        return {
            "eventhub_name": "orders",
            "id": partition_id,
            "beginning_sequence_number": beginning,
            "last_enqueued_sequence_number": last,
            "last_enqueued_offset": "4096",
            "last_enqueued_time_utc": datetime(2026, 1, 1, tzinfo=UTC),
            "is_empty": empty,
        }

    async def close(self) -> None:
        self.closed = True


def test_event_hub_adapter_maps_the_sdk_property_dict():
    source = EventHubPartitionSource(FakeConsumerClient({"0": (5, 120, False), "1": (0, -1, True)}))

    async def scenario():
        return await source.get_partition_ids(), [await source.get_partition_properties(p) for p in ("0", "1")]

    ids, properties = asyncio.run(scenario())
    assert ids == ["0", "1"]
    assert properties == [PartitionProperties("0", 5, 120, False), PartitionProperties("1", 0, -1, True)]


def eh_source(**changes) -> SourceSettings:
    values = {"kind": "eventhub", "name": "orders", "event_hub_name": "orders", "fully_qualified_namespace": "ns.servicebus.windows.net",
              "checkpoint_account_url": "https://acct.blob.core.windows.net"}
    values.update(changes)
    return SourceSettings(**values)


def test_event_hub_clients_are_cached_per_namespace_hub_and_consumer_group_and_closed():
    made: list[tuple[str, str | None]] = []

    def factory(source, connection):
        made.append((source.consumer_group, connection))
        return FakeConsumerClient({})

    clients = EventHubClients(credential=StaticTokenCredential(), environ={"EH": EH_CONNECTION}, client_factory=factory)
    first = clients.source_for(eh_source())
    assert clients.source_for(eh_source(name="same-hub-other-target")) is first
    other_group = clients.source_for(eh_source(consumer_group="audit"))
    by_connection = clients.source_for(eh_source(connection_from_env="EH", fully_qualified_namespace=None))
    assert len({id(first), id(other_group), id(by_connection)}) == 3
    assert made == [("$Default", None), ("audit", None), ("$Default", EH_CONNECTION)]
    assert clients.namespace(eh_source(connection_from_env="EH", fully_qualified_namespace=None)) == "orders-ns.servicebus.windows.net"

    asyncio.run(clients.aclose())
    assert all(source.client.closed for source in (first, other_group, by_connection))


def test_event_hub_clients_name_a_missing_connection_variable():
    clients = EventHubClients(environ={})
    with pytest.raises(LookupError, match="ORDERS_EH .*connectionFromEnv"):
        clients.source_for(eh_source(connection_from_env="ORDERS_EH"))


def test_event_hub_clients_build_the_real_sdk_client_offline():
    clients = EventHubClients(credential=None, environ={"EH": EH_CONNECTION})
    source = clients.source_for(eh_source(connection_from_env="EH", event_hub_name="Orders-Hub", consumer_group="$Default"))
    assert isinstance(source.client, EventHubConsumerClient)
    assert source.client.eventhub_name == "Orders-Hub"
    assert source.client._address.hostname == "orders-ns.servicebus.windows.net"  # no public accessor in 5.15
    asyncio.run(clients.aclose())


class FakeAdministrationClient:
    """Answers like ``ServiceBusAdministrationClient`` (aio): runtime properties objects with
    ``active_message_count``."""

    def __init__(self) -> None:
        self.asked: list[tuple] = []
        self.closed = False

    async def get_queue_runtime_properties(self, queue_name):
        self.asked.append(("queue", queue_name))
        return SimpleNamespace(name=queue_name, active_message_count=17, dead_letter_message_count=3,
                               scheduled_message_count=1, total_message_count=21)

    async def get_subscription_runtime_properties(self, topic_name, subscription_name):
        self.asked.append(("subscription", topic_name, subscription_name))
        return SimpleNamespace(name=subscription_name, active_message_count=4, dead_letter_message_count=0)

    async def close(self):
        self.closed = True


def sb_source(**changes) -> SourceSettings:
    values = {"kind": "servicebus", "name": "jobs", "fully_qualified_namespace": "jobs-ns.servicebus.windows.net", "queue_name": "jobs"}
    values.update(changes)
    return SourceSettings(**values)


def test_service_bus_reader_counts_active_messages_of_queues_and_subscriptions():
    admin = FakeAdministrationClient()
    reader = ServiceBusReader(lambda source: ServiceBusAdminCounter(admin))
    now = datetime(2026, 1, 1, tzinfo=UTC)

    async def scenario():
        gate = CallGate(4, 1.0)
        return (await reader.read(sb_source(), gate, now),
                await reader.read(sb_source(name="events", queue_name=None, topic_name="events", subscription_name="billing"), gate, now))

    queue, subscription = asyncio.run(scenario())
    assert (queue.ok, queue.kind, queue.active_messages, queue.backlog) == (True, "servicebus", 17, 17)
    assert (subscription.active_messages, subscription.partitions) == (4, ())
    assert admin.asked == [("queue", "jobs"), ("subscription", "events", "billing")]


def test_service_bus_reader_reports_a_failure_as_a_failed_reading():
    class Broken(FakeAdministrationClient):
        async def get_queue_runtime_properties(self, queue_name):
            raise PermissionError("Unauthorized: missing Manage claim")

    reader = ServiceBusReader(lambda source: ServiceBusAdminCounter(Broken()))
    reading = asyncio.run(reader.read(sb_source(), CallGate(), datetime(2026, 1, 1, tzinfo=UTC)))
    assert (reading.ok, reading.error) == (False, "PermissionError: Unauthorized: missing Manage claim")
    assert reading.backlog == 0


NAMESPACE_ID = "/subscriptions/{}/resourceGroups/rg-jobs/providers/Microsoft.ServiceBus/namespaces/{}"


class FakeArmError(Exception):
    """Carries what azure-core's ``HttpResponseError`` does: ``status_code`` and ``error.code``."""

    def __init__(self, status_code: int, code: str) -> None:
        super().__init__(f"({code}) refused")
        self.status_code = status_code
        self.error = SimpleNamespace(code=code)


class FakeManagementClient:
    """Answers like ``ServiceBusManagementClient`` (aio): ``queues.get`` and ``subscriptions.get``
    return models whose ``count_details`` holds the counts; ``failure`` is raised instead."""

    def __init__(self, failure: Exception | None = None, count_details: object = "default") -> None:
        self.asked: list[tuple] = []
        self.failure = failure
        self.details = SimpleNamespace(active_message_count=17, dead_letter_message_count=3) \
            if count_details == "default" else count_details
        self.queues = SimpleNamespace(get=self._get_queue)
        self.subscriptions = SimpleNamespace(get=self._get_subscription)

    async def _get_queue(self, resource_group_name, namespace_name, queue_name):
        self.asked.append(("queue", resource_group_name, namespace_name, queue_name))
        if self.failure:
            raise self.failure
        return SimpleNamespace(name=queue_name, count_details=self.details, message_count=20)

    async def _get_subscription(self, resource_group_name, namespace_name, topic_name, subscription_name):
        self.asked.append(("subscription", resource_group_name, namespace_name, topic_name, subscription_name))
        if self.failure:
            raise self.failure
        return SimpleNamespace(name=subscription_name, count_details=self.details, message_count=20)


def management_counter(client: FakeManagementClient) -> ServiceBusManagementCounter:
    namespace = parse_namespace_id(NAMESPACE_ID.format("sub-1", "jobs-ns"), SERVICE_BUS)
    assert namespace is not None
    return ServiceBusManagementCounter(client, namespace)


def test_management_counter_reads_count_details_of_the_namespace_entities():
    client = FakeManagementClient()
    counter = management_counter(client)

    async def scenario():
        return await counter.queue_active_messages("jobs"), await counter.subscription_active_messages("events", "billing")

    assert asyncio.run(scenario()) == (17, 17)
    assert client.asked == [("queue", "rg-jobs", "jobs-ns", "jobs"), ("subscription", "rg-jobs", "jobs-ns", "events", "billing")]


@pytest.mark.parametrize(
    ("failure", "details", "message"),
    [
        pytest.param(FakeArmError(403, "AuthorizationFailed"), "default",
                     r"^403 AuthorizationFailed: reading queue 'jobs' of Service Bus namespace /subscriptions/sub-1/.*"
                     r"/namespaces/jobs-ns is not authorized: assign the autoscaler's identity the Service Bus entity "
                     r"reader role .* or Reader on the namespace$", id="forbidden"),
        pytest.param(FakeArmError(404, "NotFound"), "default",
                     r"^404 NotFound: queue 'jobs' does not exist in Service Bus namespace /subscriptions/sub-1/", id="missing"),
        pytest.param(None, None, r"^the management plane's reply for queue 'jobs' has no countDetails\.activeMessageCount$",
                     id="no-count-details"),
    ],
)
def test_management_counter_explains_what_to_fix(failure, details, message):
    counter = management_counter(FakeManagementClient(failure, details))
    with pytest.raises(ReadError, match=message):
        asyncio.run(counter.queue_active_messages("jobs"))


def test_management_counter_passes_other_failures_on_unchanged():
    failure = FakeArmError(503, "ServiceUnavailable")
    counter = management_counter(FakeManagementClient(failure))
    with pytest.raises(FakeArmError) as caught:
        asyncio.run(counter.subscription_active_messages("events", "billing"))
    assert caught.value is failure


def test_service_bus_clients_build_real_clients_offline_and_cache_per_namespace_and_subscription():
    clients = ServiceBusClients(credential=StaticTokenCredential(), environ={"SB": SB_CONNECTION},
                                arm_endpoint="https://127.0.0.1:1")
    jobs = NAMESPACE_ID.format("sub-1", "jobs-ns")
    by_identity = clients.counter_for(sb_source(namespace_resource_id=jobs))
    assert isinstance(by_identity, ServiceBusManagementCounter)
    assert isinstance(by_identity.client, ServiceBusManagementClient)
    assert by_identity.client._config.subscription_id == "sub-1"  # no public accessor in 10.0
    assert by_identity.client._config.base_url == "https://127.0.0.1:1"
    # The same namespace (by metricsResourceId, any case): the same counter.
    assert clients.counter_for(sb_source(name="other", queue_name="other", metrics_resource_id=jobs.upper())) is by_identity
    # Another namespace of the same subscription shares the client; another subscription gets its own.
    same_subscription = clients.counter_for(sb_source(fully_qualified_namespace=None,
                                                      namespace_resource_id=NAMESPACE_ID.format("sub-1", "other-ns")))
    other_subscription = clients.counter_for(sb_source(fully_qualified_namespace=None,
                                                       namespace_resource_id=NAMESPACE_ID.format("sub-2", "jobs-ns")))
    assert same_subscription is not by_identity and same_subscription.client is by_identity.client
    assert other_subscription.client is not by_identity.client
    # Only a source with nothing but a connection string counts through the data plane.
    by_connection = clients.counter_for(sb_source(connection_from_env="SB", fully_qualified_namespace=None))
    assert isinstance(by_connection, ServiceBusAdminCounter)
    assert isinstance(by_connection.client, ServiceBusAdministrationClient)
    with pytest.raises(LookupError, match="namespaceResourceId"):
        clients.counter_for(sb_source())
    asyncio.run(clients.aclose())


def policy_document(**source_changes) -> dict:
    eventhub = {"kind": "eventhub", "name": "orders", "eventHubName": "Orders-Hub", "connectionFromEnv": "ORDERS_EH",
                "storageConnectionFromEnv": "CHECKPOINTS", "checkpointStrategy": "azureFunction"}
    eventhub.update(source_changes)
    return {
        "targets": [
            {"name": "orders", "plan": {"resource_id": PLAN.format("orders")}, "sources": [eventhub]},
            {"name": "jobs", "plan": {"resource_id": PLAN.format("jobs")}, "mode": "rules",
             "rules": [{"name": "backlog", "metric": "backlog", "scale_up_above": 100}],
             "sources": [{"kind": "servicebus", "name": "jobs", "queueName": "jobs", "connectionFromEnv": "JOBS_SB"},
                         {"kind": "servicebus", "name": "billing", "topicName": "events", "subscriptionName": "billing",
                          "namespaceResourceId": NAMESPACE_ID.format("sub-1", "jobs-ns")},
                         {"kind": "eventhub", "name": "orders-again", "eventHubName": "Orders-Hub",
                          "fullyQualifiedNamespace": "orders-ns.servicebus.windows.net",
                          "checkpointAccountUrl": "https://acct.blob.core.windows.net/"}]},
        ]
    }


def settings_for(document: dict) -> Settings:
    storage = StorageSettings(AZURITE, None, None, None, None, None)
    return Settings(policy=policy_from_dict(document), storage=storage, collect_concurrency=3, collect_timeout_seconds=2.5,
                    ownership_expiry_seconds=45)


ENVIRON = {"ORDERS_EH": EH_CONNECTION, "CHECKPOINTS": AZURITE, "JOBS_SB": SB_CONNECTION}


def test_collector_for_wires_real_adapters_from_settings_without_io():
    collector = collector_for(settings_for(policy_document()), credential=StaticTokenCredential(), environ=ENVIRON)
    assert (collector.concurrency, collector.timeout_seconds) == (3, 2.5)
    eventhub = collector.readers["eventhub"]
    assert eventhub.ownership_expiry_seconds == 45
    by_connection = eventhub.bind(collector.policy.targets[0].sources[0])
    assert by_connection.namespace == "orders-ns.servicebus.windows.net"
    assert isinstance(by_connection.checkpoints, AzureFunctionCheckpointReader)
    assert isinstance(by_connection.checkpoints.container, ContainerClient)
    assert isinstance(by_connection.partitions.client, EventHubConsumerClient)
    by_identity = eventhub.bind(collector.policy.targets[1].sources[2])
    assert isinstance(by_identity.checkpoints, AutoCheckpointReader)  # the default: the layout is found, not configured
    assert by_identity.checkpoints.container.url.startswith("https://acct.blob.core.windows.net/azure-webjobs-eventhub")
    assert by_identity.partitions is not by_connection.partitions  # identity vs connection string: two clients
    assert isinstance(collector.readers["servicebus"].counter_for(collector.policy.targets[1].sources[0]), ServiceBusAdminCounter)
    by_arm = collector.readers["servicebus"].counter_for(collector.policy.targets[1].sources[1])
    assert isinstance(by_arm, ServiceBusManagementCounter)
    assert by_arm.client._config.base_url == "https://management.azure.com"  # ARM_ENDPOINT's default
    asyncio.run(collector.aclose())


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("ORDERS_EH", r"^ORDERS_EH \(connectionFromEnv of source 'orders'\) is not set \(targets\[0\]\.sources\[0\]\)"),
        ("CHECKPOINTS", r"^CHECKPOINTS \(targets\[0\]\.sources\[0\]\.storageConnectionFromEnv\) is not set"),
        ("JOBS_SB", r"^JOBS_SB \(connectionFromEnv of source 'jobs'\) is not set \(targets\[1\]\.sources\[0\]\)"),
    ],
)
def test_collector_for_names_the_missing_setting(missing, message):
    environ = {key: value for key, value in ENVIRON.items() if key != missing}
    with pytest.raises(SettingsError, match=message):
        collector_for(settings_for(policy_document()), credential=StaticTokenCredential(), environ=environ)


def test_collector_for_names_a_connection_string_without_endpoint():
    environ = {**ENVIRON, "ORDERS_EH": "SharedAccessKeyName=listen;SharedAccessKey=bm90LWEta2V5"}
    with pytest.raises(SettingsError, match=r"^targets\[0\]\.sources\[0\]: ORDERS_EH \(connectionFromEnv of source 'orders'\) has no Endpoint"):
        collector_for(settings_for(policy_document()), credential=StaticTokenCredential(), environ=environ)


def test_collector_for_creates_and_closes_a_default_credential_when_identity_is_needed():
    collector = collector_for(settings_for(policy_document()), environ=ENVIRON)
    from azure.identity.aio import DefaultAzureCredential

    credential = collector.readers["eventhub"].bind(collector.policy.targets[1].sources[2]).checkpoints.container.credential
    assert isinstance(credential, DefaultAzureCredential)
    asyncio.run(collector.aclose())


def test_sample_messages_are_json_documents():
    # Guards the contract collect relies on: to_json is compact JSON with the schema version.
    from scaling.domain.samples import MetricSample, SourceReading

    sample = MetricSample("orders", datetime(2026, 1, 1, tzinfo=UTC), 2, (SourceReading("orders", "eventhub"),))
    assert json.loads(sample.to_json())["schema_version"] == 1
