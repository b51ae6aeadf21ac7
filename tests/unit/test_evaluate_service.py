"""The evaluate service on the in-memory store: validation, dead letters, duplicates, late
samples, the outbox, the decision log, retention and optimistic concurrency.

The same service runs on real Table storage (Azurite) in tests/integration/test_evaluate_*.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.decisions import ScalerState
from scaling.services.evaluate import EvaluateService
from scaling.storage.base import ConcurrencyConflict
from scaling.storage.memory import MemoryStorage
from scaling.storage.records import OUTBOX_KEEP, StoredState, parse_action
from scaling.storage.synthetic import policy_of, queue_sample, rules_target
from tests.helpers import Clock

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
HIGH, LOW = 5000, 10


def make(target=None, capacity: int = 2, store=None, **service_kwargs):
    target = target or rules_target("orders", window_seconds=300, min_samples=3, up_cooldown=0, down_cooldown=120)
    store = store or MemoryStorage()
    store.commit(StoredState(ScalerState(target.name, capacity=capacity)))
    clock = Clock(T0)
    service = EvaluateService(store, policy_of(target), clock=clock, **service_kwargs)
    return service, store, clock


def deliver(service, clock, sample, *, lag=timedelta(seconds=5), dequeue_count=1):
    clock.now = max(clock.now, sample.collected_at + lag)
    return service.handle(sample.to_json(), dequeue_count=dequeue_count)


def minute(index: int) -> datetime:
    return T0 + timedelta(minutes=index)


# --- validation and dead letters ----------------------------------------------------------------

GOOD = json.loads(queue_sample("orders", T0, 10).to_json())


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (json.dumps({**GOOD, "schema_version": 99}), "schema_version 99"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "sources"}), "sources is missing"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "collected_at"}), "collected_at is missing"),
        (json.dumps({**GOOD, "capacity": -2}), "capacity must be at least 0"),
        (json.dumps({**GOOD, "capacity": "two"}), "capacity must be an integer"),
        (json.dumps({**GOOD, "sources": [{**GOOD["sources"][0], "active_messages": -5}]}), "active_messages"),
        (json.dumps({**GOOD, "collected_at": "2024-05-02T12:00:00Z", "sample_id": None}), "in the future"),
        (json.dumps({**GOOD, "target": "nobody", "sample_id": None}), "not in the policy"),
    ],
)
def test_malformed_messages_are_dead_lettered_with_body_and_error(body, fragment):
    service, store, clock = make()
    clock.now = T0 + timedelta(seconds=5)
    outcome = service.handle(body, dequeue_count=3, message_id="m-1")
    assert outcome.status == "dead_lettered"
    assert fragment in outcome.error
    [letter] = store.letters
    assert letter.function == "evaluate" and fragment in letter.error
    assert letter.body == (body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body)
    assert (letter.received_at, letter.dequeue_count, letter.message_id) == (clock.now, 3, "m-1")
    assert store.history == {} and store.calls.get("commit", 0) == 1  # only the seeding commit


# --- duplicates, late samples -------------------------------------------------------------------


def test_a_duplicate_sample_changes_nothing():
    service, store, clock = make()
    sample = queue_sample("orders", minute(0), 100)
    assert deliver(service, clock, sample).status == "evaluated"
    state_before, commits = store.states["orders"], store.calls["commit"]
    again = deliver(service, clock, sample)
    assert again.status == "duplicate" and again.messages == ()
    assert store.states["orders"] == state_before and store.calls["commit"] == commits
    assert len(store.history["orders"]) == 1


def test_a_duplicate_evaluates_if_the_first_delivery_never_committed():
    service, store, clock = make()
    sample = queue_sample("orders", minute(0), 100)
    store.add_sample(sample)  # the first delivery stored the sample, then its worker died
    outcome = deliver(service, clock, sample)
    assert outcome.status == "evaluated"
    assert store.states["orders"].was_evaluated(sample.collected_at)


def test_a_sample_older_than_the_window_is_stored_but_not_evaluated():
    service, store, clock = make()
    deliver(service, clock, queue_sample("orders", minute(30), 100))
    old = queue_sample("orders", minute(0), 100)
    commits = store.calls["commit"]
    outcome = service.handle(old.to_json())
    assert outcome.status == "late"
    assert store.calls["commit"] == commits
    assert any(s.sample_id == old.sample_id for s in store.history["orders"].values())


def test_late_samples_join_the_window_by_collection_time():
    """Minutes 0 and 2 arrive, then minute 1 late: the third sample completes the window and the
    decision belongs to the window's newest sample (minute 2)."""
    service, store, clock = make()
    assert deliver(service, clock, queue_sample("orders", minute(0), HIGH)).decision.reason_code == "too_few_samples"
    assert deliver(service, clock, queue_sample("orders", minute(2), HIGH)).decision.reason_code == "too_few_samples"
    late = deliver(service, clock, queue_sample("orders", minute(1), HIGH))
    assert late.status == "evaluated" and late.action is not None
    newest = queue_sample("orders", minute(2), HIGH)
    from scaling.domain.decisions import decision_id_for

    assert late.action.decision_id == decision_id_for("orders", newest.sample_id)
    assert late.action.target_capacity == 3


