"""Owners and their loads reach the SLO mode's decision from real ownership blobs (issue 18).

Two processors claim the partitions of a 4-partition hub in Azurite with the Event Hubs SDK's own
``BlobCheckpointStore.claim_ownership`` and checkpoint with ``update_checkpoint``; ``b``'s claims
are older than the ownership expiry when the collector reads them, ``a``'s are fresh. The hub's
sequence numbers come from a ``StandInHub`` (no Event Hubs emulator runs here), four collections a
minute apart. The collector's reader names ``a`` as the owner of its partitions and none for
``b``'s; the engine's decision sizes by owner load (not the worst case) and records the busiest
load, which is the partitions' forecast, not ``k`` times the hottest.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

from azure.eventhub.extensions.checkpointstoreblobaio import BlobCheckpointStore
from azure.storage.blob.aio import ContainerClient

from scaling.domain.decisions import ScalerState
from scaling.domain.engine import evaluate
from scaling.domain.policy import policy_from_dict
from scaling.domain.samples import MetricSample
from scaling.sources.base import CallGate
from scaling.sources.checkpoints import BlobMetadataCheckpointReader
from scaling.sources.eventhub import EventHubBinding, EventHubReader
from scaling.sources.standins import StandInHub

FQNS = "orders-ns.servicebus.windows.net"
HUB = "orders-hub"
GROUP = "$Default"
PLAN = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/serverfarms/orders"
#: Events a minute per partition: partition 0 is hot, the others quiet.
PER_MINUTE = {"0": 600, "1": 120, "2": 120, "3": 120}
OWNERS = {"0": "a", "1": "a", "2": "b", "3": "b"}
EXPIRY_SECONDS = 2.0


def policy():
    return policy_from_dict({"targets": [{
        "name": "orders", "plan": {"resource_id": PLAN}, "bounds": {"min_instances": 1, "max_instances": 4},
        "slo": {"events_per_instance_per_second": 20.0},
        "sources": [{"kind": "eventhub", "name": "orders", "eventHubName": HUB, "consumerGroup": GROUP,
                     "fullyQualifiedNamespace": FQNS, "storageConnectionFromEnv": "CHECKPOINTS"}]}]})


def ownership(owner: str, partition: str) -> dict:
    return {"fully_qualified_namespace": FQNS, "eventhub_name": HUB, "consumer_group": GROUP,
            "partition_id": partition, "owner_id": owner}


def test_two_owners_one_expired_reach_the_decision(storage_connection_string, unique_name) -> None:
    target = policy().targets[0]
    source = target.sources[0]
    hub = StandInHub.uniform(len(PER_MINUTE), last_enqueued=0)

    async def main() -> list[MetricSample]:
        async with ContainerClient.from_connection_string(storage_connection_string, unique_name) as container:
            await container.create_container()
        async with BlobCheckpointStore.from_connection_string(storage_connection_string, unique_name) as store:
            await store.claim_ownership([ownership("b", p) for p, owner in OWNERS.items() if owner == "b"])
            time.sleep(EXPIRY_SECONDS + 1.1)  # b stops renewing; Azurite's last-modified times are to the second
            await store.claim_ownership([ownership("a", p) for p, owner in OWNERS.items() if owner == "a"])
            now = datetime.now(UTC)
            samples = []
            async with ContainerClient.from_connection_string(storage_connection_string, unique_name) as container:
                reader = EventHubReader(lambda _: EventHubBinding(hub, BlobMetadataCheckpointReader(container), FQNS),
                                        ownership_expiry_seconds=EXPIRY_SECONDS)
                for minute in range(4):
                    for partition, rate in PER_MINUTE.items():
                        last = rate * (minute + 1) - 1
                        hub.set(partition, 0, last)
                        await store.update_checkpoint({**ownership("a", partition), "sequence_number": last - 10,
                                                       "offset": str(last - 10)})
                    at = now - timedelta(minutes=3 - minute)
                    reading = await reader.read(source, CallGate(4, 5.0), at if minute < 3 else datetime.now(UTC))
                    assert reading.ok, reading.error
                    samples.append(MetricSample(target=target.name, collected_at=at, capacity=2, sources=(reading,)))
            return samples

    samples = asyncio.run(main())
    latest = samples[-1].sources[0]
    assert {p.partition_id: p.owner for p in latest.partitions} == {"0": "a", "1": "a", "2": None, "3": None}
    assert latest.owners == 1 and latest.unowned_partitions == ("2", "3")

    decision = evaluate(target, ScalerState(target=target.name), samples, samples[-1].collected_at)
    assert any(reason.startswith("sizing: owner_load") for reason in decision.reasons), decision.reasons
    # An unowned partition: no exact load at 2 instances, the bound of the 2 heaviest: (10 + 2) * 1.05 /s,
    # not the worst case's 2 x 10 x 1.05 /s.
    assert decision.metrics["busiest_load"] == round((600 + 120) / 60 * 1.05, 3)
