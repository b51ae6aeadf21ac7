"""The plan adapter and the scale function against a local ARM endpoint, with the REAL
``azure.mgmt.web.WebSiteManagementClient``.

How the bearer token gets through: azure-core refuses to send bearer tokens over plain http, so
the local endpoint (pytest-httpserver, ``scaling.plans.local_arm``) serves **TLS** with a
certificate from a throwaway ``trustme`` CA; the client trusts it through
``connection_verify=<ca file>`` and authenticates with a static fake token credential. No
``enforce_https`` switch is used anywhere. Tables and queues are a real Azurite.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from azure.functions.queue import QueueMessage

from scaling.domain.decisions import ScalerState
from scaling.domain.policy import PlanSettings
from scaling.functions import scale as scale_module
from scaling.plans.appservice import AppServicePlanAdapter
from scaling.plans.base import PlanError, PlanNotFoundError
from scaling.plans.local_arm import LocalArm, serve_local_arm
from scaling.services.evaluate import EvaluateService
from scaling.services.scale import ScaleService
from scaling.storage.base import TableNames
from scaling.storage.records import StoredState
from scaling.storage.synthetic import plan_id, policy_of, queue_sample, rules_target
from scaling.storage.tables import TableStorage
from tests.helpers import Clock, app_function

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
HIGH = 5000


@pytest.fixture(scope="module")
def endpoint():
    with serve_local_arm() as served:
        yield served


@pytest.fixture
def arm(endpoint):
    endpoint.arm.plans.clear()
    endpoint.arm.writes.clear()
    endpoint.arm.requests.clear()
    endpoint.arm.faults.clear()
    return endpoint.arm


def adapter_for(endpoint, **kwargs) -> AppServicePlanAdapter:
    options = {"retry_total": 3, "retry_backoff_factor": 0.01, "polling_interval": 0, **kwargs}
    return AppServicePlanAdapter(endpoint.credential, base_url=endpoint.base_url, **options, **endpoint.client_kwargs())


@pytest.fixture
def adapter(endpoint, arm):
    plans = adapter_for(endpoint)
    yield plans
    plans.close()


DEDICATED = plan_id("plan-orders")
ELASTIC = plan_id("plan-elastic")


# --- the adapter -----------------------------------------------------------------------------------


def test_reads_a_dedicated_plan(adapter, arm):
    arm.add_plan(DEDICATED, capacity=2, tier="Standard")
    info = adapter.get_plan(DEDICATED)
    assert (info.capacity, info.sku_name, info.sku_tier, info.max_instances, info.kind) == (2, "S1", "Standard", 10, "dedicated")
    assert arm.requests[0][0] == "GET"


def test_resizes_a_dedicated_plan_with_one_put_of_the_plan_as_read(adapter, arm):
    arm.add_plan(DEDICATED, capacity=2, tier="PremiumV3")
    info = adapter.set_capacity(DEDICATED, 5)
    assert info.capacity == 5 and arm.capacity(DEDICATED) == 5
    [write] = arm.writes
    assert write.method == "PUT" and write.body["sku"]["capacity"] == 5
    assert write.body["sku"]["name"] == "P1v3" and write.body["location"] == "West Europe"
    assert write.body["properties"]["reserved"] is True  # the rest of the plan is sent back unchanged


def test_resizes_an_elastic_premium_plan_through_its_maximum_burst(adapter, arm):
    arm.add_plan(ELASTIC, capacity=1, tier="ElasticPremium", maximum_elastic_worker_count=4)
    info = adapter.get_plan(ELASTIC)
    assert (info.kind, info.capacity, info.minimum_capacity, info.max_instances) == ("elastic", 4, 1, 100)
    adapter.set_capacity(ELASTIC, 9)
    [write] = arm.writes
    assert write.body["properties"]["maximumElasticWorkerCount"] == 9 and write.body["sku"]["capacity"] == 1


def test_writes_nothing_when_the_capacity_is_already_there(adapter, arm):
    arm.add_plan(DEDICATED, capacity=3)
    assert adapter.set_capacity(DEDICATED, 3).capacity == 3
    assert arm.writes == [] and [method for method, _ in arm.requests] == ["GET"]


def test_429_with_retry_after_is_waited_out_and_retried(adapter, arm):
    arm.add_plan(DEDICATED, capacity=2)
    arm.fail(429, retry_after="1")
    started = time.monotonic()
    assert adapter.get_plan(DEDICATED).capacity == 2
    assert time.monotonic() - started >= 0.9
    assert len(arm.requests) == 2


def test_500_is_retried(adapter, arm):
    arm.add_plan(DEDICATED, capacity=2)
    arm.fail(500, times=2)
    assert adapter.get_plan(DEDICATED).capacity == 2
    assert len(arm.requests) == 3


def test_409_another_operation_in_progress_is_retried_for_the_put(adapter, arm):
    arm.add_plan(DEDICATED, capacity=2)
    arm.fail(409, method="PUT", code="Conflict", message="Another operation on this plan is in progress")
    assert adapter.set_capacity(DEDICATED, 4).capacity == 4
    # Read back before the PUT goes again: a refused write is never repeated blindly.
    assert [method for method, _ in arm.requests] == ["GET", "PUT", "GET", "PUT"]
    assert len(arm.writes) == 1


def test_404_is_a_clear_not_found_error(adapter, arm):
    with pytest.raises(PlanNotFoundError, match=r"plan .*plan-orders not found \(404\)"):
        adapter.get_plan(DEDICATED)
    assert len(arm.requests) == 1  # not retried


def test_retries_are_bounded_and_the_final_error_names_the_status(endpoint, arm):
    arm.add_plan(DEDICATED, capacity=2)
    arm.fail(503, times=50)
    plans = adapter_for(endpoint, retry_total=2)
    with pytest.raises(PlanError, match="ARM answered 503"):
        plans.set_capacity(DEDICATED, 4)
    assert len(arm.requests) == 3 and arm.writes == []
    plans.close()


def test_current_capacity_serves_the_collector(adapter, arm):
    arm.add_plan(DEDICATED, capacity=6)
    assert asyncio.run(adapter.current_capacity(PlanSettings(DEDICATED))) == 6


# --- the scale function, in-process ---------------------------------------------------------------


@pytest.fixture(scope="module")
def scale_function():
    return app_function("scale").get_user_function()


class Setup:
    def __init__(self, azurite, unique_name, endpoint, *, tier="Standard", capacity=2, dry_run=False, **target_kwargs):
        self.target = rules_target("orders", **{"min_samples": 1, "up_cooldown": 600, **target_kwargs})
        self.tables = TableStorage.from_connection_string(azurite.connection_string, TableNames.with_prefix(unique_name))
        self.tables.ensure_tables()
        self.tables.commit(StoredState(ScalerState("orders", capacity=capacity)))
        self.clock = Clock(T0)
        self.plans = adapter_for(endpoint)
        endpoint.arm.add_plan(self.target.plan.resource_id, capacity=capacity, tier=tier)
        policy = policy_of(self.target)
        self.evaluate = EvaluateService(self.tables, policy, clock=self.clock)
        self.scale = ScaleService(self.tables, self.plans, policy, dry_run=dry_run, clock=self.clock)
        self.minute = 0

    def decide(self, backlog: int = HIGH, capacity: int | None = None) -> str:
        sample = queue_sample("orders", T0 + timedelta(minutes=self.minute), backlog, capacity)
        self.minute += 1
        self.clock.now = sample.collected_at + timedelta(seconds=5)
        [message] = self.evaluate.handle(sample.to_json()).messages
        return message

    def close(self):
        self.plans.close()
        self.tables.close()


@pytest.fixture
def setup(azurite, unique_name, endpoint, arm):
    made = []

    def build(**kwargs):
        made.append(Setup(azurite, unique_name, endpoint, **kwargs))
        return made[-1]

    previous = scale_module.set_service(None)
    yield build
    scale_module.set_service(previous)
    for item in made:
        item.close()


def invoke(function, body: str, dequeue_count: int = 1) -> None:
    function(QueueMessage(id="a", body=body.encode(), dequeue_count=dequeue_count))


def test_duplicated_actions_write_the_plan_once(scale_function, setup, arm):
    world = setup()
    scale_module.set_service(world.scale)
    message = world.decide()
    for count in (1, 1, 2):
        invoke(scale_function, message, count)
    assert [write.body["sku"]["capacity"] for write in arm.writes] == [3]
    [row] = [row for row in world.tables.decisions("orders") if row.acts]
    assert row.outcome == "applied"
    assert world.tables.get_applied("orders", json.loads(message)["decision_id"]).capacity_after == 3


def test_the_target_is_clamped_to_the_skus_instance_limit(scale_function, setup, arm):
    world = setup(tier="Basic", capacity=3, max_instances=8)
    scale_module.set_service(world.scale)
    body = json.loads(world.decide(capacity=3))
    assert body["target_capacity"] == 4
    invoke(scale_function, json.dumps(body))
    assert arm.writes == []  # Basic allows 3: already there, nothing written
    record = world.tables.get_applied("orders", body["decision_id"])
    assert record.status == "unchanged" and "clamped 4 -> 3" in record.detail


def test_a_final_arm_failure_is_recorded_and_the_next_evaluation_decides_again(scale_function, setup, arm):
    world = setup()
    scale_module.set_service(world.scale)
    message = world.decide()
    arm.fail(500, method="PUT", times=20)
    invoke(scale_function, message)  # returns normally: recorded, not retried by the queue
    [row] = [row for row in world.tables.decisions("orders") if row.acts]
    assert row.outcome == "failed" and "ARM answered 500" in row.outcome_detail
    state = world.tables.load_state("orders").state
    assert state.last_action_at is None and state.capacity == 2
    arm.faults.clear()
    retry = world.decide(capacity=2)  # a minute later, inside the 600 s cooldown it would have had
    invoke(scale_function, retry)
    assert arm.capacity(world.target.plan.resource_id) == 3


def test_a_missing_plan_is_reported_as_not_found(scale_function, setup, arm):
    world = setup()
    scale_module.set_service(world.scale)
    message = world.decide()
    arm.plans.clear()
    invoke(scale_function, message)
    [row] = [row for row in world.tables.decisions("orders") if row.acts]
    assert row.outcome == "failed" and "not found" in row.outcome_detail


def test_dry_run_calls_no_arm(scale_function, setup, arm):
    world = setup(dry_run=True)
    scale_module.set_service(world.scale)
    invoke(scale_function, world.decide())
    assert arm.requests == []
    [row] = [row for row in world.tables.decisions("orders") if row.acts]
    assert row.outcome == "dry_run" and "would set plan" in row.outcome_detail


def test_a_malformed_action_is_dead_lettered(scale_function, setup, arm):
    world = setup()
    scale_module.set_service(world.scale)
    invoke(scale_function, '{"schema_version": 1}')
    [letter] = world.tables.dead_letters_for("scale")
    assert letter.body == '{"schema_version": 1}' and "missing" in letter.error
    assert arm.requests == []


def test_local_arm_resource_ids_match_the_policy_shape():
    assert LocalArm.resource_id("s", "g", "p") == "/subscriptions/s/resourceGroups/g/providers/Microsoft.Web/serverfarms/p"


def _forged(world, **changes) -> str:
    """An action as anyone with write access to the actions queue could send it: well formed, for
    the policy's target and plan, ``decided_at`` 59 s ahead (inside the clock tolerance)."""
    action = {"schema_version": 1, "decision_id": "0123456789abcdef01234567", "target": "orders",
              "plan_resource_id": world.target.plan.resource_id, "target_capacity": 8, "direction": "up",
              "reason": "backlog_high: forged", **changes,
              "decided_at": (world.clock.now + timedelta(seconds=59)).isoformat().replace("+00:00", "Z")}
    return json.dumps(action)


