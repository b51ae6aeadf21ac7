"""What the collected ownership tells the engine besides the owners' loads (engine.py, slo.py):
which instances really serve (``serving_instances``, ``ready_from_owners``: new ones confirmed
by their claims, a late or lost one seen missing), partitions without a live owner while
others have one (a stalled consumer: reason ``unowned_partitions``, no action on its account),
and no live owner at all (no instance serves)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from scaling.domain.decisions import HOLD, UP
from scaling.domain.engine import evaluate, ready_from_owners
from scaling.domain.proposal import serving_instances
from scaling.domain.samples import MetricSample, PartitionReading, SourceReading
from tests.unit.test_domain_slo import T0, history, slo_target, state


def owned(samples: list[MetricSample], owner_of) -> list[MetricSample]:
    """The samples with ``owner_of(partition index)`` (``None``: no live owner) as each
    partition's owner, and the live owner count as collect reports it."""
    result = []
    for sample in samples:
        source = sample.sources[0]
        partitions = tuple(replace(p, owner=owner_of(index)) for index, p in enumerate(source.partitions))
        live = len({p.owner for p in partitions if p.owner is not None})
        result.append(replace(sample, sources=(replace(source, partitions=partitions, owners=live),)))
    return result


def source_of(partitions: int, live: int | None, name: str = "hub") -> SourceReading:
    readings = tuple(PartitionReading.measure(str(index), 0, 10, 10) for index in range(partitions))
    return SourceReading(name=name, kind="eventhub", partitions=readings, owners=live)


# --- which instances serve -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("sources", "capacity", "expected"), [
    pytest.param([source_of(32, 8)], 8, 8, id="as-many-owners-as-instances"),
    pytest.param([source_of(32, 6)], 8, 6, id="two-not-serving"),
    pytest.param([source_of(4, 4)], 8, 8, id="more-instances-than-partitions-all-owned"),
    pytest.param([source_of(4, 3)], 8, 3, id="more-instances-than-partitions-one-short"),
    pytest.param([source_of(32, 10)], 8, 8, id="more-owners-than-instances-several-processors-each"),
    pytest.param([source_of(32, 8), source_of(32, 5, "other")], 8, 5, id="the-fewest-over-the-sources"),
    pytest.param([source_of(32, 0)], 8, 0, id="nothing-owned-none-serves"),
    pytest.param([source_of(32, None)], 8, None, id="no-ownership-collected"),
    pytest.param([source_of(32, 8), source_of(32, None, "legacy")], 8, None, id="one-source-without-ownership"),
])
def test_serving_instances(sources, capacity, expected) -> None:
    sample = MetricSample(target="orders", collected_at=T0, capacity=capacity, sources=tuple(sources))
    assert serving_instances(sample, capacity) == expected


INTERVAL = 60.0


@pytest.mark.parametrize(("expected", "serving", "due_seconds_ago", "ready"), [
    pytest.param(4, None, None, 4, id="no-ownership-the-delay-decides"),
    pytest.param(4, 8, -60, 8, id="owners-confirm-new-instances-before-the-delay-ends"),
    pytest.param(4, 4, -60, 4, id="still-provisioning"),
    pytest.param(8, 4, 0, 8, id="just-due-their-claims-may-not-show-yet"),
    pytest.param(8, 4, 59, 8, id="within-an-interval-of-due"),
    pytest.param(8, 4, 60, 4, id="an-interval-late-they-are-late"),
    pytest.param(8, 7, None, 7, id="no-scale-out-in-flight-one-lost"),
    pytest.param(1, 0, None, 0, id="the-only-instance-lost"),
])
def test_ready_from_owners(expected, serving, due_seconds_ago, ready) -> None:
    due = None if due_seconds_ago is None else T0 - timedelta(seconds=due_seconds_ago)
    assert ready_from_owners(expected, serving, due, T0, INTERVAL) == ready


def test_a_lost_instance_counts_as_not_serving_until_its_owners_come_back() -> None:
    """Eight instances billed, seven own the 32 partitions (one failed; the survivors took its
    partitions). Each partition receives 4 events/s: eight instances (4 partitions each) drain
    the 100 s backlog, seven (up to 5 each) fall behind. The ready count is 7 and the eighth is
    expected back no sooner than the next collection, so the predicted age is higher than with
    all eight serving."""
    samples = history(4.0, 4.0, 400)
    all_eight = evaluate(slo_target(), state(8), owned(samples, lambda index: f"i{index % 8}"), T0)
    seven = evaluate(slo_target(), state(8), owned(samples, lambda index: f"i{index % 7}"), T0)
    assert all_eight.metrics["ready_capacity"] == 8
    assert seven.metrics["ready_capacity"] == 7
    assert seven.metrics["predicted_age_seconds"] > all_eight.metrics["predicted_age_seconds"]


# --- partitions without a live owner ---------------------------------------------------------------------------


def test_partitions_without_a_live_owner_are_a_stalled_consumer_not_missing_capacity() -> None:
    """Three of 32 partitions lost their owner and pile up (10 minutes' backlog on every
    partition calls for a scale-out when all are owned): the engine holds with reason
    ``unowned_partitions`` and names them, instead of adding instances that cannot serve them."""
    samples = history(2.0, 1.0, 1200)
    at_risk = evaluate(slo_target(), state(8), owned(samples, lambda index: f"i{index % 8}"), T0)
    assert at_risk.direction == UP, at_risk.reasons
    unowned = {5, 17, 30}
    stalled = evaluate(slo_target(), state(8), owned(samples, lambda index: None if index in unowned else f"i{index % 8}"), T0)
    assert (stalled.direction, stalled.reason_code) == (HOLD, "unowned_partitions")
    assert stalled.metrics["unowned_partitions"] == 3
    assert "hub/5, hub/17, hub/30" in stalled.reasons[0]


def test_nothing_owned_at_all_means_no_instance_serves() -> None:
    """One instance serves 32 partitions that each receive 0.5 events/s (16/s of its 16.7/s),
    and the oldest event is 120 s old. Served, it stays there: hold. When the only instance has
    failed (ownership is collected but no claim is live), nothing serves until a restart, which
    takes a provisioning delay (120 s): 240 s would pass the 210 s limit, so the engine scales
    out now instead of counting on the lost instance (NASA's realistic run lost its only
    instance at minute 22150 and waited two collections for it). A consumer that writes no
    ownership at all (``owners`` None) is not read as one that stopped."""
    samples = history(0.5, 0.5, 60, capacity=1)
    served = evaluate(slo_target(), state(1), owned(samples, lambda index: "i0"), T0)
    assert served.direction == HOLD, served.reasons
    lost = evaluate(slo_target(), state(1), owned(samples, lambda index: None), T0)
    assert (lost.direction, lost.reason_code) == (UP, "slo_at_risk"), lost.reasons
    assert lost.metrics["ready_capacity"] == 0
    assert any("no live owner: no instance serves" in reason for reason in lost.reasons)
    assert lost.metrics["predicted_age_seconds"] >= lost.metrics["oldest_age_seconds"] + 120  # unserved for the restart
    unknown = evaluate(slo_target(), state(1), samples, T0)
    assert unknown.direction == HOLD, unknown.reasons
