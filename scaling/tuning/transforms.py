"""Step 1 of the tuning job: Spark DataFrame transforms over the Parquet history (schema:
docs/tuning.md). Per partition, the increase of the last-enqueued sequence number (arrivals)
and of the checkpoint (processed) between consecutive samples; per sample, the sums, the
capacity and whether every partition was saturated; per target, the per-instance throughput
from saturated minutes at steady capacity, and the per-minute arrival series.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scaling.tuning.options import TuneError
from scaling.tuning.spark_io import has_scheme


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
    if not has_scheme(path):
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

    Duplicated rows (the same sample exported twice) are dropped. A sequence number that went
    backwards for good counts as a reset (no arrivals or progress known for that interval). One
    that went back for a single reading, its next reading at or above the one before (a misread:
    a stale or swapped reading), is read as the engine reads positions, which never go back: a
    misread ``last_enqueued`` drops that partition's reading (the interval after it spans both
    sides; the readings next to it are ``bridged``: suspect, never used for throughput), a misread
    ``checkpoint`` is no progress, and neither are the intervals next to it (its rebound is no
    throughput). ``misreads`` counts both kinds.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = (history
            .where(F.col("partition_id").isNotNull() & F.coalesce(F.col("source_ok"), F.lit(True))
                   & F.col("last_enqueued").isNotNull())
            .dropDuplicates(["target", "sample_id", "source", "partition_id"]))
    by_partition = Window.partitionBy("target", "source", "partition_id").orderBy("collected_at")

    def misread(column: str) -> Any:
        before, after = F.lag(column).over(by_partition), F.lead(column).over(by_partition)
        return F.coalesce(before.isNotNull() & after.isNotNull() & F.col(column).isNotNull()
                          & (F.col(column) < before) & (after >= before), F.lit(False))

    rows = (rows
            .withColumn("last_misread", misread("last_enqueued"))
            .withColumn("checkpoint_misread", misread("checkpoint")))
    # The readings next to a misread are suspect too (of a swapped pair, either one may be the wrong one).
    rows = rows.withColumn("bridged", F.coalesce(F.lag("last_misread").over(by_partition)
                                                 | F.lead("last_misread").over(by_partition), F.lit(False)))
    misread_rows = rows.where(F.col("last_misread"))
    rows = rows.where(~F.col("last_misread"))
    prev_last = F.lag("last_enqueued").over(by_partition)
    prev_checkpoint = F.lag("checkpoint").over(by_partition)
    prev_backlog = F.lag("backlog").over(by_partition)
    prev_time = F.lag("collected_at").over(by_partition)
    rows = (rows
            .withColumn("prev_collected_at", prev_time)
            .withColumn("prev_last_enqueued", prev_last)
            .withColumn("prev_checkpoint", prev_checkpoint)
            .withColumn("prev_backlog", prev_backlog)
            .withColumn("near_checkpoint_misread", F.coalesce(F.lag("checkpoint_misread").over(by_partition)
                                                              | F.lead("checkpoint_misread").over(by_partition), F.lit(False))))
    raw_arrived = F.col("last_enqueued") - F.greatest(F.col("prev_last_enqueued"), F.lit(-1))
    raw_done = F.col("checkpoint") - F.col("prev_checkpoint")
    arrival_reset = F.col("prev_last_enqueued").isNotNull() & (raw_arrived < 0)
    done_reset = (F.col("prev_checkpoint").isNotNull() & F.col("checkpoint").isNotNull() & (raw_done < 0)
                  & ~F.col("checkpoint_misread"))
    arrived = F.when(F.col("prev_last_enqueued").isNull() | arrival_reset, F.lit(None).cast("long")).otherwise(raw_arrived)
    done = (F.when(F.col("prev_checkpoint").isNull() | F.col("checkpoint").isNull() | done_reset
                   | (F.col("prev_checkpoint") < 0) | F.col("checkpoint_misread") | F.col("near_checkpoint_misread"),
                   F.lit(None).cast("long"))
            .otherwise(raw_done))
    saturated = (F.col("arrived").isNotNull() & F.col("done").isNotNull()
                 & (F.col("backlog") > 2 * F.col("arrived")) & (F.col("prev_backlog") > 2 * F.col("arrived")))
    columns = ("target", "source", "partition_id", "partition_index", "collected_at", "sample_id", "capacity",
               "prev_collected_at", "elapsed_seconds", "last_enqueued", "checkpoint", "backlog",
               "arrived", "done", "reset", "arrival_reset", "misreads", "bridged", "saturated")
    deltas = (rows
              .withColumn("elapsed_seconds",
                          F.col("collected_at").cast("double") - F.col("prev_collected_at").cast("double"))
              .withColumn("arrived", arrived)
              .withColumn("done", done)
              .withColumn("reset", (arrival_reset | done_reset).cast("int"))
              .withColumn("arrival_reset", arrival_reset.cast("int"))
              .withColumn("misreads", F.col("checkpoint_misread").cast("int"))
              .withColumn("saturated", F.coalesce(saturated, F.lit(False)))
              .select(*columns))
    # A misread last-enqueued reading stays a row of its sample (the partition was there), with
    # nothing known about its interval, so that its sample counts as incomplete, not as short.
    nothing = {"prev_collected_at": F.lit(None).cast("timestamp"), "elapsed_seconds": F.lit(None).cast("double"),
               "arrived": F.lit(None).cast("long"), "done": F.lit(None).cast("long"), "reset": F.lit(0),
               "arrival_reset": F.lit(0), "misreads": F.lit(1), "saturated": F.lit(False)}
    return deltas.unionByName(misread_rows.select(*(nothing[name].alias(name) if name in nothing else F.col(name)
                                                    for name in columns)))


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
        F.sum("arrival_reset").alias("arrival_resets"),
        F.sum("misreads").alias("misreads"),
        F.sum(F.col("bridged").cast("int")).alias("bridged"),
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
    saturated = ((F.col("all_saturated") == 1) & (F.col("compared") == F.col("partitions")) & (F.col("bridged") == 0)
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
                        F.when(F.col("steady") & (F.col("capacity") > 0) & (F.col("processed_compared") == F.col("partitions"))
                               & (F.col("bridged") == 0),
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
