"""Level-triggered scaling through the evaluate and scale services (in-memory store and plan):
a lost action is re-issued after the grace, a manual resize is adopted or reverted, and a dry
run never re-issues. The same paths on Azurite and the real ARM client, with faults injected,
are in tests/integration/test_reliability_*.py."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from scaling.plans.memory import InMemoryPlans
from scaling.services.evaluate import EvaluateService
from scaling.services.scale import ScaleService
from scaling.services.telemetry import NO_TELEMETRY, Telemetry
from scaling.storage.memory import MemoryStorage
from scaling.storage.synthetic import policy_of, queue_sample, rules_target
from tests.helpers import Clock

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


class Loop:
    """collect -> evaluate -> scale once a minute; ``lose`` drops the next actions on the way."""

    def __init__(self, *, on_external_change: str = "adopt", dry_run: bool = False,
                 telemetry: Telemetry = NO_TELEMETRY) -> None:
        target = rules_target("orders", min_samples=1, window_seconds=60, up_cooldown=0, down_cooldown=0)
        self.target = replace(target, on_external_change=on_external_change)
        self.plan = self.target.plan.resource_id
        self.store = MemoryStorage()
        self.plans = InMemoryPlans()
        self.plans.add(self.plan, 2)
        self.clock = Clock(T0)
        policy = policy_of(self.target)
        self.evaluate = EvaluateService(self.store, policy, clock=self.clock, dry_run=dry_run, telemetry=telemetry)
        self.scale = ScaleService(self.store, self.plans, policy, clock=self.clock, dry_run=dry_run, telemetry=telemetry)
        self.minute = 0
        self.lose = 0
        self.sent: list[dict] = []

    def step(self, backlog: int) -> None:
        sample = queue_sample("orders", T0 + timedelta(minutes=self.minute), backlog, self.capacity())
        self.minute += 1
        self.clock.now = sample.collected_at + timedelta(seconds=5)
        for message in self.evaluate.handle(sample.to_json()).messages:
            self.sent.append(json.loads(message))
            if self.lose:
                self.lose -= 1
                continue
            self.scale.handle(message)

    def capacity(self) -> int:
        return self.plans.plans[self.plan].capacity

    def rows(self, code: str) -> list:
        return [row for row in self.store.decisions("orders") if row.reason_code == code]


def test_a_lost_action_is_reissued_after_the_grace_and_the_plan_converges() -> None:
    loop = Loop()
    loop.step(500)  # first observation: desired = 2
    loop.lose = 1
    loop.step(5000)  # decides 3; the action is lost
    assert loop.capacity() == 2 and loop.sent[-1]["target_capacity"] == 3
    decided = loop.sent[-1]["decision_id"]
    minutes_until_fixed = 0
    while loop.capacity() != 3:
        loop.step(500)  # inside the thresholds: the engine holds, only the reconciliation acts
        minutes_until_fixed += 1
        assert minutes_until_fixed < 10
    assert minutes_until_fixed == 4  # the grace (3 minutes) measured on the plan's observations
    assert loop.sent[-1]["decision_id"] == f"{decided}-r1" and loop.sent[-1]["target_capacity"] == 3
    [row] = loop.rows("reconcile")
    assert row.acts and row.capacity_before == 2 and row.capacity_after == 3 and row.outcome == "applied"
    loop.step(500)
    assert loop.store.load_state("orders").desired.confirmed


def test_a_manual_resize_is_logged_and_adopted_by_default() -> None:
    loop = Loop()
    loop.step(500)
    loop.step(500)
    loop.plans.plans[loop.plan] = replace(loop.plans.plans[loop.plan], capacity=7)  # someone in the portal
    loop.step(500)
    [row] = loop.rows("external_change")
    assert not row.acts and row.capacity_before == 7 and row.capacity_after == 7
    assert "observed 7, desired 2" in row.reasons[0]
    assert loop.store.load_state("orders").desired.capacity == 7
    for _ in range(10):
        loop.step(500)
    assert loop.capacity() == 7 and len(loop.rows("external_change")) == 1


def test_an_adopted_manual_resize_above_the_max_bound_is_brought_back_to_it() -> None:
    """Adopting a resize means deciding from it, and the decision keeps the bounds: a plan
    resized past ``max_instances`` comes back to it."""
    loop = Loop()
    loop.step(500)
    loop.step(500)
    loop.plans.plans[loop.plan] = replace(loop.plans.plans[loop.plan], capacity=12)  # above max_instances 8
    loop.step(500)  # the engine decides from the observed 12: its action supersedes the adoption
    [change] = loop.rows("external_change")
    assert not change.acts and change.capacity_before == 12 and "observed 12, desired 2" in change.reasons[0]
    [row] = loop.rows("above_max_bound")
    assert change.reasons[-1] == f"superseded by decision {row.decision_id}"
    assert row.acts and row.capacity_before == 12 and row.capacity_after == 8
    assert "the plan has 12" in row.reasons[-1]
    for _ in range(5):
        loop.step(500)
    assert loop.capacity() == 8 and loop.store.load_state("orders").desired.capacity == 8
    assert len(loop.rows("above_max_bound")) == 1


def test_a_manual_resize_is_reverted_when_the_policy_says_so() -> None:
    loop = Loop(on_external_change="revert")
    loop.step(500)
    loop.plans.plans[loop.plan] = replace(loop.plans.plans[loop.plan], capacity=7)
    loop.step(500)
    [row] = loop.rows("external_change")
    assert row.acts and row.direction == "down" and row.capacity_after == 2
    assert loop.capacity() == 2


def test_a_dry_run_never_reissues() -> None:
    loop = Loop(dry_run=True)
    loop.step(500)
    loop.step(5000)
    for _ in range(30):
        loop.step(500)
    assert loop.capacity() == 2 and loop.rows("reconcile") == [] and loop.rows("external_change") == []
    assert not any("-r" in message["decision_id"] for message in loop.sent)
