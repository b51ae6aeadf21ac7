"""Local stand-ins behind the collector's protocols, for tests, the benchmark and the demo.

No Event Hubs emulator can run here, so ``StandInHub`` plays a hub behind ``PartitionSource``
(the same interface the real ``EventHubPartitionSource`` adapter offers over
``azure.eventhub.aio.EventHubConsumerClient``). ``FixedCapacity`` plays the plan adapter behind
``CapacityReader``. Both can add latency, fail or hang, to exercise concurrency and timeouts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from scaling.domain.policy import PlanSettings
from scaling.sources.eventhub import PartitionProperties


class StandInHub:
    """An in-memory Event Hub (stand-in for the real service) implementing ``PartitionSource``.

    ``latency_seconds`` is awaited on every call; ``fail_with`` makes every call raise it;
    ``hang`` makes every call wait forever (until the caller's timeout cancels it).
    ``calls`` counts the calls made, ``peak_in_flight`` the most calls seen at once.
    """

    def __init__(
        self,
        partitions: Iterable[PartitionProperties] = (),
        *,
        latency_seconds: float = 0.0,
        fail_with: Exception | None = None,
        hang: bool = False,
    ) -> None:
        self.partitions: dict[str, PartitionProperties] = {p.partition_id: p for p in partitions}
        self.latency_seconds = latency_seconds
        self.fail_with = fail_with
        self.hang = hang
        self.calls = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.closed = False

    @classmethod
    def uniform(cls, partition_count: int, *, beginning: int = 0, last_enqueued: int = 0,
                latency_seconds: float = 0.0) -> StandInHub:
        """``partition_count`` partitions ``"0".."N-1"`` at the same positions."""
        return cls((PartitionProperties(str(i), beginning, last_enqueued, last_enqueued < 0) for i in range(partition_count)),
                   latency_seconds=latency_seconds)

    def set(self, partition_id: str, beginning: int, last_enqueued: int, is_empty: bool | None = None) -> None:
        """Move a partition (events arrived, retention expired)."""
        empty = last_enqueued < 0 if is_empty is None else is_empty
        self.partitions[partition_id] = PartitionProperties(partition_id, beginning, last_enqueued, empty)

    async def _call(self) -> None:
        self.calls += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if self.hang:
                await asyncio.Event().wait()
            if self.latency_seconds:
                await asyncio.sleep(self.latency_seconds)
            if self.fail_with is not None:
                raise self.fail_with
        finally:
            self.in_flight -= 1

    async def get_partition_ids(self) -> list[str]:
        await self._call()
        return list(self.partitions)

    async def get_partition_properties(self, partition_id: str) -> PartitionProperties:
        await self._call()
        try:
            return self.partitions[partition_id]
        except KeyError:
            raise ValueError(f"partition {partition_id!r} does not exist") from None

    async def close(self) -> None:
        self.closed = True


class FixedCapacity:
    """A plan whose capacity is whatever ``capacity`` says (stand-in for the ARM adapter)."""

    def __init__(self, capacity: int | dict[str, int] = 1, *, latency_seconds: float = 0.0,
                 fail_with: Exception | None = None) -> None:
        self.capacity = capacity
        self.latency_seconds = latency_seconds
        self.fail_with = fail_with
        self.calls = 0

    async def current_capacity(self, plan: PlanSettings) -> int:
        self.calls += 1
        if self.latency_seconds:
            await asyncio.sleep(self.latency_seconds)
        if self.fail_with is not None:
            raise self.fail_with
        if isinstance(self.capacity, dict):
            return self.capacity[plan.name]
        return self.capacity
