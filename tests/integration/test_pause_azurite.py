"""Pause, pin, expiry and resume through the real services: tables on Azurite, the plan on the
local ARM endpoint (``scaling.plans.local_arm``, TLS with a throwaway CA; there is no ARM
emulator) driven through the real ``WebSiteManagementClient``; the clock is injected. Also the
``pause``/``resume``/``decisions`` commands as an operator runs them, and concurrent pauses
(two operators at once; a pause while an evaluation holds a cached state)."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest

from scaling.__main__ import main
from scaling.domain.decisions import ScalerState
from scaling.domain.policy import policy_to_dict
from scaling.plans.appservice import AppServicePlanAdapter
from scaling.plans.local_arm import serve_local_arm
from scaling.services.evaluate import EvaluateService
from scaling.services.pause import PauseConflict, PauseService
from scaling.services.scale import ScaleService
from scaling.services.telemetry import NoTelemetry
from scaling.storage.base import TableNames
from scaling.storage.records import StoredState
from scaling.storage.synthetic import policy_of, queue_sample, rules_target
from scaling.storage.tables import TableStorage
from tests.helpers import Clock

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
HIGH = 5000


@pytest.fixture(scope="module")
def endpoint():
    with serve_local_arm() as served:
        yield served


class World:
    """One target on Azurite and the local ARM endpoint, with evaluate, scale and pause services."""

    def __init__(self, azurite, unique_name, endpoint) -> None:
        for store in (endpoint.arm.plans, endpoint.arm.writes, endpoint.arm.requests, endpoint.arm.faults):
            store.clear()
        self.arm = endpoint.arm
        self.target = rules_target("orders", min_samples=1, up_cooldown=600)
        self.names = TableNames.with_prefix(unique_name)
        self.connection = azurite.connection_string
        self.tables = TableStorage.from_connection_string(self.connection, self.names)
        self.tables.ensure_tables()
        self.tables.commit(StoredState(ScalerState("orders", capacity=2)))
        self.clock = Clock(T0)
        self.plans = AppServicePlanAdapter(endpoint.credential, base_url=endpoint.base_url, retry_total=3,
                                           retry_backoff_factor=0.01, polling_interval=0, **endpoint.client_kwargs())
        endpoint.arm.add_plan(self.target.plan.resource_id, capacity=2, tier="Standard")
        policy = policy_of(self.target)
        self.evaluate = EvaluateService(self.tables, policy, clock=self.clock)
        self.scale = ScaleService(self.tables, self.plans, policy, clock=self.clock)
        self.pauses = PauseService(self.tables, clock=self.clock)
        self.minute = 0

    def sample(self, backlog: int = HIGH):
        """Collect and evaluate one sample with the plan's real capacity; returns the outcome."""
        capacity = self.plans.get_plan(self.target.plan.resource_id).capacity
        sample = queue_sample("orders", T0 + timedelta(minutes=self.minute), backlog, capacity)
        self.minute += 1
        self.clock.now = sample.collected_at + timedelta(seconds=5)
        return self.evaluate.handle(sample.to_json()), sample

    def deliver(self, outcome) -> list[str]:
        """Send the outcome's actions to scale; the statuses."""
        return [self.scale.handle(message).status for message in outcome.messages]

    def capacities_written(self) -> list[int]:
        return [write.body["sku"]["capacity"] for write in self.arm.writes]

    def rows(self, code: str | None = None):
        """The evaluations' decision rows (``code``: of that reason only); operators' rows apart."""
        return [row for row in self.tables.decisions("orders") if (code is None or row.reason_code == code)
                and row.trigger_sample_id != "operator"]

    def operator_rows(self):
        return [row for row in self.tables.decisions("orders") if row.trigger_sample_id == "operator"]

    def close(self) -> None:
        self.plans.close()
        self.tables.close()


@pytest.fixture
def world(azurite, unique_name, endpoint):
    made = World(azurite, unique_name, endpoint)
    yield made
    made.close()


