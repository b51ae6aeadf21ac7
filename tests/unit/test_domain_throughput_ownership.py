"""Learning the per-instance throughput from the instances that really served (engine.serving_owners):
the collected ownership divides what was processed, and an interval whose owners changed (a
rebalance, a failed instance's partitions) teaches nothing. Without ownership data the count
assumed ready divides, as before."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
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
    (A, ["a", "a", "b", None], 0),  # a partition lost its live owner
    (["a", "a", "b", None], ["a", "a", "b", None], 2),  # one never owned: the others still teach
    ([None] * 4, [None] * 4, 0),  # nothing owned: no instance served, nothing to learn
    (None, None, None),  # no ownership collected
    (["a", "b", "c", "d"], ["a", "b", "c", "d"], 4),
])
def test_serving_owners(before, after, owners) -> None:
    assert serving_owners([sample(0, before, 500), sample(1, after, 500)]) == owners
    # Paired by partition id, not by position: the same when a reading lists its partitions in
    # another order (the engine's path for the rest, beside the one for partitions in one order).
    later = sample(1, after, 500)
    reordered = replace(later, sources=(replace(later.sources[0], partitions=later.sources[0].partitions[::-1]),))
    assert serving_owners([sample(0, before, 500), reordered]) == owners


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


def test_an_owner_whose_partitions_were_all_busy_measures_one_instance() -> None:
    """Owner a's two partitions are backlogged, owner b's ran dry: a alone is a measurement
    (its 2 x 600 events a minute), and the interval counts as saturated though b idled."""
    earlier, later = sample(0, A, 600), sample(1, A, 600)
    idle = tuple(PartitionReading.measure(p.partition_id, 0, p.last_enqueued, p.last_enqueued, owner=p.owner)
                 if p.owner == "b" else p for p in later.sources[0].partitions)
    later = MetricSample(target="t", collected_at=later.collected_at, capacity=4,
                         sources=(SourceReading(name="hub", kind="eventhub", partitions=idle, owners=2),))
    state = learn_throughput(ScalerState(target="t"), [earlier, later], 4)
    assert state.throughput_per_instance == pytest.approx(2 * 600 / 60)


def caught_up(sample_: MetricSample, partition_ids: set[str]) -> MetricSample:
    """The sample with ``partition_ids`` checkpointed at their last event (nothing waiting)."""
    partitions = tuple(PartitionReading.measure(p.partition_id, 0, p.last_enqueued, p.last_enqueued, owner=p.owner)
                       if p.partition_id in partition_ids else p for p in sample_.sources[0].partitions)
    return MetricSample(target="t", collected_at=sample_.collected_at, capacity=sample_.capacity,
                        sources=(SourceReading(name="hub", kind="eventhub", partitions=partitions,
                                               owners=sample_.sources[0].owners),))


def test_an_owner_with_a_partition_busy_throughout_measures_one_instance() -> None:
    """An instance shares its throughput among its partitions by demand: while one of its
    partitions stays backlogged it has nothing to spare, so it is working at its rate even if its
    other partition keeps up. Owner a: partition 0 backlogged (500 a minute processed), partition 1
    caught up (its 600 a minute); owner b: both backlogged (500 each). Both owners measure one
    instance: (1,100 + 1,000) / 2 a minute; counting only owners whose partitions were all busy
    would read b's 1,000 alone."""
    earlier, later = caught_up(sample(0, A, 500), {"1"}), caught_up(sample(1, A, 500), {"1"})
    state = learn_throughput(ScalerState(target="t"), [earlier, later], 4)
    assert state.throughput_per_instance == pytest.approx((1100 + 1000) / 2 / 60)


def test_a_partition_hotter_than_one_instance_is_named_and_not_chased() -> None:
    """Eight partitions, weights 2/3, 2/9, ... of 1,800 events a minute: partition 0 gets ~1,200 a
    minute, more than one instance (1,000) serves, at any count. The engine learns the rate from
    the busy owners, names the partition (reason ``hot_partition``) within 5 minutes of knowing
    the rate, and sizes for the other seven (by owner load: ~600 a minute of others, and the hot
    partition counted as heavy as partition 1's 400, fit about one instance) instead of chasing
    partition 0 to the maximum of 8; the other partitions meet the SLO."""
    from scaling.simulation.peers.looped import EngineAutoscaler, simulated_target
    from scaling.simulation.world.loop import simulate
    from scaling.simulation.world.scenario import Scenario

    scenario = Scenario(partitions=8, skew=2.0, assignment="balanced")
    decisions = []
    autoscaler = EngineAutoscaler(simulated_target(scenario, name="hot"),
                                  on_decision=lambda sample, decision: decisions.append(decision))
    result = simulate(np.full(240, 1800.0), autoscaler, scenario)
    learned = next(index for index, decision in enumerate(decisions) if decision.metrics.get("throughput_source") == "learned")
    named = next(index for index, decision in enumerate(decisions)
                 if any(reason.startswith("hot_partition: hub/0 receives") for reason in decision.reasons))
    assert named - learned <= 5
    assert any(decision.reason_code == "hot_partition" for decision in decisions)
    assert result.capacity[named + 30:].max() <= 2
    assert result.servable_partitions_violation_minutes == 0
