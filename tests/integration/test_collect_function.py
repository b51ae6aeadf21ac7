"""The collect function invoked in-process, its bindings, and its messages on a real Azurite queue.

The hubs are ``StandInHub``s (stand-ins behind ``PartitionSource``; no Event Hubs emulator can
run here); checkpoints are real blobs in Azurite written by the real ``BlobCheckpointStore``;
the produced messages go through a real Azurite queue and back through ``parse_sample``.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import azure.functions as func
import pytest
from azure.eventhub.extensions.checkpointstoreblobaio import BlobCheckpointStore
from azure.functions.timer import TimerRequest  # the concrete request the worker builds
from azure.storage.blob.aio import BlobServiceClient, ContainerClient
from azure.storage.queue import QueueClient

from scaling.domain.policy import policy_from_dict
from scaling.domain.samples import parse_sample
from scaling.functions import collect as collect_module
from scaling.plans.appservice import AppServicePlanAdapter
from scaling.services.collect import Collector
from scaling.settings import SettingsError
from scaling.sources.checkpoints import BlobMetadataCheckpointReader
from scaling.sources.eventhub import EventHubBinding, EventHubReader, PartitionProperties
from scaling.sources.standins import FixedCapacity, StandInHub

FQNS = "orders-ns.servicebus.windows.net"
PLAN = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/serverfarms/{}"
NOW = datetime(2026, 7, 1, 8, 30, 0, 250_000, tzinfo=UTC)


class OutCollector(func.Out):
    """Collects what the function sets on its output binding, like the host does."""

    def __init__(self) -> None:
        self.value = None

    def set(self, val) -> None:
        self.value = val

    def get(self):
        return self.value


def collect_function(app: func.FunctionApp):
    # get_functions() remembers the names it returned (functions_bindings) and raises "does not
    # have a unique function name" when called again on the same app; the host calls it once per
    # process, tests on the shared function_app.app call it many times, so start from scratch.
    app.functions_bindings = None
    [function] = [f for f in app.get_functions() if f.get_function_name() == "collect"]
    return function


def check_bindings(function) -> None:
    document = json.loads(function.get_function_json())
    by_type = {binding["type"]: binding for binding in document["bindings"]}
    assert by_type["timerTrigger"] == {"direction": "IN", "type": "timerTrigger", "name": "timer",
                                       "schedule": "%COLLECT_SCHEDULE%", "runOnStartup": False}
    assert by_type["queue"] == {"direction": "OUT", "type": "queue", "name": "metrics", "queueName": "metrics",
                                "connection": "AzureWebJobsStorage"}
    assert {b.type for b in function.get_bindings()} == {"timerTrigger", "queue"}


def test_blueprint_declares_a_timer_trigger_and_a_queue_output_to_metrics():
    app = func.FunctionApp()
    app.register_functions(collect_module.blueprint)
    check_bindings(collect_function(app))


@pytest.fixture
def clean_service():
    previous = collect_module.set_service(None)
    yield
    collect_module.set_service(previous)


def policy_document() -> dict:
    def hub_source(name: str, hub: str) -> dict:
        return {"kind": "eventhub", "name": name, "eventHubName": hub, "fullyQualifiedNamespace": FQNS,
                "storageConnectionFromEnv": "CHECKPOINTS"}

    return {"targets": [
        {"name": "orders", "plan": {"resource_id": PLAN.format("orders")},
         "sources": [hub_source("orders", "Orders-Hub"), hub_source("refunds", "Refunds")]},
        {"name": "audit", "plan": {"resource_id": PLAN.format("audit")}, "sources": [hub_source("audit", "Audit")]},
    ]}


def test_the_function_emits_one_sample_per_target_that_round_trips_through_a_real_queue(
        storage_connection_string, unique_name, clean_service):
    hubs = {
        "orders": StandInHub([PartitionProperties(str(i), 0, 100 + i, False) for i in range(4)]),
        "refunds": StandInHub([PartitionProperties("0", 0, 9, False)], fail_with=ConnectionError("link detached")),
        "audit": StandInHub([PartitionProperties("0", 5, 5, False), PartitionProperties("1", 0, -1, True)]),
    }

    async def scenario():
        async with BlobServiceClient.from_connection_string(storage_connection_string) as service:
            await service.create_container(unique_name)
        async with BlobCheckpointStore.from_connection_string(storage_connection_string, unique_name) as store:
            for pid, sequence in (("0", 90), ("1", 101), ("2", 2)):
                await store.update_checkpoint({"fully_qualified_namespace": FQNS, "eventhub_name": "Orders-Hub",
                                               "consumer_group": "$Default", "partition_id": pid,
                                               "sequence_number": sequence, "offset": "0"})
        container = ContainerClient.from_connection_string(storage_connection_string, unique_name)
        checkpoints = BlobMetadataCheckpointReader(container)
        reader = EventHubReader(lambda source: EventHubBinding(hubs[source.name], checkpoints, FQNS),
                                closers=(container.close,))
        collector = Collector(policy_from_dict(policy_document()), [reader], FixedCapacity({"orders": 3, "audit": 1}),
                              concurrency=4, timeout_seconds=5, clock=lambda: NOW)
        collect_module.set_service(collector)
        out = OutCollector()
        user_function = collect_function(app).get_user_function()
        try:
            await user_function(timer=TimerRequest(past_due=True), metrics=out)
        finally:
            await collector.aclose()
        return out.value

    app = func.FunctionApp()
    app.register_functions(collect_module.blueprint)
    messages = asyncio.run(scenario())
    assert isinstance(messages, list) and len(messages) == 2 and all(isinstance(m, str) for m in messages)

    queue = QueueClient.from_connection_string(storage_connection_string, unique_name)
    queue.create_queue()
    for message in messages:
        queue.send_message(message)
    received = [m.content for m in queue.receive_messages(messages_per_page=32)]
    queue.delete_queue()
    samples = {s.target: s for s in (parse_sample(body, now=NOW) for body in received)}

    orders, audit = samples["orders"], samples["audit"]
    assert orders.collected_at == datetime(2026, 7, 1, 8, 30, 0, tzinfo=UTC)
    assert orders.capacity == 3 and audit.capacity == 1
    hub, refunds = orders.sources
    assert [p.backlog for p in hub.partitions] == [10, 0, 100, 104]  # 100-90, 101-101, 102-2, no checkpoint: 103-0+1
    assert (refunds.ok, refunds.error) == (False, "ConnectionError: link detached")
    assert orders.backlog == 214 and orders.ok is False
    assert audit.ok and [p.backlog for p in audit.sources[0].partitions] == [1, 0]
    # no claim written at all: ownership not collected (None), not "nobody serves" (0)
    assert (audit.sources[0].owners, audit.sources[0].unowned_partitions, audit.sources[0].notes) == (None, ("0", "1"), ())


def test_a_configuration_error_surfaces_at_the_first_invocation_naming_the_setting(monkeypatch, clean_service):
    for name in ("AUTOSCALER_POLICY", "AUTOSCALER_POLICY_FILE"):
        monkeypatch.delenv(name, raising=False)
    app = func.FunctionApp()
    app.register_functions(collect_module.blueprint)  # registering needs no settings
    user_function = collect_function(app).get_user_function()
    with pytest.raises(SettingsError, match="^AUTOSCALER_POLICY"):
        asyncio.run(user_function(timer=TimerRequest(), metrics=OutCollector()))


def test_a_missing_connection_variable_is_named_at_the_first_invocation(monkeypatch, clean_service, storage_connection_string):
    monkeypatch.setenv("AUTOSCALER_POLICY", json.dumps(policy_document()))
    monkeypatch.setenv("AzureWebJobsStorage", storage_connection_string)
    monkeypatch.delenv("CHECKPOINTS", raising=False)
    with pytest.raises(SettingsError, match=r"^CHECKPOINTS \(targets\[0\]\.sources\[0\]\.storageConnectionFromEnv\) is not set"):
        collect_module.get_service()


def test_the_service_is_built_once_from_the_environment_and_reused(monkeypatch, clean_service, storage_connection_string):
    monkeypatch.setenv("AUTOSCALER_POLICY", json.dumps(policy_document()))
    monkeypatch.setenv("AzureWebJobsStorage", storage_connection_string)
    monkeypatch.setenv("CHECKPOINTS", storage_connection_string)
    monkeypatch.setenv("COLLECT_CONCURRENCY", "5")
    monkeypatch.setenv("AZURE_CLIENT_ID", "00000000-0000-0000-0000-000000000001")
    service = collect_module.get_service()
    assert collect_module.get_service() is service
    assert isinstance(service, Collector) and service.concurrency == 5
    assert isinstance(service.capacity, AppServicePlanAdapter)  # the ARM adapter reads the capacity
    asyncio.run(service.aclose())


def test_function_app_registers_collect():
    from function_app import app

    check_bindings(collect_function(app))
    assert collect_function(app).get_user_function().__module__ == "scaling.functions.collect"
