"""Recovering what each target went through from the transforms (``transforms.py``): its per-minute
arrivals with gaps spread evenly, resets, partitions, the initial capacity, the checkpoint delay
and the per-instance throughput, collected to the driver as one ``TargetHistory`` per target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from scaling.domain.samples import MAX_CLOCK_SKEW
from scaling.tuning.transforms import partition_deltas, sample_stats, throughput_by_target
from scaling.tuning.validation import longest_stretch, minute_series, screen_history, screening_notes, throughput_problem


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
    #: Per minute of ``arrivals``: recorded (``True``) or invented by the job (gaps, repairs); never scored.
    recorded: Any = None
    #: What validation found and did (``validation.py``): counts by rule.
    validation: dict = field(default_factory=dict)
    #: Why the history contradicts ``throughput_per_minute`` (``validation.throughput_problem``), if it does.
    throughput_problem: str | None = None

    @property
    def recorded_minutes(self) -> int:
        return int(self.recorded.sum()) if self.recorded is not None else len(self.arrivals)


def recover_histories(spark: Any, history: Any, *, steady_samples: int, targets: Sequence[str] = (),
                      now: datetime | None = None, clock_skew: timedelta = MAX_CLOCK_SKEW) -> tuple[list[TargetHistory], list[str]]:
    """Validate the rows (``validation.screen_history``), run the transforms and bring each
    target's (small) per-sample results to the driver, where its stretch, per-minute series and
    recorded minutes are worked out (``validation.py``)."""
    from pyspark.sql import functions as F

    messages: list[str] = []
    if targets:
        history = history.where(F.col("target").isin(list(targets)))
    history, screened = screen_history(history, now or datetime.now(UTC), clock_skew)
    # One cheap pass over the raw rows; duplicates are counted against the de-duplicated rows below.
    totals = {row["target"]: row for row in history.groupBy("target").agg(
        F.count(F.when(F.col("partition_id").isNotNull(), 1)).alias("partition_rows"),
    ).collect()}
    for name in targets:
        if name not in totals and name not in screened:
            messages.append(f"{name}: no history rows for this target")
    for name in sorted(set(screened) - set(totals)):
        messages.append(f"{name}: refused: every sample was dropped by validation: " + "; ".join(screening_notes(screened[name], clock_skew)))
    deltas = partition_deltas(history).cache()
    stats = sample_stats(deltas, steady_samples).cache()
    throughput = {row["target"]: row for row in throughput_by_target(stats).collect()}
    per_sample: dict[str, list[Any]] = {}
    for row in stats.select("target", "collected_at", F.date_format("collected_at", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("at"),
                            F.col("collected_at").cast("double").alias("seconds"),
                            "capacity", "partitions", "compared", "elapsed_seconds", "resets", "arrival_resets", "misreads",
                            "bridged", "interval_seconds", "arrived", "backlog",
                            "observed_per_instance_per_minute", "throughput_per_instance_per_minute",
                            ).orderBy("target", "collected_at").collect():
        per_sample.setdefault(row["target"], []).append(row)
    # Per partition: its share of arrivals, its position in the hub, and when it was last seen.
    shares: dict[str, dict[str, tuple[int, float]]] = {}
    seen_at: dict[str, dict[str, float]] = {}
    last_seen = deltas.groupBy("target", "source", "partition_id").agg(
        F.max("partition_index").alias("index"), F.sum("arrived").alias("arrived"),
        F.max("collected_at").cast("double").alias("last_seen"))
    for row in last_seen.collect():
        key = f"{row['source']}/{row['partition_id']}"
        shares.setdefault(row["target"], {})[key] = (row["index"] or 0, row["arrived"] or 0)
        seen_at.setdefault(row["target"], {})[key] = row["last_seen"]

    results = []
    for name in sorted(totals):
        recovered = _target_history(name, totals[name], screened.get(name, {}), per_sample.get(name, []),
                                    shares.get(name, {}), seen_at.get(name, {}), throughput.get(name), clock_skew, messages)
        if recovered is not None:
            results.append(recovered)
    deltas.unpersist()
    stats.unpersist()
    return results, messages


def _target_history(name: str, total: Any, found: dict, sampled: list[Any], shares: dict[str, tuple[int, float]],
                    seen_at: dict[str, float], info: Any, clock_skew: timedelta, messages: list[str]) -> TargetHistory | None:
    """One target's history from its samples on the driver, or ``None`` (the reason in ``messages``)
    when it has no partition readings or fewer than three consecutive samples."""
    notes: list[str] = screening_notes(found, clock_skew)
    rows = sampled
    duplicates = total["partition_rows"] - sum(row["partitions"] for row in rows)
    if duplicates:
        notes.append(f"{duplicates} duplicated history rows ignored (same sample exported more than once)")
    if total["partition_rows"] == 0:
        messages.append(f"{name}: skipped: no Event Hubs partition readings in the history "
                        "(tuning needs sequence numbers; Service Bus-only targets are not tuned)")
        return None
    if len(rows) < 3:
        messages.append(f"{name}: skipped: only {len(rows)} usable samples; at least 3 consecutive samples are needed")
        return None
    stretch = longest_stretch([row["seconds"] for row in rows])
    described = stretch.describe(len(rows), [row["at"] for row in rows])
    if described:
        notes.append(described)
    rows = rows[stretch.start:stretch.end]
    recreated, expected = _expected_partitions(rows)
    interval_seconds = rows[-1]["interval_seconds"] or 60.0
    interval_minutes = max(int(round(interval_seconds / 60.0)), 1)
    series = minute_series([{"collected_at": row["seconds"], "elapsed_seconds": row["elapsed_seconds"],
                             "arrived": row["arrived"], "compared": row["compared"], "partitions": row["partitions"],
                             "expected": count, "bridged": row["bridged"]}
                            for row, count in zip(rows, expected, strict=True)], interval_seconds)
    if series is None or len(rows) < 3:
        messages.append(f"{name}: skipped: only {len(rows)} usable samples; at least 3 consecutive samples are needed")
        return None
    arrivals = series.arrivals
    gaps = [row for row in rows[1:] if row["elapsed_seconds"] and row["elapsed_seconds"] > 1.5 * interval_seconds]
    gap_minutes = int(sum(round(row["elapsed_seconds"] / 60.0) - interval_minutes for row in gaps))
    if gaps:
        notes.append(f"{len(gaps)} gaps in the history ({gap_minutes} minutes missing): arrivals spread evenly over each gap, "
                     "those minutes not scored")
    latest, distinct_counts, short = _partitions(rows, expected, recreated, shares, seen_at, notes)
    partitions = len(latest)
    misreads, resets = _sequence_notes(rows, notes)
    invented = series.invented_minutes
    if invented:
        notes.append(f"{invented} of {len(arrivals)} minutes invented by the job (gaps, repaired or incomplete readings): "
                     "simulated, never scored")
    weights = [float(shares.get(key, (0, 0))[1]) for key in latest]
    if sum(weights) <= 0:
        weights = [1.0] * partitions
    capacities = [row["capacity"] for row in rows if row["capacity"] is not None]
    learned = float(info["throughput_per_minute"]) if info and info["throughput_per_minute"] else None
    median = float(info["throughput_median_per_minute"]) if info and info["throughput_median_per_minute"] else None
    problem = None
    if learned is not None:
        problem = throughput_problem(learned, median, [row["observed_per_instance_per_minute"] for row in rows
                                                       if row["observed_per_instance_per_minute"] is not None],
                                     [row["throughput_per_instance_per_minute"] for row in rows
                                      if row["throughput_per_instance_per_minute"] is not None])
    return TargetHistory(
        target=name, arrivals=arrivals, start=rows[0]["at"], end=rows[-1]["at"], samples=len(rows),
        interval_minutes=interval_minutes, partitions=partitions, partition_counts=distinct_counts,
        weights=[round(w / sum(weights), 6) for w in weights], gaps=len(gaps), gap_minutes=gap_minutes, resets=resets,
        initial_capacity=int(capacities[0]) if capacities else 1,
        checkpoint_delay_seconds=_checkpoint_delay(rows),
        saturated_minutes=int(info["saturated_minutes"]) if info else 0,
        throughput_per_minute=learned,
        throughput_median_per_minute=median,
        throughput_floor_per_minute=float(info["throughput_floor_per_minute"]) if info and info["throughput_floor_per_minute"] else None,
        messages=notes,
        recorded=series.recorded,
        validation={"future_samples": found.get("future", 0), "conflicting_samples": found.get("conflicting", 0),
                    "misread_sequence_numbers": misreads, "short_samples": short,
                    "stretches": stretch.stretches, "left_out_samples": len(sampled) - len(rows),
                    "recorded_minutes": int(series.recorded.sum()), "invented_minutes": invented},
        throughput_problem=problem,
    )


def _expected_partitions(rows: list[Any]) -> tuple[float, list[int]]:
    """The hub's partitions: those seen since it was last recreated (every partition went back for
    good); a count never shrinks, so a sample with fewer is a read that missed some. Returns when
    it was last recreated and, per sample, how many partitions it should have read."""
    recreated, expected, running = rows[0]["seconds"], [], 0
    for row in rows:
        if row["partitions"] and (row["arrival_resets"] or 0) >= row["partitions"]:
            recreated, running = row["seconds"], 0
        running = max(running, row["partitions"])
        expected.append(running)
    return recreated, expected


def _partitions(rows: list[Any], expected: list[int], recreated: float, shares: dict[str, tuple[int, float]],
                seen_at: dict[str, float], notes: list[str]) -> tuple[list[str], list[int], int]:
    """The partitions to simulate (seen since the hub was recreated, in the hub's order), the
    distinct counts read and how many samples missed some; what differs is said in ``notes``."""
    counts = [row["partitions"] for row in rows]
    changes = sum(1 for a, b in zip(counts, counts[1:], strict=False) if a != b)
    keys = [key for key, moment in seen_at.items() if moment >= recreated]
    latest = sorted(keys, key=lambda key: shares.get(key, (0, 0))[0])
    partitions = len(latest)
    distinct_counts = sorted(set(counts))
    short = sum(1 for row, count in zip(rows, expected, strict=True) if row["partitions"] < count)
    if short:
        missing_last = rows[-1]["partitions"] < expected[-1]
        notes.append(f"{short} samples miss partitions the hub has ({'the latest among them: ' if missing_last else ''}a "
                     f"partition count never shrinks, so a lower count is a read that missed some): simulating "
                     f"{partitions} partitions; those minutes not scored")
    elif changes:
        notes.append(f"partition count changed {changes} times ({', '.join(map(str, distinct_counts))}); "
                     f"simulating the latest count, {partitions}")
    sources = {key.split("/", 1)[0] for key in latest}
    if len(sources) > 1:
        notes.append(f"{len(sources)} Event Hubs sources; simulated as one hub with {partitions} partitions")
    return latest, distinct_counts, short


def _sequence_notes(rows: list[Any], notes: list[str]) -> tuple[int, int]:
    """The misread and reset sequence numbers, counted and said in ``notes``."""
    misreads = int(sum(row["misreads"] or 0 for row in rows))
    resets = int(sum(row["resets"] or 0 for row in rows))
    if misreads:
        notes.append(f"{misreads} sequence numbers (checkpoints or last-enqueued) read lower than the reading before them, "
                     "the next at or above it: misreads, not resets; positions never go back, so no progress is counted "
                     "next to them (no throughput from the rebound) and a misread last-enqueued reading is dropped; "
                     "those minutes not scored")
    if resets:
        notes.append(f"{resets} sequence-number resets (hub recreated or checkpoint reset): those intervals were left out")
    return misreads, resets


def _checkpoint_delay(rows: list[Any]) -> float:
    """How far checkpoints trail: the observed backlog in seconds of arrivals, at quiet times (the
    lower quartile over the history), rounded to 5 seconds, at most 10 minutes."""
    ratios = sorted(row["backlog"] / row["arrived"] * row["elapsed_seconds"] for row in rows
                    if row["arrived"] and row["backlog"] is not None and row["elapsed_seconds"])
    trail = ratios[len(ratios) // 4] if ratios else 0.0
    return float(min(max(round(trail / 5.0) * 5.0, 0.0), 600.0))
