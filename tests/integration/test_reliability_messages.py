"""Nothing poisons, nothing is lost (issue 11 cases 4, 5, 6): malformed samples and actions are
dead-lettered once with their error, poison queues are drained into the dead-letter table,
``dead-letters`` lists and replays, and a running worker recovers when storage comes back empty.
Real Azurite tables and queues; the functions are invoked as the host would invoke them."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta

import pytest
from azure.functions.queue import QueueMessage

from scaling.commands import dead_letters as dead_letters_command
from scaling.domain.decisions import ScalerState
from scaling.functions import poison as poison_module
from scaling.plans.memory import InMemoryPlans
from scaling.services.dead_letters import DeadLetterService, LastErrors
from scaling.services.evaluate import EvaluateService
from scaling.services.scale import ScaleService
from scaling.settings import StorageSettings
from scaling.storage.base import TableNames
from scaling.storage.factory import build_queue_client
from scaling.storage.records import StoredState
from scaling.storage.synthetic import hub_sample, policy_of, queue_sample, rules_target
from scaling.storage.tables import TableStorage
from tests.helpers import Clock, app_function

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def valid_sample() -> dict:
    return json.loads(hub_sample("orders", T0, [10, 20], capacity=2).to_json())


def mutated(**changes) -> str:
    document = valid_sample()
    for path, value in changes.items():
        node = document
        *parents, leaf = path.split(".")
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[leaf] = value
    document.pop("sample_id", None)
    return json.dumps(document)


#: The malformed kinds seen to poison the queue on main before issue 11 (18 kinds).
MALFORMED_SAMPLES = {
    "collected_at offset out of range": mutated(collected_at="0001-01-01T00:00:00+23:59"),
    "collected_at year 9999": mutated(collected_at="9999-12-31T23:59:59-23:59"),
    "collected_at not a time": mutated(collected_at="yesterday"),
    "collected_at a number": mutated(collected_at=1714564800),
    "extra a list": mutated(extra=[1, 2]),
    "extra a string": mutated(extra="x"),
    "partitions an object": mutated(**{"sources.0.partitions": {"id": "0"}}),
    "partitions a string": mutated(**{"sources.0.partitions": "0,1"}),
    "notes a string": mutated(**{"sources.0.notes": "hello"}),
    "notes of objects": mutated(**{"sources.0.notes": [{"a": 1}]}),
    "unowned_partitions a number": mutated(**{"sources.0.unowned_partitions": 3}),
    "unowned_partitions of lists": mutated(**{"sources.0.unowned_partitions": [[1]]}),
    "lone surrogate target": mutated(target="orders\udc80"),
    "capacity 1e300": mutated(capacity=1e300),
    "capacity 2**63": mutated(capacity=2**63),
    "owner an object": mutated(**{"sources.0.partitions.0.owner": {"id": 1}}),
    "source name a number": mutated(**{"sources.0.name": 7}),
    "error an object": mutated(**{"sources.0.error": {"why": "x"}}),
}


@pytest.fixture
def tables(azurite, unique_name):
    tables = TableStorage.from_connection_string(azurite.connection_string, TableNames.with_prefix(unique_name))
    tables.ensure_tables()
    yield tables
    tables.close()


@pytest.mark.parametrize("body", list(MALFORMED_SAMPLES.values()), ids=list(MALFORMED_SAMPLES))
def test_every_malformed_sample_is_dead_lettered_once_and_never_raises(tables, body) -> None:
    clock = Clock(T0 + timedelta(seconds=5))
    service = EvaluateService(tables, policy_of(rules_target("orders")), clock=clock)
    outcomes = [service.handle(body, dequeue_count=count, message_id="m-1") for count in (1, 2)]
    assert [outcome.status for outcome in outcomes] == ["dead_lettered", "dead_lettered"]
    [letter] = tables.dead_letters_for("evaluate")  # a redelivery is recorded once
    assert letter.error and letter.body


@pytest.mark.parametrize(
    ("change", "fragment"),
    [({"decision_id": "a/b"}, "decision_id"), ({"decided_at": "9999-12-31T23:59:59-23:59"}, "decided_at"),
     ({"target_capacity": 2**63}, "target_capacity"), ({"target": "x\udc80"}, "target"),
     ({"reason": ["no"]}, "reason")],
)
def test_malformed_actions_are_dead_lettered_once(tables, change, fragment) -> None:
    target = rules_target("orders")
    action = {"schema_version": 1, "decision_id": "4b0df8bfbb51ccbf1fe5b35f", "target": "orders",
              "plan_resource_id": target.plan.resource_id, "target_capacity": 3, "direction": "up",
              "reason": "test", "decided_at": "2024-05-01T12:00:00Z", **change}
    service = ScaleService(tables, InMemoryPlans(), policy_of(target), clock=Clock(T0))
    body = json.dumps(action)
    statuses = [service.handle(body, dequeue_count=count, message_id="a-1").status for count in range(1, 6)]
    assert statuses == ["dead_lettered"] * 5
    [letter] = tables.dead_letters_for("scale")
    assert fragment in letter.error


def test_a_sample_far_in_the_future_is_dead_lettered_and_displaces_nothing(tables) -> None:
    """Case 5: stamped 9 minutes ahead, it froze scaling and took the id of the real sample."""
    clock = Clock(T0)
    service = EvaluateService(tables, policy_of(rules_target("orders", min_samples=1)), clock=clock)
    future = queue_sample("orders", T0 + timedelta(minutes=9), 5000, capacity=2)
    assert service.handle(future.to_json()).status == "dead_lettered"
    assert "in the future" in tables.dead_letters_for("evaluate")[0].error
    clock.now = T0 + timedelta(minutes=9, seconds=5)
    real = queue_sample("orders", T0 + timedelta(minutes=9), 5000, capacity=2)
    outcome = service.handle(real.to_json())
    assert outcome.status == "evaluated" and outcome.action is not None  # acts at once, not frozen
    assert [sample.sample_id for sample in tables.load_window("orders", T0, T0 + timedelta(minutes=10))] == [real.sample_id]


def test_poison_messages_are_drained_into_the_dead_letter_table_with_the_last_error(tables) -> None:
    errors = LastErrors()
    body = queue_sample("orders", T0, 10, capacity=2).to_json()
    errors.remember(body, ConnectionError("storage unreachable"))
    previous = poison_module.set_service(DeadLetterService(tables, clock=Clock(T0), last_errors=errors))
    try:
        function = app_function("evaluate_poison").get_user_function()
        for _ in range(2):  # the host may deliver the poison message twice
            function(QueueMessage(id="p-1", body=body.encode(), dequeue_count=1))
        app_function("scale_poison").get_user_function()(QueueMessage(id="p-2", body=b"{}", dequeue_count=1))
    finally:
        poison_module.set_service(previous)
    [letter] = tables.dead_letters_for("evaluate")
    assert letter.origin == "poison" and letter.target == "orders" and letter.body == body
    assert "metrics-poison" in letter.error and "storage unreachable" in letter.error
    [other] = tables.dead_letters_for("scale")
    assert "actions-poison" in other.error and "not seen by this worker" in other.error


def test_dead_letters_command_lists_and_replays(azurite, tables, unique_name, capsys) -> None:
    service = EvaluateService(tables, policy_of(rules_target("orders")), clock=Clock(T0))
    service.handle(mutated(capacity=1e300), message_id="m-9")
    args = argparse.Namespace(target="orders", function=None, replay=None, connection_string=azurite.connection_string,
                              table=tables.names.dead_letters)
    assert dead_letters_command.run(args) == 0
    listing = capsys.readouterr().out
    [letter] = tables.dead_letters_for()
    assert "1 dead letter(s)" in listing and letter.letter_id[:12] in listing and "capacity must be at most" in listing
    storage = StorageSettings(azurite.connection_string, None, None, None, None, None)
    with build_queue_client(storage, "metrics") as queue:
        queue.create_queue() if not _exists(queue) else None
        queue.clear_messages()
        replay = argparse.Namespace(**{**vars(args), "replay": letter.letter_id[:8]})
        assert dead_letters_command.run(replay) == 0
        [message] = queue.receive_messages(messages_per_page=5, visibility_timeout=1)
        assert message.content == letter.body
    assert tables.dead_letters_for()[0].replayed_at is not None


def _exists(queue) -> bool:
    try:
        queue.get_queue_properties()
    except Exception:
        return False
    return True


def test_a_running_worker_recovers_when_storage_comes_back_empty(tables) -> None:
    """Case 6: after a restart with empty storage the cached worker failed 15 of 15 times."""
    clock = Clock(T0)
    target = rules_target("orders", min_samples=1)
    service = EvaluateService(tables, policy_of(target), clock=clock)
    tables.commit(StoredState(ScalerState("orders", capacity=2)))
    for index in range(3):
        clock.now = T0 + timedelta(minutes=index, seconds=5)
        assert service.handle(queue_sample("orders", T0 + timedelta(minutes=index), 500, 2).to_json()).status == "evaluated"
    for client in (tables.history, tables.state, tables.dead_letters, tables.applied):
        client.delete_table()  # what an Azurite restart on empty data looks like to the worker
    statuses = []
    for index in range(3, 6):
        clock.now = T0 + timedelta(minutes=index, seconds=5)
        statuses.append(service.handle(queue_sample("orders", T0 + timedelta(minutes=index), 5000, 2).to_json()).status)
    assert statuses == ["evaluated"] * 3
    assert tables.load_state("orders").etag is not None


@pytest.mark.parametrize(("oldest_after", "status"), [
    pytest.param(timedelta(days=1), "dead_lettered", id="a-day-after"),
    pytest.param(timedelta(seconds=61), "dead_lettered", id="past-the-tolerance"),
    pytest.param(timedelta(seconds=59), "evaluated", id="within-the-tolerance"),
    pytest.param(timedelta(hours=-5), "evaluated", id="five-hours-before"),
])
def test_a_queue_sample_whose_oldest_message_postdates_its_collection_is_dead_lettered(tables, oldest_after, status) -> None:
    """Issue 49: the oldest active message's enqueued time is read at collection; one dated after
    it (beyond the clock skew tolerated) is no reading, and would set the SLO mode's age."""
    from dataclasses import replace

    clock = Clock(T0 + timedelta(seconds=5))
    service = EvaluateService(tables, policy_of(rules_target("orders", min_samples=1)), clock=clock)
    sample = queue_sample("orders", T0, 5000, capacity=2)
    sample = replace(sample, sources=(replace(sample.sources[0], oldest_enqueued_at=T0 + oldest_after),))
    outcome = service.handle(sample.to_json())
    assert outcome.status == status
    if status == "dead_lettered":
        [letter] = tables.dead_letters_for("evaluate")
        assert "sources[0].oldest_enqueued_at" in letter.error and "after collected_at" in letter.error
        assert "clock skew is tolerated" in letter.error