def test_a_late_sample_never_repeats_a_decision_already_taken():
    """Scale-up cooldown 0: re-evaluating the same newest sample would decide the same action
    again (its capacity still says 2); the decision id is the same, so it does not act."""
    service, store, clock = make()
    for index in (0, 1, 3):
        outcome = deliver(service, clock, queue_sample("orders", minute(index), HIGH))
    assert outcome.action is not None and outcome.action.target_capacity == 3
    late = deliver(service, clock, queue_sample("orders", minute(2), HIGH))
    assert late.status == "evaluated" and late.action is None and late.messages == ()
    assert store.states["orders"].state.capacity == 3
    assert sum(1 for row in store.decisions("orders") if row.acts) == 1


# --- the outbox -------------------------------------------------------------------------------------


def acting_run(service, clock):
    outcome = None
    for index in range(3):
        outcome = deliver(service, clock, queue_sample("orders", minute(index), HIGH))
    assert outcome.action is not None
    return queue_sample("orders", minute(2), HIGH), outcome


def test_a_redelivered_sample_resends_the_recorded_action_without_deciding_again():
    service, store, clock = make()
    sample, first = acting_run(service, clock)
    commits, rows = store.calls["commit"], len(store.decisions("orders"))
    clock.now += timedelta(minutes=3)  # the redelivery comes later; the cooldown would differ now
    again = service.handle(sample.to_json(), dequeue_count=2)
    assert again.status == "resent"
    assert again.messages == first.messages
    assert store.calls["commit"] == commits and len(store.decisions("orders")) == rows


def test_a_plain_duplicate_of_an_acting_sample_sends_nothing():
    service, _, clock = make()
    sample, _ = acting_run(service, clock)
    assert service.handle(sample.to_json(), dequeue_count=1).messages == ()


def test_a_superseded_action_is_still_resent_for_its_own_sample():
    service, _, clock = make()
    sample, first = acting_run(service, clock)
    newer = deliver(service, clock, queue_sample("orders", minute(3), HIGH))
    assert newer.action is not None and newer.action.target_capacity == 4
    again = service.handle(sample.to_json(), dequeue_count=4)
    assert again.status == "resent" and parse_action(again.messages[0]) == first.action


def _outbox_moved_on(store=None):
    """Sample 3 of twelve decides a scale-out; the eight acting samples after it push it out of
    the outbox (``OUTBOX_KEEP``), and by the end it is older than the window."""
    target = rules_target("orders", window_seconds=180, min_samples=2, up_cooldown=0, down_cooldown=0)
    service, store, clock = make(target, store=store)
    outcomes = [deliver(service, clock, queue_sample("orders", minute(index), backlog))
                for index, backlog in enumerate([0, 500, 0, 6000, 0, 0, 0, 0, 0, 0, 6000, 0])]
    sample = queue_sample("orders", minute(3), 6000)
    assert outcomes[3].action is not None
    assert sum(outcome.action is not None for outcome in outcomes[4:]) >= OUTBOX_KEEP
    assert store.load_state("orders").outbox_for(sample.sample_id) is None
    return service, sample, outcomes[3]