def test_a_paused_target_evaluates_logs_what_it_would_do_and_sends_nothing(world):
    world.pauses.pause("orders", reason="incident 42", requested_by="alice", until=T0 + timedelta(hours=1))
    first, _ = world.sample()
    second, _ = world.sample()
    assert (first.status, first.messages, second.messages) == ("evaluated", (), ())
    assert world.capacities_written() == []
    [row] = world.rows("paused")  # the would-be action, logged once while it does not change
    assert row.reasons[0] == "paused: would scale 2 -> 3"
    assert "paused by alice until 2024-05-01T13:00:00Z: incident 42" in row.reasons
    [operator] = world.operator_rows()
    assert operator.reason_code == "paused" and "alice" in operator.reasons[0]


def test_a_pin_is_requested_once_through_the_scale_path_and_then_held(world):
    world.pauses.pause("orders", reason="load test", requested_by="bob", until=T0 + timedelta(hours=1), pinned_at=5)
    pinned, sample = world.sample()
    [action] = [json.loads(message) for message in pinned.messages]
    assert (action["target_capacity"], action["reason"].split(":")[0]) == (5, "pinned")
    assert world.deliver(pinned) == ["applied"]
    # A redelivery of the sample re-sends the same decision; scale applies it at most once.
    again = world.evaluate.handle(sample.to_json(), dequeue_count=2)
    assert again.status == "resent" and world.deliver(again) == ["duplicate"]
    held, _ = world.sample()  # the plan now has 5; the backlog still asks for more
    assert held.messages == ()
    assert world.capacities_written() == [5]
    [row] = world.rows("pinned")[-1:]
    assert row.reasons[0] == "pinned: would scale 5 -> 6"
    assert [row.outcome for row in world.rows("pinned") if row.acts] == ["applied"]


def test_a_pause_ends_by_itself_logged_and_the_target_acts_again(world):
    world.pauses.pause("orders", reason="deploy", requested_by="carol", until=T0 + timedelta(minutes=2))
    during = [world.sample()[0] for _ in range(2)]
    assert all(outcome.messages == () for outcome in during)
    after, _ = world.sample()  # minute 2 + 5 s: past the end
    [expired] = world.rows("pause_expired")
    assert "ended by itself" in expired.reasons[0] and "carol" in expired.reasons[0]
    assert [json.loads(m)["target_capacity"] for m in after.messages] == [3]
    assert world.deliver(after) == ["applied"] and world.capacities_written() == [3]
    assert world.tables.load_state("orders").pause is None


def test_resume_ends_the_pause_at_once(world):
    world.pauses.pause("orders", reason="deploy", requested_by="carol", until=T0 + timedelta(hours=4))
    assert world.sample()[0].messages == ()
    ended = world.pauses.resume("orders", requested_by="dave")
    assert ended is not None and ended.requested_by == "carol"
    [row] = [row for row in world.operator_rows() if row.reason_code == "resumed"]
    assert row.reasons[0].startswith("resumed by dave (was paused by carol")
    outcome, _ = world.sample()
    assert world.deliver(outcome) == ["applied"] and world.capacities_written() == [3]
    assert world.pauses.resume("orders", requested_by="dave") is None  # nothing left to resume


def test_a_pause_written_while_an_evaluation_holds_a_cached_state_is_not_lost(world):
    world.sample(backlog=500)  # the evaluate service now caches the state and its ETag
    world.pauses.pause("orders", reason="incident", requested_by="erin", until=T0 + timedelta(hours=1))
    outcome, _ = world.sample()  # its commit fails the ETag, re-reads, and sees the pause
    assert outcome.messages == () and outcome.attempts == 2
    assert world.tables.load_state("orders").pause.requested_by == "erin"


