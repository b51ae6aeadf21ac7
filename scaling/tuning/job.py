"""The offline tuning job: learn thresholds from metric history with PySpark.

One entry file for both ways of running it:

- embedded: ``python -m scaling tune --history DIR --out FILE ...`` (``scaling.tuning.cli``),
  on ``local[*]`` by default;
- on a cluster: ``spark-submit scaling/tuning/job.py --history abfss://... --out FILE ...``
  (same options). The ``scaling`` package is zipped at run time and shipped to the executors
  with ``addPyFile``; when it was already shipped (``--py-files scaling.zip``), that is reused.

Steps (docs/tuning.md):

1. Spark DataFrame transforms over the Parquet history: per partition, the increase of the
   last-enqueued sequence number (arrivals) and of the checkpoint (processed) between
   consecutive samples (``lag`` over ``collected_at``); per sample, the sums, the capacity and
   whether every partition was saturated; per target, the per-instance throughput from
   saturated minutes at steady capacity, and the per-minute arrival series (gaps spread evenly).
2. Candidate policies (``scaling.simulation.candidates.all_candidates``) plus the current policy,
   each simulated by the executors on the whole reconstructed series (warm state) and scored on
   the validation window (the part after ``--train-fraction``). Tasks are (target, candidate
   chunk) pairs in an RDD, so the work spreads over cores and over many targets: a target's
   threshold-rule candidates run as one batched simulation (``scaling.simulation.batched``),
   its SLO-mode candidates as another (``scaling.simulation.batched_slo``), both exactly the
   engine's results; the few others through the engine in the loop.
3. The cheapest candidate meeting the SLO on training and validation (``pick_cheapest``) is
   written as a policy file; the evidence goes to a sibling ``.evidence.json``.
4. A report: a Pareto plot per target (PNG) and a Markdown summary.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

GRIDS = ("small", "medium", "large")


class TuneError(Exception):
    """Input the job cannot use at all (no history, unreadable policy); the message says why."""


@dataclass(frozen=True, slots=True)
class TuneOptions:
    history: str
    out: str
    report: str | None = None
    grid: str = "large"
    master: str | None = None
    policy: str | None = None
    train_fraction: float = 0.6
    targets: tuple[str, ...] = ()
    steady_minutes: int | None = None
    min_saturated_minutes: int = 3
    tasks_per_core: int = 3
    app_name: str = "scaling-tune"


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


# --- Spark session and shipping the package ---------------------------------------------------


def build_session(master: str | None, app_name: str = "scaling-tune", extra: dict[str, str] | None = None) -> Any:
    from pyspark.sql import SparkSession

    embedded = not os.environ.get("PYSPARK_GATEWAY_PORT")
    if embedded:
        # On one machine: driver and executors talk over loopback only, never another interface.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif embedded:  # not under spark-submit: run embedded
        builder = builder.master("local[*]")
    settings = {"spark.sql.session.timeZone": "UTC"}
    if embedded:
        # Embedded on one machine: few shuffle partitions (the per-minute data is small).
        settings.update({"spark.sql.shuffle.partitions": "4", "spark.ui.showConsoleProgress": "false",
                         "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    settings.update(extra or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def build_package_zip(destination: str | Path) -> Path:
    """Zip the ``scaling`` package (Python files only) for the executors."""
    package = Path(__file__).resolve().parents[1]
    destination = Path(destination)
    with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(package.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            archive.write(path, str(path.relative_to(package.parent)))
    return destination


def ship_package(spark: Any) -> None:
    """Make ``scaling`` importable on the executors, once per SparkContext."""
    import scaling

    context = spark.sparkContext
    if getattr(context, "_scaling_shipped", False):
        return
    if ".zip" not in str(getattr(scaling, "__file__", "")):  # not already shipped with --py-files
        directory = Path(tempfile.mkdtemp(prefix="scaling-tune-"))
        context.addPyFile(str(build_package_zip(directory / "scaling.zip")))
    context._scaling_shipped = True


# --- files on local disk or any Hadoop file system (abfss://, hdfs://) ------------------------


def _has_scheme(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def write_bytes(spark: Any, path: str, data: bytes) -> None:
    if not _has_scheme(path):
        local = Path(path.removeprefix("file://"))
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(data)
        return
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    stream = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).create(hadoop_path, True)
    try:
        stream.write(bytearray(data))
    finally:
        stream.close()


def read_text(spark: Any, path: str) -> str:
    if not _has_scheme(path):
        return Path(path.removeprefix("file://")).read_text(encoding="utf-8")
    return "\n".join(spark.sparkContext.textFile(path, 1).collect())


def join_path(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def evidence_path(out: str) -> str:
    """``out/recommended.json`` -> ``out/recommended.evidence.json``."""
    head, _, tail = out.rpartition("/")
    stem = tail[:-5] if tail.endswith(".json") else tail
    return f"{head}/{stem}.evidence.json" if head else f"{stem}.evidence.json"


# --- step 1: DataFrame transforms -------------------------------------------------------------


def history_schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("collected_at", T.TimestampType(), False),
        T.StructField("sample_id", T.StringType(), False),
        T.StructField("ok", T.BooleanType(), False),
        T.StructField("capacity", T.IntegerType(), True),
        T.StructField("capacity_error", T.StringType(), True),
        T.StructField("source", T.StringType(), True),
        T.StructField("source_kind", T.StringType(), True),
        T.StructField("source_ok", T.BooleanType(), True),
        T.StructField("active_messages", T.LongType(), True),
        T.StructField("partition_id", T.StringType(), True),
        T.StructField("partition_index", T.IntegerType(), True),
        T.StructField("beginning", T.LongType(), True),
        T.StructField("last_enqueued", T.LongType(), True),
        T.StructField("checkpoint", T.LongType(), True),
        T.StructField("backlog", T.LongType(), True),
        T.StructField("target", T.StringType(), False),
        T.StructField("date", T.StringType(), False),
    ])


def read_history_df(spark: Any, path: str) -> Any:
    """The Parquet history with its declared schema (partition columns stay strings)."""
    if not _has_scheme(path):
        local = Path(path.removeprefix("file://"))
        if not local.exists():
            raise TuneError(f"--history {path} does not exist")
        if not any(local.rglob("*.parquet")):
            raise TuneError(f"--history {path} holds no Parquet files (empty history)")
    try:
        return spark.read.schema(history_schema()).option("mergeSchema", "false").parquet(path)
    except Exception as error:  # AnalysisException: path not found, not Parquet
        raise TuneError(f"--history {path} cannot be read as Parquet history: {str(error).splitlines()[0]}") from error


def partition_deltas(history: Any) -> Any:
    """Per target, source, partition and sample: what arrived and what was processed since the
    previous sample of that partition (``lag`` over ``collected_at``), and whether the partition
    was saturated (observed backlog above two intervals' arrivals at both ends: checkpoints trail
    by about one interval, so one interval's arrivals is the normal backlog of an idle consumer).

    Duplicated rows (the same sample exported twice) are dropped; a sequence number that went
    backwards counts as a reset (no arrivals or progress known for that interval).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = (history
            .where(F.col("partition_id").isNotNull() & F.coalesce(F.col("source_ok"), F.lit(True))
                   & F.col("last_enqueued").isNotNull())
            .dropDuplicates(["target", "sample_id", "source", "partition_id"]))
    by_partition = Window.partitionBy("target", "source", "partition_id").orderBy("collected_at")
    prev_last = F.lag("last_enqueued").over(by_partition)
    prev_checkpoint = F.lag("checkpoint").over(by_partition)
    prev_backlog = F.lag("backlog").over(by_partition)
    prev_time = F.lag("collected_at").over(by_partition)
    rows = (rows
            .withColumn("prev_collected_at", prev_time)
            .withColumn("prev_last_enqueued", prev_last)
            .withColumn("prev_checkpoint", prev_checkpoint)
            .withColumn("prev_backlog", prev_backlog))
    raw_arrived = F.col("last_enqueued") - F.greatest(F.col("prev_last_enqueued"), F.lit(-1))
    raw_done = F.col("checkpoint") - F.col("prev_checkpoint")
    arrival_reset = F.col("prev_last_enqueued").isNotNull() & (raw_arrived < 0)
    done_reset = F.col("prev_checkpoint").isNotNull() & F.col("checkpoint").isNotNull() & (raw_done < 0)
    arrived = F.when(F.col("prev_last_enqueued").isNull() | arrival_reset, F.lit(None).cast("long")).otherwise(raw_arrived)
    done = (F.when(F.col("prev_checkpoint").isNull() | F.col("checkpoint").isNull() | done_reset
                   | (F.col("prev_checkpoint") < 0), F.lit(None).cast("long"))
            .otherwise(raw_done))
    saturated = (F.col("arrived").isNotNull() & F.col("done").isNotNull()
                 & (F.col("backlog") > 2 * F.col("arrived")) & (F.col("prev_backlog") > 2 * F.col("arrived")))
    return (rows
            .withColumn("elapsed_seconds",
                        F.col("collected_at").cast("double") - F.col("prev_collected_at").cast("double"))
            .withColumn("arrived", arrived)
            .withColumn("done", done)
            .withColumn("reset", (arrival_reset | done_reset).cast("int"))
            .withColumn("saturated", F.coalesce(saturated, F.lit(False)))
            .select("target", "source", "partition_id", "partition_index", "collected_at", "sample_id", "capacity",
                    "prev_collected_at", "elapsed_seconds", "last_enqueued", "checkpoint", "backlog",
                    "arrived", "done", "reset", "saturated"))


def sample_stats(deltas: Any, steady_samples: int) -> Any:
    """Per target and sample: arrivals, processed events, capacity, partitions, whether every
    partition was saturated, whether capacity and partitions were steady over the previous
    ``steady_samples`` samples, and the per-instance throughput of saturated, steady intervals
    (events per minute per instance serving; instances beyond the partition count serve nothing).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    per_sample = (deltas.groupBy("target", "collected_at").agg(
        F.first("sample_id", ignorenulls=True).alias("sample_id"),
        F.max("capacity").alias("capacity"),
        F.count(F.lit(1)).alias("partitions"),
        F.count("arrived").alias("compared"),
        F.sum("arrived").alias("arrived"),
        F.sum("done").alias("processed"),
        F.count("done").alias("processed_compared"),
        F.max("elapsed_seconds").alias("elapsed_seconds"),
        F.sum("backlog").alias("backlog"),
        F.sum("reset").alias("resets"),
        F.min(F.col("saturated").cast("int")).alias("all_saturated"),
    ))
    by_time = Window.partitionBy("target").orderBy("collected_at")
    steady_window = by_time.rowsBetween(-steady_samples, 0)
    interval = F.percentile_approx("elapsed_seconds", 0.5).over(Window.partitionBy("target"))
    steady = ((F.count(F.lit(1)).over(steady_window) == steady_samples + 1)
              & (F.count("capacity").over(steady_window) == steady_samples + 1)
              & (F.min("capacity").over(steady_window) == F.max("capacity").over(steady_window))
              & (F.min("partitions").over(steady_window) == F.max("partitions").over(steady_window))
              & ((F.col("collected_at").cast("double") - F.first("collected_at").over(steady_window).cast("double"))
                 <= F.col("interval_seconds") * steady_samples * 1.5))
    serving = F.least(F.col("capacity"), F.col("partitions"))
    saturated = ((F.col("all_saturated") == 1) & (F.col("compared") == F.col("partitions"))
                 & (F.col("processed_compared") == F.col("partitions")) & (F.col("processed") > 0)
                 & (F.col("capacity") > 0))
    return (per_sample
            .withColumn("interval_seconds", interval)
            .withColumn("steady", F.coalesce(steady, F.lit(False)))
            .withColumn("saturated", F.coalesce(saturated, F.lit(False)))
            .withColumn("arrival_rate_per_minute", F.col("arrived") * 60.0 / F.col("elapsed_seconds"))
            .withColumn("processing_rate_per_minute", F.col("processed") * 60.0 / F.col("elapsed_seconds"))
            .withColumn("throughput_per_instance_per_minute",
                        F.when(F.col("saturated") & F.col("steady"),
                               F.col("processed") * 60.0 / F.col("elapsed_seconds") / serving))
            .withColumn("observed_per_instance_per_minute",
                        F.when(F.col("steady") & (F.col("capacity") > 0) & (F.col("processed_compared") == F.col("partitions")),
                               F.col("processed") * 60.0 / F.col("elapsed_seconds") / serving)))


def throughput_by_target(stats: Any) -> Any:
    """Per target: saturated minutes and the per-instance throughput they show (ratio of sums,
    and the median), plus the best rate seen at any steady minute (a lower bound)."""
    from pyspark.sql import functions as F

    usable = F.col("throughput_per_instance_per_minute").isNotNull()
    serving = F.least(F.col("capacity"), F.col("partitions"))
    return stats.groupBy("target").agg(
        F.count(F.when(usable, 1)).alias("saturated_minutes"),
        (F.sum(F.when(usable, F.col("processing_rate_per_minute")))
         / F.sum(F.when(usable, serving))).alias("throughput_per_minute"),
        F.percentile_approx(F.col("throughput_per_instance_per_minute"), 0.5).alias("throughput_median_per_minute"),
        F.max("observed_per_instance_per_minute").alias("throughput_floor_per_minute"),
    )


def minute_arrivals(stats: Any) -> Any:
    """Per target and minute index (0 = the first sample's minute): events that arrived.

    An interval of ``g`` minutes (a gap, or a slower collection) is spread evenly over its
    minutes, so the series has one value per minute from the second sample on.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    start = F.min("collected_at").over(Window.partitionBy("target")).cast("double")
    minute = F.round((F.col("collected_at").cast("double") - start) / 60.0).cast("int")
    span = F.greatest(F.round(F.col("elapsed_seconds") / 60.0).cast("int"), F.lit(1))
    return (stats
            .withColumn("minute", minute)
            .where(F.col("arrived").isNotNull())
            .withColumn("span", span)
            .withColumn("offset", F.explode(F.sequence(F.lit(0), F.col("span") - 1)))
            .select("target", (F.col("minute") - F.col("offset")).alias("minute"),
                    (F.col("arrived") / F.col("span")).alias("arrivals"))
            .groupBy("target", "minute").agg(F.sum("arrivals").alias("arrivals")))


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


# --- step 2: candidates and their simulation ---------------------------------------------------


def default_target(name: str, partitions: int) -> Any:
    """Built-in defaults shaped like the observed hub (placeholder plan and source settings)."""
    from scaling.simulation.peers import simulated_target
    from scaling.simulation.world import Scenario

    return simulated_target(Scenario(partitions=max(partitions, 1)), name=name)


def plan_target(history: TargetHistory, current: Any | None, options: TuneOptions) -> tuple[Any, Any, list[str]] | str:
    """The scenario, the current policy and the base of the candidates for one target, or why the
    target cannot be tuned."""
    from scaling.domain.policy import with_slo
    from scaling.tuning.tasks import HistoryScenario

    notes: list[str] = []
    if current is None:
        current = default_target(history.target, history.partitions)
        notes.append("not in --policy (or no --policy): compared with the built-in defaults; "
                     "the recommendation carries placeholder plan and source settings to fill in")
    prior = current.slo.events_per_instance_per_second
    threshold = options.min_saturated_minutes
    if history.throughput_per_minute is not None and history.saturated_minutes >= threshold:
        mu = history.throughput_per_minute
        source = "history"
    elif prior:
        mu = prior * 60.0
        source = "configured prior"
        notes.append(f"per-instance throughput not identifiable from history ({history.saturated_minutes} saturated minutes at "
                     f"steady capacity, {threshold} needed): using the configured prior {prior:g}/s")
    else:
        floor = history.throughput_floor_per_minute
        seen = f"; the best rate seen is {floor:.1f} events/min per instance, a lower bound only" if floor else ""
        return (f"skipped: per-instance throughput is not identifiable: consumers were never saturated at a steady "
                f"capacity ({history.saturated_minutes} saturated minutes, {threshold} needed){seen}, and the policy "
                "configures no slo.events_per_instance_per_second prior. Record history that includes a busy period, "
                "or set the prior.")
    if len(history.arrivals) < 60:
        return f"skipped: only {len(history.arrivals)} minutes of arrivals; at least 60 are needed"
    if float(history.arrivals.sum()) <= 0:
        return "skipped: no events arrived in the history; nothing to tune"
    scenario = HistoryScenario(
        peak_instances=float(history.partitions),
        events_per_instance_per_minute=mu,
        partitions=history.partitions,
        provisioning_delay_minutes=int(round(current.slo.provisioning_delay_seconds / 60.0)),
        collection_interval_minutes=history.interval_minutes,
        checkpoint_delay_seconds=history.checkpoint_delay_seconds,
        slo_minutes=current.slo.max_event_age_seconds / 60.0,
        initial_capacity=max(history.initial_capacity, 1),
        weights=tuple(history.weights),
    )
    base = current
    if source == "history":
        base = with_slo(current, events_per_instance_per_second=round(mu / 60.0, 3))
    return scenario, base, [*notes, f"per-instance throughput {mu:.1f} events/min ({source})"]


def task_chunks(sizes: dict[str, int], parallelism: int, tasks_per_core: int) -> list[tuple[str, list[int]]]:
    """(target, candidate indices) tasks: about ``tasks_per_core`` per core, never empty."""
    total = sum(sizes.values())
    if not total:
        return []
    chunk = max(1, math.ceil(total / max(parallelism * tasks_per_core, 1)))
    tasks = []
    for target, size in sizes.items():
        for start in range(0, size, chunk):
            tasks.append((target, list(range(start, min(start + chunk, size)))))
    return tasks


#: Rough cost of one candidate-minute, in seconds: the engine in the loop, and the batched
#: simulators per minute and per partition (for ordering tasks longest first only).
ENGINE_MINUTE_SECONDS = 3e-4
BATCHED_PARTITION_MINUTE_SECONDS = 4e-8
BATCH_MINUTE_SECONDS = 4e-4
#: At most this many candidate-minutes in one batch (its per-minute series take ~50 bytes each).
MAX_BATCH_CANDIDATE_MINUTES = 4_000_000


def plan_tasks(works: dict[str, Any], parallelism: int, tasks_per_core: int) -> list[tuple[str, list[int]]]:
    """Spark tasks, longest first: per target and batch group (threshold rules; SLO mode per
    window), its candidates in one task (one batched simulation; split in a few when there are
    fewer batches than cores, so that every core has work, and so that no batch holds more than
    ``MAX_BATCH_CANDIDATE_MINUTES``), and its other candidates (the engine in the loop) in chunks
    of about ``tasks_per_core`` tasks per core."""
    from scaling.tuning.tasks import batch_group

    together: dict[tuple, list[int]] = {}
    alone: dict[str, list[int]] = {name: [] for name in works}
    for name, work in works.items():
        for index in range(len(work.candidates)):
            group = batch_group(work, index)
            if group is None:
                alone[name].append(index)
            else:
                together.setdefault((name, group), []).append(index)
    tasks: list[tuple[str, list[int]]] = []
    costs: list[float] = []
    pieces = max(1, math.ceil(parallelism / max(len(together), 1)))
    for (name, _), indices in together.items():
        size = max(math.ceil(len(indices) / pieces), 32)
        size = max(min(size, MAX_BATCH_CANDIDATE_MINUTES // max(len(works[name].arrivals), 1)), 1)
        for start in range(0, len(indices), size):
            part = indices[start:start + size]
            tasks.append((name, part))
            costs.append(len(works[name].arrivals) * (BATCH_MINUTE_SECONDS + BATCHED_PARTITION_MINUTE_SECONDS * len(part)
                                                      * works[name].scenario.partitions))
    for name, chunk in task_chunks({name: len(indices) for name, indices in alone.items()}, parallelism, tasks_per_core):
        tasks.append((name, [alone[name][i] for i in chunk]))
        costs.append(len(works[name].arrivals) * ENGINE_MINUTE_SECONDS * len(chunk))
    order = sorted(range(len(tasks)), key=lambda number: -costs[number])
    return [tasks[number] for number in order]


def simulate_all(spark: Any, works: dict[str, Any], tasks_per_core: int = 3) -> tuple[list[dict], float]:
    """Distribute (target, candidate chunk) tasks over the executors; returns rows and seconds."""
    from scaling.tuning.tasks import run_chunk

    context = spark.sparkContext
    ship_package(spark)
    tasks = plan_tasks(works, context.defaultParallelism, tasks_per_core)
    if not tasks:
        return [], 0.0
    shared = context.broadcast(works)
    started = time.perf_counter()
    rows = (context.parallelize(tasks, numSlices=len(tasks))
            .flatMap(lambda task: run_chunk(task, shared.value))
            .collect())
    seconds = time.perf_counter() - started
    shared.unpersist()
    return rows, seconds


# --- step 3: choosing -----------------------------------------------------------------------------


def choose(rows: list[dict], candidates: Sequence[Any], scenario: Any) -> tuple[int | None, str]:
    """The index of the cheapest candidate meeting the SLO on validation (and, when any does, on
    training too), via ``pick_cheapest``; ``None`` when none meets it."""
    from scaling.simulation.candidates import pick_cheapest
    from scaling.simulation.world import RunResult

    def as_result(row: dict) -> RunResult:
        validation = row["validation"]
        cost_ratio = validation["cost_ratio"]
        return RunResult(algorithm="candidate", knob=row["label"], minutes=validation["minutes"], cost=validation["cost"],
                         fluid_lower_bound=validation["cost"] / cost_ratio if cost_ratio else 0.0,
                         slo_violation_minutes=validation["slo_violation_minutes"], p99_age_minutes=validation["p99_age_minutes"],
                         max_age_minutes=validation["max_age_minutes"], scale_actions=validation["scale_actions"],
                         final_backlog=validation.get("final_backlog", 0.0))

    both = [row for row in rows if row["train"]["meets_slo"]]
    pool, how = (both, "meets the SLO on training and validation") if any(
        row["validation"]["meets_slo"] for row in both) else (rows, "meets the SLO on validation (none met it on training too)")
    picked = pick_cheapest([(candidates[row["index"]], as_result(row)) for row in pool], scenario)
    if picked is None:
        return None, "no candidate meets the SLO on the validation window"
    label = picked[0].label
    index = next(row["index"] for row in pool if row["label"] == label)
    return index, f"cheapest candidate that {how}"


# --- step 4: outputs ------------------------------------------------------------------------------


def _evidence_numbers(row: dict | None) -> dict | None:
    if row is None:
        return None
    return {"label": row["label"], "train": row["train"], "validation": row["validation"]}


def pareto_png(target: str, rows: list[dict], current_index: int, recommended_index: int | None, scenario: Any) -> bytes:
    """Cost ratio vs SLO-violation minutes on validation: all candidates, current and recommended marked."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=110)
    points = [(row["validation"]["slo_violation_minutes"], row["validation"]["cost_ratio"] or 0.0, row) for row in rows]
    slo_points = [(x, y) for x, y, row in points if row["label"].startswith("slo")]
    rule_points = [(x, y) for x, y, row in points if row["label"].startswith("rules")]
    if slo_points:
        axes.scatter(*zip(*slo_points, strict=True), s=22, color="#4c72b0", label="SLO-mode candidates")
    if rule_points:
        axes.scatter(*zip(*rule_points, strict=True), s=22, marker="s", color="#8172b2", label="rule candidates")
    front, best = [], math.inf
    for x, y, _ in sorted(points, key=lambda p: (p[0], p[1])):
        if y < best:
            front.append((x, y))
            best = y
    if len(front) > 1:
        axes.step(*zip(*front, strict=True), where="post", color="#999999", linewidth=1, label="Pareto front")
    for x, y, row in points:
        if row["index"] == current_index:
            axes.scatter([x], [y], s=160, marker="X", color="#c44e52", label="current", zorder=5)
        if row["index"] == recommended_index:
            axes.scatter([x], [y], s=220, marker="*", color="#55a868", label="recommended", zorder=6)
    allowed = scenario.max_violation_fraction * (rows[0]["validation"]["minutes"] if rows else 0)
    axes.axvline(allowed, color="#dd8452", linestyle="--", linewidth=1, label=f"SLO budget ({allowed:.1f} min)")
    axes.set_xscale("symlog", linthresh=1)
    axes.set_xlim(left=-0.3)  # (violation minutes are never negative: no ticks below 0)
    axes.set_xlabel("SLO-violation minutes (validation window)")
    axes.set_ylabel("cost / fluid lower bound")
    axes.set_title(f"{target}: candidates on the validation window")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8, loc="best")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def summary_markdown(evidence: dict) -> str:
    lines = ["# Tuning report", "",
             f"History `{evidence['history']}`, grid `{evidence['grid']}`, train fraction {evidence['train_fraction']:g}; "
             f"{evidence['simulation']['candidate_policy_minutes']:,} candidate-policy-minutes simulated in "
             f"{evidence['simulation']['seconds']:.1f}s on {evidence['simulation']['parallelism']} cores "
             f"({evidence['simulation']['minutes_per_second']:,.0f}/s).", ""]
    for message in evidence["messages"]:
        lines.append(f"- {message}")
    if evidence["messages"]:
        lines.append("")
    lines += ["| target | status | throughput (events/min/instance) | current: cost ratio / violation min / actions | "
              "recommended: cost ratio / violation min / actions | recommended candidate |",
              "|---|---|---:|---|---|---|"]
    for name, item in evidence["targets"].items():
        current, recommended = item.get("current"), item.get("recommended")

        def cell(numbers: dict | None) -> str:
            if not numbers:
                return "–"
            v = numbers["validation"]
            return f"{v['cost_ratio']} / {v['slo_violation_minutes']} / {v['scale_actions']}"

        throughput = item.get("throughput", {}).get("events_per_instance_per_minute")
        lines.append(f"| {name} | {item['status']} | {throughput if throughput is not None else '–'} | {cell(current)} | "
                     f"{cell(recommended)} | {recommended['label'] if recommended else '–'} |")
    lines.append("")
    for name, item in evidence["targets"].items():
        lines.append(f"## {name}")
        lines.append("")
        for note in item.get("messages", []):
            lines.append(f"- {note}")
        if item.get("plot"):
            lines += ["", f"![Pareto plot of {name}]({item['plot']})"]
        lines.append("")
    return "\n".join(lines)


def _safe_name(name: str) -> str:
    return "".join(char if char.isalnum() or char in "-_." else "_" for char in name)


# --- the job ---------------------------------------------------------------------------------


def run_job(spark: Any, options: TuneOptions) -> dict:
    """Run the whole job on ``spark``; returns the evidence document (also written next to OUT)."""
    from scaling.domain.policy import Policy, PolicyError, load_policy_text, policy_to_dict
    from scaling.simulation.candidates import Candidate, all_candidates
    from scaling.tuning.tasks import CURRENT, TargetWork

    if options.grid not in GRIDS:
        raise TuneError(f"--grid must be one of {', '.join(GRIDS)}")
    if not 0.05 <= options.train_fraction <= 0.95:
        raise TuneError("--train-fraction must be between 0.05 and 0.95")
    current_policy = None
    if options.policy:
        try:
            current_policy = load_policy_text(read_text(spark, options.policy), origin=options.policy)
        except OSError as error:
            raise TuneError(f"--policy {options.policy} cannot be read: {error}") from error
        except PolicyError as error:
            raise TuneError(f"--policy: {error}") from error
    started = time.perf_counter()
    history_df = read_history_df(spark, options.history)
    delay_minutes = 2
    if current_policy is not None:
        delay_minutes = max(int(round(max(t.slo.provisioning_delay_seconds for t in current_policy.targets) / 60.0)), 0)
    steady = options.steady_minutes if options.steady_minutes is not None else delay_minutes + 2
    histories, messages = recover_histories(spark, history_df, steady_samples=steady, targets=options.targets)
    if not histories and not messages:
        raise TuneError(f"--history {options.history} holds no samples")
    transform_seconds = time.perf_counter() - started

    evidence_targets: dict[str, dict] = {}
    works: dict[str, TargetWork] = {}
    currents: dict[str, Any] = {}
    for history in histories:
        current = None
        if current_policy is not None:
            try:
                current = current_policy.target(history.target)
            except KeyError:
                current = None
        item: dict = {
            "status": "skipped",
            "messages": list(history.messages),
            "history": {"start": history.start, "end": history.end, "samples": history.samples,
                        "minutes": len(history.arrivals), "interval_minutes": history.interval_minutes,
                        "partitions": history.partitions, "partition_counts": history.partition_counts,
                        "gaps": history.gaps, "gap_minutes": history.gap_minutes, "resets": history.resets},
            "throughput": {"saturated_minutes": history.saturated_minutes,
                           "from_history_per_minute": _round(history.throughput_per_minute),
                           "median_per_minute": _round(history.throughput_median_per_minute),
                           "best_seen_per_minute": _round(history.throughput_floor_per_minute)},
        }
        evidence_targets[history.target] = item
        planned = plan_target(history, current, options)
        if isinstance(planned, str):
            item["messages"].append(planned)
            messages.append(f"{history.target}: {planned}")
            continue
        scenario, base, notes = planned
        item["messages"].extend(notes)
        current = current or default_target(history.target, history.partitions)
        currents[history.target] = current
        candidates = (Candidate(CURRENT, current), *all_candidates(base, options.grid))
        split = min(max(int(len(history.arrivals) * options.train_fraction), 1), len(history.arrivals) - 1)
        works[history.target] = TargetWork(history.target, history.arrivals, scenario, split, tuple(candidates))
        item["throughput"]["events_per_instance_per_minute"] = round(scenario.events_per_instance_per_minute, 3)
        item["scenario"] = {key: value for key, value in asdict(scenario).items() if key != "weights"}
        item["split"] = {"train_minutes": split, "validation_minutes": len(history.arrivals) - split}

    rows, seconds = simulate_all(spark, works, options.tasks_per_core)
    simulated = sum(row["simulated_minutes"] for row in rows)
    recommended_targets = []
    report_files: dict[str, bytes] = {}
    for name, work in works.items():
        item = evidence_targets[name]
        target_rows = sorted((row for row in rows if row["target"] == name), key=lambda row: row["index"])
        by_index = {row["index"]: row for row in target_rows}
        index, why = choose(target_rows, work.candidates, work.scenario)
        item["current"] = _evidence_numbers(by_index.get(0))
        item["candidates"] = [{"label": row["label"], "train": row["train"], "validation": row["validation"]} for row in target_rows]
        if index is None:
            item["status"] = "kept current"
            item["messages"].append(f"{why}: keeping the current policy")
            closest = min(target_rows, key=lambda row: (row["validation"]["slo_violation_minutes"], row["validation"]["cost"]))
            item["closest"] = _evidence_numbers(closest)
            recommended_targets.append(currents[name])
        else:
            item["status"] = "kept current" if index == 0 else "tuned"
            item["recommended"] = _evidence_numbers(by_index[index])
            item["messages"].append(f"recommended: {work.candidates[index].label} ({why})")
            current_numbers, chosen = by_index[0]["validation"], by_index[index]["validation"]
            if current_numbers["cost"] > 0 and index != 0:
                item["messages"].append(
                    f"validation: cost {chosen['cost']:.0f} vs {current_numbers['cost']:.0f} instance-minutes "
                    f"({chosen['cost'] / current_numbers['cost'] - 1:+.1%}), SLO-violation minutes "
                    f"{chosen['slo_violation_minutes']} vs {current_numbers['slo_violation_minutes']}, "
                    f"scale actions {chosen['scale_actions']} vs {current_numbers['scale_actions']}")
            recommended_targets.append(work.candidates[index].target)
        if options.report:
            plot = f"pareto-{_safe_name(name)}.png"
            report_files[plot] = pareto_png(name, target_rows, 0, index, work.scenario)
            item["plot"] = plot
    # Targets of the current policy that could not be tuned stay as they are.
    if current_policy is not None:
        tuned = {target.name for target in recommended_targets}
        for target in current_policy.targets:
            if target.name not in tuned:
                recommended_targets.append(target)
                if target.name not in evidence_targets:
                    evidence_targets[target.name] = {"status": "unchanged", "messages": ["no usable history for this target"]}
                elif evidence_targets[target.name]["status"] == "skipped":
                    evidence_targets[target.name]["status"] = "unchanged"

    evidence = {
        "history": options.history,
        "grid": options.grid,
        "train_fraction": options.train_fraction,
        "policy": options.policy,
        "messages": messages,
        "simulation": {"candidate_policy_minutes": simulated, "seconds": round(seconds, 3),
                       "minutes_per_second": round(simulated / seconds, 1) if seconds > 0 else 0.0,
                       "parallelism": spark.sparkContext.defaultParallelism,
                       "transform_seconds": round(transform_seconds, 3)},
        "targets": evidence_targets,
        "recommendations": options.out if recommended_targets else None,
    }
    if recommended_targets:
        policy = Policy(targets=tuple(recommended_targets))
        text = json.dumps(policy_to_dict(policy), indent=2) + "\n"
        load_policy_text(text, origin="the recommendation")  # never write a file the engine would refuse
        write_bytes(spark, options.out, text.encode("utf-8"))
    write_bytes(spark, evidence_path(options.out), (json.dumps(evidence, indent=1, default=str) + "\n").encode("utf-8"))
    if options.report:
        for file_name, data in report_files.items():
            write_bytes(spark, join_path(options.report, file_name), data)
        write_bytes(spark, join_path(options.report, "summary.md"), summary_markdown(evidence).encode("utf-8"))
    return evidence


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


# --- command line (shared by spark-submit and ``python -m scaling tune``) ---------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--history", required=True, help="Parquet history (directory or abfss:// URI)")
    parser.add_argument("--out", required=True, help="recommendations policy file (evidence goes to OUT.evidence.json)")
    parser.add_argument("--report", help="directory for the Pareto plots and summary.md")
    parser.add_argument("--grid", choices=GRIDS, default="large", help="candidate grid size (large: 80 SLO-mode and 18 rule candidates per target)")
    parser.add_argument("--master", help="Spark master (default: local[*] when run embedded; spark-submit's otherwise)")
    parser.add_argument("--policy", help="the current policy file: candidates start from it and it is the baseline")
    parser.add_argument("--train-fraction", type=float, default=0.6, help="first part of the history used for training")
    parser.add_argument("--target", action="append", default=[], help="only this target (repeatable)")
    parser.add_argument("--steady-minutes", type=int, default=None,
                        help="samples of unchanged capacity before a saturated interval counts (default: provisioning delay + 2)")
    parser.add_argument("--min-saturated-minutes", type=int, default=3,
                        help="saturated minutes needed to trust the throughput learned from history")
    parser.add_argument("--tasks-per-core", type=int, default=3, help="Spark tasks per core for the simulations")


def options_from(args: argparse.Namespace) -> TuneOptions:
    return TuneOptions(history=args.history, out=args.out, report=args.report, grid=args.grid, master=args.master,
                       policy=args.policy, train_fraction=args.train_fraction, targets=tuple(args.target),
                       steady_minutes=args.steady_minutes, min_saturated_minutes=args.min_saturated_minutes,
                       tasks_per_core=args.tasks_per_core)


def run(args: argparse.Namespace, spark: Any = None) -> int:
    options = options_from(args)
    own = spark is None
    try:
        if own:
            spark = build_session(options.master, options.app_name)
        evidence = run_job(spark, options)
    except TuneError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        if own and spark is not None and not os.environ.get("SCALING_KEEP_SPARK"):
            spark.stop()
    for message in evidence["messages"]:
        print(f"warning: {message}", file=sys.stderr)
    for name, item in evidence["targets"].items():
        recommended = item.get("recommended")
        print(f"{name}: {item['status']}" + (f" -> {recommended['label']}" if recommended else ""))
    simulation = evidence["simulation"]
    print(f"simulated {simulation['candidate_policy_minutes']:,} candidate-policy-minutes in {simulation['seconds']:.1f}s "
          f"({simulation['minutes_per_second']:,.0f}/s on {simulation['parallelism']} cores)")
    if not evidence["recommendations"]:
        print(f"error: no target could be tuned; no recommendations written (see {evidence_path(options.out)})", file=sys.stderr)
        return 1
    print(f"recommendations: {options.out} (evidence: {evidence_path(options.out)})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark-submit scaling/tuning/job.py", description=__doc__.splitlines()[0])
    configure(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