def test_a_redelivery_after_the_outbox_moved_on_resends_the_action_from_the_decision_log():
    """Found by the queue-chaos property: the sample's output was lost, and by its redelivery
    eight newer actions had pushed its own out of the outbox, so nothing was sent and scale never
    recorded that decision's fate (stale: older than the applied ones)."""
    service, sample, first = _outbox_moved_on()
    again = service.handle(sample.to_json(), dequeue_count=2)
    assert again.status == "resent"
    assert parse_action(again.messages[0]) == first.action


class _LogDown(MemoryStorage):
    def decisions(self, target, since=None, limit=None):
        raise ConnectionError("table storage unreachable")


def test_a_redelivery_whose_decision_log_cannot_be_read_sends_nothing_and_does_not_fail():
    service, sample, _ = _outbox_moved_on(_LogDown())
    again = service.handle(sample.to_json(), dequeue_count=2)
    assert again.status == "late" and again.messages == ()


# --- the decision log -----------------------------------------------------------------------------


def test_the_log_has_every_action_and_every_change_of_reason_while_holding():
    service, store, clock = make(rules_target("orders", min_samples=3, up_cooldown=600))
    for index, backlog in enumerate([500, 500, 500, 500, HIGH, HIGH, 500, 500]):
        deliver(service, clock, queue_sample("orders", minute(index), backlog))
    rows = store.decisions("orders")
    codes = [row.reason_code for row in rows]
    assert codes == ["too_few_samples", "within_thresholds", "rule_scale_up", "cooldown"]
    assert "cooldown until" in rows[-1].reasons[-1]
    acted = [row for row in rows if row.acts]
    assert len(acted) == 1 and (acted[0].capacity_before, acted[0].capacity_after) == (2, 3)
    assert acted[0].metrics["rules"]["queue"]["scale_up_value"] > 1000 and acted[0].metrics["backlog"] == HIGH
    assert acted[0].action is not None and acted[0].action.decision_id == acted[0].decision_id
    holds = [row for row in rows if not row.acts]
    assert all(row.capacity_before == row.capacity_after for row in holds)


# --- retention ----------------------------------------------------------------------------------------


def test_history_retention_runs_at_most_hourly_and_removes_old_rows():
    service, store, clock = make(retention_days=1 / 24, retention_limit=1000)
    for index in range(150):
        deliver(service, clock, queue_sample("orders", minute(index), 500))
    assert store.calls["purge_history"] == 3  # minutes 0, 60 and 120
    remaining = sorted(s.collected_at for s in store.history["orders"].values())
    assert remaining[0] >= minute(120) - timedelta(hours=1)
    assert store.states["orders"].retention_at == minute(120) + timedelta(seconds=5)


def test_a_failing_retention_does_not_fail_the_evaluation():
    service, store, clock = make()

    def broken(*args, **kwargs):
        raise RuntimeError("table is busy")

    store.purge_history = broken
    assert deliver(service, clock, queue_sample("orders", minute(0), 500)).status == "evaluated"


# --- optimistic concurrency ------------------------------------------------------------------------


def test_a_conflicting_write_makes_the_service_reread_and_reevaluate():
    """Another worker evaluates minute 2 between this worker's read and commit: the commit fails
    on the ETag, the state is re-read, and the sample (already evaluated) is not acted on twice."""
    service, store, clock = make()
    other = EvaluateService(store, service.policy, clock=clock)
    for index in range(2):
        deliver(service, clock, queue_sample("orders", minute(index), HIGH))
    sample = queue_sample("orders", minute(2), HIGH)
    original_commit = store.commit
    raced = {}

    def commit_after_other_worker(stored, decisions=()):
        if not raced:
            raced["started"] = True
            raced["other"] = other.handle(sample.to_json())
        return original_commit(stored, decisions)

    store.commit = commit_after_other_worker
    clock.now = sample.collected_at + timedelta(seconds=5)
    mine = service.handle(sample.to_json())
    assert raced["other"].action is not None
    assert mine.status == "duplicate" and mine.messages == () and mine.attempts == 2


