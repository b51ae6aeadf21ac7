"""Recovering what each target went through from the transforms (``transforms.py``): its per-minute
arrivals with gaps spread evenly, resets, partitions, the initial capacity, the checkpoint delay
and the per-instance throughput, collected to the driver as one ``TargetHistory`` per target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scaling.tuning.transforms import minute_arrivals, partition_deltas, sample_stats, throughput_by_target


@dataclass(slots=True)
class TargetHistory:
    """What the Spark transforms recovered for one target."""

    target: str
    arrivals: Any  # numpy array, events per minute
    start: str
    end: str
    samples: int
    interval_minutes: int
    partitions: int
    partition_counts: list[int]
    weights: list[float]
    gaps: int
    gap_minutes: int
    resets: int
    initial_capacity: int
    checkpoint_delay_seconds: float
    saturated_minutes: int
    throughput_per_minute: float | None
    throughput_median_per_minute: float | None
    throughput_floor_per_minute: float | None
    messages: list[str] = field(default_factory=list)


def recover_histories(spark: Any, history: Any, *, steady_samples: int, targets: Sequence[str] = ()) -> tuple[list[TargetHistory], list[str]]:
    """Run the transforms and bring each target's (small) per-minute results to the driver."""
    import numpy as np
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    messages: list[str] = []
    if targets:
        history = history.where(F.col("target").isin(list(targets)))
    # One cheap pass over the raw rows; duplicates are counted against the de-duplicated rows below.
    totals = {row["target"]: row for row in history.groupBy("target").agg(
        F.count(F.when(F.col("partition_id").isNotNull(), 1)).alias("partition_rows"),
    ).collect()}
    for name in targets:
        if name not in totals:
            messages.append(f"{name}: no history rows for this target")
    deltas = partition_deltas(history).cache()
    stats = sample_stats(deltas, steady_samples).cache()
    throughput = {row["target"]: row for row in throughput_by_target(stats).collect()}
    per_sample: dict[str, list[Any]] = {}
    for row in stats.select("target", "collected_at", F.date_format("collected_at", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("at"),
                            "capacity", "partitions", "elapsed_seconds", "resets",
                            "interval_seconds", "arrived", "backlog").orderBy("target", "collected_at").collect():
        per_sample.setdefault(row["target"], []).append(row)
    minutes: dict[str, list[tuple[int, float]]] = {}
    for row in minute_arrivals(stats).orderBy("target", "minute").collect():
        minutes.setdefault(row["target"], []).append((row["minute"], row["arrivals"]))
    # Per partition: its share of arrivals, its position in the hub, and whether the target's
    # latest sample has it (the partitions to simulate).
    shares: dict[str, dict[str, tuple[int, float]]] = {}
    latest_partitions: dict[str, list[str]] = {}
    last_seen = deltas.groupBy("target", "source", "partition_id").agg(
        F.max("partition_index").alias("index"), F.sum("arrived").alias("arrived"), F.max("collected_at").alias("last_seen"))
    last_seen = last_seen.withColumn("latest", F.col("last_seen") == F.max("last_seen").over(Window.partitionBy("target")))
    for row in last_seen.collect():
        key = f"{row['source']}/{row['partition_id']}"
        shares.setdefault(row["target"], {})[key] = (row["index"] or 0, row["arrived"] or 0)
        if row["latest"]:
            latest_partitions.setdefault(row["target"], []).append(key)

    results = []
    for name in sorted(totals):
        total = totals[name]
        notes: list[str] = []
        rows = per_sample.get(name, [])
        duplicates = total["partition_rows"] - sum(row["partitions"] for row in rows)
        if duplicates:
            notes.append(f"{duplicates} duplicated history rows ignored (same sample exported more than once)")
        if total["partition_rows"] == 0:
            messages.append(f"{name}: skipped: no Event Hubs partition readings in the history "
                            "(tuning needs sequence numbers; Service Bus-only targets are not tuned)")
            continue
        series = minutes.get(name, [])
        if len(rows) < 3 or not series:
            messages.append(f"{name}: skipped: only {len(rows)} usable samples; at least 3 consecutive samples are needed")
            continue
        interval_seconds = rows[-1]["interval_seconds"] or 60.0
        interval_minutes = max(int(round(interval_seconds / 60.0)), 1)
        first_minute, last_minute = series[0][0], series[-1][0]
        arrivals = np.zeros(last_minute - first_minute + 1)
        for minute, value in series:
            arrivals[minute - first_minute] = max(float(value or 0.0), 0.0)
        gaps = [row for row in rows[1:] if row["elapsed_seconds"] and row["elapsed_seconds"] > 1.5 * interval_seconds]
        gap_minutes = int(sum(round(row["elapsed_seconds"] / 60.0) - interval_minutes for row in gaps))
        if gaps:
            notes.append(f"{len(gaps)} gaps in the history ({gap_minutes} minutes missing): arrivals spread evenly over each gap")
        counts = [row["partitions"] for row in rows]
        changes = sum(1 for a, b in zip(counts, counts[1:], strict=False) if a != b)
        latest = sorted(latest_partitions.get(name, []), key=lambda key: shares[name].get(key, (0, 0))[0])
        partitions = len(latest)
        distinct_counts = sorted(set(counts))
        if changes:
            notes.append(f"partition count changed {changes} times ({', '.join(map(str, distinct_counts))}); "
                         f"simulating the latest count, {partitions}")
        sources = {key.split("/", 1)[0] for key in latest}
        if len(sources) > 1:
            notes.append(f"{len(sources)} Event Hubs sources; simulated as one hub with {partitions} partitions")
        resets = int(sum(row["resets"] or 0 for row in rows))
        if resets:
            notes.append(f"{resets} sequence-number resets (hub recreated or checkpoint reset): those intervals were left out")
        weights = [float(shares[name].get(key, (0, 0))[1]) for key in latest]
        if sum(weights) <= 0:
            weights = [1.0] * partitions
        # How far checkpoints trail: the observed backlog in seconds of arrivals, at quiet times
        # (the lower quartile over the history), rounded to 5 seconds, at most 10 minutes.
        ratios = sorted(row["backlog"] / row["arrived"] * row["elapsed_seconds"] for row in rows
                        if row["arrived"] and row["backlog"] is not None and row["elapsed_seconds"])
        trail = ratios[len(ratios) // 4] if ratios else 0.0
        checkpoint_delay = float(min(max(round(trail / 5.0) * 5.0, 0.0), 600.0))
        info = throughput.get(name)
        saturated_minutes = int(info["saturated_minutes"]) if info else 0
        capacities = [row["capacity"] for row in rows if row["capacity"] is not None]
        results.append(TargetHistory(
            target=name,
            arrivals=arrivals,
            start=rows[0]["at"],
            end=rows[-1]["at"],
            samples=len(rows),
            interval_minutes=interval_minutes,
            partitions=partitions,
            partition_counts=distinct_counts,
            weights=[round(w / sum(weights), 6) for w in weights],
            gaps=len(gaps),
            gap_minutes=gap_minutes,
            resets=resets,
            initial_capacity=int(capacities[0]) if capacities else 1,
            checkpoint_delay_seconds=checkpoint_delay,
            saturated_minutes=saturated_minutes,
            throughput_per_minute=float(info["throughput_per_minute"]) if info and info["throughput_per_minute"] else None,
            throughput_median_per_minute=float(info["throughput_median_per_minute"]) if info and info["throughput_median_per_minute"] else None,
            throughput_floor_per_minute=float(info["throughput_floor_per_minute"]) if info and info["throughput_floor_per_minute"] else None,
            messages=notes,
        ))
    deltas.unpersist()
    stats.unpersist()
    return results, messages