class MeetingStore:
    """The real table storage, but each pause's first read waits until both have read: the two
    operators then commit against the same ETag (a test-side wrapper, nothing patched)."""

    def __init__(self, tables: TableStorage, barrier: threading.Barrier) -> None:
        self.tables, self.barrier, self.reads = tables, barrier, 0

    def load_state(self, target: str) -> StoredState:
        stored = self.tables.load_state(target)
        self.reads += 1
        if self.reads == 1:
            self.barrier.wait(timeout=30)
        return stored

    def commit(self, stored, decisions=()):
        return self.tables.commit(stored, decisions)


def test_two_operators_pausing_at_once_one_wins_the_other_gets_a_clear_conflict(world):
    barrier = threading.Barrier(2)
    results: dict[str, object] = {}

    def pause(who: str, pinned_at: int | None) -> None:
        service = PauseService(MeetingStore(world.tables, barrier), clock=world.clock)
        try:
            results[who] = service.pause("orders", reason=f"by {who}", requested_by=who,
                                         until=T0 + timedelta(hours=1), pinned_at=pinned_at)
        except PauseConflict as error:
            results[who] = error

    threads = [threading.Thread(target=pause, args=(who, pin)) for who, pin in (("frank", None), ("grace", 4))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    conflicts = [who for who, result in results.items() if isinstance(result, PauseConflict)]
    winners = [who for who, result in results.items() if not isinstance(result, PauseConflict)]
    assert len(conflicts) == 1 and len(winners) == 1
    assert "changed meanwhile" in str(results[conflicts[0]]) and winners[0] in str(results[conflicts[0]])
    stored = world.tables.load_state("orders").pause
    assert stored == results[winners[0]]  # the winner's pause, whole; the loser wrote nothing
    assert [row.reasons[0].split(" by ")[1].split(" until")[0] for row in world.operator_rows()] == winners


def test_the_commands_pause_show_and_resume_a_target(world, tmp_path, capsys):
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(policy_to_dict(policy_of(world.target))), encoding="utf-8")
    common = ["--target", "orders", "--connection-string", world.connection, "--table", world.names.state,
              "--policy", str(policy)]
    assert main(["pause", *common, "--at", "4", "--for", "2h", "--reason", "INC-7 failover", "--by", "heidi"]) == 0
    assert "orders: pinned at 4 by heidi until" in capsys.readouterr().out
    assert main(["decisions", "--target", "orders", "--connection-string", world.connection,
                 "--table", world.names.state]) == 0
    shown = capsys.readouterr().out
    assert "PAUSED NOW: pinned at 4 by heidi until" in shown and "INC-7 failover" in shown
    assert main(["pause", *common, "--at", "40", "--reason", "x"]) == 2
    assert "--at 40 is outside orders's bounds (1-8)" in capsys.readouterr().err
    assert main(["pause", *common, "--for", "8d", "--reason", "x"]) == 2
    assert "at most 7 days" in capsys.readouterr().err
    assert main(["resume", *common, "--by", "ivan"]) == 0
    assert "orders: resumed (was pinned at 4 by heidi" in capsys.readouterr().out
    assert world.tables.load_state("orders").pause is None
    assert main(["resume", *common, "--by", "ivan"]) == 0
    assert "orders: resumed (it was neither paused nor held)" in capsys.readouterr().out


class RecordedTelemetry(NoTelemetry):
    """Keeps each metric's name and ``reason`` dimension."""

    def __init__(self) -> None:
        self.reasons: list[tuple[str, str | None]] = []

    def record(self, metric, value, attributes) -> None:
        self.reasons.append((metric.name, attributes.get("reason")))


def corrupt_stored_pause(world, edit) -> None:
    """An out-of-band edit of the state entity's pause (Storage Explorer, an older writer): ``edit``
    changes the stored document's ``pause`` in place, written straight to the table."""
    from azure.data.tables import UpdateMode

    from scaling.storage.base import STATE_ROW, join_text, partition_key, split_text

    entity = world.tables.state.get_entity(partition_key("orders"), STATE_ROW)
    document = json.loads(join_text(entity, "document"))
    edit(document)
    entity.update(split_text("document", json.dumps(document)))
    world.tables.state.upsert_entity(entity, mode=UpdateMode.REPLACE)


