"""Never fight: another controller on the plan, through the real clients.

The local ARM endpoint (``scaling/plans/local_arm.py``) stands in for ARM: it serves the plan to
the real azure-mgmt-web client and the resource group's autoscale settings to the real
azure-mgmt-monitor client (no emulator exists for either). Storage is the in-memory store with
the same conditions as Table storage (``tests/integration/test_evaluate_azurite.py`` covers the
tables themselves); the services are the real ones, wired by ``bootstrap``.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.conflict import AUTOSCALE_SETTING, EXTERNAL_WRITER
from scaling.domain.decisions import ScalerState
from scaling.domain.samples import SourceReading
from scaling.plans.appservice import AppServicePlanAdapter
from scaling.plans.base import PlanError
from scaling.plans.local_arm import serve_local_arm
from scaling.services.collect import Collector
from scaling.services.evaluate import EvaluateService
from scaling.services.pause import PauseService
from scaling.services.scale import ScaleService
from scaling.storage.memory import MemoryStorage
from scaling.storage.records import CONFLICT, StoredState
from scaling.storage.synthetic import policy_of, queue_sample, rules_target
from tests.helpers import Clock

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
HIGH, LOW = 50_000, 500  # far above the scale-out threshold; between the two thresholds


@pytest.fixture
def endpoint():
    with serve_local_arm() as served:
        yield served


class QueueCount:
    """The queue's count, as the test sets it (the Service Bus reader has tests of its own)."""

    kind = "servicebus"

    def __init__(self) -> None:
        self.backlog = 0

    async def read(self, source, gate, now) -> SourceReading:
        return SourceReading(name=source.name, kind=self.kind, active_messages=self.backlog)

    async def aclose(self) -> None:
        pass


class Loop:
    """collect (capacity and autoscale settings from the local ARM) -> evaluate -> scale, a minute a step."""

    def __init__(self, endpoint, *, capacity: int = 2, store=None) -> None:
        self.target = replace(rules_target("orders", min_samples=1, up_cooldown=0, down_cooldown=0, max_instances=8),
                              on_external_change="revert")
        self.arm = endpoint.arm
        self.arm.add_plan(self.target.plan.resource_id, capacity=capacity)
        self.plans = AppServicePlanAdapter(endpoint.credential, base_url=endpoint.base_url, retry_total=0,
                                           polling_interval=0, **endpoint.client_kwargs())
        self.store = store or MemoryStorage()
        self.store.commit(StoredState(ScalerState(self.target.name, capacity=capacity)))
        self.clock = Clock(T0)
        policy = policy_of(self.target)
        self.evaluate = EvaluateService(self.store, policy, clock=self.clock)
        self.scale = ScaleService(self.store, self.plans, policy, clock=self.clock, controllers=self.plans)
        self.pauses = PauseService(self.store, clock=self.clock)
        self.queue = QueueCount()
        self.collector = Collector(policy, [self.queue], self.plans, controllers=self.plans)
        self.minute = 0
        self.outcomes = []

    def step(self, backlog: int = HIGH) -> list:
        collected = T0 + timedelta(minutes=self.minute)
        self.minute += 1
        self.queue.backlog = backlog
        [message] = asyncio.run(self.collector.collect_messages(collected))
        self.clock.now = collected + timedelta(seconds=5)
        outcome = self.evaluate.handle(message)
        self.outcomes = [self.scale.handle(message) for message in outcome.messages]
        return self.outcomes

    def capacity(self) -> int:
        return self.arm.capacity(self.target.plan.resource_id)

    def rows(self, code: str) -> list:
        return [row for row in self.store.decisions(self.target.name) if row.reason_code == code]

    def plan_writes(self) -> int:
        return len(self.arm.writes)


def test_an_enabled_autoscale_setting_on_the_plan_holds_the_target_until_it_is_disabled(endpoint):
    loop = Loop(endpoint)
    loop.arm.autoscale.add("cpu-autoscale", loop.target.plan.resource_id)
    loop.arm.autoscale.add("other-plan", loop.target.plan.resource_id.replace("plan-orders", "plan-other"))
    for _ in range(3):
        assert loop.step(HIGH) == []
    assert loop.plan_writes() == 0 and loop.capacity() == 2
    [row] = loop.rows(AUTOSCALE_SETTING)  # logged once, when it began
    text = " ".join(row.reasons)
    assert not row.acts and "conflict:autoscale-setting cpu-autoscale" in text and "would scale 2 -> 3" in text
    assert "other-plan" not in text
    assert row.metrics.get("would_scale_to") == 3

    loop.arm.autoscale.set_enabled("cpu-autoscale", False)
    [outcome] = loop.step(HIGH)  # the first evaluation after it is disabled acts
    assert outcome.status == "applied" and loop.capacity() == 3


def test_the_scale_service_writes_nothing_while_a_setting_drives_the_plan(endpoint):
    """A setting created after the sample was collected: evaluate acted, scale refuses the write."""
    loop = Loop(endpoint)
    collected = T0
    loop.clock.now = collected + timedelta(seconds=5)
    outcome = loop.evaluate.handle(queue_sample("orders", collected, HIGH, 2).to_json())
    loop.arm.autoscale.add("created-meanwhile", loop.target.plan.resource_id)
    [result] = [loop.scale.handle(message) for message in outcome.messages]
    assert result.status == CONFLICT and "created-meanwhile" in result.detail
    assert loop.plan_writes() == 0
    [row] = [row for row in loop.store.decisions("orders") if row.acts]
    assert row.outcome == CONFLICT


