"""checkpointStrategy auto against real Azurite blobs: each layout, both, none, and the near misses.

Current-layout checkpoints are written by the real ``BlobCheckpointStore``; legacy ones in the
old Functions/EventProcessorHost JSON format, with the configured case as that host kept it.
Hubs are ``StandInHub`` stand-ins (no Event Hubs emulator runs here); the note is read off the
sample the collector builds, as it reaches the ``metrics`` queue.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from azure.eventhub.extensions.checkpointstoreblobaio import BlobCheckpointStore
from azure.storage.blob.aio import BlobServiceClient, ContainerClient

from scaling.bootstrap import collector_for as build_collector
from scaling.domain.policy import policy_from_dict
from scaling.domain.samples import parse_sample
from scaling.settings import Settings, StorageSettings
from scaling.sources.base import CallGate
from scaling.sources.checkpoints import AutoCheckpointReader
from scaling.sources.eventhub import EventHubBinding, EventHubReader
from scaling.sources.standins import FixedCapacity, StandInHub

from .test_collect_checkpoints import CountingContainer, legacy_body

FQNS = "orders-ns.servicebus.windows.net"
HUB = "orders-hub"
GROUP = "$Default"
PARTITIONS = 4
LAST = 1000
NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
PLAN = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/serverfarms/orders"
# A second clock tick: Azurite (like Storage) reports last-modified times to the second.
TICK = 1.1


async def write_current(connection_string: str, container: str, sequence_numbers: dict[str, int], *,
                        namespace: str = FQNS, hub: str = HUB, group: str = GROUP) -> None:
    async with BlobCheckpointStore.from_connection_string(connection_string, container) as store:
        await asyncio.gather(*(store.update_checkpoint(
            {"fully_qualified_namespace": namespace, "eventhub_name": hub, "consumer_group": group,
             "partition_id": pid, "sequence_number": sequence, "offset": str(sequence)})
            for pid, sequence in sequence_numbers.items()))


async def write_legacy(container: ContainerClient, sequence_numbers: dict[str, int], *,
                       namespace: str = FQNS, hub: str = HUB, group: str = GROUP) -> None:
    prefix = f"{namespace}/{hub}/{group}/"  # the legacy host kept the configured case
    await asyncio.gather(*(container.upload_blob(prefix + pid, legacy_body(pid, sequence), overwrite=True)
                           for pid, sequence in sequence_numbers.items()))


async def read_source(container: CountingContainer, *, namespace: str = FQNS, hub: str = HUB, group: str = GROUP,
                max_listed_names: int = 5000):
    """One collection of one hub through the Event Hubs reader with the auto reader."""
    policy = policy_from_dict({"targets": [{"name": "orders", "plan": {"resource_id": PLAN}, "sources": [
        {"kind": "eventhub", "name": "orders", "eventHubName": hub, "consumerGroup": group,
         "fullyQualifiedNamespace": namespace, "storageConnectionFromEnv": "CHECKPOINTS"}]}]})
    source = policy.targets[0].sources[0]
    binding = EventHubBinding(StandInHub.uniform(PARTITIONS, last_enqueued=LAST),
                              AutoCheckpointReader(container, max_listed_names=max_listed_names), namespace)
    reading = await EventHubReader(lambda _: binding).read(source, CallGate(4, 5.0), NOW)
    assert reading.ok, reading.error
    return reading


@pytest.fixture
def blobs(storage_connection_string, unique_name):
    """A fresh container; yields (write, read): run a coroutine on it, read the hub through auto."""

    def run(scenario):
        async def main():
            async with ContainerClient.from_connection_string(storage_connection_string, unique_name) as container:
                return await scenario(container)
        return asyncio.run(main())

    async def create(container):
        await container.create_container()

    run(create)

    def read(**kwargs):
        async def main():
            async with ContainerClient.from_connection_string(storage_connection_string, unique_name) as container:
                counting = CountingContainer(container)
                return await read_source(counting, **kwargs), counting.calls
        return asyncio.run(main())

    return run, read


def listings(calls: list[str]) -> list[str]:
    return [call.removeprefix("list_blobs:") for call in calls if call.startswith("list_blobs:")]


def test_blob_metadata_layout_is_found_used_and_named_with_one_listing(blobs, storage_connection_string, unique_name):
    run, read = blobs
    asyncio.run(write_current(storage_connection_string, unique_name, {str(pid): 900 + pid for pid in range(PARTITIONS)}))
    reading, calls = read()
    assert [p.checkpoint for p in reading.partitions] == [900, 901, 902, 903]
    assert reading.notes == ("checkpoint_layout: blobMetadata (4 of 4 partitions)",)
    assert listings(calls) == [f"{FQNS}/{HUB}/$"]  # both spellings of $Default in one call


def test_legacy_layout_is_found_in_the_configured_case_and_named(blobs):
    run, read = blobs
    run(lambda container: write_legacy(container, {"0": 500, "1": 501, "2": 502},
                                       namespace="Orders-NS.servicebus.windows.net", hub="Orders-Hub"))
    reading, calls = read(namespace="Orders-NS.servicebus.windows.net", hub="Orders-Hub")
    assert [p.checkpoint for p in reading.partitions] == [500, 501, 502, None]
    assert [p.backlog for p in reading.partitions] == [500, 499, 498, LAST + 1]
    assert reading.notes == ("checkpoint_layout: azureFunction (3 of 4 partitions; 1 partition counts from its beginning)",)
    assert listings(calls) == ["orders-ns.servicebus.windows.net/orders-hub/$default/",
                               "Orders-NS.servicebus.windows.net/Orders-Hub/$Default/"]


def test_with_both_layouts_the_most_recently_updated_one_is_used_and_the_note_says_so(
        blobs, storage_connection_string, unique_name):
    run, read = blobs
    run(lambda container: write_legacy(container, {str(pid): 100 for pid in range(PARTITIONS)}))
    asyncio.run(asyncio.sleep(TICK))
    asyncio.run(write_current(storage_connection_string, unique_name, {str(pid): 700 for pid in range(PARTITIONS)}))
    migrated, calls = read()  # the consumers moved to extension v5: the old lease blobs stay behind
    assert [p.checkpoint for p in migrated.partitions] == [700] * PARTITIONS
    assert not [call for call in calls if call.startswith("download_blob")]  # no legacy body is needed
    note = migrated.notes[0]
    assert note.startswith("checkpoint_layout: blobMetadata (4 of 4 partitions); azureFunction blobs are there too under "
                           f"'{FQNS}/{HUB}/{GROUP}/' (4 partitions, updated ")
    assert note.endswith(") and is used") and "blobMetadata was updated more recently" in note

    asyncio.run(asyncio.sleep(TICK))
    run(lambda container: write_legacy(container, {str(pid): 800 for pid in range(PARTITIONS)}))
    rolled_back, _ = read()  # and back to the legacy host: its writes are now the newest
    assert [p.checkpoint for p in rolled_back.partitions] == [800] * PARTITIONS
    assert rolled_back.notes[0].startswith("checkpoint_layout: azureFunction (4 of 4 partitions); blobMetadata blobs are there too")


def test_mid_migration_a_partition_without_a_new_checkpoint_starts_from_its_legacy_one(
        blobs, storage_connection_string, unique_name):
    """As the Functions extension v5 does: only partitions 0 and 1 have checkpointed since the
    upgrade; 2 and 3 still start from their legacy checkpoints, not from the beginning."""
    run, read = blobs
    run(lambda container: write_legacy(container, {str(pid): 100 + pid for pid in range(PARTITIONS)}))
    asyncio.run(asyncio.sleep(TICK))
    asyncio.run(write_current(storage_connection_string, unique_name, {"0": 700, "1": 701}))
    reading, calls = read()
    assert [p.checkpoint for p in reading.partitions] == [700, 701, 102, 103]
    assert reading.notes[0].startswith("checkpoint_layout: blobMetadata (4 of 4 partitions, 2 of them from azureFunction "
                                       "checkpoints, where the Functions extension starts a partition that has no new "
                                       "checkpoint yet); azureFunction blobs are there too")
    assert sorted(call for call in calls if call.startswith("download_blob")) == [
        f"download_blob:{FQNS}/{HUB}/{GROUP}/2", f"download_blob:{FQNS}/{HUB}/{GROUP}/3"]


def test_none_in_an_empty_container_says_where_it_looked_with_one_more_listing(blobs, unique_name):
    _, read = blobs
    reading, calls = read()
    assert [p.backlog for p in reading.partitions] == [LAST + 1] * PARTITIONS
    assert reading.notes == (f"checkpoint_layout: none under '{FQNS}/{HUB}/$default/' or '{FQNS}/{HUB}/{GROUP}/' in container "
                             f"'{unique_name}' (4 partitions count from their beginning); found instead: an empty container",)
    assert listings(calls) == [f"{FQNS}/{HUB}/$", "None"]  # the group's listing, then the container's names


def test_a_missing_container_is_one_line(storage_connection_string, unique_name):
    async def main():
        async with ContainerClient.from_connection_string(storage_connection_string, unique_name) as container:
            return await read_source(CountingContainer(container))

    reading = asyncio.run(main())
    assert reading.ok and [p.backlog for p in reading.partitions] == [LAST + 1] * PARTITIONS
    assert reading.notes == (f"checkpoint_layout: none: checkpoint container '{unique_name}' not found "
                             "(4 partitions count from their beginning)",)


@pytest.mark.parametrize(
    ("write", "found_instead"),
    [
        pytest.param({"group": "Audit"}, "consumer group 'audit' (blobMetadata, 4 partitions)", id="other-consumer-group"),
        pytest.param({"hub": "order-hub"}, "event hub 'order-hub' (a typo of 'orders-hub'?) (blobMetadata, 4 partitions)",
                     id="hub-name-typo"),
        pytest.param({"namespace": "ORDERS-NS.servicebus.windows.net", "legacy": True},
                     f"the same names in another case, 'ORDERS-NS.servicebus.windows.net/{HUB}/{GROUP}/' (azureFunction, 4 partitions)",
                     id="namespace-in-another-case"),
        pytest.param({"namespace": "orders-ns-dr.servicebus.windows.net"},
                     "namespace 'orders-ns-dr.servicebus.windows.net' (blobMetadata, 4 partitions)", id="other-namespace"),
    ],
)
def test_near_misses_are_named_instead_of_silently_counting_everything(blobs, storage_connection_string, unique_name,
                                                                        write, found_instead):
    run, read = blobs
    write = dict(write)
    sequence_numbers = {str(pid): 990 for pid in range(PARTITIONS)}
    if write.pop("legacy", False):
        run(lambda container: write_legacy(container, sequence_numbers, **write))
    else:
        asyncio.run(write_current(storage_connection_string, unique_name, sequence_numbers, **write))
    reading, _ = read()
    assert all(p.checkpoint is None for p in reading.partitions)
    assert reading.notes[0].endswith(f"(4 partitions count from their beginning); found instead: {found_instead}")
    assert len(reading.notes) == 1


def test_the_near_miss_listing_reads_one_page_of_names_at_most(blobs, storage_connection_string, unique_name):
    run, read = blobs
    asyncio.run(write_current(storage_connection_string, unique_name, {str(pid): 1 for pid in range(3)}, group="audit"))
    reading, calls = read(max_listed_names=2)
    assert reading.notes[0].endswith("found instead: consumer group 'audit' (blobMetadata, 2 partitions) "
                                     "(only the first names of the container were looked at)")
    assert listings(calls) == [f"{FQNS}/{HUB}/$", "None"]


def test_auto_is_the_default_and_its_note_reaches_the_sample(storage_connection_string, unique_name):
    document = {"targets": [{"name": "orders", "plan": {"resource_id": PLAN}, "sources": [
        {"kind": "eventhub", "name": "orders", "eventHubName": HUB, "fullyQualifiedNamespace": FQNS,
         "storageConnectionFromEnv": "CHECKPOINTS", "blobContainer": unique_name}]}]}
    settings = Settings(policy=policy_from_dict(document),
                        storage=StorageSettings(storage_connection_string, None, None, None, None, None))

    async def main():
        async with BlobServiceClient.from_connection_string(storage_connection_string) as service:
            await service.create_container(unique_name)
        await write_current(storage_connection_string, unique_name, {"0": 990, "1": 995})
        collector = build_collector(settings, environ={"CHECKPOINTS": storage_connection_string},
                                    capacity_reader=FixedCapacity(2), clock=lambda: NOW,
                                    partition_source_for=lambda source: StandInHub.uniform(2, last_enqueued=LAST))
        try:
            return await collector.collect_messages()
        finally:
            await collector.aclose()

    (message,) = asyncio.run(main())
    sample = parse_sample(message, now=NOW)
    assert sample.sources[0].notes == ("checkpoint_layout: blobMetadata (2 of 2 partitions)",)
    assert sample.backlog == 10 + 5
    assert json.loads(message)["sources"][0]["notes"] == ["checkpoint_layout: blobMetadata (2 of 2 partitions)"]