def _drop_until(document):
    del document["pause"]["until"]


def _garbage_until(document):
    document["pause"]["until"] = "next tuesday"


def _text_pause(document):
    document["pause"] = "paused by someone"


def _word_pin(document):
    document["pause"]["pinned_at"] = "twelve"


UNREADABLE_PAUSES = [pytest.param(_drop_until, id="until-missing"), pytest.param(_garbage_until, id="until-garbage"),
                     pytest.param(_text_pause, id="pause-is-text"), pytest.param(_word_pin, id="pinned-at-a-word")]


@pytest.mark.parametrize("edit", UNREADABLE_PAUSES)
def test_an_unreadable_stored_pause_counts_as_expired_with_a_logged_alert(world, edit):
    world.pauses.pause("orders", reason="deploy", requested_by="carol", until=T0 + timedelta(hours=4))
    corrupt_stored_pause(world, edit)
    world.evaluate.telemetry = telemetry = RecordedTelemetry()
    outcome, _ = world.sample()  # on d0d07e7: every delivery raised (five, then poison)
    assert outcome.status == "evaluated"
    assert ("autoscaler.decisions", "state_unreadable") in telemetry.reasons  # the state-unreadable alert's signal
    [row] = world.rows("state_unreadable")
    assert row.reasons[0].startswith("the stored pause cannot be read (pause: ")
    assert "the pause counts as expired" in row.reasons[0]
    assert world.deliver(outcome) == ["applied"] and world.capacities_written() == [3]
    stored = world.tables.load_state("orders")
    assert (stored.pause, stored.unreadable) == (None, ())  # written back cleanly: said once
    world.sample()
    assert len(world.rows("state_unreadable")) == 1


@pytest.mark.parametrize("edit", UNREADABLE_PAUSES)
def test_resume_clears_an_unreadable_stored_pause(world, edit, capsys):
    world.pauses.pause("orders", reason="deploy", requested_by="carol", until=T0 + timedelta(hours=4))
    corrupt_stored_pause(world, edit)
    assert main(["resume", "--target", "orders", "--connection-string", world.connection,
                 "--table", world.names.state, "--by", "ivan"]) == 0
    assert "orders: resumed (was unreadable: pause: " in capsys.readouterr().out
    stored = world.tables.load_state("orders")
    assert (stored.pause, stored.unreadable) == (None, ())
    [row] = [row for row in world.operator_rows() if row.reason_code == "resumed"]
    assert row.reasons[0].startswith("resumed by ivan (was unreadable: pause: ")


def test_a_pause_whose_reply_is_lost_is_recognised_as_its_own(world, azurite):
    """The pause's transaction lands and its reply is a 503; azure-core's retry fails the ETag.
    The re-read state carries the pause's writer token: the pause is stored once and the command
    succeeds (before the shared unit of work it found "its" pause there and raised PauseConflict)."""
    from tests.faultproxy import FaultProxy, proxied_connection_string

    with FaultProxy(("127.0.0.1", azurite.table_port)) as proxy:
        proxied = TableStorage.from_connection_string(proxied_connection_string(azurite, table=proxy), world.names,
                                                      retry_total=2, retry_backoff_factor=0.01)
        try:
            proxy.applied_then_status(503, method="POST", path_contains="$batch", times=1)
            pause = PauseService(proxied, clock=world.clock).pause("orders", reason="incident 7", requested_by="alice",
                                                                   until=T0 + timedelta(hours=1))
        finally:
            proxied.close()
        assert proxy.counts().faulted == {"applied_then_status": 1}
    assert world.tables.load_state("orders").pause == pause
    assert [row.reason_code for row in world.tables.decisions("orders")] == [pause.code]
