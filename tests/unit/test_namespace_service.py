"""The namespace target's evaluate service on memory storage (the Azurite and local-ARM runs are
tests/integration/test_namespace_arm.py): duplicates, redeliveries and late samples."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from scaling.domain.namespace.policy import EventHubsNamespaceTarget
from scaling.domain.namespace.samples import NamespaceSample
from scaling.domain.namespace.sizing import NamespaceMinute
from scaling.domain.policy import Policy
from scaling.services.namespace import NamespaceCollector, NamespaceEvaluateService
from scaling.storage.memory import MemoryStorage
from scaling.storage.synthetic import rules_target
from tests.helpers import Clock

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NAMESPACE = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/ns"
POLICY = Policy(targets=(rules_target("orders"),),
                namespaces=(EventHubsNamespaceTarget(name="ns", resource_id=NAMESPACE, consumer_targets=("orders",)),))


def busy(at: datetime, capacity: int = 1) -> str:
    """An hour of 2,000 events/s of 1 KB: 3 TUs wanted."""
    minutes = tuple(NamespaceMinute(at - timedelta(minutes=60 - i), 120e6, 120e3, 120e6, 120e3) for i in range(60))
    return NamespaceSample("ns", at, capacity, minutes=minutes).to_json()


def service(clock: Clock) -> NamespaceEvaluateService:
    return NamespaceEvaluateService(MemoryStorage(), POLICY, clock=clock)


def test_a_duplicate_does_nothing_and_a_redelivery_resends_the_recorded_action() -> None:
    clock = Clock(T0 + timedelta(seconds=5))
    evaluate = service(clock)
    first = evaluate.handle(busy(T0))
    assert first.status == "evaluated" and first.action.target_capacity == 3
    assert evaluate.handle(busy(T0)).status == "duplicate"
    again = evaluate.handle(busy(T0), dequeue_count=2)
    assert again.status == "resent" and again.messages == first.messages


def test_a_late_sample_is_remembered_but_never_acted_on() -> None:
    clock = Clock(T0 + timedelta(minutes=1, seconds=5))
    evaluate = service(clock)
    evaluate.handle(busy(T0 + timedelta(minutes=1), capacity=3))
    late = evaluate.handle(busy(T0))
    assert late.status == "evaluated" and late.messages == () and late.decision.reason_code == "late_sample"
    assert evaluate.store.load_state("ns").state.last_sample_at == T0 + timedelta(minutes=1)


class RecordingReaders:
    """The namespace at 2 TUs, and the metrics reader recording how far back it was asked to read."""

    def __init__(self) -> None:
        self.lookbacks: list[timedelta] = []

    async def current_namespace(self, resource_id: str) -> SimpleNamespace:
        return SimpleNamespace(capacity=2, auto_inflate=False, auto_inflate_max=None)

    async def namespace_minutes(self, resource_id: str, now: datetime, lookback: timedelta) -> tuple:
        self.lookbacks.append(lookback)
        return ()


@pytest.mark.parametrize(("ingress_hold_seconds", "lookback_hours"), [(0, 1), (1_800, 1), (21_600, 6)])
def test_collect_reads_the_longer_of_the_scale_down_and_ingress_holds(ingress_hold_seconds, lookback_hours) -> None:
    """The ingress hold decides on the busiest minute of its hours: collect must read them."""
    target = EventHubsNamespaceTarget(name="ns", resource_id=NAMESPACE, ingress_hold_seconds=ingress_hold_seconds)
    readers = RecordingReaders()
    collector = NamespaceCollector(Policy(targets=(rules_target("orders"),), namespaces=(target,)), readers, readers)
    [sample] = asyncio.run(collector.collect(T0))
    assert sample.capacity == 2 and readers.lookbacks == [timedelta(hours=lookback_hours)]
