"""Property: whatever the queues do (duplicate, reorder, deliver late, lose an output and
redeliver the sample, duplicate and reorder actions), evaluate + scale end where the rule
engine says, never write the plan twice for one decision, and lose no decision.

The model the outcome is compared with is the pure rule engine folded over the samples in the
order of their *first* delivery, each evaluated over every sample delivered so far (the window
by collection time) at the delivery's clock; a sample older than the window is only stored,
and a decision id already acted on does not act again. When the first deliveries come in time
order (any duplicates, losses and action chaos allowed), this is exactly the engine folded over
the de-duplicated, time-ordered samples, and the test checks that too. (A sample that arrives
after a newer one cannot undo an action already taken; it joins the window of the evaluations
that follow, which is what the model does.)

The property runs 200 examples against the in-memory store (same conditions as Table storage:
ETags, create-if-absent, atomic commit) and 50 against real Table storage on Azurite (200 with
``make test-deep``).
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaling.domain.decisions import Decision, ScalerState, restore_learning
from scaling.domain.engine import evaluate
from scaling.plans.memory import InMemoryPlans
from scaling.services.evaluate import EvaluateService
from scaling.services.scale import ScaleService
from scaling.storage.base import TableNames
from scaling.storage.memory import MemoryStorage
from scaling.storage.records import APPLIED, STALE, UNCHANGED, StoredState, parse_action
from scaling.storage.synthetic import policy_of, queue_sample, rules_target
from scaling.storage.tables import TableStorage

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
LEVELS = [0, 40, 500, 1500, 6000]
START_CAPACITY = 2
LAG = timedelta(seconds=5)
MAX_DEQUEUE = 4
#: Examples against Table storage on Azurite (``QUEUE_CHAOS_EXAMPLES``; ``make test-deep`` runs 200):
#: the in-memory store, which keeps the same conditions, always runs 200.
TABLE_EXAMPLES = int(os.environ.get("QUEUE_CHAOS_EXAMPLES", "50"))


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Run:
    decisions_logged: list = field(default_factory=list)
    first_deliveries: list[tuple[int, datetime]] = field(default_factory=list)
    emitted: list[str] = field(default_factory=list)
    writes: Counter = field(default_factory=Counter)
    applied: dict = field(default_factory=dict)
    final_capacity: int = 0
    dead_letters: int = 0


def model(target, samples, first_deliveries) -> tuple[list[Decision], ScalerState]:
    """The rule engine alone, folded over the first deliveries (see the module docstring)."""
    state = ScalerState(target.name, capacity=START_CAPACITY)
    seen, decisions, latest = [], [], None
    for index, now in first_deliveries:
        seen.append(samples[index])
        if samples[index].collected_at <= now - timedelta(seconds=target.window_seconds):
            continue
        at = latest + timedelta(milliseconds=1) if latest is not None and now <= latest else now
        decision = evaluate(target, state, seen, at)
        if decision.acts and decision.decision_id == state.last_decision_id:
            continue
        new_state = decision.state
        if state.last_sample_at is not None and new_state.last_sample_at <= state.last_sample_at:
            new_state = restore_learning(new_state, state)
        if decision.acts:
            decisions.append(decision)
            latest = decision.evaluated_at
        state = new_state
    return decisions, state


def time_ordered_fold(target, samples) -> list[Decision]:
    """The rule engine over the de-duplicated samples in collection order, nothing else."""
    state = ScalerState(target.name, capacity=START_CAPACITY)
    decisions = []
    for index, sample in enumerate(samples):
        decision = evaluate(target, state, samples[: index + 1], sample.collected_at + LAG)
        if decision.acts:
            decisions.append(decision)
        state = decision.state
    return decisions


def play(data, store, target) -> tuple[Run, list]:
    """Drive evaluate and scale through one random schedule drawn from ``data``."""
    count = data.draw(st.integers(3, 12), label="samples")
    backlogs = data.draw(st.lists(st.sampled_from(LEVELS), min_size=count, max_size=count), label="backlogs")
    samples = [queue_sample(target.name, T0 + timedelta(minutes=i), b) for i, b in enumerate(backlogs)]
    if data.draw(st.booleans(), label="time ordered"):
        order = list(range(count))
    else:
        order = data.draw(st.permutations(range(count)), label="order")
    deliveries = [(index, 1) for index in order]
    for _ in range(data.draw(st.integers(0, count), label="duplicates")):
        index = data.draw(st.sampled_from(order), label="duplicate of")
        deliveries.insert(data.draw(st.integers(0, len(deliveries)), label="duplicate at"), (index, 1))

    clock = Clock()
    plans = InMemoryPlans()
    plans.add(target.plan.resource_id, START_CAPACITY, max_instances=30)
    current = {}
    plans.on_write = lambda resource_id, capacity: run.writes.update([current["decision"]])
    store.commit(StoredState(ScalerState(target.name, capacity=START_CAPACITY)))
    policy = policy_of(target)
    evaluator = EvaluateService(store, policy, clock=clock)
    scaler = ScaleService(store, plans, policy, clock=clock)
    run = Run()

    actions: list[str] = []
    delivered: set[int] = set()
    newest = None

    def scale_one() -> None:
        position = data.draw(st.integers(0, len(actions) - 1), label="action")
        message = actions.pop(position)
        current["decision"] = parse_action(message).decision_id
        outcome = scaler.handle(message)
        if outcome.status in (APPLIED, UNCHANGED, STALE):
            run.applied.setdefault(outcome.decision_id, outcome.status)

    while deliveries:
        index, dequeue_count = deliveries.pop(0)
        sample = samples[index]
        newest = sample.collected_at if newest is None else max(newest, sample.collected_at)
        clock.now = newest + LAG
        if index not in delivered:
            delivered.add(index)
            run.first_deliveries.append((index, clock.now))
        outcome = evaluator.handle(sample.to_json(), dequeue_count=dequeue_count)
        run.dead_letters += outcome.status == "dead_lettered"
        if outcome.messages:
            if dequeue_count < MAX_DEQUEUE and data.draw(st.booleans(), label="output lost"):
                at = data.draw(st.integers(0, len(deliveries)), label="redelivered at")
                deliveries.insert(at, (index, dequeue_count + 1))
            else:
                run.emitted.extend(outcome.messages)
                actions.extend(outcome.messages)
                if data.draw(st.booleans(), label="action duplicated"):
                    actions.extend(outcome.messages)
        for _ in range(data.draw(st.integers(0, len(actions)), label="scale now")):
            scale_one()
    while actions:
        scale_one()
    run.final_capacity = plans.plans[target.plan.resource_id].capacity
    run.decisions_logged = [row for row in store.decisions(target.name) if row.acts]
    return run, samples


def check(run: Run, samples, target) -> None:
    assert run.dead_letters == 0
    expected, _ = model(target, samples, run.first_deliveries)
    logged = [(row.decision_id, row.capacity_after) for row in run.decisions_logged]
    assert logged == [(d.decision_id, d.target_capacity) for d in expected]
    # the plan is written at most once per decision
    assert all(writes == 1 for writes in run.writes.values()), run.writes
    # no decision is lost: each was applied (or found in place), or skipped as older than a newer one
    for decision in expected:
        assert run.applied.get(decision.decision_id) in (APPLIED, UNCHANGED, STALE), decision.decision_id
    if expected:
        assert run.applied[expected[-1].decision_id] in (APPLIED, UNCHANGED)
    # the plan ends where the engine says
    assert run.final_capacity == (expected[-1].target_capacity if expected else START_CAPACITY)
    assert {parse_action(m).decision_id for m in run.emitted} <= {d.decision_id for d in expected}
    if [index for index, _ in run.first_deliveries] == sorted(index for index, _ in run.first_deliveries):
        plain = time_ordered_fold(target, samples)
        assert [(d.decision_id, d.target_capacity) for d in plain] == [(d.decision_id, d.target_capacity) for d in expected]


TARGET_SETTINGS = st.fixed_dictionaries({
    "up_cooldown": st.sampled_from([0, 120]),
    "down_cooldown": st.sampled_from([0, 60, 180]),
    "min_samples": st.integers(1, 3),
    "window_seconds": st.sampled_from([180, 300]),
})


@settings(max_examples=200, deadline=None)
@given(data=st.data(), knobs=TARGET_SETTINGS)
def test_queue_chaos_never_changes_the_outcome_in_memory(data, knobs):
    target = rules_target("orders", max_instances=6, **knobs)
    run, samples = play(data, MemoryStorage(), target)
    check(run, samples, target)


_names = itertools.count()


@pytest.fixture(scope="module")
def shared_tables(azurite):
    tables = TableStorage.from_connection_string(azurite.connection_string, TableNames.with_prefix("prop"))
    tables.ensure_tables()
    yield tables
    tables.close()


@settings(max_examples=TABLE_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), knobs=TARGET_SETTINGS)
def test_queue_chaos_never_changes_the_outcome_on_table_storage(shared_tables, data, knobs):
    target = rules_target(f"target{next(_names)}", max_instances=6, **knobs)  # a fresh partition per example
    run, samples = play(data, shared_tables, target)
    check(run, samples, target)
