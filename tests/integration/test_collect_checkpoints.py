"""Checkpoint and ownership readers against real Azurite blobs.

Current-layout checkpoints and ownership are written by the real
``azure.eventhub.extensions.checkpointstoreblobaio.BlobCheckpointStore`` (``update_checkpoint``,
``claim_ownership``); legacy blobs are written in the old Functions/EventProcessorHost JSON
format. Names are mixed-case (``Orders-Hub``, ``$Default``) to check the lower-casing rules.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from azure.eventhub.extensions.checkpointstoreblobaio import BlobCheckpointStore
from azure.storage.blob.aio import BlobServiceClient, ContainerClient

from scaling.sources.base import CallGate
from scaling.sources.checkpoints import (
    AzureFunctionCheckpointReader,
    BlobMetadataCheckpointReader,
    CheckpointLocation,
    checkpoint_reader_for,
    summarize_ownership,
)

FQNS = "Orders-NS.servicebus.windows.net"
HUB = "Orders-Hub"
GROUP = "$Default"
LOCATION = CheckpointLocation(FQNS, HUB, GROUP)


class CountingContainer:
    """Delegates to a real ``ContainerClient`` and counts the calls made through it."""

    def __init__(self, container: ContainerClient) -> None:
        self.container = container
        self.container_name = container.container_name
        self.calls: list[str] = []

    def list_blobs(self, **kwargs):
        self.calls.append(f"list_blobs:{kwargs.get('name_starts_with')}")
        return self.container.list_blobs(**kwargs)

    async def download_blob(self, name, **kwargs):
        self.calls.append(f"download_blob:{name}")
        return await self.container.download_blob(name, **kwargs)


def checkpoint(partition_id: str, sequence_number: int, *, hub: str = HUB, group: str = GROUP) -> dict:
    return {"fully_qualified_namespace": FQNS, "eventhub_name": hub, "consumer_group": group,
            "partition_id": partition_id, "sequence_number": sequence_number, "offset": str(sequence_number * 128)}


def ownership(partition_id: str, owner_id: str) -> dict:
    return {"fully_qualified_namespace": FQNS, "eventhub_name": HUB, "consumer_group": GROUP,
            "partition_id": partition_id, "owner_id": owner_id}


def run_with_container(connection_string: str, name: str, scenario, *, create: bool = True):
    async def main():
        if create:
            async with BlobServiceClient.from_connection_string(connection_string) as service:
                await service.create_container(name)
        async with ContainerClient.from_connection_string(connection_string, name) as container:
            return await scenario(container)

    return asyncio.run(main())


def test_blob_metadata_checkpoints_written_by_the_real_store_are_read_with_one_listing(storage_connection_string, unique_name):
    async def scenario(container):
        async with BlobCheckpointStore.from_connection_string(storage_connection_string, unique_name) as store:
            await asyncio.gather(*(store.update_checkpoint(checkpoint(str(pid), 1000 + pid)) for pid in range(32)))
            # another consumer group and another hub in the same container must not leak in
            await store.update_checkpoint(checkpoint("0", 5, group="Audit"))
            await store.update_checkpoint(checkpoint("0", 6, hub="Orders-Hub-2"))
            await store.update_checkpoint(checkpoint("3", 2000))  # a second checkpoint overwrites the first
        counting = CountingContainer(container)
        return await BlobMetadataCheckpointReader(counting).read(LOCATION, CallGate(4, 5.0)), counting.calls

    snapshot, calls = run_with_container(storage_connection_string, unique_name, scenario)
    assert snapshot.checkpoints == {**{str(pid): 1000 + pid for pid in range(32)}, "3": 2000}
    assert snapshot.notes == () and snapshot.container_found
    assert calls == ["list_blobs:orders-ns.servicebus.windows.net/orders-hub/$default/"]  # one call, lower-cased


def test_other_consumer_group_with_mixed_case_reads_its_own_checkpoints(storage_connection_string, unique_name):
    async def scenario(container):
        async with BlobCheckpointStore.from_connection_string(storage_connection_string, unique_name) as store:
            await store.update_checkpoint(checkpoint("0", 5, group="Audit-Readers"))
            await store.update_checkpoint(checkpoint("0", 99))
        return await BlobMetadataCheckpointReader(container).read(CheckpointLocation(FQNS, HUB, "Audit-Readers"))

    snapshot = run_with_container(storage_connection_string, unique_name, scenario)
    assert snapshot.checkpoints == {"0": 5}


@pytest.mark.parametrize(
    ("metadata", "note"),
    [
        # Writers leave sequencenumber empty when unset; Azurite drops empty metadata values on the
        # way in, so here it reads back as missing. Either way: no checkpoint, and a note.
        ({"sequencenumber": "", "offset": "10"}, ("partition 1: checkpoint sequencenumber empty; counted from the beginning",
                                                  "partition 1: checkpoint sequencenumber missing; counted from the beginning")),
        ({"offset": "10"}, "partition 1: checkpoint sequencenumber missing; counted from the beginning"),
        ({"sequencenumber": "abc", "offset": "10"},
         "partition 1: checkpoint sequencenumber not a non-negative integer: 'abc'; counted from the beginning"),
        ({}, "partition 1: checkpoint sequencenumber missing; counted from the beginning"),
    ],
)
def test_missing_empty_or_bad_metadata_means_no_checkpoint_and_a_note(storage_connection_string, unique_name, metadata, note):
    async def scenario(container):
        async with BlobCheckpointStore.from_connection_string(storage_connection_string, unique_name) as store:
            await store.update_checkpoint(checkpoint("0", 42))
        blob = container.get_blob_client(f"{LOCATION.prefix()}checkpoint/1")
        await blob.upload_blob(b"", metadata=metadata, overwrite=True)
        return await BlobMetadataCheckpointReader(container).read(LOCATION)

    snapshot = run_with_container(storage_connection_string, unique_name, scenario)
    assert snapshot.checkpoints == {"0": 42}
    assert len(snapshot.notes) == 1
    assert snapshot.notes[0] in (note if isinstance(note, tuple) else (note,))


def test_missing_container_means_no_checkpoints_and_a_note(storage_connection_string, unique_name):
    async def scenario(container):
        return (await BlobMetadataCheckpointReader(container).read(LOCATION),
                await AzureFunctionCheckpointReader(container).read(LOCATION))

    current, legacy = run_with_container(storage_connection_string, unique_name, scenario, create=False)
    for snapshot in (current, legacy):
        assert snapshot.checkpoints == {} and snapshot.ownership == ()
        assert snapshot.container_found is False
        assert snapshot.notes == (f"checkpoint container {unique_name!r} not found: every partition counts from its beginning",)


def test_ownership_claimed_by_the_real_store_counts_live_owners_and_expired_claims(storage_connection_string, unique_name):
    async def scenario(container):
        async with BlobCheckpointStore.from_connection_string(storage_connection_string, unique_name) as store:
            claimed = await store.claim_ownership(
                [ownership("0", "worker-a"), ownership("1", "worker-a"), ownership("2", "worker-b"), ownership("3", "")]
            )
            await store.update_checkpoint(checkpoint("0", 7))
        counting = CountingContainer(container)
        return claimed, await BlobMetadataCheckpointReader(counting).read(LOCATION), counting.calls

    claimed, snapshot, calls = run_with_container(storage_connection_string, unique_name, scenario)
    assert len(calls) == 1  # ownership comes from the same listing as the checkpoints
    assert snapshot.checkpoints == {"0": 7}
    assert sorted((r.partition_id, r.owner_id) for r in snapshot.ownership) == [
        ("0", "worker-a"), ("1", "worker-a"), ("2", "worker-b"), ("3", None)]
    claimed_at = datetime.fromtimestamp(max(c["last_modified_time"] for c in claimed), UTC)
    assert all(abs((r.last_modified - claimed_at).total_seconds()) <= 2 for r in snapshot.ownership)

    partitions = ["0", "1", "2", "3", "4"]
    live = summarize_ownership(snapshot.ownership, partitions, claimed_at + timedelta(seconds=30), 60)
    assert (live.live_owners, live.unowned_partitions) == (2, ("3", "4"))  # 3 was released, 4 never claimed
    expired = summarize_ownership(snapshot.ownership, partitions, claimed_at + timedelta(seconds=120), 60)
    assert (expired.live_owners, expired.unowned_partitions) == (0, tuple(partitions))


def legacy_body(partition_id: str, sequence_number, *, owner: str = "", offset="4096") -> bytes:
    return json.dumps({"PartitionId": partition_id, "Owner": owner, "Token": "", "Epoch": 2,
                       "Offset": offset, "SequenceNumber": sequence_number}).encode()


def test_legacy_json_checkpoints_are_read_with_one_listing_and_concurrent_downloads(storage_connection_string, unique_name):
    async def scenario(container):
        prefix = LOCATION.prefix(lower=False)  # the legacy host kept the configured case
        bodies = {str(pid): legacy_body(str(pid), 500 + pid) for pid in range(8)}
        bodies["6"] = legacy_body("6", 0, offset=None)  # lease created, never checkpointed
        bodies["7"] = b"{not json"
        await asyncio.gather(*(container.upload_blob(prefix + pid, body) for pid, body in bodies.items()))
        await container.upload_blob(prefix + "checkpoint/0", b"", metadata={"sequencenumber": "1"})  # not legacy
        counting = CountingContainer(container)
        return await AzureFunctionCheckpointReader(counting).read(LOCATION, CallGate(8, 5.0)), counting.calls

    snapshot, calls = run_with_container(storage_connection_string, unique_name, scenario)
    assert snapshot.checkpoints == {str(pid): 500 + pid for pid in range(6)}
    assert snapshot.notes == ("partition 7: checkpoint body is not JSON (JSONDecodeError); counted from the beginning",)
    assert calls[0] == "list_blobs:Orders-NS.servicebus.windows.net/Orders-Hub/$Default/"
    assert sorted(calls[1:]) == sorted(f"download_blob:{LOCATION.prefix(lower=False)}{pid}" for pid in range(8))


def test_legacy_reader_falls_back_to_lower_case_names(storage_connection_string, unique_name):
    async def scenario(container):
        await container.upload_blob(LOCATION.prefix() + "0", legacy_body("0", 12))
        counting = CountingContainer(container)
        return await checkpoint_reader_for("azureFunction", counting).read(LOCATION), counting.calls

    snapshot, calls = run_with_container(storage_connection_string, unique_name, scenario)
    assert snapshot.checkpoints == {"0": 12}
    assert [c for c in calls if c.startswith("list_blobs")] == [
        "list_blobs:Orders-NS.servicebus.windows.net/Orders-Hub/$Default/",
        "list_blobs:orders-ns.servicebus.windows.net/orders-hub/$default/",
    ]


def test_legacy_ownership_follows_the_blob_lease(storage_connection_string, unique_name):
    async def scenario(container):
        prefix = LOCATION.prefix(lower=False)
        await container.upload_blob(prefix + "0", legacy_body("0", 10, owner="host-1"))
        await container.upload_blob(prefix + "1", legacy_body("1", 11, owner="host-1"))  # owner named, lease lapsed
        await container.upload_blob(prefix + "2", legacy_body("2", 12, owner="host-2"))
        for pid in ("0", "2"):
            await container.get_blob_client(prefix + pid).acquire_lease(lease_duration=60)
        return await AzureFunctionCheckpointReader(container).read(LOCATION)

    snapshot = run_with_container(storage_connection_string, unique_name, scenario)
    summary = summarize_ownership(snapshot.ownership, ["0", "1", "2", "3"], datetime.now(UTC) + timedelta(hours=1), 60)
    assert summary.owner_by_partition == {"0": "host-1", "2": "host-2"}
    assert (summary.live_owners, summary.unowned_partitions) == (2, ("1", "3"))
