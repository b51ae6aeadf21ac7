"""Ways Table exports go wrong, applied to a clean Parquet history (a pyarrow table, one row per
target, sample, source and partition; schema: scaling.tuning.history). Issue 54's table, one
function per row, each returning a new table."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pyarrow as pa

from scaling.domain.samples import sample_id_for


def sample_times(table: pa.Table) -> list:
    """The distinct collection times, ascending."""
    return sorted(set(table.column("collected_at").to_pylist()))


def _with(table: pa.Table, name: str, values) -> pa.Table:
    field = table.schema.field(name)
    return table.set_column(table.schema.get_field_index(name), field, pa.array(values, type=field.type))


def _retimed(table: pa.Table, shift, mask: np.ndarray, *, new_ids: bool = False) -> pa.Table:
    """Rows under ``mask`` moved by ``shift`` (their date column too; with ``new_ids``, their
    sample id follows the new time, as ``collect`` would have made it)."""
    times = table.column("collected_at").to_pylist()
    moved = [moment + shift if keep else moment for moment, keep in zip(times, mask, strict=True)]
    table = _with(table, "collected_at", moved)
    table = _with(table, "date", [moment.strftime("%Y-%m-%d") for moment in moved])
    if new_ids:
        targets = table.column("target").to_pylist()
        ids = table.column("sample_id").to_pylist()
        table = _with(table, "sample_id", [sample_id_for(target, moment) if keep else old
                                           for target, moment, old, keep in zip(targets, moved, ids, mask, strict=True)])
    return table


def _at(table: pa.Table, moments) -> np.ndarray:
    wanted = set(moments)
    return np.array([moment in wanted for moment in table.column("collected_at").to_pylist()])


def future_sample(table: pa.Table, index: int = 700, years: int = 2) -> pa.Table:
    """One sample (all its rows) dated ``years`` ahead."""
    return _retimed(table, timedelta(days=365 * years), _at(table, [sample_times(table)[index]]))


def checkpoint_low(table: pa.Table, every: int = 97, by: int = 20_000) -> pa.Table:
    """One partition's checkpoint read ``by`` too low every ``every`` samples (the partition turns)."""
    times = sample_times(table)
    positions = {moment: number for number, moment in enumerate(times)}
    checkpoints = table.column("checkpoint").to_pylist()
    partitions = table.column("partition_index").to_pylist()
    edited = []
    for moment, partition, checkpoint in zip(table.column("collected_at").to_pylist(), partitions, checkpoints, strict=True):
        number = positions[moment]
        hit = number and number % every == 0 and partition == (number // every) % 8 and checkpoint is not None
        edited.append(max(checkpoint - by, 0) if hit else checkpoint)
    return _with(table, "checkpoint", edited)


def partition_missing_last(table: pa.Table, partition: str = "7") -> pa.Table:
    """Partition ``partition`` missing from the latest sample only."""
    last = sample_times(table)[-1]
    keep = ~(_at(table, [last]) & np.array([pid == partition for pid in table.column("partition_id").to_pylist()]))
    return table.filter(pa.array(keep))


def hours_missing(table: pa.Table, start: int, minutes: int = 360) -> pa.Table:
    """``minutes`` of samples missing from sample ``start`` on."""
    return table.filter(pa.array(~_at(table, sample_times(table)[start:start + minutes])))


def clock_jump(table: pa.Table, start: int, shift: timedelta) -> pa.Table:
    """From sample ``start`` on, the collector's clock is off by ``shift`` (ids follow the clock)."""
    return _retimed(table, shift, _at(table, sample_times(table)[start:]), new_ids=True)


def second_sample_per_minute(table: pa.Table, every: int = 10, offset_seconds: int = 20, by: int = 50_000) -> pa.Table:
    """Every ``every``-th minute a second sample ``offset_seconds`` later with other values
    (sequence numbers ``by`` lower)."""
    chosen = sample_times(table)[1::every]
    copies = table.filter(pa.array(_at(table, chosen)))
    copies = _retimed(copies, timedelta(seconds=offset_seconds), np.ones(copies.num_rows, dtype=bool), new_ids=True)
    for name in ("last_enqueued", "checkpoint"):
        values = copies.column(name).to_pylist()
        copies = _with(copies, name, [None if value is None else max(value - by, 0) for value in values])
    return pa.concat_tables([table, copies])


def swapped_pairs(table: pa.Table, pairs: int = 84, seed: int = 5) -> pa.Table:
    """``pairs`` pairs of consecutive samples with their timestamps (and ids) swapped."""
    times = sample_times(table)
    rng = np.random.default_rng(seed)
    starts = sorted(rng.choice(np.arange(2, len(times) - 3, 3), size=pairs, replace=False))
    swap = {}
    for start in starts:
        swap[times[start]], swap[times[start + 1]] = times[start + 1], times[start]
    moved = [swap.get(moment, moment) for moment in table.column("collected_at").to_pylist()]
    ids = {moment: sample for moment, sample in zip(table.column("collected_at").to_pylist(),
                                                     table.column("sample_id").to_pylist(), strict=True)}
    table = _with(table, "sample_id", [ids[moment] for moment in moved])
    table = _with(table, "collected_at", moved)
    return _with(table, "date", [moment.strftime("%Y-%m-%d") for moment in moved])


def id_with_two_values(table: pa.Table, index: int = 500, by: int = 1_000) -> pa.Table:
    """One sample exported twice, the second copy's sequence numbers ``by`` higher."""
    copy = table.filter(pa.array(_at(table, [sample_times(table)[index]])))
    copy = _with(copy, "last_enqueued", [value + by for value in copy.column("last_enqueued").to_pylist()])
    return pa.concat_tables([table, copy])


def first_minutes(table: pa.Table, minutes: int = 120) -> pa.Table:
    """Only the first ``minutes`` samples."""
    return table.filter(pa.array(_at(table, sample_times(table)[:minutes])))


def capacity_recorded(table: pa.Table, start: int, minutes: int, capacity: int = 20) -> pa.Table:
    """The capacity recorded as ``capacity`` for ``minutes`` samples from ``start``."""
    mask = _at(table, sample_times(table)[start:start + minutes])
    values = table.column("capacity").to_pylist()
    return _with(table, "capacity", [capacity if hit else value for value, hit in zip(values, mask, strict=True)])


def rows_equal(left: pa.Table, right: pa.Table) -> bool:
    order = [("target", "ascending"), ("collected_at", "ascending"), ("source", "ascending"), ("partition_index", "ascending")]
    return left.sort_by(order).equals(right.sort_by(order))

