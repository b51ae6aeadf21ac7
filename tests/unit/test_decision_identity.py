"""One decision id, one capacity: the reproduction of issue 30 on the real services in memory.

Samples of one target delivered out of order within the clock-skew tolerance used to make
evaluate emit the same decision id twice with two capacities (the window reaches ``now +
clock_skew``, so a later evaluation could re-decide an id already acted on after another, older
decision had acted in between). The scale function then skipped the second as a duplicate and
reconciliation mistook the autoscaler's own lost action for an external change.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

from scaling.domain.decisions import ScalerState
from scaling.domain.reconcile import EXTERNAL_CHANGE
from scaling.plans.memory import InMemoryPlans
from scaling.services.evaluate import EvaluateService
from scaling.services.scale import ScaleService
from scaling.storage.memory import MemoryStorage
from scaling.storage.records import StoredState, parse_action
from scaling.storage.synthetic import policy_of, queue_sample, rules_target
from tests.helpers import Clock

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def test_out_of_order_samples_never_reuse_a_decision_id_with_another_capacity():
    target = rules_target("orders", window_seconds=600, min_samples=2, up_cooldown=0, max_instances=10)
    store = MemoryStorage()
    store.commit(StoredState(ScalerState(target.name, capacity=2)))
    plans = InMemoryPlans()
    plans.add(target.plan.resource_id, 2, max_instances=30)
    clock = Clock(T0)
    policy = policy_of(target)
    evaluator = EvaluateService(store, policy, clock=clock)
    scaler = ScaleService(store, plans, policy, clock=clock)

    emitted = []
    for minute in (0, 3, 1, 2):
        collected = T0 + timedelta(minutes=minute)
        clock.now = collected + timedelta(seconds=5)
        outcome = evaluator.handle(queue_sample(target.name, collected, 50_000).to_json())
        assert outcome.status == "evaluated", outcome
        emitted.extend(parse_action(message) for message in outcome.messages)
    capacities = defaultdict(set)
    for action in emitted:
        capacities[action.decision_id].add(action.target_capacity)
    assert all(len(values) == 1 for values in capacities.values()), dict(capacities)
    for action in emitted:
        scaler.handle(action.to_json())

    newest = max(emitted, key=lambda action: action.decided_at)
    assert plans.plans[target.plan.resource_id].capacity == newest.target_capacity
    assert store.load_state(target.name).desired.capacity == newest.target_capacity
    # The next samples carry the plan's capacity: nothing to reconcile, no external change.
    for minute in (4, 5, 6, 7, 8):
        collected = T0 + timedelta(minutes=minute)
        clock.now = collected + timedelta(seconds=5)
        capacity = plans.plans[target.plan.resource_id].capacity
        outcome = evaluator.handle(queue_sample(target.name, collected, 500, capacity).to_json())
        for message in outcome.messages:
            scaler.handle(message)
    assert not [row for row in store.decisions(target.name) if row.reason_code == EXTERNAL_CHANGE]
