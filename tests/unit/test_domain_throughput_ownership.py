"""Learning the per-instance throughput from the instances that really served (engine.serving_owners):
the collected ownership divides what was processed, and an interval whose owners changed (a
rebalance, a failed instance's partitions) teaches nothing. Without ownership data the count
assumed ready divides, as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.decisions import ScalerState
from scaling.domain.engine import learn_throughput, serving_owners
from scaling.domain.samples import MetricSample, PartitionReading, SourceReading

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def sample(minute: int, owners: list[str | None] | None, processed: int) -> MetricSample:
    """Four partitions, 10,000 events behind each (saturated), ``processed`` more checkpointed
    per partition each minute; ``owners`` per partition, or ``None`` for no ownership data."""
    partitions = tuple(
        PartitionReading.measure(str(index), 0, 100_000 + 600 * minute, 90_000 + processed * minute,
                                 owner=None if owners is None else owners[index])
        for index in range(4))
    live = None if owners is None else len({owner for owner in owners if owner})
    return MetricSample(target="t", collected_at=T0 + timedelta(minutes=minute), capacity=4,
                        sources=(SourceReading(name="hub", kind="eventhub", partitions=partitions, owners=live),))


A, B = ["a", "a", "b", "b"], ["a", "b", "a", "b"]


@pytest.mark.parametrize(("before", "after", "owners"), [
    (A, A, 2),
    (A, B, 0),  # partitions changed owner in the interval
    (A, ["a", "a", "b", None], 0),  # a partition without a live owner
    (None, None, None),  # no ownership collected
    (["a", "b", "c", "d"], ["a", "b", "c", "d"], 4),
])
def test_serving_owners(before, after, owners) -> None:
    assert serving_owners([sample(0, before, 500), sample(1, after, 500)]) == owners


@pytest.mark.parametrize(("owners", "ready", "learned"), [
    (A, 4, 4 * 500 / 60 / 2),  # two live owners served: each did twice what 4 would have
    (None, 4, 4 * 500 / 60 / 4),  # no ownership: the ready count divides
])
def test_the_live_owners_divide_what_was_processed(owners, ready, learned) -> None:
    state = learn_throughput(ScalerState(target="t"), [sample(0, owners, 500), sample(1, owners, 500)], ready)
    assert state.throughput_per_instance == pytest.approx(learned)


def test_an_interval_with_a_rebalance_teaches_nothing() -> None:
    state = ScalerState(target="t", throughput_per_instance=10.0, throughput_observations=3)
    assert learn_throughput(state, [sample(0, A, 50), sample(1, B, 50)], 4) == state
