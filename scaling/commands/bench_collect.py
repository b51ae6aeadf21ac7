"""``python -m scaling bench-collect``: concurrent vs serial collection time.

Starts its own Azurite, writes real checkpoints and ownership for every hub and partition with
the real ``BlobCheckpointStore`` (``update_checkpoint``, ``claim_ownership``), and collects with
stand-in hubs (``StandInHub``: no Event Hubs emulator runs here) that add a fixed latency to
every call, like a round trip to the service. The same collector runs with the configured
concurrency and with concurrency 1; the ratio of the two times is the speed-up (goal >= 10).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

GOAL = 10.0
NAMESPACE = "bench-ns.servicebus.windows.net"
CONTAINER = "azure-webjobs-eventhub"
PLAN = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/bench/providers/Microsoft.Web/serverfarms/{}"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hubs", type=int, default=4, help="hubs, one target each (default 4)")
    parser.add_argument("--partitions", type=int, default=32, help="partitions per hub (default 32)")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="stand-in latency per Event Hubs and ARM call (default 50)")
    parser.add_argument("--concurrency", type=int, default=16, help="calls in flight for the concurrent run (default 16)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each mode; the median is reported (default 3)")
    parser.add_argument("--storage", metavar="CONNECTION_STRING",
                        help="use this Azurite instead of starting one (checkpoints go to a fresh container)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")


def _policy(hubs: int) -> Any:
    from scaling.domain.policy import policy_from_dict

    return policy_from_dict({"targets": [
        {"name": f"bench-{index}", "plan": {"resource_id": PLAN.format(f"bench-{index}")},
         "sources": [{"kind": "eventhub", "name": f"hub-{index}", "eventHubName": f"Bench-Hub-{index}",
                      "fullyQualifiedNamespace": NAMESPACE, "storageConnectionFromEnv": "BENCH_CHECKPOINTS"}]}
        for index in range(hubs)
    ]})


async def _write_checkpoints(connection_string: str, container: str, hubs: int, partitions: int) -> None:
    from azure.eventhub.extensions.checkpointstoreblobaio import BlobCheckpointStore
    from azure.storage.blob.aio import BlobServiceClient

    async with BlobServiceClient.from_connection_string(connection_string) as service:
        await service.create_container(container)
    async with BlobCheckpointStore.from_connection_string(connection_string, container) as store:
        for hub in range(hubs):
            base = {"fully_qualified_namespace": NAMESPACE, "eventhub_name": f"Bench-Hub-{hub}", "consumer_group": "$Default"}
            await asyncio.gather(*(
                store.update_checkpoint({**base, "partition_id": str(pid), "sequence_number": 1000 * pid, "offset": str(pid)})
                for pid in range(partitions)
            ))
            await store.claim_ownership([{**base, "partition_id": str(pid), "owner_id": f"worker-{pid % 4}"}
                                         for pid in range(partitions)])


async def _measure(connection_string: str, container_name: str, args: argparse.Namespace) -> dict[str, Any]:
    from azure.storage.blob.aio import ContainerClient

    from scaling.services.collect import Collector
    from scaling.sources.checkpoints import BlobMetadataCheckpointReader
    from scaling.sources.eventhub import EventHubBinding, EventHubReader
    from scaling.sources.standins import FixedCapacity, StandInHub

    latency = args.latency_ms / 1000
    policy = _policy(args.hubs)
    hubs = {f"hub-{i}": StandInHub.uniform(args.partitions, last_enqueued=1000 * args.partitions, latency_seconds=latency)
            for i in range(args.hubs)}
    async with ContainerClient.from_connection_string(connection_string, container_name) as container:
        checkpoints = BlobMetadataCheckpointReader(container)
        reader = EventHubReader(lambda source: EventHubBinding(hubs[source.name], checkpoints, NAMESPACE))
        capacity = FixedCapacity(2, latency_seconds=latency)

        def collector(concurrency: int) -> Collector:
            return Collector(policy, [reader], capacity, concurrency=concurrency, timeout_seconds=30)

        warm = await collector(args.concurrency).collect()  # opens the storage connections
        if not all(sample.ok for sample in warm):
            raise RuntimeError(f"the warm-up collection failed: {[s.to_json() for s in warm if not s.ok]}")
        backlog = sum(sample.backlog for sample in warm)
        calls_before = sum(h.calls for h in hubs.values())
        timings: dict[str, list[float]] = {"concurrent": [], "serial": []}
        for _ in range(args.repeat):
            for mode, concurrency in (("concurrent", args.concurrency), ("serial", 1)):
                started = time.perf_counter()
                samples = await collector(concurrency).collect()
                timings[mode].append(time.perf_counter() - started)
                if sum(s.backlog for s in samples) != backlog or not all(s.ok for s in samples):
                    raise RuntimeError(f"the {mode} run disagrees with the warm-up")
        calls_per_run = (sum(h.calls for h in hubs.values()) - calls_before) // (2 * args.repeat)
    concurrent, serial = statistics.median(timings["concurrent"]), statistics.median(timings["serial"])
    return {
        "hubs": args.hubs, "partitions_per_hub": args.partitions, "latency_ms": args.latency_ms,
        "concurrency": args.concurrency, "repeat": args.repeat,
        "event_hubs_calls_per_run": calls_per_run, "capacity_calls_per_run": args.hubs,
        "checkpoint_listings_per_run": args.hubs, "total_backlog": backlog,
        "concurrent_seconds": round(concurrent, 3), "serial_seconds": round(serial, 3),
        "ratio": round(serial / concurrent, 1), "goal": GOAL,
    }


def run(args: argparse.Namespace) -> int:
    import uuid

    from scaling.local.azurite import Azurite

    container = f"{CONTAINER}-{uuid.uuid4().hex[:8]}"
    server = None
    connection_string = args.storage
    if connection_string is None:
        server = Azurite()
        connection_string = server.start().connection_string
    try:
        async def main() -> dict[str, Any]:
            await _write_checkpoints(connection_string, container, args.hubs, args.partitions)
            return await _measure(connection_string, container, args)

        result = asyncio.run(main())
    finally:
        if server is not None:
            server.stop()
    print(f"collect: {args.hubs} hubs x {args.partitions} partitions, {args.latency_ms:g} ms per Event Hubs/ARM call, "
          f"checkpoints in Azurite ({result['event_hubs_calls_per_run']} Event Hubs calls, "
          f"{result['checkpoint_listings_per_run']} checkpoint listings, {result['capacity_calls_per_run']} capacity reads per run)")
    print(f"concurrent (concurrency {args.concurrency}): {result['concurrent_seconds']:.3f} s")
    print(f"serial     (concurrency 1): {result['serial_seconds']:.3f} s")
    verdict = "meets" if result["ratio"] >= GOAL else "misses"
    print(f"ratio: {result['ratio']:.1f}x ({verdict} the goal of {GOAL:g}x)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
    return 0
