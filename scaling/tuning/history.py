"""Metric history as Parquet: the tuning job's input, written by ``export-history`` and by
``simulate --history-out``.

One row per target, collection time, source and partition (long format, so that Spark's
window functions can ``lag`` over ``collected_at`` per partition). A source without partitions
(Service Bus, or a failed Event Hubs read) gets one row with ``partition_id`` null, so that no
sample disappears. The dataset is hive-partitioned by ``target`` and ``date`` (UTC day of
``collected_at``). Schema: docs/tuning.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scaling.domain.samples import MetricSample, PartitionReading, SourceReading

#: Columns in the data files (``target`` and ``date`` are the directory partitions).
COLUMNS = (
    "target", "date", "collected_at", "sample_id", "ok", "capacity", "capacity_error",
    "source", "source_kind", "source_ok", "active_messages",
    "partition_id", "partition_index", "beginning", "last_enqueued", "checkpoint", "backlog",
)
PARTITION_COLUMNS = ("target", "date")


def arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        pa.field("target", pa.string(), nullable=False),
        pa.field("date", pa.string(), nullable=False),
        pa.field("collected_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("ok", pa.bool_(), nullable=False),
        pa.field("capacity", pa.int32()),
        pa.field("capacity_error", pa.string()),
        pa.field("source", pa.string()),
        pa.field("source_kind", pa.string()),
        pa.field("source_ok", pa.bool_()),
        pa.field("active_messages", pa.int64()),
        pa.field("partition_id", pa.string()),
        pa.field("partition_index", pa.int32()),
        pa.field("beginning", pa.int64()),
        pa.field("last_enqueued", pa.int64()),
        pa.field("checkpoint", pa.int64()),
        pa.field("backlog", pa.int64()),
    ])


def sample_rows(sample: MetricSample) -> Iterator[dict[str, Any]]:
    """The Parquet rows of one sample."""
    moment = sample.collected_at.astimezone(UTC)
    common = {
        "target": sample.target,
        "date": moment.strftime("%Y-%m-%d"),
        "collected_at": moment,
        "sample_id": sample.sample_id,
        "ok": sample.ok,
        "capacity": sample.capacity,
        "capacity_error": sample.capacity_error,
    }
    empty = {"partition_id": None, "partition_index": None, "beginning": None, "last_enqueued": None,
             "checkpoint": None, "backlog": None}
    if not sample.sources:
        yield {**common, "source": None, "source_kind": None, "source_ok": None, "active_messages": None, **empty}
        return
    for source in sample.sources:
        head = {**common, "source": source.name, "source_kind": source.kind, "source_ok": source.ok,
                "active_messages": source.active_messages}
        if not source.partitions:
            yield {**head, **empty}
            continue
        for index, partition in enumerate(source.partitions):
            yield {**head, "partition_id": partition.partition_id, "partition_index": index,
                   "beginning": partition.beginning, "last_enqueued": partition.last_enqueued,
                   "checkpoint": partition.checkpoint, "backlog": partition.backlog}


def history_table(samples: Iterable[MetricSample]) -> Any:
    """A pyarrow Table of the samples' rows (column order as ``COLUMNS``)."""
    import pyarrow as pa

    columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    for sample in samples:
        for row in sample_rows(sample):
            for name in COLUMNS:
                columns[name].append(row[name])
    return pa.Table.from_pydict(columns, schema=arrow_schema())


def write_history(samples: Iterable[MetricSample], out_dir: str | Path) -> int:
    """Append the samples to the Parquet dataset at ``out_dir`` (partitioned by target and date).

    Files get a unique name per call, so repeated exports add files rather than overwrite them;
    readers de-duplicate by ``sample_id``. Returns the number of rows written.
    """
    import pyarrow.parquet as pq

    table = history_table(samples)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    if table.num_rows == 0:
        return 0
    table = table.sort_by([("target", "ascending"), ("collected_at", "ascending"), ("partition_index", "ascending")])
    pq.write_to_dataset(
        table,
        root_path=str(out_dir),
        partition_cols=list(PARTITION_COLUMNS),
        basename_template=f"part-{uuid.uuid4().hex[:12]}-{{i}}.parquet",
        existing_data_behavior="overwrite_or_ignore",
    )
    return table.num_rows


def read_history_table(path: str | Path, *, targets: Iterable[str] | None = None,
                       since: datetime | None = None, until: datetime | None = None) -> Any:
    """The dataset as one pyarrow Table with the full schema, optionally filtered."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    schema = arrow_schema()
    partitioning = ds.partitioning(pa.schema([schema.field("target"), schema.field("date")]), flavor="hive")
    dataset = ds.dataset(str(path), format="parquet", schema=schema, partitioning=partitioning)
    condition = None

    def both(left: Any, right: Any) -> Any:
        return right if left is None else left & right

    if targets is not None:
        condition = both(condition, ds.field("target").isin(list(targets)))
    if since is not None:
        condition = both(condition, ds.field("collected_at") >= since.astimezone(UTC))
    if until is not None:
        condition = both(condition, ds.field("collected_at") < until.astimezone(UTC))
    return dataset.to_table(filter=condition)


def read_history(path: str | Path, *, targets: Iterable[str] | None = None,
                 since: datetime | None = None, until: datetime | None = None) -> list[MetricSample]:
    """The samples stored at ``path``, de-duplicated by ``sample_id``, ordered by target and time.

    Only what the Parquet rows hold comes back (no owners, notes or errors of sources).
    """
    table = read_history_table(path, targets=targets, since=since, until=until)
    rows = table.to_pylist()
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault((row["target"], row["sample_id"]), []).append(row)
    samples = []
    for (target, _), group in grouped.items():
        first = group[0]
        sources: dict[str | None, list[dict[str, Any]]] = {}
        seen: set[tuple[str | None, str | None]] = set()
        for row in group:
            key = (row["source"], row["partition_id"])
            if key in seen:  # the same sample written twice
                continue
            seen.add(key)
            sources.setdefault(row["source"], []).append(row)
        readings = []
        for name, source_rows in sources.items():
            if name is None:
                continue
            head = source_rows[0]
            partitions = tuple(
                PartitionReading(str(r["partition_id"]), int(r["beginning"]), int(r["last_enqueued"]), r["checkpoint"], int(r["backlog"]))
                for r in sorted(source_rows, key=lambda r: r["partition_index"] if r["partition_index"] is not None else -1)
                if r["partition_id"] is not None
            )
            readings.append(SourceReading(name=name, kind=head["source_kind"] or "eventhub",
                                          ok=bool(head["source_ok"]) if head["source_ok"] is not None else True,
                                          partitions=partitions, active_messages=head["active_messages"]))
        collected = first["collected_at"]
        if collected.tzinfo is None:
            collected = collected.replace(tzinfo=UTC)
        samples.append(MetricSample(target=target, collected_at=collected.astimezone(UTC), capacity=first["capacity"],
                                    sources=tuple(readings), capacity_error=first["capacity_error"]))
    samples.sort(key=lambda sample: (sample.target, sample.collected_at))
    return samples