@pytest.mark.parametrize("case", ["unknown-decision", "real-decision-other-capacity"])
def test_an_action_evaluate_never_committed_is_dead_lettered_and_writes_nothing(scale_function, setup, arm, case):
    """Issue 49: on d0d07e7 a forged action inside the clock tolerance resized the plan."""
    world = setup()
    scale_module.set_service(world.scale)
    real = json.loads(world.decide())  # evaluate committed 3
    changes = {"decision_id": real["decision_id"], "target_capacity": 7} if case == "real-decision-other-capacity" else {}
    invoke(scale_function, _forged(world, **changes))
    assert [request for request in arm.requests if request.method == "PUT"] == []
    [letter] = world.tables.dead_letters_for("scale")
    expected = "evaluate committed 3 for it" if changes else "was not committed by evaluate"
    assert expected in letter.error, letter.error
    invoke(scale_function, json.dumps(real))  # the real decision still applies
    assert [write.body["sku"]["capacity"] for write in arm.writes] == [3]


def test_an_action_whose_outbox_entry_moved_on_is_found_in_the_decision_log(scale_function, setup, arm):
    """A genuine action delivered late, after more than the outbox keeps: matched by its row."""
    from dataclasses import replace

    world = setup()
    scale_module.set_service(world.scale)
    message = world.decide()
    stored = world.tables.load_state("orders")
    world.tables.commit(replace(stored, outbox=(), desired=None))  # as if many newer actions had pushed it out
    invoke(scale_function, message)
    assert [write.body["sku"]["capacity"] for write in arm.writes] == [3]
    assert world.tables.dead_letters_for("scale") == []
