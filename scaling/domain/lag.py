"""Lag arithmetic, the same way the platform's own scalers count it.

Pure functions over sequence numbers; no I/O. The edge cases follow KEDA's azure-eventhub
scaler and the Functions Event Hubs extension (see docs/lag.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MAX_INT64 = 2**63 - 1
#: A checkpoint ahead of the partition info by more than this is treated as a stale read, not a
#: sequence-number wrap (KEDA's ``stalePartitionInfoThreshold``).
STALE_PARTITION_INFO_THRESHOLD = 10_000
EMPTY_PARTITION = -1
#: Sequence numbers at or above this are "near the top" of int64, where a wrap can happen.
WRAP_REGION = 2**62


def partition_backlog(
    *,
    beginning: int,
    last_enqueued: int,
    checkpoint: int | None,
    stale_threshold: int = STALE_PARTITION_INFO_THRESHOLD,
) -> int:
    """Unprocessed events in one partition.

    - empty partition (``last_enqueued == -1``): 0;
    - no checkpoint yet: every retained event, ``last_enqueued - beginning + 1``;
    - checkpoint at or behind the last enqueued event: ``last_enqueued - checkpoint``;
    - checkpoint ahead: a wrap of the 64-bit sequence number when the checkpoint sits near the
      top of int64 and the partition near zero, otherwise a stale partition read, which counts 0
      rather than a huge number.
    """
    if last_enqueued <= EMPTY_PARTITION:
        return 0
    if checkpoint is None or checkpoint < 0:
        first = max(beginning, 0)
        return max(last_enqueued - first + 1, 0)
    if last_enqueued >= checkpoint:
        return last_enqueued - checkpoint
    # Ahead: a genuine wrap has the checkpoint near the top of int64 and the partition restarted
    # near zero; anything else is a stale partition read, which counts 0 rather than ~2**63.
    wrapped = (MAX_INT64 - checkpoint) + last_enqueued
    if checkpoint < WRAP_REGION or last_enqueued >= WRAP_REGION or wrapped > MAX_INT64 - stale_threshold or wrapped < 0:
        return 0
    return wrapped


def total_backlog(backlogs: Iterable[int]) -> int:
    """Sum that saturates at ``MAX_INT64`` instead of growing past what consumers can store."""
    total = 0
    for backlog in backlogs:
        total += max(backlog, 0)
        if total >= MAX_INT64:
            return MAX_INT64
    return total


def max_backlog(backlogs: Iterable[int]) -> int:
    """The largest single-partition backlog (0 for no partitions)."""
    return max((max(backlog, 0) for backlog in backlogs), default=0)


@dataclass(frozen=True, slots=True)
class PartitionPosition:
    """Where one partition stood at one collection: its newest event and its checkpoint."""

    last_enqueued: int
    checkpoint: int | None


@dataclass(frozen=True, slots=True)
class Rates:
    """Events per second between two collections, summed over the partitions seen in both."""

    arrivals_per_second: float
    processed_per_second: float
    partitions_compared: int
    resets: int


def sequence_increase(before: int | None, after: int | None) -> tuple[int, bool]:
    """Increase of a monotonic sequence number; a decrease is a reset and counts 0.

    Returns ``(increase, was_reset)``. Missing values (no checkpoint yet, empty partition)
    count as no progress observed.
    """
    if before is None or after is None or before < 0 or after < 0:
        return 0, False
    if after < before:
        return 0, True
    return after - before, False


def rates_between(
    earlier: Mapping[str, PartitionPosition],
    later: Mapping[str, PartitionPosition],
    elapsed_seconds: float,
) -> Rates:
    """Arrival and processing rates between two samples.

    Arrivals are the increase of last-enqueued sequence numbers, processed events the increase
    of checkpoints. Partitions present in only one sample (added, or missed by a failed read)
    are left out rather than guessed; a sequence number that went backwards (hub recreated,
    checkpoint reset) counts as no progress and is reported in ``resets``.
    """
    if elapsed_seconds <= 0:
        raise ValueError("elapsed_seconds must be positive")
    arrivals = processed = resets = compared = 0
    for partition_id in earlier.keys() & later.keys():
        before, after = earlier[partition_id], later[partition_id]
        arrived, arrival_reset = sequence_increase(before.last_enqueued, after.last_enqueued)
        done, checkpoint_reset = sequence_increase(before.checkpoint, after.checkpoint)
        arrivals += arrived
        processed += done
        resets += int(arrival_reset) + int(checkpoint_reset)
        compared += 1
    return Rates(arrivals / elapsed_seconds, processed / elapsed_seconds, compared, resets)


def balanced_counts(partition_count: int) -> list[int]:
    """Instance counts that spread ``partition_count`` partitions evenly.

    ``{ceil(P / c) for c in 1..P}`` read as instance counts: for 32 partitions
    1, 2, 3, 4, 5, 6, 7, 8, 11, 16, 32. Any other count costs more without serving faster.
    """
    if partition_count < 1:
        return []
    return sorted({-(-partition_count // per_instance) for per_instance in range(1, partition_count + 1)})


def partitions_per_instance(partition_count: int, instances: int) -> int:
    """How many partitions the busiest instance owns."""
    return -(-partition_count // max(instances, 1))


def effective_capacity(partition_count: int, instances: int, per_instance_rate: float) -> float:
    """Events per unit time that ``instances`` serve when load is spread evenly over partitions.

    The busiest instance owns ``ceil(P / n)`` partitions and serves each at ``rate / ceil(P / n)``,
    so 24 instances on 32 partitions serve no more than 16.
    """
    if partition_count < 1 or instances < 1:
        return 0.0
    return partition_count * per_instance_rate / partitions_per_instance(partition_count, instances)
