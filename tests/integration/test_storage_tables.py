"""TableStorage on a real Azurite: keys, range queries, chunking, ETags, transactions,
retention, dead letters and the applied-action claims. Each test uses fresh tables."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.decisions import ScalerState
from scaling.domain.forecast_record import SeasonalIndex, StoredProfile
from scaling.storage.base import ConcurrencyConflict, TableNames
from scaling.storage.records import (
    APPLIED,
    APPLYING,
    ActionMessage,
    AppliedRecord,
    DeadLetter,
    DecisionRecord,
    StoredState,
)
from scaling.storage.synthetic import hub_sample, queue_sample
from scaling.storage.tables import TableStorage

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def tables(azurite, unique_name):
    storage = TableStorage.from_connection_string(azurite.connection_string, TableNames.with_prefix(unique_name))
    storage.ensure_tables()
    yield storage
    storage.close()


def minute(index: int) -> datetime:
    return T0 + timedelta(minutes=index)


def decision(target: str, index: int, acts: bool = False) -> DecisionRecord:
    action = ActionMessage(f"d{index}", target, "/subscriptions/s/resourceGroups/g/providers/Microsoft.Web/serverfarms/p",
                           3, "up", "why", minute(index)) if acts else None
    return DecisionRecord(target, f"d{index}", minute(index), f"s{index}", acts, "up" if acts else "none", "code",
                          ("because",), {"backlog": {"scale_up_value": 1.5}}, 2, 3 if acts else 2, action)


def test_samples_are_created_once_and_read_back_by_collection_time(tables):
    for index in (3, 0, 2, 1, 9):  # arrival order differs from collection order
        assert tables.add_sample(queue_sample("orders", minute(index), 100 + index))
    assert not tables.add_sample(queue_sample("orders", minute(2), 999))  # duplicate: same id, nothing changes
    tables.add_sample(queue_sample("other", minute(1), 5))
    window = tables.load_window("orders", minute(0), minute(3))
    assert [s.collected_at for s in window] == [minute(0), minute(1), minute(2), minute(3)]
    assert [s.backlog for s in window] == [100, 101, 102, 103]
    assert all(s.target == "orders" for s in window)


def test_a_sample_larger_than_a_property_is_split_and_joined(tables):
    sample = hub_sample("big", minute(0), list(range(1024)), capacity=4)
    assert len(sample.to_json()) > 64_000
    tables.add_sample(sample)
    [back] = tables.load_window("big", minute(-1), minute(1))
    assert back == sample


def test_awkward_target_names_are_escaped(tables):
    name = "team/a#b?c's"
    tables.add_sample(queue_sample(name, minute(0), 7))
    assert [s.target for s in tables.load_window(name, minute(-1), minute(1))] == [name]
    saved = tables.commit(StoredState(ScalerState(name, capacity=1)))
    assert tables.load_state(name).etag == saved.etag


def test_state_commits_are_etag_guarded_and_atomic_with_decision_rows(tables):
    assert tables.load_state("orders").etag is None
    first = tables.commit(StoredState(ScalerState("orders", capacity=2)), [decision("orders", 0)])
    with pytest.raises(ConcurrencyConflict):
        tables.commit(StoredState(ScalerState("orders", capacity=9)))  # create again: exists
    second = tables.commit(replace(first, state=replace(first.state, capacity=3)), [decision("orders", 1, acts=True)])
    assert second.etag != first.etag
    with pytest.raises(ConcurrencyConflict):  # stale ETag: nothing of the transaction is written
        tables.commit(replace(first, state=replace(first.state, capacity=7)), [decision("orders", 2)])
    loaded = tables.load_state("orders")
    assert loaded.state.capacity == 3 and loaded.etag == second.etag
    assert [row.decision_id for row in tables.decisions("orders")] == ["d0", "d1"]
    acted = tables.decisions("orders")[1]
    assert acted.action.decision_id == "d1" and acted.metrics == {"backlog": {"scale_up_value": 1.5}}
    assert [row.decision_id for row in tables.decisions("orders", since=minute(1))] == ["d1"]


def test_outcomes_are_noted_on_existing_decision_rows_only(tables):
    tables.commit(StoredState(ScalerState("orders")), [decision("orders", 4, acts=True)])
    assert tables.record_outcome("orders", minute(4), "d4", "applied", "2 -> 3", minute(5))
    row = tables.decisions("orders")[0]
    assert (row.outcome, row.outcome_detail, row.outcome_at) == ("applied", "2 -> 3", minute(5))
    assert row.reasons == ("because",)
    assert not tables.record_outcome("orders", minute(6), "missing", "applied", None, minute(6))


def test_retention_deletes_a_bounded_number_of_old_rows(tables):
    for index in range(0, 250):
        tables.add_sample(queue_sample("orders", minute(index), 1))
    assert tables.purge_history("orders", minute(230), limit=150) == 150
    assert tables.purge_history("orders", minute(230), limit=150) == 80
    assert tables.purge_history("orders", minute(230), limit=150) == 0
    remaining = tables.load_window("orders", minute(-1), minute(300))
    assert remaining[0].collected_at == minute(230) and len(remaining) == 20


def test_dead_letters_keep_the_whole_body(tables):
    body = "x" * 70_000
    tables.dead_letter(DeadLetter("evaluate", body, "the message is not valid JSON", minute(0), 2, "m1"))
    [letter] = tables.dead_letters_for("evaluate")
    assert letter.body == body and letter.error.startswith("the message") and letter.dequeue_count == 2


def test_applied_claims_are_create_if_absent_and_etag_guarded(tables):
    record = AppliedRecord("orders", "d1", APPLYING, minute(0), 3, minute(1))
    claimed = tables.claim_applied(record)
    with pytest.raises(ConcurrencyConflict):
        tables.claim_applied(record)
    done = tables.save_applied(replace(claimed, status=APPLIED, capacity_before=2, capacity_after=3, finished_at=minute(2)))
    with pytest.raises(ConcurrencyConflict):
        tables.save_applied(claimed)  # stale ETag
    loaded = tables.get_applied("orders", "d1")
    assert loaded == done
    assert tables.get_applied("orders", "d2") is None


def test_factories_build_the_services_from_settings(azurite, unique_name):
    from scaling.bootstrap import evaluate_service_for, scale_service_for
    from scaling.plans.factory import build_plan_adapter
    from scaling.plans.local_arm import StaticTokenCredential
    from scaling.plans.memory import InMemoryPlans
    from scaling.settings import Settings, StorageSettings
    from scaling.storage.factory import build_queue_client, build_table_storage
    from scaling.storage.synthetic import policy_of, rules_target

    local = StorageSettings(azurite.connection_string, None, None, None, None, None)
    settings = Settings(policy=policy_of(rules_target("orders")), storage=local, dry_run=True,
                        arm_endpoint="https://management.example")
    names = TableNames.with_prefix(unique_name)
    evaluate = evaluate_service_for(settings, names=names)
    assert evaluate.handle(queue_sample("orders", datetime.now(UTC), 5).to_json()).status == "evaluated"
    scale = scale_service_for(settings, StaticTokenCredential(), plans=InMemoryPlans(), names=names)
    assert scale.dry_run and scale.store.names == names
    queue = build_queue_client(settings, unique_name)
    queue.create_queue()
    queue.send_message("hello")
    assert queue.receive_message().content == "hello"
    queue.close()

    adapter = build_plan_adapter(settings, StaticTokenCredential())
    assert adapter.base_url == "https://management.example"
    identity = StorageSettings(None, "acct", None, "https://acct.queue.core.windows.net",
                               "https://acct.table.core.windows.net", "client-id")
    tables = build_table_storage(identity, StaticTokenCredential(), ensure=False)  # no I/O
    assert tables.history.url.startswith("https://acct.table.core.windows.net")
    assert tables.history.table_name == "metrichistory"


def test_the_look_ahead_profile_round_trips_beside_the_state_and_out_of_the_decision_log(tables):
    weekly = SeasonalIndex(10_080, 7, tuple(round(1 + 0.5 * ((index % 97) / 97), 4) for index in range(1440)))
    daily = SeasonalIndex(1440, 1, tuple(round(0.5 + index / 1440, 4) for index in range(1440)))
    profile = StoredProfile("orders", minute(90), minute(-30 * 1440), 30 * 1440, True, (), (1440, 10_080),
                            (daily, weekly), 0.1, 0.2)
    assert tables.load_profile("orders") is None
    tables.commit(StoredState(ScalerState("orders", capacity=2)), [decision("orders", 1)])
    tables.save_profile(profile)
    assert tables.load_profile("orders") == profile
    untrusted = StoredProfile("orders", minute(150), minute(0), 100, False, ("history 100 min < 2880", "no period"))
    tables.save_profile(untrusted)  # a refit replaces it
    assert tables.load_profile("orders") == untrusted
    assert [row.decision_id for row in tables.decisions("orders")] == ["d1"]
    assert tables.load_state("orders").state.capacity == 2
    assert tables.load_profile("other") is None
