"""The factory-built collector against real Azurite checkpoints, and the benchmark on a small world.

Hubs are ``StandInHub`` stand-ins (no Event Hubs emulator runs here) wherever partitions are read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime

from azure.eventhub.extensions.checkpointstoreblobaio import BlobCheckpointStore
from azure.storage.blob.aio import BlobServiceClient

from scaling.bootstrap import collector_for
from scaling.commands import bench_collect as bench
from scaling.domain.policy import policy_from_dict
from scaling.services.collect import Collector
from scaling.settings import Settings, StorageSettings
from scaling.sources.base import CallGate
from scaling.sources.checkpoints import CheckpointLocation
from scaling.sources.eventhub import EventHubBinding, EventHubReader
from scaling.sources.standins import FixedCapacity, StandInHub

EH_CONNECTION = "Endpoint=sb://Orders-NS.servicebus.windows.net/;SharedAccessKeyName=listen;SharedAccessKey=bm90LWEta2V5"
PLAN = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/serverfarms/{}"


def test_factory_checkpoint_readers_read_real_blobs_for_both_strategies(storage_connection_string, unique_name):
    legacy_container = unique_name + "-legacy"
    document = {"targets": [{"name": "orders", "plan": {"resource_id": PLAN.format("orders")}, "sources": [
        {"kind": "eventhub", "name": "current", "eventHubName": "Orders-Hub", "connectionFromEnv": "ORDERS_EH",
         "storageConnectionFromEnv": "CHECKPOINTS", "blobContainer": unique_name},
        {"kind": "eventhub", "name": "legacy", "eventHubName": "Orders-Hub", "connectionFromEnv": "ORDERS_EH",
         "storageConnectionFromEnv": "CHECKPOINTS", "blobContainer": legacy_container, "checkpointStrategy": "azureFunction"},
    ]}]}
    settings = Settings(policy=policy_from_dict(document),
                        storage=StorageSettings(storage_connection_string, None, None, None, None, None))
    collector = collector_for(settings, environ={"ORDERS_EH": EH_CONNECTION, "CHECKPOINTS": storage_connection_string})
    current_source, legacy_source = collector.policy.targets[0].sources
    current = collector.readers["eventhub"].bind(current_source)
    legacy = collector.readers["eventhub"].bind(legacy_source)
    assert current.namespace == legacy.namespace == "Orders-NS.servicebus.windows.net"

    async def scenario():
        async with BlobServiceClient.from_connection_string(storage_connection_string) as service:
            await service.create_container(unique_name)
            await service.create_container(legacy_container)
            legacy_blobs = service.get_container_client(legacy_container)
            await legacy_blobs.upload_blob("Orders-NS.servicebus.windows.net/Orders-Hub/$Default/0",
                                           json.dumps({"PartitionId": "0", "Owner": "", "Offset": "1", "SequenceNumber": 31}))
        async with BlobCheckpointStore.from_connection_string(storage_connection_string, unique_name) as store:
            await store.update_checkpoint({"fully_qualified_namespace": current.namespace, "eventhub_name": "Orders-Hub",
                                           "consumer_group": "$Default", "partition_id": "0", "sequence_number": 17,
                                           "offset": "0"})
        location = CheckpointLocation(current.namespace, "Orders-Hub", "$Default")
        try:
            return await current.checkpoints.read(location, CallGate()), await legacy.checkpoints.read(location, CallGate())
        finally:
            await collector.aclose()

    current_snapshot, legacy_snapshot = asyncio.run(scenario())
    assert current_snapshot.checkpoints == {"0": 17}
    assert legacy_snapshot.checkpoints == {"0": 31}


def test_partial_failure_with_real_checkpoints_keeps_the_other_targets(storage_connection_string, unique_name):
    """One target's checkpoint container is missing (counted from the beginning, with a note),
    one hub hangs past the timeout, one hub raises: each target still gets its sample."""
    async def scenario():
        from azure.storage.blob.aio import ContainerClient

        from scaling.sources.checkpoints import BlobMetadataCheckpointReader

        async with BlobServiceClient.from_connection_string(storage_connection_string) as service:
            await service.create_container(unique_name)
        async with BlobCheckpointStore.from_connection_string(storage_connection_string, unique_name) as store:
            await store.update_checkpoint({"fully_qualified_namespace": "ns", "eventhub_name": "a", "consumer_group": "$Default",
                                           "partition_id": "0", "sequence_number": 8, "offset": "0"})
        present = ContainerClient.from_connection_string(storage_connection_string, unique_name)
        missing = ContainerClient.from_connection_string(storage_connection_string, unique_name + "-missing")
        hanging = StandInHub.uniform(2, last_enqueued=5)
        hanging.hang = True
        failing = StandInHub.uniform(2, last_enqueued=5)
        failing.fail_with = OSError("name resolution failed")
        bindings = {
            "a": EventHubBinding(StandInHub.uniform(1, last_enqueued=10), BlobMetadataCheckpointReader(present), "ns"),
            "b": EventHubBinding(StandInHub.uniform(2, last_enqueued=4), BlobMetadataCheckpointReader(missing), "ns"),
            "c": EventHubBinding(hanging, BlobMetadataCheckpointReader(present), "ns"),
            "d": EventHubBinding(failing, BlobMetadataCheckpointReader(present), "ns"),
        }
        policy = policy_from_dict({"targets": [
            {"name": name, "plan": {"resource_id": PLAN.format(name)},
             "sources": [{"kind": "eventhub", "name": name, "eventHubName": name, "fullyQualifiedNamespace": "ns",
                          "storageConnectionFromEnv": "X"}]}
            for name in "abcd"]})
        reader = EventHubReader(lambda source: bindings[source.name], closers=(present.close, missing.close))
        collector = Collector(policy, [reader], FixedCapacity(1), concurrency=4, timeout_seconds=0.3,
                              clock=lambda: datetime(2026, 2, 2, tzinfo=UTC))
        try:
            return await collector.collect()
        finally:
            await collector.aclose()

    a, b, c, d = asyncio.run(scenario())
    assert a.ok and a.backlog == 2
    assert b.ok and b.backlog == 10  # 2 partitions x (4 - 0 + 1), no container
    assert b.sources[0].notes == (f"checkpoint container {unique_name + '-missing'!r} not found: every partition counts from its beginning",)
    assert (c.sources[0].ok, c.sources[0].error) == (False, "get_partition_ids timed out after 0.3s")
    assert (d.sources[0].ok, d.sources[0].error) == (False, "OSError: name resolution failed")


def test_bench_collect_runs_on_a_small_world(storage_connection_string, tmp_path, capsys):
    parser = argparse.ArgumentParser()
    bench.configure(parser)
    out = tmp_path / "bench.json"
    args = parser.parse_args(["--hubs", "2", "--partitions", "4", "--latency-ms", "10", "--concurrency", "8",
                              "--repeat", "1", "--storage", storage_connection_string, "--json", str(out)])
    assert bench.run(args) == 0
    result = json.loads(out.read_text())
    assert result["event_hubs_calls_per_run"] == 2 * (1 + 4)
    assert result["total_backlog"] == 2 * sum(4000 - 1000 * pid for pid in range(4))
    assert result["serial_seconds"] > result["concurrent_seconds"]
    assert "ratio:" in capsys.readouterr().out
