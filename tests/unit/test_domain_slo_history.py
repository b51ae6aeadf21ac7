"""The SLO mode's history of a source (``slo_history``): a window slid a sample at a time reads the
same numbers as the window read whole, and a window that does not continue the last is read anew."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from scaling.domain import slo_history
from scaling.domain.samples import MetricSample, PartitionReading, SourceReading

START = datetime(2026, 1, 1, tzinfo=UTC)
IDS = ("0", "1", "2")


def sample(minute: int, owners: tuple[str | None, ...] = ("a", "b", None), ids: tuple[str, ...] = IDS,
           ok: bool = True, checkpoint: int | None = 5) -> MetricSample:
    """A sample at ``minute``: each partition ``index`` enqueued ``100 * minute + index``."""
    partitions = tuple(PartitionReading.measure(partition_id, 0, 100 * minute + index,
                                                None if checkpoint is None else checkpoint * minute, owner)
                       for index, (partition_id, owner) in enumerate(zip(ids, owners, strict=True)))
    return MetricSample(target="t", collected_at=START + timedelta(minutes=minute), capacity=2,
                        sources=(SourceReading(name="hub", kind="eventhub", ok=ok, partitions=partitions, owners=2),))


def same_codes(first: np.ndarray, second: np.ndarray) -> bool:
    """Whether two owner-code arrays say the same: the same liveness, the same equalities."""
    return bool(((first >= 0) == (second >= 0)).all() and (
        (first.ravel()[:, None] == first.ravel()[None, :]) == (second.ravel()[:, None] == second.ravel()[None, :])).all())


def assert_read_alike(slid: slo_history.Stack, whole: slo_history.Stack) -> None:
    assert slid.readings == whole.readings
    for name in ("times", "positions", "checkpoints", "backlogs"):
        np.testing.assert_array_equal(getattr(slid, name), getattr(whole, name))
    assert same_codes(slid.owners, whole.owners)


WINDOWS = [  # (the samples of each evaluation's window, by minute; the owners of each minute)
    ("slides by one", [range(0, 4), range(1, 5), range(2, 6)], {}),
    ("grows first", [range(0, 1), range(0, 2), range(0, 3), range(1, 4)], {}),
    ("drops two at once", [range(0, 5), range(2, 6)], {}),
    ("owners change", [range(0, 3), range(1, 4), range(2, 5)], {3: ("b", "b", "c"), 4: (None, "c", "c")}),
]


def read_whole(window: list[MetricSample]) -> slo_history.Stack:
    """The window read as a cold host reads it (nothing kept), the kept stacks left as they were."""
    kept = dict(slo_history._STACKS)
    slo_history._STACKS.clear()
    try:
        return slo_history.stacked(window, "hub", IDS)
    finally:
        slo_history._STACKS.clear()
        slo_history._STACKS.update(kept)


@pytest.mark.parametrize(("case", "windows", "owners"), WINDOWS, ids=[case for case, _, _ in WINDOWS])
def test_a_slid_window_reads_as_the_window_read_whole(case: str, windows: list[range],
                                                       owners: dict[int, tuple]) -> None:
    samples = {minute: sample(minute, owners.get(minute, ("a", "b", None))) for minute in range(8)}
    slo_history._STACKS.clear()
    for window in windows:  # (one evaluation after the other, as the loop evaluates)
        picked = [samples[minute] for minute in window]
        assert_read_alike(slo_history.stacked(picked, "hub", IDS), read_whole(picked))


def test_a_window_that_does_not_continue_the_last_is_read_anew() -> None:
    first = [sample(minute) for minute in range(4)]
    slo_history.stacked(first, "hub", IDS)
    other = [sample(minute, ("x", "y", "z")) for minute in range(1, 5)]  # (other objects, other owners)
    stack = slo_history.stacked(other, "hub", IDS)
    assert stack.readings == tuple(s.sources[0] for s in other)
    assert (stack.owners >= 0).all() and len(set(stack.owners[-1].tolist())) == 3


def test_a_slid_window_continues_with_the_kept_arrays() -> None:
    window = [sample(minute) for minute in range(5)]
    before = slo_history.stacked(window[:4], "hub", IDS)
    slid = slo_history.stacked(window[1:], "hub", IDS)
    assert slid.codes is before.codes  # (slid on, not read whole)
    np.testing.assert_array_equal(slid.positions[:-1], before.positions[1:])
    assert not slid.positions.flags.writeable


@pytest.mark.parametrize(("ids", "ok", "checkpoint", "positions", "checkpoints", "owners"), [
    (IDS, True, 5, [100.0, 101.0, 102.0], [5.0, 5.0, 5.0], ("a", "b", "")),
    (("2", "0", "1"), True, 5, [102.0, 100.0, 101.0], [5.0, 5.0, 5.0], ("", "a", "b")),  # (read by id)
    (("0", "9"), True, 5, [100.0, math.nan], [5.0, math.nan], ("a", "")),  # (a partition missing: NaN, no owner)
    (IDS, True, None, [100.0, 101.0, 102.0], [-1.0, -1.0, -1.0], ("a", "b", "")),  # (no checkpoint yet: -1)
])
def test_a_row_reads_each_partition_by_its_id(ids, ok, checkpoint, positions, checkpoints, owners) -> None:
    row = slo_history.Row.read(sample(1, checkpoint=checkpoint).sources[0], ids)
    np.testing.assert_array_equal(row.positions, positions)
    np.testing.assert_array_equal(row.checkpoints, checkpoints)
    assert row.owners == owners


def test_samples_that_did_not_read_the_source_are_left_out() -> None:
    window = [sample(0), sample(1, ok=False), sample(2)]
    stack = slo_history.stacked(window, "hub", IDS)
    assert stack.readings == (window[0].sources[0], window[2].sources[0])
    np.testing.assert_array_equal(stack.times, [START.timestamp(), (START + timedelta(minutes=2)).timestamp()])


@pytest.mark.parametrize("checkpoint", [5, None, 0])
@pytest.mark.parametrize("owners", [("a", "b", None), (None, None, None)])
def test_a_row_read_in_one_pass_reads_as_by_id(checkpoint, owners) -> None:
    """The one-pass path (partitions listed as ``ids``) and the by-id path give the same row."""
    reading = sample(3, owners=owners, checkpoint=checkpoint).sources[0]
    in_order = slo_history.Row.read(reading, IDS)
    shuffled = ("2", "0", "1")
    by_id = slo_history.Row.read(reading, shuffled)
    order = [IDS.index(partition_id) for partition_id in shuffled]
    for name in ("positions", "checkpoints", "backlogs"):
        np.testing.assert_array_equal(getattr(in_order, name)[order], getattr(by_id, name))
        assert getattr(in_order, name).dtype == getattr(by_id, name).dtype == np.float64
    assert tuple(in_order.owners[index] for index in order) == by_id.owners


def test_a_row_read_in_one_pass_converts_large_sequence_numbers_as_float_does() -> None:
    """Sequence numbers past 2**53 round as ``float(n)`` rounds them, on either path."""
    large = 2**53 + 1
    partitions = (PartitionReading.measure("0", 0, large + 8, large), PartitionReading.measure("1", 0, 2**62 + 3, None))
    reading = SourceReading(name="hub", kind="eventhub", partitions=partitions, owners=0)
    for ids in (("0", "1"), ("1", "0")):
        row = slo_history.Row.read(reading, ids)
        by_id = {p.partition_id: p for p in partitions}
        assert row.positions.tolist() == [float(by_id[i].last_enqueued) for i in ids]
        assert row.checkpoints.tolist() == [-1.0 if by_id[i].checkpoint is None else float(by_id[i].checkpoint) for i in ids]
        assert row.backlogs.tolist() == [float(by_id[i].backlog) for i in ids]