def test_a_plan_resized_from_outside_more_than_three_times_in_an_hour_is_held_until_resume(endpoint):
    loop = Loop(endpoint, capacity=3)
    loop.step(LOW)
    resize_to = [5, 6, 4, 7]
    for index, capacity in enumerate(resize_to):
        loop.arm.add_plan(loop.target.plan.resource_id, capacity=capacity)  # the stand-in writer
        loop.step(LOW)
        loop.step(LOW)
        if index < 3:
            assert loop.capacity() == 3, index  # reverted: on_external_change revert
    writes_before = loop.plan_writes()
    assert loop.capacity() == 7  # the fourth resize in the hour is not answered
    for _ in range(3):
        loop.step(HIGH)
    assert loop.plan_writes() == writes_before and loop.capacity() == 7
    [row] = loop.rows(EXTERNAL_WRITER)
    text = " ".join(row.reasons)
    assert not row.acts and "4 times within the hour" in text
    assert all(f"->{capacity}" in text for capacity in resize_to)

    loop.pauses.resume("orders", requested_by="operator")
    [outcome] = loop.step(HIGH)
    assert outcome.status == "applied" and loop.capacity() == 8
    assert loop.rows("external_change")[-1].capacity_before == 4  # the three before were answered, logged


def test_a_refused_list_of_autoscale_settings_names_the_action_to_grant(endpoint):
    loop = Loop(endpoint)
    loop.arm.autoscale.denied = True
    with pytest.raises(PlanError, match="403.*autoscalesettings/read"):
        loop.plans.enabled_autoscale_settings(loop.target.plan.resource_id)
    [outcome] = loop.step(HIGH)  # neither collect nor scale blocks on it: the write goes through
    assert outcome.status == "applied"


@pytest.fixture
def tables(azurite, unique_name):
    from scaling.storage.base import TableNames
    from scaling.storage.tables import TableStorage

    made = TableStorage.from_connection_string(azurite.connection_string, TableNames.with_prefix(unique_name))
    made.ensure_tables()
    yield made
    made.close()


def test_resizes_by_a_setting_that_holds_the_target_are_its_own_and_disabling_it_resumes_at_once(endpoint, tables):
    """Issue 49: on d0d07e7 the setting's resizes were counted as an external writer's; after
    four the hold latched, and the target stayed held after the setting was disabled."""
    loop = Loop(endpoint, store=tables)
    loop.arm.autoscale.add("cpu-autoscale", loop.target.plan.resource_id)
    for capacity in (3, 5, 4, 6, 5, 4):  # the setting moves the plan, six times in six minutes
        loop.arm.add_plan(loop.target.plan.resource_id, capacity=capacity)
        assert loop.step(HIGH) == []
    assert loop.plan_writes() == 0
    stored = tables.load_state("orders")
    assert (stored.external_writer, stored.external_changes) == (None, ())
    assert loop.rows(EXTERNAL_WRITER) == [] and loop.rows("external_change") == []
    # Its last resize lands just before it is disabled: still the setting's, never reverted.
    loop.arm.add_plan(loop.target.plan.resource_id, capacity=6)
    loop.arm.autoscale.set_enabled("cpu-autoscale", False)
    [outcome] = loop.step(HIGH)  # the first evaluation after it is disabled acts, from what the plan has
    assert (outcome.status, outcome.capacity_before, outcome.capacity_after) == ("applied", 6, 7)
    assert loop.rows("external_change") == [] and tables.load_state("orders").external_changes == ()


def test_an_enabled_setting_kept_in_another_resource_group_holds_the_target(endpoint, tables):
    """Issue 49: Azure lets a setting live anywhere in the plan's subscription; on d0d07e7 only the
    plan's resource group was listed, so this one was never seen and the autoscaler wrote."""
    loop = Loop(endpoint, store=tables)
    loop.arm.autoscale.add("ops-autoscale", loop.target.plan.resource_id, resource_group="rg-operations")
    for _ in range(2):
        assert loop.step(HIGH) == []
    assert loop.plan_writes() == 0 and loop.capacity() == 2
    [row] = loop.rows(AUTOSCALE_SETTING)
    assert "conflict:autoscale-setting ops-autoscale" in " ".join(row.reasons)
    assert all("/resourcegroups/" not in path.lower() for _, path in loop.arm.autoscale.requests)  # the subscription's
    loop.arm.autoscale.set_enabled("ops-autoscale", False)
    [outcome] = loop.step(HIGH)
    assert outcome.status == "applied" and loop.capacity() == 3


def test_a_refused_subscription_list_falls_back_to_the_plans_resource_group(endpoint, tables):
    """The role on the plan's resource group only (as azd assigns it): today's behaviour, a setting
    there still holds the target; the subscription is not asked again within the hour."""
    loop = Loop(endpoint, store=tables)
    loop.arm.autoscale.subscription_denied = True
    loop.arm.autoscale.add("cpu-autoscale", loop.target.plan.resource_id)
    for _ in range(3):
        assert loop.step(HIGH) == []
    assert loop.plan_writes() == 0 and loop.rows(AUTOSCALE_SETTING)
    paths = [path.lower() for _, path in loop.arm.autoscale.requests]
    assert sum("/resourcegroups/" not in path for path in paths) == 1  # refused once, then remembered
    assert sum("/resourcegroups/rg-consumers/" in path for path in paths) == len(paths) - 1
