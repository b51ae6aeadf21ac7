"""The scale service on the in-memory store and plan adapter: idempotency, staleness,
clamping, dry run, failures. The real ARM client runs in tests/integration/test_scale_*.py."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.decisions import ScalerState
from scaling.plans.base import PlanError, PlanNotFoundError
from scaling.plans.memory import InMemoryPlans
from scaling.services.evaluate import EvaluateService
from scaling.services.scale import ScaleService
from scaling.storage.memory import MemoryStorage
from scaling.storage.records import APPLYING, AppliedRecord, StoredState
from scaling.storage.synthetic import policy_of, queue_sample, rules_target
from tests.helpers import Clock

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
HIGH = 5000


class World:
    """Evaluate and scale sharing one store, one clock and one in-memory plan."""

    def __init__(self, *, capacity: int = 2, tier: str = "Standard", max_instances: int = 10, dry_run: bool = False,
                 **target_kwargs) -> None:
        self.target = rules_target("orders", **{"min_samples": 1, "up_cooldown": 0, **target_kwargs})
        self.store = MemoryStorage()
        self.store.commit(StoredState(ScalerState("orders", capacity=capacity)))
        self.plans = InMemoryPlans()
        self.plans.add(self.target.plan.resource_id, capacity, sku_tier=tier, max_instances=max_instances)
        self.clock = Clock(T0)
        policy = policy_of(self.target)
        self.evaluate = EvaluateService(self.store, policy, clock=self.clock)
        self.scale = ScaleService(self.store, self.plans, policy, dry_run=dry_run, clock=self.clock)
        self.minute = 0

    def decide(self, backlog: int = HIGH, capacity: int | None = None) -> str:
        sample = queue_sample("orders", T0 + timedelta(minutes=self.minute), backlog, capacity)
        self.minute += 1
        self.clock.now = sample.collected_at + timedelta(seconds=5)
        outcome = self.evaluate.handle(sample.to_json())
        assert outcome.messages, outcome
        return outcome.messages[0]

    def capacity(self) -> int:
        return self.plans.plans[self.target.plan.resource_id].capacity


def test_an_action_is_applied_once_however_often_it_is_delivered():
    world = World()
    message = world.decide()
    outcomes = [world.scale.handle(message).status for _ in range(3)]
    assert outcomes == ["applied", "duplicate", "duplicate"]
    assert world.plans.writes == [(world.target.plan.resource_id, 3)]
    [row] = [row for row in world.store.decisions("orders") if row.acts]
    assert row.outcome == "applied"


def test_an_older_action_is_skipped_as_stale_after_a_newer_decision():
    world = World()
    first, second = world.decide(), world.decide()
    assert world.scale.handle(second).status == "applied"
    assert world.scale.handle(first).status == "stale"
    assert world.capacity() == 4 and world.plans.writes == [(world.target.plan.resource_id, 4)]
    rows = {row.decision_id: row for row in world.store.decisions("orders") if row.acts}
    assert rows[json.loads(first)["decision_id"]].outcome == "stale"


def test_actions_in_order_are_both_applied():
    world = World()
    first = world.decide()
    assert world.scale.handle(first).status == "applied"
    second = world.decide(capacity=3)
    assert world.scale.handle(second).status == "applied"
    assert world.capacity() == 4


def test_capacity_is_clamped_to_the_policy_bounds_and_the_sku_limit():
    world = World(capacity=2, tier="Basic", max_instances=3)
    # The sample says 3 (the plan has 2): evaluate decides 4, beyond Basic's 3. (An action whose
    # capacity differs from the committed decision's is refused, so the clamp is reached this way.)
    outcome = world.scale.handle(world.decide(capacity=3))
    assert outcome.status == "applied" and outcome.capacity_after == 3
    assert "clamped 4 -> 3" in outcome.detail


def test_nothing_is_written_when_the_plan_already_has_the_capacity():
    world = World()
    message = world.decide()
    world.plans.add(world.target.plan.resource_id, 3)
    outcome = world.scale.handle(message)
    assert outcome.status == "unchanged" and world.plans.writes == []


def test_dry_run_calls_no_arm_at_all():
    world = World(dry_run=True)
    outcome = world.scale.handle(world.decide())
    assert outcome.status == "dry_run" and "would set plan" in outcome.detail
    assert world.plans.reads == 0 and world.plans.writes == []


def test_a_final_failure_is_recorded_and_lets_the_next_evaluation_decide_again():
    world = World(up_cooldown=600)
    message = world.decide()
    original = world.plans.set_capacity

    def failing_set(resource_id, capacity):
        raise PlanError("ARM answered 500 while setting capacity 3 (after retries)", status_code=500)

    world.plans.set_capacity = failing_set
    outcome = world.scale.handle(message)
    assert outcome.status == "failed" and "500" in outcome.detail
    [row] = [row for row in world.store.decisions("orders") if row.acts]
    assert row.outcome == "failed" and "500" in row.outcome_detail
    state = world.store.states["orders"].state
    assert state.last_action_at is None and state.capacity == 2 and state.last_reason_code == "scale_failed"
    assert world.scale.handle(message).status == "duplicate"  # recorded; not retried by redelivery
    world.plans.set_capacity = original
    retry = world.decide(capacity=2)  # within the 600 s cooldown, but the cooldown was reset
    assert json.loads(retry)["target_capacity"] == 3
    assert world.scale.handle(retry).status == "applied" and world.capacity() == 3


def test_a_missing_plan_is_a_clear_error():
    world = World()
    message = world.decide()
    world.plans.plans.clear()
    outcome = world.scale.handle(message)
    assert outcome.status == "failed" and "not found" in outcome.detail


def test_a_claim_held_by_another_worker_is_respected_until_its_lease_expires():
    world = World()
    message = world.decide()
    decision_id = json.loads(message)["decision_id"]
    world.store.claim_applied(AppliedRecord("orders", decision_id, APPLYING, world.clock.now, 3, world.clock.now))
    assert world.scale.handle(message).status == "in_progress"
    assert world.plans.writes == []
    world.clock.now += timedelta(minutes=6)
    assert world.scale.handle(message).status == "applied"
    assert world.store.get_applied("orders", decision_id).attempts == 2


def test_an_unexpected_error_releases_the_claim_and_raises():
    world = World()
    message = world.decide()

    def broken(resource_id):
        raise RuntimeError("network is down")

    world.plans.get_plan = broken
    with pytest.raises(RuntimeError):
        world.scale.handle(message)
    record = world.store.get_applied("orders", json.loads(message)["decision_id"])
    assert record.status == "abandoned"
    del world.plans.get_plan
    assert world.scale.handle(message).status == "applied"


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda body: "nonsense", "not valid JSON"),
        (lambda body: json.dumps({**body, "target": "elsewhere"}), "not in the policy"),
        (lambda body: json.dumps({**body, "plan_resource_id": body["plan_resource_id"] + "x"}), "is not target"),
        (lambda body: json.dumps({**body, "target_capacity": 0}), "positive integer"),
        (lambda body: json.dumps({**body, "decided_at": "2099-01-01T00:00:00Z"}), "decided_at 2099-01-01T00:00:00Z is in the future"),
        (lambda body: json.dumps({**body, "decided_at": "2024-05-01T12:02:06Z"}), "at most 60 s of clock skew"),
    ],
)
def test_malformed_actions_are_dead_lettered(mutate, fragment):
    world = World()
    body = json.loads(world.decide())
    outcome = world.scale.handle(mutate(body), message_id="m-9")
    assert outcome.status == "dead_lettered" and fragment in outcome.detail
    [letter] = world.store.letters
    assert letter.function == "scale" and letter.message_id == "m-9"
    assert world.plans.writes == []


def test_a_failed_older_action_leaves_the_state_of_a_newer_decision_alone():
    world = World()
    first = world.decide()
    world.plans.fail_next = [PlanNotFoundError("plan gone", status_code=404)]
    assert world.scale.handle(first).status == "failed"  # resets: the first is still the latest
    assert world.store.states["orders"].state.last_reason_code == "scale_failed"
    second = world.decide(capacity=2)
    world.plans.fail_next = [PlanError("ARM answered 503", status_code=503)]
    stored = world.store.states["orders"]
    # A third decision lands while the second is being applied: the second's failure must not reset it.
    world.store.commit(replace(stored, latest_decision_id="newer", latest_decided_at=stored.latest_decided_at))
    before = world.store.states["orders"]
    assert world.scale.handle(second).status == "failed"
    assert world.store.states["orders"] == before


@pytest.mark.parametrize(("decided_in_seconds", "status"), [(0, "applied"), (60, "applied"), (61, "dead_lettered")])
def test_decided_at_may_be_ahead_of_the_scalers_clock_by_the_skew_tolerance_only(decided_in_seconds, status):
    world = World()
    body = json.loads(world.decide())
    body["decided_at"] = (world.clock.now + timedelta(seconds=decided_in_seconds)).isoformat().replace("+00:00", "Z")
    assert world.scale.handle(json.dumps(body)).status == status


def test_a_forged_far_future_action_writes_nothing_and_later_decisions_still_apply():
    world = World()
    forged = {**json.loads(world.decide()), "decision_id": "forged", "target_capacity": 9,
              "decided_at": "2099-01-01T00:00:00Z"}
    assert world.scale.handle(json.dumps(forged)).status == "dead_lettered"
    assert world.plans.writes == []
    assert world.scale.handle(world.decide()).status == "applied"
    assert world.capacity() == 4


def test_at_start_up_every_plan_another_controller_drives_is_named(caplog):
    world = World()
    world.plans.autoscale_settings[world.target.plan.resource_id.lower()] = ("cpu-autoscale",)
    service = ScaleService(world.store, world.plans, policy_of(world.target), clock=world.clock, controllers=world.plans)
    assert service.competing_controllers() == {"orders": ("cpu-autoscale",)}
    assert "conflict:autoscale-setting cpu-autoscale" in caplog.text
    world.plans.autoscale_settings.clear()
    assert service.competing_controllers() == {}
