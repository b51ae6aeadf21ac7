"""Lag arithmetic (scaling/domain/lag.py), table-driven like KEDA's azure-eventhub scaler tests.

Expected values are computed by hand from docs/peers.md and docs/architecture.md.
"""

from __future__ import annotations

import pytest

from scaling.domain.lag import (
    MAX_INT64,
    STALE_PARTITION_INFO_THRESHOLD,
    PartitionPosition,
    balanced_counts,
    effective_capacity,
    max_backlog,
    partition_backlog,
    partitions_per_instance,
    rates_between,
    sequence_increase,
    total_backlog,
)


@pytest.mark.parametrize(
    ("beginning", "last_enqueued", "checkpoint", "expected"),
    [
        # empty partition: nothing was ever enqueued (or everything expired)
        pytest.param(0, -1, None, 0, id="empty-no-checkpoint"),
        pytest.param(0, -1, 5, 0, id="empty-with-old-checkpoint"),
        pytest.param(100, -1, None, 0, id="empty-beginning-positive"),
        # no checkpoint yet: every retained event counts, last - beginning + 1
        pytest.param(0, 0, None, 1, id="no-checkpoint-one-event"),
        pytest.param(0, 9, None, 10, id="no-checkpoint-ten-events"),
        pytest.param(100, 149, None, 50, id="no-checkpoint-beginning-positive"),
        pytest.param(100, 100, None, 1, id="no-checkpoint-last-equals-beginning"),
        pytest.param(0, 9, -1, 10, id="checkpoint-minus-one-means-none"),
        pytest.param(-1, 9, None, 10, id="no-checkpoint-beginning-unknown"),
        # checkpoint at or behind the last enqueued event
        pytest.param(0, 500, 500, 0, id="caught-up"),
        pytest.param(0, 500, 400, 100, id="behind"),
        pytest.param(0, 0, 0, 0, id="caught-up-at-zero"),
        pytest.param(0, MAX_INT64, 0, MAX_INT64, id="behind-by-max"),
        # checkpoint ahead by a small amount: a stale partition read, 0 (not negative, not huge)
        pytest.param(0, 100, 101, 0, id="stale-by-1"),
        pytest.param(0, 100, 105, 0, id="stale-by-5"),
        pytest.param(0, 100, 100 + STALE_PARTITION_INFO_THRESHOLD - 1, 0, id="stale-just-under-threshold"),
        # genuine 64-bit wrap: the checkpoint sits just below MaxInt64, the hub restarted at 0
        pytest.param(0, 5, MAX_INT64 - 10, 15, id="wrap-small"),
        pytest.param(0, 0, MAX_INT64 - 1, 1, id="wrap-one"),
        pytest.param(0, 1000, MAX_INT64 - 9000, 10_000, id="wrap-larger"),
    ],
)
def test_partition_backlog(beginning: int, last_enqueued: int, checkpoint: int | None, expected: int) -> None:
    assert partition_backlog(beginning=beginning, last_enqueued=last_enqueued, checkpoint=checkpoint) == expected


@pytest.mark.parametrize(
    "ahead",
    [STALE_PARTITION_INFO_THRESHOLD, 50_000, 2**40],
    ids=["ahead-by-threshold", "ahead-by-50k", "ahead-by-2^40"],
)
def test_partition_backlog_far_stale_checkpoint_is_not_huge(ahead: int) -> None:
    backlog = partition_backlog(beginning=0, last_enqueued=100, checkpoint=100 + ahead)
    assert backlog == 0


@pytest.mark.parametrize(
    ("threshold", "checkpoint", "expected"),
    [
        (100, 150, 0),  # ahead by 50, within a threshold of 100: stale
        (100, 101, 0),
        (5, MAX_INT64 - 3, 3 + 100),  # near the top: a wrap whatever the threshold
    ],
)
def test_partition_backlog_custom_stale_threshold(threshold: int, checkpoint: int, expected: int) -> None:
    assert partition_backlog(beginning=0, last_enqueued=100, checkpoint=checkpoint, stale_threshold=threshold) == expected


