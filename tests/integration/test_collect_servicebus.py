"""Service Bus counts on the management plane: the collect function with the REAL
``azure.mgmt.servicebus.aio.ServiceBusManagementClient`` against the local ARM endpoint
(``scaling.plans.local_arm``: TLS, a throwaway CA, a static token), the plan capacities through
the real azure-mgmt-web client on the same endpoint, and the samples through a real Azurite queue.

Everything from the app settings on is production wiring (``Settings.from_environment``,
``collector_for``, the blueprint); only the endpoint and its certificate are local. The cases: a
queue, a topic subscription, a queue that does not exist (404) and a namespace whose reads are
refused (403, the error names the role to assign); a refused or missing entity fails only its
own source.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import azure.functions as func
import pytest
from azure.functions.timer import TimerRequest
from azure.storage.queue import QueueClient

from scaling.bootstrap import collector_for
from scaling.domain.samples import MetricSample, parse_sample
from scaling.functions import collect as collect_module
from scaling.plans.appservice import AppServicePlanAdapter
from scaling.plans.local_arm import AsyncStaticTokenCredential, EntityCounts, LocalArm, serve_local_arm
from scaling.settings import Settings
from tests.integration.test_collect_function import OutCollector, collect_function

NOW = datetime(2026, 7, 1, 8, 30, 0, tzinfo=UTC)
SUBSCRIPTION = "11111111-2222-3333-4444-555555555555"
JOBS_NS = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-jobs/providers/Microsoft.ServiceBus/namespaces/jobs-ns"
LOCKED_NS = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-locked/providers/Microsoft.ServiceBus/namespaces/locked-ns"
PLAN = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-apps/providers/Microsoft.Web/serverfarms/{{}}"


def target(name: str, source: dict) -> dict:
    return {"name": name, "plan": {"resource_id": PLAN.format(name)}, "mode": "rules",
            "rules": [{"name": "backlog", "metric": "backlog", "scale_up_above": 100, "scale_down_below": 10}],
            "sources": [{"kind": "servicebus", "name": name, **source}]}


POLICY = {"version": 1, "targets": [
    target("jobs", {"queueName": "jobs", "namespaceResourceId": JOBS_NS}),
    target("billing", {"topicName": "events", "subscriptionName": "billing", "namespaceResourceId": JOBS_NS,
                       "fullyQualifiedNamespace": "jobs-ns.servicebus.windows.net"}),
    target("missing", {"queueName": "nope", "namespaceResourceId": JOBS_NS}),
    target("locked", {"queueName": "payments", "namespaceResourceId": LOCKED_NS}),
]}


@pytest.fixture
def clean_service():
    previous = collect_module.set_service(None)
    yield
    collect_module.set_service(previous)


def collect_through_the_function(storage_connection_string: str, unique_name: str, arm: LocalArm) -> dict[str, MetricSample]:
    """One collect invocation over the policy above; the samples as the evaluate side parses them
    off a real queue."""
    with serve_local_arm(arm) as endpoint:
        settings = Settings.from_environment({"AUTOSCALER_POLICY": json.dumps(POLICY),
                                              "AzureWebJobsStorage": storage_connection_string,
                                              "ARM_ENDPOINT": endpoint.base_url})

        async def scenario() -> list[str]:
            plans = AppServicePlanAdapter(endpoint.credential, base_url=endpoint.base_url, **endpoint.client_kwargs())
            collector = collector_for(settings, AsyncStaticTokenCredential(), capacity_reader=plans, environ={},
                                      clock=lambda: NOW, arm_client_kwargs=endpoint.client_kwargs())
            collect_module.set_service(collector)
            out = OutCollector()
            try:
                await collect_function(app).get_user_function()(timer=TimerRequest(), metrics=out)
            finally:
                await collector.aclose()
                plans.close()
            return out.value

        app = func.FunctionApp()
        app.register_functions(collect_module.blueprint)
        messages = asyncio.run(scenario())

    queue = QueueClient.from_connection_string(storage_connection_string, unique_name)
    queue.create_queue()
    try:
        for message in messages:
            queue.send_message(message)
        received = [m.content for m in queue.receive_messages(messages_per_page=32)]
    finally:
        queue.delete_queue()
    return {sample.target: sample for sample in (parse_sample(body, now=NOW) for body in received)}


def local_namespaces() -> LocalArm:
    arm = LocalArm()
    for name, capacity in (("jobs", 2), ("billing", 3), ("missing", 1), ("locked", 4)):
        arm.add_plan(PLAN.format(name), capacity=capacity)
    arm.service_bus.add_queue(JOBS_NS, "jobs", EntityCounts(active=1234, dead_letter=7, scheduled=5))
    arm.service_bus.add_subscription(JOBS_NS, "events", "billing", EntityCounts(active=56, dead_letter=2, transfer=1))
    arm.service_bus.add_queue(LOCKED_NS, "payments", EntityCounts(active=99))
    arm.service_bus.deny(LOCKED_NS)
    return arm


def test_queue_and_subscription_counts_come_from_the_management_plane(storage_connection_string, unique_name,
                                                                      clean_service):
    arm = local_namespaces()
    samples = collect_through_the_function(storage_connection_string, unique_name, arm)

    jobs, billing = samples["jobs"], samples["billing"]
    # The active count only: dead letters, scheduled and transfer messages are nobody's backlog.
    assert (jobs.ok, jobs.capacity, jobs.sources[0].active_messages, jobs.backlog) == (True, 2, 1234, 1234)
    assert (billing.ok, billing.capacity, billing.sources[0].active_messages) == (True, 3, 56)
    reads = {path: version for method, path, version in arm.service_bus.requests if method == "GET"}
    assert reads == {
        f"{JOBS_NS}/queues/jobs": "2026-01-01",
        f"{JOBS_NS}/topics/events/subscriptions/billing": "2026-01-01",
        f"{JOBS_NS}/queues/nope": "2026-01-01",
        f"{LOCKED_NS}/queues/payments": "2026-01-01",
    }
    assert all(method == "GET" for method, _, _ in arm.service_bus.requests)  # reads only, never a write


def test_a_missing_entity_and_a_refused_namespace_fail_only_their_own_source(storage_connection_string, unique_name,
                                                                             clean_service):
    samples = collect_through_the_function(storage_connection_string, unique_name, local_namespaces())

    missing, locked = samples["missing"].sources[0], samples["locked"].sources[0]
    assert (missing.ok, missing.active_messages) == (False, None)
    assert missing.error == (f"404 NotFound: queue 'nope' does not exist in Service Bus namespace {JOBS_NS} "
                             "(check queueName / topicName / subscriptionName and namespaceResourceId)")
    assert (locked.ok, locked.active_messages) == (False, None)
    assert locked.error.startswith(f"403 AuthorizationFailed: reading queue 'payments' of Service Bus namespace {LOCKED_NS} "
                                   "is not authorized: assign the autoscaler's identity the Service Bus entity reader role")
    assert "or Reader on the namespace" in locked.error
    # The capacity is still read, and the healthy targets are untouched.
    assert (samples["missing"].capacity, samples["locked"].capacity) == (1, 4)
    assert samples["jobs"].ok and samples["billing"].ok
