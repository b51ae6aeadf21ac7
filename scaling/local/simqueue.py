"""A simulated Service Bus queue for the local demo (``--source servicebus``), over ``QueueWorld``.

No Service Bus data plane or Azure Monitor emulator can be installed here, so ``SimulatedQueue``
stands in for two of the clients the Service Bus source reads through, behind the same interfaces
(scaling/sources/servicebus.py), as ``SimulatedHub`` stands in for Event Hubs:

- ``OldestMessagePeeker``: the oldest message's enqueued time (``peek_messages`` in Azure);
- ``QueueMetricsReader``: ``IncomingMessages`` and ``CompleteMessage`` of the minute Azure Monitor
  would report, ``metrics_lag_minutes`` behind the queue (``MetricsQueryClient`` in Azure).

The count is not simulated here in the demo: the local ARM endpoint serves the queue's GET
(``countDetails.activeMessageCount`` from ``QueueWorld.observe``) to the real management client,
as ARM does in Azure. ``SimulatedQueue`` still answers ``MessageCounter`` too
(``queue_active_messages``), for tests that replace every Service Bus client (``queue_for``).

Everything after these calls (the reader, the sample, the queues, tables and functions) is the
production code, as in the Event Hubs demo. Times are the demo's simulated clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from scaling.simulation.queue.world import QueueWorld
from scaling.sources.servicebus import QueueRates

QUEUE_NAME = "jobs"
NAMESPACE = "demo-queue.servicebus.windows.net"
NAMESPACE_ID = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/demo/providers/"
                "Microsoft.ServiceBus/namespaces/demo-queue")


class SimulatedQueue:
    """``MessageCounter``, ``OldestMessagePeeker`` and ``QueueMetricsReader`` over a ``QueueWorld``
    whose minute 0 starts at ``epoch``. ``calls`` counts requests."""

    def __init__(self, world: QueueWorld, epoch: datetime, queue_name: str = QUEUE_NAME) -> None:
        if epoch.tzinfo is None:
            raise ValueError("the epoch must be timezone-aware")
        self.world = world
        self.epoch = epoch
        self.queue_name = queue_name
        self.calls = 0

    def _check(self, queue_name: str) -> None:
        self.calls += 1
        if queue_name != self.queue_name:
            raise LookupError(f"queue {queue_name!r} does not exist in the simulated namespace (it has {self.queue_name!r})")

    async def queue_active_messages(self, queue_name: str) -> int:
        self._check(queue_name)
        return self.world.observe().active_messages

    async def subscription_active_messages(self, topic_name: str, subscription_name: str) -> int:
        raise LookupError("the simulated namespace has one queue and no topics")

    async def oldest_enqueued_at(self, queue_name: str) -> datetime | None:
        self._check(queue_name)
        oldest = self.world.observe().oldest_enqueued_minute
        return None if oldest is None else self.epoch + timedelta(minutes=oldest)

    async def queue_rates(self, resource_id: str, queue_name: str, now: datetime) -> QueueRates:
        self._check(queue_name)
        observation = self.world.observe()
        if observation.incoming_per_minute is None:
            return QueueRates(None, None)
        reported = self.epoch + timedelta(minutes=self.world.minute - 1 - self.world.lag)
        return QueueRates(observation.incoming_per_minute, observation.completed_per_minute, reported)

    async def close(self) -> None:
        pass
