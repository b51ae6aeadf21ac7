"""The job's DataFrame transforms on small hand-made histories with known answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pyspark.testing import assertDataFrameEqual

from scaling.domain.samples import MetricSample, PartitionReading, SourceReading
from scaling.tuning.history import write_history
from scaling.tuning.transforms import (
    minute_arrivals,
    partition_deltas,
    read_history_df,
    sample_stats,
    throughput_by_target,
)

pytestmark = pytest.mark.spark

T0 = datetime(2024, 6, 1, tzinfo=UTC)
P0_LAST = [10, 30, 50, 70, 90, 110]
P0_CHECKPOINT = [0, 5, 15, 25, 35, 45]
P1_LAST = [5, 25, 45, 65, 85, 105]
P1_CHECKPOINT = [None, 5, 15, 25, 35, 45]


def at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def sample(minute: int, capacity: int = 2) -> MetricSample:
    partitions = (
        PartitionReading.measure("0", 0, P0_LAST[minute], P0_CHECKPOINT[minute]),
        PartitionReading.measure("1", 0, P1_LAST[minute], P1_CHECKPOINT[minute]),
    )
    return MetricSample("t", at(minute), capacity, (SourceReading("hub", "eventhub", partitions=partitions),))


@pytest.fixture
def history(spark, tmp_path):
    def make(minutes, copies: int = 1):
        for _ in range(copies):
            write_history([sample(m) for m in minutes], tmp_path / "h")
        return read_history_df(spark, str(tmp_path / "h"))

    return make


def test_partition_deltas_lag_over_collection_time(spark, history):
    deltas = partition_deltas(history(range(6)))
    expected = spark.createDataFrame(
        [("0", at(m), a, d, s) for m, a, d, s in [
            (0, None, None, False), (1, 20, 5, False), (2, 20, 10, False), (3, 20, 10, False), (4, 20, 10, True), (5, 20, 10, True)]]
        + [("1", at(m), a, d, s) for m, a, d, s in [
            (0, None, None, False), (1, 20, None, False), (2, 20, 10, False), (3, 20, 10, False), (4, 20, 10, False), (5, 20, 10, True)]],
        "partition_id string, collected_at timestamp, arrived long, done long, saturated boolean")
    assertDataFrameEqual(deltas.select("partition_id", "collected_at", "arrived", "done", "saturated"), expected)


def test_duplicated_rows_do_not_double_count(spark, history):
    once = partition_deltas(history(range(6))).select("partition_id", "collected_at", "arrived", "done", "saturated")
    twice = partition_deltas(history(range(6), copies=2)).select("partition_id", "collected_at", "arrived", "done", "saturated")
    assertDataFrameEqual(twice, once)


def test_sample_stats_and_throughput_from_saturated_steady_minutes(spark, history):
    stats = sample_stats(partition_deltas(history(range(6))), steady_samples=2)
    expected = spark.createDataFrame(
        [(at(0), None, None, False, False, None), (at(1), 40, 5, False, False, None), (at(2), 40, 20, False, True, None),
         (at(3), 40, 20, False, True, None), (at(4), 40, 20, False, True, None), (at(5), 40, 20, True, True, 10.0)],
        "collected_at timestamp, arrived long, processed long, saturated boolean, steady boolean, "
        "throughput_per_instance_per_minute double")
    assertDataFrameEqual(stats.select("collected_at", "arrived", "processed", "saturated", "steady",
                                      "throughput_per_instance_per_minute"), expected)
    result = throughput_by_target(stats).collect()
    assert [(r["target"], r["saturated_minutes"], r["throughput_per_minute"]) for r in result] == [("t", 1, 10.0)]


def test_a_gap_is_spread_evenly_over_its_minutes(spark, history):
    stats = sample_stats(partition_deltas(history([0, 1, 2, 5])), steady_samples=2)
    expected = spark.createDataFrame([("t", minute, 40.0) for minute in range(1, 6)], "target string, minute int, arrivals double")
    assertDataFrameEqual(minute_arrivals(stats), expected)
    # Capacity is not known to be steady across a gap: only minute 2 (after 0, 1, 2) is.
    assert [row["collected_at"].replace(tzinfo=UTC) for row in stats.where("steady").collect()] == [at(2)]
