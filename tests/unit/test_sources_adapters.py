"""The real SDK adapters, fed objects with the SDKs' method names and return shapes (no network).

Event Hubs: no emulator runs here, so the adapter over ``EventHubConsumerClient`` is checked
against a fake client that answers like the SDK (the property dict keys of azure-eventhub 5.x).
Service Bus: the adapter over ``ServiceBusAdministrationClient`` against a fake with its
runtime-properties methods. The factory is checked building the real clients offline.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from azure.eventhub.aio import EventHubConsumerClient
from azure.servicebus.aio.management import ServiceBusAdministrationClient
from azure.storage.blob.aio import ContainerClient

from scaling.bootstrap import collector_for
from scaling.domain.policy import SourceSettings, policy_from_dict
from scaling.settings import Settings, SettingsError, StorageSettings
from scaling.sources.base import CallGate
from scaling.sources.checkpoints import AutoCheckpointReader, AzureFunctionCheckpointReader
from scaling.sources.eventhub import EventHubClients, EventHubPartitionSource, PartitionProperties
from scaling.sources.servicebus import ServiceBusAdminCounter, ServiceBusClients, ServiceBusReader

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


def test_service_bus_clients_build_real_clients_offline_and_cache_per_namespace():
    clients = ServiceBusClients(credential=StaticTokenCredential(), environ={"SB": SB_CONNECTION})
    by_identity = clients.counter_for(sb_source())
    assert clients.counter_for(sb_source(name="other", queue_name="other")) is by_identity
    by_connection = clients.counter_for(sb_source(connection_from_env="SB", fully_qualified_namespace=None))
    assert by_connection is not by_identity
    assert isinstance(by_identity.client, ServiceBusAdministrationClient)
    assert isinstance(by_connection.client, ServiceBusAdministrationClient)
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
    by_identity = eventhub.bind(collector.policy.targets[1].sources[1])
    assert isinstance(by_identity.checkpoints, AutoCheckpointReader)  # the default: the layout is found, not configured
    assert by_identity.checkpoints.container.url.startswith("https://acct.blob.core.windows.net/azure-webjobs-eventhub")
    assert by_identity.partitions is not by_connection.partitions  # identity vs connection string: two clients
    assert collector.readers["servicebus"].counter_for(collector.policy.targets[1].sources[0]) is not None
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

    credential = collector.readers["eventhub"].bind(collector.policy.targets[1].sources[1]).checkpoints.container.credential
    assert isinstance(credential, DefaultAzureCredential)
    asyncio.run(collector.aclose())


def test_sample_messages_are_json_documents():
    # Guards the contract collect relies on: to_json is compact JSON with the schema version.
    from scaling.domain.samples import MetricSample, SourceReading

    sample = MetricSample("orders", datetime(2026, 1, 1, tzinfo=UTC), 2, (SourceReading("orders", "eventhub"),))
    assert json.loads(sample.to_json())["schema_version"] == 1
