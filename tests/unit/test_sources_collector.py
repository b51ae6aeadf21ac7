"""The collector with stand-in hubs, plans and checkpoint stores (no I/O): lag per partition,
ownership, partial failures, timeouts, the concurrency bound and the sample id rule.

The hubs are ``StandInHub``s: stand-ins for Event Hubs behind the ``PartitionSource`` protocol,
because no Event Hubs emulator can run here. Real checkpoint blobs are covered by
tests/integration/test_collect_checkpoints.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.lag import MAX_INT64
from scaling.domain.policy import policy_from_dict
from scaling.domain.samples import parse_sample
from scaling.services.collect import Collector
from scaling.sources.base import CallGate
from scaling.sources.checkpoints import CheckpointLocation, CheckpointSnapshot, OwnershipRecord
from scaling.sources.eventhub import EventHubBinding, EventHubReader, PartitionProperties
from scaling.sources.layouts import LayoutFinding
from scaling.sources.servicebus import ServiceBusReader
from scaling.sources.standins import FixedCapacity, StandInHub

PLAN = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/serverfarms/{}"
NOW = datetime(2026, 5, 4, 3, 2, 1, 987_654, tzinfo=UTC)

SB_NAMESPACE_ID = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/sb"


class MemoryCheckpoints:
    """A checkpoint reader over a fixed snapshot; records what it was asked for."""

    strategy = "blobMetadata"

    def __init__(self, snapshot: CheckpointSnapshot | None = None, *, fail_with: Exception | None = None) -> None:
        self.snapshot = snapshot or CheckpointSnapshot()
        self.fail_with = fail_with
        self.locations: list[CheckpointLocation] = []

    async def read(self, location: CheckpointLocation, gate: CallGate | None = None) -> CheckpointSnapshot:
        self.locations.append(location)
        if self.fail_with is not None:
            raise self.fail_with
        return self.snapshot


class MemoryCounter:
    def __init__(self, count: int) -> None:
        self.count = count

    async def queue_active_messages(self, queue_name: str) -> int:
        return self.count

    async def subscription_active_messages(self, topic_name: str, subscription_name: str) -> int:
        return self.count


def eventhub(name: str, hub: str | None = None, **extra) -> dict:
    return {"kind": "eventhub", "name": name, "eventHubName": hub or name, "fullyQualifiedNamespace": "NS.servicebus.windows.net",
            "checkpointAccountUrl": "https://acct.blob.core.windows.net", **extra}


def target(name: str, *sources: dict) -> dict:
    document = {"name": name, "plan": {"resource_id": PLAN.format(name)}, "sources": list(sources)}
    if any(source["kind"] == "servicebus" for source in sources):  # (the SLO mode reads Event Hubs only)
        document.update(mode="rules", rules=[{"name": "backlog", "metric": "backlog", "scale_up_above": 100}])
    return document


def build(document_targets: list[dict], bindings: dict[str, EventHubBinding], *, capacity=None, counters=None,
          concurrency: int = 8, timeout: float = 1.0) -> Collector:
    policy = policy_from_dict({"targets": document_targets})
    readers = [
        EventHubReader(lambda source: bindings[source.name], ownership_expiry_seconds=60),
        ServiceBusReader(lambda source: (counters or {})[source.name]),
    ]
    return Collector(policy, readers, capacity or FixedCapacity(2), concurrency=concurrency, timeout_seconds=timeout,
                     clock=lambda: NOW)


def test_backlog_per_partition_follows_the_lag_rules_and_ownership_is_summarised():
    hub = StandInHub([
        PartitionProperties("0", 0, 100, False),   # checkpoint 40 -> 60
        PartitionProperties("1", 10, 20, False),   # no checkpoint -> 20 - 10 + 1 = 11
        PartitionProperties("2", 0, 500, True),    # empty (retention expired) -> 0
        PartitionProperties("3", 0, 5, False),     # checkpoint ahead, stale read -> 0
        PartitionProperties("4", 0, 3, False),     # checkpoint equal -> 0
    ])
    snapshot = CheckpointSnapshot(
        checkpoints={"0": 40, "2": 100, "3": 50, "4": 3},
        ownership=(OwnershipRecord("0", "worker-a", NOW - timedelta(seconds=10)),
                   OwnershipRecord("1", "worker-b", NOW - timedelta(seconds=10)),
                   OwnershipRecord("2", "worker-a", NOW - timedelta(seconds=10)),
                   OwnershipRecord("3", "worker-c", NOW - timedelta(minutes=5))),
        notes=("partition 9: checkpoint sequencenumber empty; counted from the beginning",),
    )
    checkpoints = MemoryCheckpoints(snapshot)
    collector = build([target("orders", eventhub("orders", "Orders-Hub", consumerGroup="$Default"))],
                      {"orders": EventHubBinding(hub, checkpoints, "NS.servicebus.windows.net")})
    [sample] = asyncio.run(collector.collect())

    [source] = sample.sources
    assert source.ok and source.kind == "eventhub"
    assert [(p.partition_id, p.backlog) for p in source.partitions] == [("0", 60), ("1", 11), ("2", 0), ("3", 0), ("4", 0)]
    assert source.partitions[2].last_enqueued == -1  # an empty partition is recorded as such
    assert [p.owner for p in source.partitions] == ["worker-a", "worker-b", "worker-a", None, None]
    assert (source.owners, source.unowned_partitions) == (2, ("3", "4"))
    assert source.notes == snapshot.notes
    assert sample.backlog == 71 and sample.capacity == 2 and sample.ok
    assert checkpoints.locations == [CheckpointLocation("NS.servicebus.windows.net", "Orders-Hub", "$Default")]


@pytest.mark.parametrize(("ownership", "owners"), [
    pytest.param((), None, id="no-claim-ever-written-no-ownership-collected"),
    pytest.param((OwnershipRecord("0", "worker-a", NOW - timedelta(minutes=5)),), 0, id="claims-expired-nobody-serves"),
    pytest.param((OwnershipRecord("0", "worker-a", NOW - timedelta(seconds=5)),), 1, id="one-live-claim"),
    pytest.param((OwnershipRecord("0", "", NOW - timedelta(seconds=5)),), 0, id="released-claims-nobody-serves"),
    pytest.param((OwnershipRecord("0", None, NOW, leased=False),), None, id="legacy-blob-without-lease-or-owner-claims-nothing"),
    pytest.param((OwnershipRecord("0", "host-1", NOW, leased=False),), 0, id="legacy-lease-lost-nobody-serves"),
    pytest.param((OwnershipRecord("0", "host-1", NOW, leased=True),), 1, id="legacy-leased"),
])
def test_no_claim_at_all_is_told_apart_from_claims_that_expired(ownership, owners):
    """A consumer that claims no partitions reports ``owners`` None (the engine sizes by the worst
    case): no ownership blob, or legacy checkpoint blobs without a lease or an owner. One whose
    every claim expired or was released (its instances stopped), or whose legacy leases lapsed,
    reports 0, which the engine reads as no instance serving."""
    hub = StandInHub([PartitionProperties("0", 0, 100, False)])
    checkpoints = MemoryCheckpoints(CheckpointSnapshot(checkpoints={"0": 40}, ownership=ownership))
    collector = build([target("orders", eventhub("orders"))], {"orders": EventHubBinding(hub, checkpoints, "NS.servicebus.windows.net")})
    [sample] = asyncio.run(collector.collect())
    assert sample.sources[0].owners == owners


@pytest.mark.parametrize(
    ("finding", "note", "warned"),
    [
        pytest.param(LayoutFinding("blobMetadata"), "checkpoint_layout: blobMetadata (1 of 2 partitions; "
                     "1 partition counts from its beginning)", False, id="found"),
        pytest.param(LayoutFinding(None, looked_under=("ns/hub/cg/",), container="c", found_instead="an empty container"),
                     "checkpoint_layout: none under 'ns/hub/cg/' in container 'c' (2 partitions count from their "
                     "beginning); found instead: an empty container", True, id="none-is-also-a-warning"),
    ],
)
def test_the_layout_found_is_the_first_note_of_the_sample(caplog, finding, note, warned):
    hub = StandInHub.uniform(2, last_enqueued=9)
    snapshot = CheckpointSnapshot(checkpoints={"0": 4, "7": 1}, notes=("partition 7: other",), layout=finding)
    collector = build([target("orders", eventhub("orders"))], {"orders": EventHubBinding(hub, MemoryCheckpoints(snapshot), "ns")})
    with caplog.at_level(logging.WARNING, logger="scaling.services.collect"):
        [sample] = asyncio.run(collector.collect())
    assert sample.sources[0].notes == (note, "partition 7: other")
    assert (f"collect orders/orders: {note}" in caplog.messages) is warned


def test_collected_at_is_the_clock_floored_to_the_second_and_the_id_is_stable():
    hub = StandInHub.uniform(2, last_enqueued=9)
    collector = build([target("orders", eventhub("orders"))], {"orders": EventHubBinding(hub, MemoryCheckpoints(), "ns")})

    async def twice():
        return await collector.collect(), await collector.collect(NOW + timedelta(microseconds=10))

    first, again = asyncio.run(twice())
    assert first[0].collected_at == datetime(2026, 5, 4, 3, 2, 1, tzinfo=UTC)
    assert first[0].sample_id == again[0].sample_id  # a retried run in the same second is a duplicate downstream


def test_one_failing_and_one_hanging_source_do_not_stop_the_others():
    ok_hub = StandInHub.uniform(4, last_enqueued=10)
    failing = StandInHub.uniform(4, last_enqueued=10)
    failing.fail_with = ConnectionError("amqp:connection:forced")
    hanging = StandInHub.uniform(4, last_enqueued=10)
    hanging.hang = True
    bindings = {
        "good": EventHubBinding(ok_hub, MemoryCheckpoints(), "ns"),
        "bad": EventHubBinding(failing, MemoryCheckpoints(), "ns"),
        "stuck": EventHubBinding(hanging, MemoryCheckpoints(), "ns"),
        "other": EventHubBinding(StandInHub.uniform(2, last_enqueued=4), MemoryCheckpoints(), "ns"),
    }
    collector = build(
        [target("mixed", eventhub("good"), eventhub("bad"), eventhub("stuck"),
                {"kind": "servicebus", "name": "jobs", "queueName": "jobs", "namespaceResourceId": SB_NAMESPACE_ID}),
         target("healthy", eventhub("other"))],
        bindings, counters={"jobs": MemoryCounter(7)}, timeout=0.2,
    )
    started = time.monotonic()
    mixed, healthy = asyncio.run(collector.collect())
    assert time.monotonic() - started < 2

    by_name = {s.name: s for s in mixed.sources}
    assert [s.name for s in mixed.sources] == ["good", "bad", "stuck", "jobs"]  # policy order kept
    assert by_name["good"].ok and by_name["good"].backlog == 44
    assert by_name["bad"].ok is False and by_name["bad"].error == "ConnectionError: amqp:connection:forced"
    assert by_name["stuck"].ok is False and by_name["stuck"].error == "get_partition_ids timed out after 0.2s"
    assert by_name["bad"].partitions == () and by_name["stuck"].partitions == ()
    assert by_name["jobs"].ok and by_name["jobs"].active_messages == 7
    assert mixed.ok is False and mixed.backlog == 44 + 7  # failed sources never add to the backlog
    assert healthy.ok and healthy.backlog == 10


def test_a_partition_timing_out_fails_its_source_with_the_partition_named():
    class SlowPartition(StandInHub):
        async def get_partition_properties(self, partition_id):
            if partition_id == "2":
                await asyncio.sleep(5)
            return await super().get_partition_properties(partition_id)

    hub = SlowPartition([PartitionProperties(str(i), 0, 10, False) for i in range(4)])
    collector = build([target("orders", eventhub("orders"))], {"orders": EventHubBinding(hub, MemoryCheckpoints(), "ns")},
                      timeout=0.1)
    [sample] = asyncio.run(collector.collect())
    assert sample.sources[0].ok is False
    assert sample.sources[0].error == "partition 2: get_partition_properties timed out after 0.1s"


def test_a_failed_checkpoint_read_fails_the_source():
    checkpoints = MemoryCheckpoints(fail_with=PermissionError("AuthorizationPermissionMismatch"))
    collector = build([target("orders", eventhub("orders"))],
                      {"orders": EventHubBinding(StandInHub.uniform(2, last_enqueued=5), checkpoints, "ns")})
    [sample] = asyncio.run(collector.collect())
    assert sample.sources[0].ok is False
    assert sample.sources[0].error == "checkpoints: PermissionError: AuthorizationPermissionMismatch"


@pytest.mark.parametrize(
    ("capacity", "expected", "error"),
    [
        (FixedCapacity(3), 3, None),
        (FixedCapacity(fail_with=RuntimeError("ARM said 429")), None, "RuntimeError: ARM said 429"),
        (FixedCapacity(-1), None, "the plan reported an invalid capacity: -1"),
        (FixedCapacity(latency_seconds=5), None, "reading the plan's capacity timed out after 0.1s"),
    ],
)
def test_capacity_failures_become_capacity_error_not_a_crash(capacity, expected, error):
    collector = build([target("orders", eventhub("orders"))],
                      {"orders": EventHubBinding(StandInHub.uniform(1, last_enqueued=1), MemoryCheckpoints(), "ns")},
                      capacity=capacity, timeout=0.1)
    [sample] = asyncio.run(collector.collect())
    assert (sample.capacity, sample.capacity_error) == (expected, error)
    assert sample.sources[0].ok


@pytest.mark.parametrize("concurrency", [1, 3, 16])
def test_calls_in_flight_never_exceed_the_concurrency_bound(concurrency):
    hubs = {f"hub{i}": StandInHub.uniform(8, last_enqueued=3, latency_seconds=0.005) for i in range(3)}
    collector = build([target(f"t{i}", eventhub(name)) for i, name in enumerate(hubs)],
                      {name: EventHubBinding(hub, MemoryCheckpoints(), "ns") for name, hub in hubs.items()},
                      concurrency=concurrency)

    peak = 0

    async def run():
        nonlocal peak
        task = asyncio.create_task(collector.collect())
        while not task.done():
            peak = max(peak, sum(h.in_flight for h in hubs.values()))
            await asyncio.sleep(0)
        return task.result()

    samples = asyncio.run(run())
    assert all(s.ok for s in samples)
    assert 1 <= peak <= concurrency
    assert sum(h.calls for h in hubs.values()) == 3 * (1 + 8)


def test_unknown_kind_without_a_reader_is_a_failed_source():
    policy = policy_from_dict({"targets": [target("jobs", {"kind": "servicebus", "name": "jobs", "queueName": "q",
                                                           "namespaceResourceId": SB_NAMESPACE_ID})]})
    collector = Collector(policy, [], FixedCapacity(1), clock=lambda: NOW)
    [sample] = asyncio.run(collector.collect())
    assert sample.sources[0].error == "no reader for source kind 'servicebus'"


def test_messages_round_trip_through_the_sample_parser():
    hub = StandInHub([PartitionProperties("0", 0, MAX_INT64, False), PartitionProperties("1", 0, 9, False)])
    collector = build([target("orders", eventhub("orders"))],
                      {"orders": EventHubBinding(hub, MemoryCheckpoints(CheckpointSnapshot({"1": 4})), "ns")})
    [message] = asyncio.run(collector.collect_messages())
    sample = parse_sample(message, now=NOW)
    assert sample.target == "orders" and sample.backlog == MAX_INT64  # saturates, never overflows
    assert [p.checkpoint for p in sample.sources[0].partitions] == [None, 4]


def test_aclose_closes_readers_capacity_and_owned_clients_even_when_one_fails():
    closed: list[str] = []

    class Reader:
        kind = "eventhub"

        async def read(self, source, gate, now):
            raise AssertionError("not called")

        async def aclose(self):
            closed.append("reader")
            raise RuntimeError("already closed")

    class Capacity(FixedCapacity):
        async def aclose(self):
            closed.append("capacity")

    async def credential_close():
        closed.append("credential")

    policy = policy_from_dict({"targets": [target("orders", eventhub("orders"))]})
    collector = Collector(policy, [Reader()], Capacity(1), closers=[credential_close])
    asyncio.run(collector.aclose())
    assert closed == ["reader", "capacity", "credential"]
