"""``python -m scaling bench-storage``: storage round trips per sample, and samples per second.

Starts its own Azurite (``scaling.local.azurite.Azurite``; or uses ``--connection-string``),
feeds N samples of one target through the evaluate service, one per simulated minute, and
counts every HTTP request the Table clients send with an azure-core per-call policy (a
transaction is one request). Steady state excludes the first ``--warmup`` samples (state read,
window filling) and reports the hourly history-retention query separately. Every
``--duplicate-every``-th sample is delivered twice to measure the duplicate path.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import uuid
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--samples", type=int, default=300, help="samples to evaluate (default 300)")
    parser.add_argument("--warmup", type=int, default=10, help="samples excluded from steady state (default 10)")
    parser.add_argument("--partitions", type=int, default=32, help="Event Hubs partitions per sample (default 32)")
    parser.add_argument("--duplicate-every", type=int, default=10, help="deliver every n-th sample twice (0: never)")
    parser.add_argument("--connection-string", help="use this storage account (e.g. a running Azurite) instead of starting one")
    parser.add_argument("--json", dest="json_path", help="also write the results as JSON to this file")


def backlog_at(index: int, partitions: int) -> list[int]:
    """A slow wave around the thresholds, so that the run has holds and a few actions."""
    level = 600 + 550 * math.sin(index / 25.0)
    return [max(int(level / partitions * (1 + 0.2 * math.sin(index + p))), 0) for p in range(partitions)]


def measure(connection_string: str, samples: int, warmup: int, partitions: int, duplicate_every: int) -> dict[str, Any]:
    from scaling.domain.policy import Policy, seed_rules
    from scaling.services.evaluate import EvaluateService
    from scaling.storage.base import TableNames
    from scaling.storage.counting import CountingPolicy
    from scaling.storage.synthetic import hub_sample, rules_target
    from scaling.storage.tables import TableStorage

    counter = CountingPolicy()
    names = TableNames.with_prefix("bench" + uuid.uuid4().hex[:8])
    tables = TableStorage.from_connection_string(connection_string, names, per_call_policies=[counter])
    tables.ensure_tables()
    counter.take()
    seed = rules_target("bench", window_seconds=600, min_samples=5, up_cooldown=600, down_cooldown=600,
                        max_instances=partitions)
    seed = replace(seed, rules=seed_rules(1000.0, 100.0))
    clock = {"now": datetime(2024, 1, 1, tzinfo=UTC)}
    service = EvaluateService(tables, Policy((seed,)), clock=lambda: clock["now"])
    start = datetime(2024, 1, 1, tzinfo=UTC)

    per_sample: list[int] = []
    steady_kinds: Counter[str] = Counter()
    retention: list[int] = []
    duplicates: list[int] = []
    statuses: Counter[str] = Counter()
    began = time.perf_counter()
    for index in range(samples):
        sample = hub_sample("bench", start + timedelta(minutes=index), backlog_at(index, partitions), capacity=2)
        clock["now"] = sample.collected_at + timedelta(seconds=3)
        body = sample.to_json()
        outcome = service.handle(body)
        statuses[outcome.status] += 1
        if outcome.action is not None:
            statuses["acted"] += 1
        counts = counter.take()
        total = sum(counts.values())
        if index >= warmup:
            if counts.get("delete") or counts.get("query", 0) > 1:  # the window query plus retention's
                retention.append(total)
            else:
                per_sample.append(total)
                steady_kinds.update(counts)
        if duplicate_every and index % duplicate_every == 0:
            service.handle(body)
            duplicates.append(sum(counter.take().values()))
    elapsed = time.perf_counter() - began
    delivered = samples + len(duplicates)
    tables.close()
    steady = len(per_sample) or 1
    return {
        "samples": samples,
        "warmup": warmup,
        "partitions": partitions,
        "sample_bytes": len(body),
        "statuses": dict(statuses),
        "steady_round_trips_mean": round(statistics.fmean(per_sample), 3) if per_sample else None,
        "steady_round_trips_max": max(per_sample) if per_sample else None,
        "steady_round_trips_by_kind": {kind: round(count / steady, 3) for kind, count in sorted(steady_kinds.items())},
        "retention_runs": len(retention),
        "retention_round_trips": retention,
        "amortized_round_trips": round((sum(per_sample) + sum(retention)) / max(len(per_sample) + len(retention), 1), 3),
        "duplicate_round_trips_mean": round(statistics.fmean(duplicates), 3) if duplicates else None,
        "messages_per_second": round(delivered / elapsed, 1),
        "samples_per_second": round(samples / elapsed, 1),
        "seconds": round(elapsed, 2),
    }


def report(result: dict[str, Any]) -> str:
    lines = [
        f"bench-storage: {result['samples']} samples ({result['partitions']} partitions, {result['sample_bytes']} bytes each), "
        f"warm-up {result['warmup']}",
        f"  outcomes:                      {result['statuses']}",
        f"  round trips per sample:        {result['steady_round_trips_mean']} mean, {result['steady_round_trips_max']} max "
        f"(steady state; goal <= 3)",
        f"    by kind:                     {result['steady_round_trips_by_kind']}",
        f"  history retention:             {result['retention_runs']} runs, {result['retention_round_trips']} round trips",
        f"  amortized incl. retention:     {result['amortized_round_trips']}",
        f"  duplicate delivery:            {result['duplicate_round_trips_mean']} round trips",
        f"  throughput:                    {result['samples_per_second']} samples/s "
        f"({result['messages_per_second']} messages/s incl. duplicates, one thread, {result['seconds']} s)",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.samples <= args.warmup:
        print("error: --samples must exceed --warmup", file=sys.stderr)
        return 2
    if args.connection_string:
        result = measure(args.connection_string, args.samples, args.warmup, args.partitions, args.duplicate_every)
    else:
        from scaling.local.azurite import Azurite

        with Azurite() as endpoints:
            result = measure(endpoints.connection_string, args.samples, args.warmup, args.partitions, args.duplicate_every)
    print(report(result))
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
    return 0
