"""The demo's simulated consumers claim partition ownership as the Event Hubs processors do: real
ownership blobs in Azurite written with the SDK's ``BlobCheckpointStore.claim_ownership`` (each
claim conditional on the etag of the last), read back by the collector's own checkpoint reader.
What collect reads is the world's current owner of each partition, named as ``simulate`` names it,
through a scale change of the balanced load balancer and a failed instance's released partitions.
(No Event Hubs emulator exists here: the hub is the simulated world, the blobs are real.)
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import numpy as np

from scaling.local.simhub import CONSUMER_GROUP, EVENT_HUB, NAMESPACE, SimulatedConsumers
from scaling.simulation.world.loop import World
from scaling.simulation.world.scenario import Scenario
from scaling.sources.checkpoints import BlobMetadataCheckpointReader, CheckpointLocation, summarize_ownership

PARTITIONS = [str(index) for index in range(8)]


def test_the_simulated_consumers_claim_what_the_world_owns(storage_connection_string, unique_name) -> None:
    from azure.storage.blob.aio import ContainerClient

    scenario = Scenario(partitions=8, initial_capacity=4, provisioning_delay_minutes=0, assignment="balanced",
                        instance_failures_per_day=0.0)
    world = World(np.full(10, 4000.0), scenario)

    async def read() -> dict[str, str | None]:
        async with ContainerClient.from_connection_string(storage_connection_string, unique_name) as container:
            snapshot = await BlobMetadataCheckpointReader(container).read(CheckpointLocation(NAMESPACE, EVENT_HUB, CONSUMER_GROUP))
        summary = summarize_ownership(snapshot.ownership, PARTITIONS, datetime.now(UTC), 60)
        return summary.owner_by_partition, summary.live_owners

    async def main():
        consumers = await SimulatedConsumers(world, storage_connection_string, container=unique_name).open()
        try:
            world.advance()
            first = await consumers.claim()
            owners_then, live_then = await read()
            again = await consumers.claim()  # nothing changed: nothing written
            world.request(2)
            world.advance()
            moved = await consumers.claim()  # the etags of the first claims make these updates
            owners_now, live_now = await read()
        finally:
            await consumers.close()
        return first, owners_then, live_then, again, moved, owners_now, live_now

    first, owners_then, live_then, again, moved, owners_now, live_now = asyncio.run(main())
    assert first == 8 and again == 0
    expected_then = {str(index): f"instance-{owner}" for index, owner in enumerate([0, 1, 2, 3, 0, 1, 2, 3])}
    assert owners_then == expected_then and live_then == 4
    world_owners = world.physics.owners(0)
    assert owners_now == {str(index): f"instance-{owner}" for index, owner in enumerate(world_owners)}
    assert live_now == 2 and moved == 4  # the balanced load balancer moved only the leaving instances' partitions
