"""A simulated Event Hub and its consumers for the local demo, over the benchmark's ``World``.

No Event Hubs emulator runs here, so the hub is the same steppable world the benchmark and
``python -m scaling simulate`` replay a trace through (scaling/simulation/world/loop.py):

- ``SimulatedHub`` is a ``PartitionSource`` (the collector's interface to a hub): partition ids
  ``"0".."P-1"`` and each partition's last enqueued sequence number from ``World.last_enqueued()``.
- ``SimulatedConsumers`` are the consumer group's workers: the world processes the arrivals at
  the plan's current capacity (new instances serve after the provisioning delay), and the
  workers write their checkpoints as REAL blobs in Azurite with the SDK's own
  ``BlobCheckpointStore.update_checkpoint`` (the ``blobMetadata`` layout), so ``collect`` reads
  exactly what it would read in Azure through its real checkpoint reader.
- ``SimulatedClock`` is the one clock of the demo: simulated minutes since the window's start.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from scaling.simulation.peers.looped import EPOCH
from scaling.simulation.world.loop import Scenario, World, load_trace, scale_trace
from scaling.sources.eventhub import PartitionProperties

NAMESPACE = "demo-hub.servicebus.windows.net"
EVENT_HUB = "telemetry"
CONSUMER_GROUP = "$Default"
CHECKPOINT_CONTAINER = "azure-webjobs-eventhub"


class SimulatedClock:
    """Simulated time: ``EPOCH`` plus ``minute`` minutes (the same times ``simulate`` stamps on
    its samples). Call it for the current time; the demo moves it one minute at a time."""

    def __init__(self, epoch: datetime = EPOCH, minute: int = 0) -> None:
        if epoch.tzinfo is None:
            raise ValueError("the epoch must be timezone-aware")
        self.epoch = epoch
        self.minute = minute

    def __call__(self) -> datetime:
        return self.epoch + timedelta(minutes=self.minute)

    def minute_of(self, moment: datetime) -> float:
        """Simulated minutes from the epoch to ``moment``."""
        return (moment - self.epoch).total_seconds() / 60.0


def load_arrivals(trace: str | Path, *, start: int = 0, minutes: int | None = None,
                  scenario: Scenario = Scenario()) -> np.ndarray:
    """Events per minute for the window, scaled like ``python -m scaling simulate`` scales it
    (the window's busiest minute needs ``scenario.peak_instances`` instances)."""
    if start < 0:
        raise ValueError(f"--start must not be negative, got {start}")
    counts = load_trace(trace)
    if start >= len(counts):
        raise ValueError(f"--start {start} is beyond the trace's {len(counts)} minutes")
    counts = counts[start:]
    if minutes:
        counts = counts[:minutes]
    return scale_trace(counts, scenario)


class SimulatedHub:
    """``PartitionSource`` over a ``World``: what ``EventHubConsumerClient`` would report.

    Partitions start at sequence number 0 (``beginning_sequence_number``); a partition that has
    had no event yet is empty (``last_enqueued_sequence_number`` -1). ``calls`` counts requests.
    """

    def __init__(self, world: World) -> None:
        self.world = world
        self.calls = 0
        self._minute = -1
        self._last = np.zeros(0, dtype=np.int64)

    @property
    def partition_count(self) -> int:
        return self.world.scenario.partitions

    def _positions(self) -> np.ndarray:
        if self._minute != self.world.minute:
            self._last, self._minute = self.world.last_enqueued(), self.world.minute
        return self._last

    async def get_partition_ids(self) -> list[str]:
        self.calls += 1
        return [str(index) for index in range(self.partition_count)]

    async def get_partition_properties(self, partition_id: str) -> PartitionProperties:
        self.calls += 1
        try:
            index = int(partition_id)
        except ValueError:
            index = -1
        if not 0 <= index < self.partition_count:
            raise ValueError(f"partition {partition_id!r} does not exist")
        last = int(self._positions()[index])
        return PartitionProperties(partition_id, 0, last, last < 0)

    async def close(self) -> None:
        pass


class SimulatedConsumers:
    """The consumer group's workers: processing is the world's, checkpoints and ownership claims
    are real blobs (``checkpoint()``, ``claim()``).

    ``checkpoint()`` writes, for every partition whose checkpoint moved since the last call, the
    blob ``{namespace}/{hub}/{consumer group}/checkpoint/{partition}`` (lower-cased) with
    metadata ``sequencenumber`` and ``offset``, through ``BlobCheckpointStore.update_checkpoint``
    (one metadata write per partition, concurrently, as independent workers would).
    """

    def __init__(self, world: World, connection_string: str, *, namespace: str = NAMESPACE,
                 event_hub: str = EVENT_HUB, consumer_group: str = CONSUMER_GROUP,
                 container: str = CHECKPOINT_CONTAINER, concurrency: int = 32) -> None:
        self.world = world
        self.connection_string = connection_string
        self.namespace = namespace
        self.event_hub = event_hub
        self.consumer_group = consumer_group
        self.container = container
        self.concurrency = concurrency
        self.writes = 0
        self.claims = 0
        self._written = np.full(world.scenario.partitions, -1, dtype=np.int64)
        self._claimed = np.full(world.scenario.partitions, -2, dtype=np.int64)  # -2: never claimed
        self._etags: dict[int, str] = {}
        self._store = None

    async def open(self) -> SimulatedConsumers:
        from azure.core.exceptions import ResourceExistsError
        from azure.eventhub.extensions.checkpointstoreblobaio import BlobCheckpointStore
        from azure.storage.blob.aio import ContainerClient

        async with ContainerClient.from_connection_string(self.connection_string, self.container) as container:
            with contextlib.suppress(ResourceExistsError):
                await container.create_container()
        self._store = BlobCheckpointStore.from_connection_string(self.connection_string, self.container)
        return self

    async def checkpoint(self) -> int:
        """Write the checkpoints that moved; returns how many were written."""
        if self._store is None:
            raise RuntimeError("SimulatedConsumers.open() was not awaited")
        positions = self.world.checkpoints()
        moved = [index for index in np.flatnonzero(positions != self._written) if positions[index] >= 0]
        slots = asyncio.Semaphore(self.concurrency)

        async def write(index: int) -> None:
            sequence = int(positions[index])
            async with slots:
                await self._store.update_checkpoint({
                    "fully_qualified_namespace": self.namespace, "eventhub_name": self.event_hub,
                    "consumer_group": self.consumer_group, "partition_id": str(index),
                    "sequence_number": sequence, "offset": str(sequence),
                })
            self._written[index] = sequence

        await asyncio.gather(*(write(int(index)) for index in moved))
        self.writes += len(moved)
        return len(moved)

    async def claim(self) -> int:
        """Write the ownership blobs whose owner changed, as the processors' load balancing does
        (``BlobCheckpointStore.claim_ownership``, each claim conditional on the etag of the last):
        ``{namespace}/{hub}/{consumer group}/ownership/{partition}`` with metadata ``ownerid``,
        the world's owner of the partition (``instance-N``, as ``simulate`` names them), or an
        empty owner id (released) while its instance has failed and nobody took it over.

        The claims are real blobs whose last-modified time is the wall clock, while collect runs
        on the demo's simulated clock (minutes from 2026-01-01): a claim never looks expired to
        it, so what decides liveness here is the owner id, which the world keeps current."""
        if self._store is None:
            raise RuntimeError("SimulatedConsumers.open() was not awaited")
        owners = self.world.physics.owners(0)
        changed = np.flatnonzero(owners != self._claimed)
        if not changed.size:
            return 0
        claimed = await self._store.claim_ownership([{
            "fully_qualified_namespace": self.namespace, "eventhub_name": self.event_hub,
            "consumer_group": self.consumer_group, "partition_id": str(index),
            "owner_id": f"instance-{owners[index]}" if owners[index] >= 0 else "", "etag": self._etags.get(int(index)),
        } for index in changed])
        for ownership in claimed:
            index = int(ownership["partition_id"])
            self._etags[index] = ownership["etag"]
            self._claimed[index] = owners[index]
        self.claims += len(claimed)
        return len(claimed)

    async def close(self) -> None:
        if self._store is not None:
            store, self._store = self._store, None
            await store.close()
