"""The evaluate function in-process (``function_app.app``) on real Table storage (Azurite):
round trips per sample, dead letters, the outbox after a failed send, two concurrent
evaluations of one target, and history retention."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from azure.functions.queue import QueueMessage

from scaling.domain.decisions import ScalerState
from scaling.functions import evaluate as evaluate_module
from scaling.services.evaluate import EvaluateService
from scaling.storage.base import TableNames
from scaling.storage.counting import CountingPolicy
from scaling.storage.records import StoredState, parse_action
from scaling.storage.synthetic import hub_sample, policy_of, queue_sample, rules_target
from scaling.storage.tables import TableStorage
from tests.helpers import Clock, app_function

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
HIGH = 5000


class Out:
    """What the host passes for an output binding: ``set`` records the value."""

    def __init__(self) -> None:
        self.value = None

    def set(self, value) -> None:
        self.value = value

    def get(self):
        return self.value


@pytest.fixture(scope="module")
def evaluate_function():
    return app_function("evaluate").get_user_function()


@pytest.fixture
def world(azurite, unique_name):
    counter = CountingPolicy()
    names = TableNames.with_prefix(unique_name)
    tables = TableStorage.from_connection_string(azurite.connection_string, names, per_call_policies=[counter])
    tables.ensure_tables()
    target = rules_target("orders", min_samples=3, up_cooldown=600)
    tables.commit(StoredState(ScalerState("orders", capacity=2)))
    counter.take()
    clock = Clock(T0)
    service = EvaluateService(tables, policy_of(target), clock=clock)
    previous = evaluate_module.set_service(service)
    yield {"tables": tables, "counter": counter, "clock": clock, "service": service, "names": names,
           "connection": azurite.connection_string, "target": target}
    evaluate_module.set_service(previous)
    tables.close()


def invoke(function, clock, sample, *, dequeue_count: int = 1, body: str | None = None):
    if sample is not None:
        clock.now = max(clock.now, sample.collected_at + timedelta(seconds=5))
    out = Out()
    message = QueueMessage(id="m", body=(body if body is not None else sample.to_json()).encode(),
                                dequeue_count=dequeue_count)
    function(message, out)
    return out.value or []


def minute(index: int) -> datetime:
    return T0 + timedelta(minutes=index)


def test_steady_state_costs_three_round_trips_per_sample(evaluate_function, world):
    """One insert, one window query, one transaction; the state is read once, then cached."""
    counts = []
    for index in range(12):
        invoke(evaluate_function, world["clock"], hub_sample("orders", minute(index), [100] * 16, capacity=2))
        counts.append(world["counter"].take())
    steady = counts[2:]
    assert all(sum(c.values()) == 3 for c in steady), steady
    assert all(c == {"insert": 1, "query": 1, "transaction": 1} for c in steady)
    # The first evaluation also reads the state and runs the hourly retention query.
    assert counts[0] == {"insert": 1, "get": 1, "query": 2, "transaction": 1}


def test_the_function_emits_one_absolute_action_and_logs_the_decision(evaluate_function, world):
    emitted = []
    for index, backlog in enumerate([HIGH, HIGH, HIGH, HIGH]):
        emitted += invoke(evaluate_function, world["clock"], queue_sample("orders", minute(index), backlog, capacity=2))
    [message] = emitted
    action = parse_action(message)
    assert (action.target, action.target_capacity, action.direction) == ("orders", 3, "up")
    assert action.plan_resource_id == world["target"].plan.resource_id
    rows = world["tables"].decisions("orders")
    assert [row.reason_code for row in rows] == ["too_few_samples", "rule_scale_up", "cooldown"]
    assert rows[1].action == action and rows[1].capacity_before == 2 and rows[1].capacity_after == 3


def test_malformed_messages_land_in_the_dead_letter_table_and_the_invocation_succeeds(evaluate_function, world):
    assert invoke(evaluate_function, world["clock"], None, body="{definitely not json") == []
    assert invoke(evaluate_function, world["clock"], None, body=json.dumps({"schema_version": 7})) == []
    letters = world["tables"].dead_letters_for("evaluate")
    assert sorted(letter.body for letter in letters) == sorted(['{definitely not json', '{"schema_version": 7}'])
    assert any("not valid JSON" in letter.error for letter in letters)
    assert any("schema_version 7" in letter.error for letter in letters)


def test_a_failed_send_is_repaired_by_the_redelivery_with_the_same_action(evaluate_function, world):
    """The output binding's send fails after the commit; the host redelivers the sample
    (dequeue count 2), and the recorded action is sent again instead of a new decision."""
    clock = world["clock"]
    for index in range(2):
        invoke(evaluate_function, clock, queue_sample("orders", minute(index), HIGH, capacity=2))
    sample = queue_sample("orders", minute(2), HIGH, capacity=2)
    [lost] = invoke(evaluate_function, clock, sample)  # pretend this message never reached the queue
    rows = len(world["tables"].decisions("orders"))
    clock.now += timedelta(minutes=2)
    [again] = invoke(evaluate_function, clock, sample, dequeue_count=2)
    assert again == lost
    assert len(world["tables"].decisions("orders")) == rows
    assert invoke(evaluate_function, clock, sample, dequeue_count=1) == []  # a plain duplicate sends nothing


def test_two_concurrent_evaluations_of_one_target_produce_one_action(world):
    """Eight workers (separate services, no shared cache) get the same acting sample at once."""
    for index in range(2):
        world["service"].handle(queue_sample("orders", minute(index), HIGH, capacity=2).to_json())
    sample = queue_sample("orders", minute(2), HIGH, capacity=2)
    world["clock"].now = sample.collected_at + timedelta(seconds=5)
    barrier = threading.Barrier(8)
    results = []

    def worker():
        tables = TableStorage.from_connection_string(world["connection"], world["names"])
        service = EvaluateService(tables, policy_of(world["target"]), clock=world["clock"])
        barrier.wait()
        results.append(service.handle(sample.to_json()))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    messages = [message for outcome in results for message in outcome.messages]
    assert len(messages) == 1, [outcome.status for outcome in results]
    assert sorted(outcome.status for outcome in results).count("evaluated") == 1
    assert sum(1 for row in world["tables"].decisions("orders") if row.acts) == 1


def test_two_concurrent_evaluations_of_different_samples_produce_one_action(world):
    """Two workers evaluate two new samples of one target at once: the ETag serialises them and
    the cooldown written by the first stops the second."""
    for index in range(2):
        world["service"].handle(queue_sample("orders", minute(index), HIGH, capacity=2).to_json())
    samples = [queue_sample("orders", minute(2), HIGH, capacity=2), queue_sample("orders", minute(3), HIGH, capacity=2)]
    world["clock"].now = minute(3) + timedelta(seconds=5)
    barrier = threading.Barrier(2)
    results = []

    def worker(sample):
        tables = TableStorage.from_connection_string(world["connection"], world["names"])
        service = EvaluateService(tables, policy_of(world["target"]), clock=world["clock"])
        barrier.wait()
        results.append(service.handle(sample.to_json()))

    threads = [threading.Thread(target=worker, args=(sample,)) for sample in samples]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(len(outcome.messages) for outcome in results) == 1
    assert all(outcome.status == "evaluated" for outcome in results)


def test_history_retention_removes_old_rows_without_a_separate_service(azurite, unique_name):
    tables = TableStorage.from_connection_string(azurite.connection_string, TableNames.with_prefix(unique_name))
    tables.ensure_tables()
    clock = Clock(T0)
    service = EvaluateService(tables, policy_of(rules_target("orders")), clock=clock, retention_days=1 / 24)
    for index in range(130):
        clock.now = minute(index) + timedelta(seconds=5)
        service.handle(queue_sample("orders", minute(index), 100, capacity=2).to_json())
    remaining = tables.load_window("orders", minute(-10), minute(200))
    assert remaining[0].collected_at >= minute(60) and remaining[-1].collected_at == minute(129)
    assert tables.load_state("orders").retention_at == minute(120) + timedelta(seconds=5)
    tables.close()


def test_an_slo_target_with_event_hubs_samples_round_trips_its_state_and_log(azurite, unique_name):
    """The default (SLO) mode learns state the rules mode does not (throughput, checkpoint
    delay, action budget); all of it survives Table storage, and decisions read back."""
    from scaling.domain.policy import Bounds, PlanSettings, SourceSettings, TargetPolicy
    from scaling.storage.synthetic import plan_id

    target = TargetPolicy(
        name="hub",
        plan=PlanSettings(plan_id("plan-hub")),
        sources=(SourceSettings(kind="eventhub", name="hub", fully_qualified_namespace="x.servicebus.windows.net",
                                event_hub_name="h", checkpoint_account_url="https://x.blob.core.windows.net"),),
        bounds=Bounds(1, 8),
    )
    tables = TableStorage.from_connection_string(azurite.connection_string, TableNames.with_prefix(unique_name))
    tables.ensure_tables()
    clock = Clock(T0)
    service = EvaluateService(tables, policy_of(target), clock=clock)
    position, checkpoint = 10_000, 9_000
    for index in range(25):
        position += 3_000
        checkpoint += 1_500 if index < 15 else 4_000
        backlogs = [max(position - checkpoint, 0) // 8] * 8
        sample = hub_sample("hub", minute(index), backlogs, capacity=2, position=position)
        clock.now = sample.collected_at + timedelta(seconds=5)
        service.handle(sample.to_json())
    service.forget()
    stored = tables.load_state("hub")
    assert stored.state.last_sample_at == minute(24)
    assert stored == tables.load_state("hub")
    rows = tables.decisions("hub")
    assert rows and all(row.reason_code for row in rows)
    tables.close()
