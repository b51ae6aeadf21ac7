"""Property: one decision id, one capacity, whatever the queues and the workers' clocks do.

A closed loop, minute by minute: collect reads the plan's capacity into each sample, stamped by
a clock off by up to 60 s either way (the tolerance); samples are delivered up to two minutes
late, in any order, some twice; every delivery is evaluated by a worker whose clock is off by up
to 60 s too (a sample stamped more than the tolerance ahead of that worker's clock is
dead-lettered as from the future, which is allowed); the actions of the minute reach ``scale`` in
any order, some twice. Whatever the schedule:

- a decision id is sent with one target capacity only (every message emitted, every log row);
- the plan is written at most once per decision and ends at the newest decision's capacity;
- the autoscaler never logs its own action as an ``external_change`` (nobody else resizes here).

200 examples in memory and ``QUEUE_CHAOS_EXAMPLES`` (50; 200 with ``make test-deep``) against real
Table storage on Azurite.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaling.domain.decisions import ScalerState
from scaling.domain.reconcile import EXTERNAL_CHANGE
from scaling.plans.memory import InMemoryPlans
from scaling.services.evaluate import EvaluateService
from scaling.services.scale import ScaleService
from scaling.storage.base import TableNames
from scaling.storage.memory import MemoryStorage
from scaling.storage.records import StoredState, parse_action
from scaling.storage.synthetic import policy_of, queue_sample, rules_target
from scaling.storage.tables import TableStorage
from tests.helpers import Clock

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
LEVELS = [0, 40, 500, 1500, 6000, 50_000]
START_CAPACITY = 2
LAG = timedelta(seconds=5)
MAX_DELAY_MINUTES = 2
MAX_CLOCK_OFFSET_SECONDS = 60
TABLE_EXAMPLES = int(os.environ.get("QUEUE_CHAOS_EXAMPLES", "50"))

TARGET_SETTINGS = st.fixed_dictionaries({
    "up_cooldown": st.sampled_from([0, 60]),
    "down_cooldown": st.sampled_from([0, 120]),
    "min_samples": st.integers(1, 3),
    "window_seconds": st.sampled_from([180, 600]),
})


def play_and_check(data, store, target) -> None:
    plans = InMemoryPlans()
    plans.add(target.plan.resource_id, START_CAPACITY, max_instances=30)
    writes: Counter = Counter()
    applying: dict[str, str] = {}
    plans.on_write = lambda resource_id, capacity: writes.update([applying["decision"]])
    store.commit(StoredState(ScalerState(target.name, capacity=START_CAPACITY)))
    clock = Clock(T0)
    policy = policy_of(target)
    evaluator = EvaluateService(store, policy, clock=clock)
    scaler = ScaleService(store, plans, policy, clock=clock)
    emitted = []
    pending: list[tuple[int, object]] = []  # (minute collected, sample)

    def evaluate(sample, at: datetime) -> None:
        offset = data.draw(st.integers(-MAX_CLOCK_OFFSET_SECONDS, MAX_CLOCK_OFFSET_SECONDS), label="clock offset")
        clock.now = at + LAG + timedelta(seconds=offset)
        outcome = evaluator.handle(sample.to_json())
        if outcome.status == "dead_lettered":
            assert "in the future" in outcome.error and sample.collected_at - clock.now > evaluator.clock_skew, outcome
            return
        assert outcome.status in ("evaluated", "duplicate", "late"), outcome
        emitted.extend(parse_action(message) for message in outcome.messages)

    def scale(actions: list) -> None:
        queue = list(actions)
        queue.extend(data.draw(st.lists(st.sampled_from(actions), max_size=2), label="duplicated actions") if actions else [])
        for action in data.draw(st.permutations(queue), label="action order"):
            applying["decision"] = action.decision_id
            scaler.handle(action.to_json())

    minutes = data.draw(st.integers(4, 14), label="minutes")
    for minute in range(minutes + MAX_DELAY_MINUTES + 1):
        now = T0 + timedelta(minutes=minute)
        if minute < minutes:
            backlog = data.draw(st.sampled_from(LEVELS), label="backlog")
            capacity = plans.plans[target.plan.resource_id].capacity
            stamp = now + timedelta(seconds=data.draw(
                st.integers(-MAX_CLOCK_OFFSET_SECONDS, MAX_CLOCK_OFFSET_SECONDS), label="collector clock offset"))
            sample = queue_sample(target.name, stamp, backlog, capacity)
            pending.append((minute, sample))
            if data.draw(st.booleans(), label="sample duplicated"):
                pending.append((minute, sample))
        due = [item for item in pending if minute - item[0] >= MAX_DELAY_MINUTES]
        maybe = [item for item in pending if minute - item[0] < MAX_DELAY_MINUTES]
        chosen = data.draw(st.lists(st.booleans(), min_size=len(maybe), max_size=len(maybe)), label="deliver now")
        delivered = due + [item for item, now_or_later in zip(maybe, chosen, strict=True) if now_or_later]
        pending = [item for item in pending if not any(item is d for d in delivered)]
        before = len(emitted)
        for _, sample in data.draw(st.permutations(delivered), label="delivery order"):
            evaluate(sample, now)
        clock.now = now + timedelta(seconds=30)
        scale(emitted[before:])

    capacities = defaultdict(set)
    for action in emitted:
        capacities[action.decision_id].add(action.target_capacity)
    rows = store.decisions(target.name)
    for row in rows:
        if row.acts:
            capacities[row.decision_id].add(row.capacity_after)
    assert all(len(values) == 1 for values in capacities.values()), dict(capacities)
    assert all(count == 1 for count in writes.values()), writes
    assert not [row for row in rows if row.reason_code == EXTERNAL_CHANGE], \
        [(row.decision_id, row.reasons) for row in rows if row.reason_code == EXTERNAL_CHANGE]
    if emitted:
        newest = max(emitted, key=lambda action: action.decided_at)
        assert plans.plans[target.plan.resource_id].capacity == newest.target_capacity


@settings(max_examples=200, deadline=None)
@given(data=st.data(), knobs=TARGET_SETTINGS)
def test_one_capacity_per_decision_id_in_memory(data, knobs):
    target = rules_target("orders", max_instances=8, **knobs)
    play_and_check(data, MemoryStorage(), target)


_names = itertools.count()


@pytest.fixture(scope="module")
def identity_tables(azurite):
    tables = TableStorage.from_connection_string(azurite.connection_string, TableNames.with_prefix("ident"))
    tables.ensure_tables()
    yield tables
    tables.close()


@settings(max_examples=TABLE_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), knobs=TARGET_SETTINGS)
def test_one_capacity_per_decision_id_on_table_storage(identity_tables, data, knobs):
    target = rules_target(f"ident{next(_names)}", max_instances=8, **knobs)  # a fresh partition per example
    play_and_check(data, identity_tables, target)
