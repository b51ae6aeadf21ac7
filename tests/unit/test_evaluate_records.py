"""Pure parts of the storage layer: action schema, state documents, keys, chunking."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.decisions import ScalerState, restore_learning
from scaling.domain.reconcile import DesiredCapacity
from scaling.storage.base import (
    MAX_PROPERTY_CHARS,
    EntityTooLarge,
    history_row_key,
    join_text,
    partition_key,
    split_text,
    target_from_key,
)
from scaling.storage.records import (
    ActionError,
    ActionMessage,
    StoredState,
    decision_row_key,
    parse_action,
    state_from_dict,
    state_to_dict,
    stored_state_from_document,
    stored_state_to_document,
)
from scaling.storage.synthetic import queue_sample

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def action(**changes) -> ActionMessage:
    values = dict(decision_id="abc123", target="orders", plan_resource_id="/subscriptions/s/resourceGroups/g/providers/"
                  "Microsoft.Web/serverfarms/p", target_capacity=3, direction="up", reason="rule_scale_up: x", decided_at=T0)
    values.update(changes)
    return ActionMessage(**values)


def test_action_message_round_trips_with_the_documented_fields():
    message = action(decided_at=T0 + timedelta(microseconds=123456))
    document = json.loads(message.to_json())
    assert set(document) == {"schema_version", "decision_id", "target", "plan_resource_id", "target_capacity",
                             "direction", "reason", "decided_at"}
    assert document["target_capacity"] == 3 and document["schema_version"] == 1
    assert parse_action(message.to_json()) == message


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("not json", "not valid JSON"),
        ("[1]", "JSON object"),
        (json.dumps({**action().to_dict(), "schema_version": 2}), "schema_version 2"),
        (json.dumps({k: v for k, v in action().to_dict().items() if k != "target"}), "target is missing"),
        (json.dumps({**action().to_dict(), "target_capacity": -1}), "positive integer"),
        (json.dumps({**action().to_dict(), "target_capacity": "3"}), "positive integer"),
        (json.dumps({**action().to_dict(), "target_capacity": 2.5}), "positive integer"),
        (json.dumps({**action().to_dict(), "direction": "sideways"}), "direction"),
        (json.dumps({**action().to_dict(), "decided_at": "yesterday"}), "decided_at"),
    ],
)
def test_malformed_actions_name_the_problem(body, fragment):
    with pytest.raises(ActionError, match=fragment):
        parse_action(body)


def test_state_document_round_trips_every_field_including_times():
    state = ScalerState("orders", capacity=4, ready_capacity=3, pending_ready_at=T0, last_action_at=T0 - timedelta(seconds=5),
                        last_direction="up", last_decision_id="d1", last_reason_code="rule_scale_up",
                        last_sample_at=T0, throughput_per_instance=12.5, throughput_observations=3)
    assert state_from_dict(json.loads(json.dumps(state_to_dict(state))), "orders") == state


def test_unknown_state_keys_are_ignored_and_missing_ones_default():
    assert state_from_dict({"capacity": 2, "from_the_future": 1}, "t") == ScalerState("t", capacity=2)


def test_stored_state_document_round_trips_outbox_and_evaluated_set():
    stored = StoredState(ScalerState("orders", capacity=2), etag="e1", evaluated=frozenset({1, 2, 3}),
                         latest_decision_id="abc123", latest_decided_at=T0, retention_at=T0, updated_at=T0)
    stored = stored.with_outbox("sample-1", action())
    again = stored_state_from_document(json.loads(json.dumps(stored_state_to_document(stored))), "orders", "e1")
    assert again == stored
    assert again.outbox_for("sample-1") == action()
    assert again.outbox_for("sample-2") is None


def test_desired_capacity_round_trips_with_the_writes_still_in_flight():
    desired = DesiredCapacity(8, "d2", T0, 4, T0, earlier_capacities=(6, 3))
    stored = StoredState(ScalerState("orders", capacity=2), desired=desired)
    again = stored_state_from_document(json.loads(json.dumps(stored_state_to_document(stored))), "orders", None)
    assert again.desired == desired
    older = stored_state_to_document(stored)
    del older["desired"]["earlier_capacities"]  # a state written before the field existed
    assert stored_state_from_document(older, "orders", None).desired.earlier_capacities == ()


def test_outbox_keeps_only_the_newest_actions():
    stored = StoredState(ScalerState("orders"))
    for index in range(20):
        stored = stored.with_outbox(f"s{index}", action(decision_id=f"d{index}"))
    assert len(stored.outbox) == 8
    assert stored.outbox_for("s19").decision_id == "d19"
    assert stored.outbox_for("s0") is None


def test_evaluated_set_forgets_samples_before_the_window():
    stored = StoredState(ScalerState("orders"))
    for minute in range(30):
        stored = stored.with_evaluated(T0 + timedelta(minutes=minute), keep_after=T0 + timedelta(minutes=minute - 10))
    assert stored.was_evaluated(T0 + timedelta(minutes=29))
    assert stored.was_evaluated(T0 + timedelta(minutes=20))
    assert not stored.was_evaluated(T0 + timedelta(minutes=5))
    assert len(stored.evaluated) == 10


def test_restore_learning_keeps_learned_fields_only():
    old = ScalerState("t", capacity=2, throughput_per_instance=10.0, throughput_observations=4)
    new = ScalerState("t", capacity=3, throughput_per_instance=99.0, throughput_observations=5, last_reason_code="x")
    restored = restore_learning(new, old)
    assert (restored.capacity, restored.last_reason_code) == (3, "x")
    assert (restored.throughput_per_instance, restored.throughput_observations) == (10.0, 4)


def test_history_row_keys_sort_by_collection_time_and_are_stable_per_sample():
    samples = [queue_sample("orders", T0 + timedelta(seconds=offset), 1) for offset in (3600, 5, 59, 60, 86400 * 400)]
    keys = [history_row_key(sample) for sample in samples]
    assert sorted(keys) == [history_row_key(s) for s in sorted(samples, key=lambda s: s.collected_at)]
    assert history_row_key(queue_sample("orders", T0, 999)) == history_row_key(queue_sample("orders", T0, 1))


def test_decision_row_keys_sort_by_time():
    first = decision_row_key(T0, "zzz")
    second = decision_row_key(T0 + timedelta(milliseconds=1), "aaa")
    assert first < second and first.startswith("d-")


@pytest.mark.parametrize("name", ["orders", "a/b", "with#hash", "q?x", "back\\slash", "100%", "tab\there", "ünï"])
def test_partition_keys_avoid_forbidden_characters_and_round_trip(name):
    key = partition_key(name)
    assert not any(char in key for char in "/\\#?\t")
    assert target_from_key(key) == name


def test_long_text_is_split_over_properties_and_joined_back():
    text = "x" * (MAX_PROPERTY_CHARS * 2 + 17)
    properties = split_text("sample", text)
    assert properties["sample_parts"] == 3
    assert all(len(value) <= MAX_PROPERTY_CHARS for key, value in properties.items() if key != "sample_parts")
    assert join_text(dict(properties), "sample") == text
    assert split_text("s", "short") == {"s": "short"}
    with pytest.raises(EntityTooLarge):
        split_text("sample", "x" * (MAX_PROPERTY_CHARS * 16))


def test_decision_metrics_are_shown_compactly():
    from scaling.storage.cli import format_metrics

    rules = {"capacity": 2, "backlog": 1200, "throughput_source": "learned", "rules": {
        "seed": {"metric": "backlog", "scale_up_value": 1100.0, "scale_down_value": 900.0, "samples": 5,
                 "scale_up_above": 1000, "scale_down_below": 100}}}
    assert format_metrics(rules) == "backlog=1200 seed.up=1100 seed.down=900"
    slo = {"backlog": 10, "arrival_rate": 12.3456789, "oldest_age_seconds": 40.0, "age_limit_seconds": 240,
           "throughput_per_instance": None}
    assert format_metrics(slo) == "backlog=10 arrival_rate=12.3457 oldest_age_seconds=40"