def test_endless_conflicts_raise_so_the_queue_redelivers():
    service, store, clock = make(max_attempts=3)

    def always_conflict(stored, decisions=()):
        raise ConcurrencyConflict("busy")

    store.commit = always_conflict
    with pytest.raises(ConcurrencyConflict, match="gave up"):
        deliver(service, clock, queue_sample("orders", minute(0), 100))


def test_decisions_never_go_back_in_time_when_clocks_differ():
    service, store, clock = make()
    _, first = acting_run(service, clock)
    clock.now = first.action.decided_at - timedelta(seconds=30)  # a worker whose clock is behind
    second = service.handle(queue_sample("orders", minute(3) - timedelta(seconds=40), HIGH).to_json())
    assert second.action is not None
    assert second.action.decided_at > first.action.decided_at


def test_samples_without_capacity_use_the_state_capacity():
    target = rules_target("orders", min_samples=1)
    service, store, clock = make(target, capacity=5)
    outcome = deliver(service, clock, queue_sample("orders", minute(0), HIGH, capacity=None))
    assert outcome.action.target_capacity == 6


def test_an_unknown_capacity_holds_and_says_why():
    target = rules_target("orders", min_samples=1)
    service, store, clock = make(target)
    store.states.clear()
    outcome = deliver(service, clock, queue_sample("orders", minute(0), HIGH, capacity=None))
    assert outcome.decision.reason_code == "capacity_unknown" and outcome.messages == ()


def test_cached_state_is_used_between_evaluations():
    service, store, clock = make()
    for index in range(5):
        deliver(service, clock, queue_sample("orders", minute(index), 500))
    assert store.calls["load_state"] == 1
    service.forget()
    deliver(service, clock, queue_sample("orders", minute(5), 500))
    assert store.calls["load_state"] == 2


def test_state_written_by_someone_else_is_picked_up_after_the_conflict():
    service, store, clock = make()
    deliver(service, clock, queue_sample("orders", minute(0), 500))
    stored = store.states["orders"]
    store.commit(replace(stored, state=replace(stored.state, capacity=7)))  # e.g. scale reset the state
    outcome = deliver(service, clock, queue_sample("orders", minute(1), 500, capacity=None))
    assert outcome.status == "evaluated" and outcome.attempts == 2
    assert store.states["orders"].state.capacity == 7


def test_the_checkpoint_layout_note_reaches_the_decision_log() -> None:
    from dataclasses import replace as replaced

    from scaling.storage.synthetic import hub_sample

    store = MemoryStorage()
    target = rules_target("orders", min_samples=1)
    clock = Clock(T0 + timedelta(seconds=5))
    service = EvaluateService(store, policy_of(target), clock=clock)
    sample = hub_sample("orders", T0, [10, 20], capacity=2)
    source = replaced(sample.sources[0], notes=("checkpoint_layout: blobMetadata (2 of 2 partitions)", "other"))
    service.handle(replaced(sample, sources=(source,)).to_json())
    [row] = store.decisions("orders")
    assert f"{source.name}: checkpoint_layout: blobMetadata (2 of 2 partitions)" in row.reasons
    assert not any("other" in reason for reason in row.reasons)


def test_a_wider_clock_skew_setting_widens_the_engines_window_too() -> None:
    """A sample the service accepts (120 s ahead with a 300 s tolerance) is one the engine reads:
    the parser and the window share one bound."""
    store = MemoryStorage()
    target = rules_target("orders", min_samples=1)
    service = EvaluateService(store, policy_of(target), clock=Clock(T0), clock_skew=timedelta(seconds=300))
    ahead = queue_sample("orders", T0 + timedelta(seconds=120), 5000, capacity=2)
    outcome = service.handle(ahead.to_json())
    assert outcome.status == "evaluated" and outcome.action is not None and outcome.action.target_capacity == 3