@pytest.mark.parametrize(
    ("backlogs", "expected"),
    [
        ([], 0),
        ([0, 0], 0),
        ([1, 2, 3], 6),
        ([5, -3], 5),  # a negative reading never subtracts
        ([MAX_INT64, 1], MAX_INT64),
        ([MAX_INT64 // 2 + 1, MAX_INT64 // 2 + 1], MAX_INT64),
        ([MAX_INT64 - 1, 1], MAX_INT64),
        ([MAX_INT64 - 2, 1], MAX_INT64 - 1),
        ([MAX_INT64] * 5, MAX_INT64),
    ],
)
def test_total_backlog_saturates_at_max_int64(backlogs: list[int], expected: int) -> None:
    assert total_backlog(backlogs) == expected
    assert total_backlog(iter(backlogs)) == expected


@pytest.mark.parametrize(("backlogs", "expected"), [([], 0), ([3, 9, 2], 9), ([-4, -1], 0)])
def test_max_backlog(backlogs: list[int], expected: int) -> None:
    assert max_backlog(backlogs) == expected


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (10, 25, (15, False)),
        (10, 10, (0, False)),
        (10, 3, (0, True)),
        (None, 3, (0, False)),
        (3, None, (0, False)),
        (-1, 5, (0, False)),
    ],
)
def test_sequence_increase(before: int | None, after: int | None, expected: tuple[int, bool]) -> None:
    assert sequence_increase(before, after) == expected


P = PartitionPosition


@pytest.mark.parametrize(
    ("earlier", "later", "elapsed", "arrivals", "processed", "compared", "resets"),
    [
        pytest.param({"0": P(100, 50)}, {"0": P(160, 110)}, 60, 1.0, 1.0, 1, 0, id="one-partition"),
        pytest.param({"0": P(100, 50), "1": P(0, 0)}, {"0": P(220, 50), "1": P(120, 60)}, 60, 4.0, 1.0, 2, 0,
                     id="two-partitions-summed"),
        pytest.param({"0": P(100, 50), "1": P(200, 150)}, {"0": P(160, 110), "2": P(5, 0)}, 60, 1.0, 1.0, 1, 0,
                     id="appearing-and-disappearing-left-out"),
        pytest.param({"0": P(100, 50)}, {"0": P(10, 20)}, 60, 0.0, 0.0, 1, 2, id="hub-recreated-both-reset"),
        pytest.param({"0": P(100, 50)}, {"0": P(130, 20)}, 30, 1.0, 0.0, 1, 1, id="checkpoint-reset"),
        pytest.param({"0": P(100, None)}, {"0": P(130, 120)}, 30, 1.0, 0.0, 1, 0, id="first-checkpoint-no-progress"),
        pytest.param({"0": P(-1, None)}, {"0": P(9, None)}, 10, 0.0, 0.0, 1, 0, id="was-empty"),
        pytest.param({}, {"0": P(9, None)}, 10, 0.0, 0.0, 0, 0, id="nothing-in-common"),
    ],
)
def test_rates_between(earlier, later, elapsed, arrivals, processed, compared, resets) -> None:
    rates = rates_between(earlier, later, elapsed)
    assert rates.arrivals_per_second == pytest.approx(arrivals)
    assert rates.processed_per_second == pytest.approx(processed)
    assert rates.partitions_compared == compared
    assert rates.resets == resets


@pytest.mark.parametrize("elapsed", [0, 0.0, -1, -60.5])
def test_rates_between_rejects_non_positive_elapsed(elapsed: float) -> None:
    with pytest.raises(ValueError, match="elapsed_seconds"):
        rates_between({"0": P(1, 0)}, {"0": P(2, 1)}, elapsed)


@pytest.mark.parametrize(
    ("partitions", "expected"),
    [
        (32, [1, 2, 3, 4, 5, 6, 7, 8, 11, 16, 32]),
        (12, [1, 2, 3, 4, 6, 12]),
        (4, [1, 2, 4]),
        (1, [1]),
        (0, []),
        (-3, []),
    ],
)
def test_balanced_counts(partitions: int, expected: list[int]) -> None:
    assert balanced_counts(partitions) == expected


@pytest.mark.parametrize(
    ("partitions", "instances", "expected"),
    [(32, 24, 2), (32, 16, 2), (32, 17, 2), (32, 32, 1), (32, 40, 1), (32, 1, 32), (32, 0, 32), (32, 11, 3)],
)
def test_partitions_per_instance(partitions: int, instances: int, expected: int) -> None:
    assert partitions_per_instance(partitions, instances) == expected


@pytest.mark.parametrize(
    ("partitions", "instances", "rate", "expected"),
    [
        (32, 24, 1000, 16_000),  # 24 instances on 32 partitions serve no more than 16
        (32, 16, 1000, 16_000),
        (32, 32, 1000, 32_000),
        (32, 40, 1000, 32_000),  # more instances than partitions add nothing
        (32, 11, 1000, 32_000 / 3),
        (32, 1, 1000, 1000),
        (32, 0, 1000, 0),
        (0, 4, 1000, 0),
    ],
)
def test_effective_capacity(partitions: int, instances: int, rate: float, expected: float) -> None:
    assert effective_capacity(partitions, instances, rate) == pytest.approx(expected)
