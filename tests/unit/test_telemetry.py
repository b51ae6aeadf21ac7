"""Telemetry: a scripted run (collect on a stand-in hub, evaluate and scale on memory storage and an
in-memory plan) reports every metric of the contract with the right values, and one decision is
one trace, collect -> evaluate -> scale, linked through the queue messages. The SDK's in-memory
reader and exporter are passed in through the adapter; nothing global is configured."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from scaling import bootstrap
from scaling.domain.namespace.samples import NamespaceSample
from scaling.domain.namespace.sizing import NamespaceMinute
from scaling.domain.policy import policy_from_dict
from scaling.domain.samples import SampleError, parse_sample
from scaling.domain.telemetry import DECISION_ID_ATTRIBUTE, METRICS
from scaling.plans.memory import InMemoryPlans
from scaling.services.collect import Collector
from scaling.services.dead_letters import DeadLetterService, LastErrors
from scaling.services.evaluate import EvaluateService
from scaling.services.namespace import NamespaceEvaluateService
from scaling.services.scale import ScaleService
from scaling.services.telemetry import NO_TELEMETRY
from scaling.sources.checkpoints import CheckpointSnapshot
from scaling.sources.eventhub import EventHubBinding, EventHubReader, PartitionProperties
from scaling.sources.standins import StandInHub
from scaling.storage.actions import ActionError, parse_action
from scaling.storage.memory import MemoryStorage
from scaling.telemetry import monitor
from scaling.telemetry.otel import OpenTelemetry
from tests.helpers import Clock

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 5, 4, 3, 0, tzinfo=UTC)
PLAN = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/serverfarms/{}"
NAMESPACE = "NS.servicebus.windows.net"
EH_NAMESPACE = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/NS"
PARTITIONS = 4
ARRIVALS_PER_MINUTE = 6000  # per partition
PROCESSED_PER_MINUTE = 5000  # per partition: the checkpoints advance this much
MINUTES = 8


def eventhub(name: str) -> dict:
    return {"kind": "eventhub", "name": name, "eventHubName": name, "fullyQualifiedNamespace": NAMESPACE,
            "checkpointAccountUrl": "https://acct.blob.core.windows.net"}


@dataclass
class MovingCheckpoints:
    """Every partition checkpointed at ``at``: the consumers process as the test says."""

    at: int = 0
    ownership: tuple = field(default=())

    async def read(self, location, gate=None) -> CheckpointSnapshot:
        return CheckpointSnapshot(checkpoints={str(i): self.at for i in range(PARTITIONS)}, ownership=(), notes=())


@dataclass
class Run:
    """What the scripted run left behind."""

    reader: InMemoryMetricReader
    spans: InMemorySpanExporter
    first_action: dict
    first_sample: dict

    def points(self) -> dict[tuple[str, frozenset], object]:
        """(metric, attributes) -> the value of a gauge or counter, (count, sum) of a histogram."""
        found = {}
        for resource in self.reader.get_metrics_data().resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        key = (metric.name, frozenset(point.attributes.items()))
                        found[key] = (point.count, point.sum) if hasattr(point, "bucket_counts") else point.value
        return found


def scripted_run() -> Run:
    reader = InMemoryMetricReader()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = OpenTelemetry(MeterProvider(metric_readers=[reader]), tracer_provider)

    policy = policy_from_dict({"targets": [
        {"name": "orders", "plan": {"resource_id": PLAN.format("orders")}, "sources": [eventhub("orders")]},
        {"name": "billing", "plan": {"resource_id": PLAN.format("billing")}, "sources": [eventhub("billing")]},
    ], "namespaces": [{"name": "orders-ns", "resource_id": EH_NAMESPACE, "consumer_targets": ["orders"]}]})
    hubs = {"orders": StandInHub.uniform(PARTITIONS), "billing": StandInHub(fail_with=ConnectionError("hub unreachable"))}
    checkpoints = MovingCheckpoints()
    plans = InMemoryPlans()
    plans.add(PLAN.format("orders"), 1)
    plans.add(PLAN.format("billing"), 2)
    store = MemoryStorage()
    clock = Clock(T0)
    ticks = iter(range(0, 10_000, 25))  # every ARM write takes 25 ms on this timer
    collector = Collector(policy, [EventHubReader(lambda source: EventHubBinding(hubs[source.name], checkpoints, NAMESPACE),
                                                  ownership_expiry_seconds=60)],
                          plans, clock=clock, telemetry=telemetry)
    namespaces = NamespaceEvaluateService(store, policy, clock=clock, telemetry=telemetry)
    evaluate = EvaluateService(store, policy, clock=clock, telemetry=telemetry, namespaces=namespaces)
    scale = ScaleService(store, plans, policy, clock=clock, telemetry=telemetry, timer=lambda: next(ticks) / 1000)

    first_action = first_sample = None
    for minute in range(MINUTES):
        now = T0 + timedelta(minutes=minute)
        for i in range(PARTITIONS):
            hubs["orders"].partitions[str(i)] = PartitionProperties(str(i), 0, ARRIVALS_PER_MINUTE * (minute + 1), False)
        checkpoints.at = PROCESSED_PER_MINUTE * minute
        clock.now = now
        messages = asyncio.run(collector.collect_messages(now))
        # the namespace target: 2 TUs, throttled 7 times in its latest minute
        messages.append(NamespaceSample("orders-ns", now, 2, minutes=(NamespaceMinute(now - timedelta(minutes=1),
                                                                                       throttled_requests=7.0),)).to_json())
        clock.now = now + timedelta(seconds=5)
        for message in messages:
            for action in evaluate.handle(message).messages:
                if first_action is None:
                    first_action, first_sample = json.loads(action), json.loads(message)
                scale.handle(action)
    evaluate.handle("not json")
    scale.handle('{"schema_version": 1}')
    return Run(reader, exporter, first_action, first_sample)


@pytest.fixture(scope="module")
def run() -> Run:
    return scripted_run()


def test_the_scripted_run_reports_every_metric_of_the_contract_with_its_dimensions(run: Run) -> None:
    points = run.points()
    reported = {name for name, _ in points}
    assert reported == {spec.name for spec in METRICS}
    for spec in METRICS:
        for name, attributes in points:
            if name == spec.name:
                assert {key for key, _ in attributes} == set(spec.dimensions), name


def test_the_metric_values_are_the_run_s(run: Run) -> None:
    points = run.points()

    def value(name: str, **attributes: str) -> object:
        return points[(f"autoscaler.{name}", frozenset(attributes.items()))]

    orders = {"target": "orders"}
    # The last minute: 4 partitions x 6000 events/min arrive; the checkpoints sit 13000 behind each.
    assert value("arrival_rate", source="orders", **orders) == pytest.approx(PARTITIONS * ARRIVALS_PER_MINUTE / 60)
    last = ARRIVALS_PER_MINUTE * MINUTES - PROCESSED_PER_MINUTE * (MINUTES - 1)
    assert value("backlog", source="orders", **orders) == PARTITIONS * last
    assert value("oldest_event_age_seconds", **orders) == pytest.approx(57.0)
    assert value("predicted_age_seconds", **orders) == pytest.approx(110.2)
    assert value("slo_seconds", **orders) == 300.0
    assert value("throughput_per_instance", **orders) == pytest.approx(PARTITIONS * PROCESSED_PER_MINUTE / 60 / 2)  # over 2
    # Scaled 1 -> 2 once: the next interval, unsteady, bounds the rate from below (the cold start),
    # and at that bound 2 instances keep the oldest event within the SLO's limit.
    assert value("capacity_desired", **orders) == 2
    assert value("capacity_requested", **orders) == 2
    assert value("capacity_observed", **orders) == 2
    assert value("samples", **orders) == MINUTES
    assert value("decisions", direction="up", reason="throughput_unknown_backlog_growing", **orders) == 1
    assert value("decisions", direction="none", reason="too_few_samples", **orders) == 2
    assert value("decisions", direction="none", reason="slo_steady", **orders) == 5
    assert value("arm_writes", outcome="applied", **orders) == 1
    assert value("arm_write_duration_ms", **orders) == (1, pytest.approx(25.0))
    # billing's hub fails every minute: one failure per collect, no backlog or arrivals reported.
    assert value("collection_failures", target="billing", source="billing") == MINUTES
    assert ("autoscaler.backlog", frozenset({"target": "billing", "source": "billing"}.items())) not in points
    assert ("autoscaler.collection_failures", frozenset({"target": "orders", "source": "orders"}.items())) not in points
    assert value("dead_letters", function="evaluate") == 1
    # the namespace target's TUs and throttling (issue 34)
    assert value("throughput_units", target="orders-ns") == 2
    assert value("throttled_requests", target="orders-ns") == 7.0
    assert value("samples", target="orders-ns") == MINUTES
    assert value("dead_letters", function="scale") == 1


def test_one_decision_is_one_trace_from_collect_through_evaluate_to_scale(run: Run) -> None:
    decision_id = run.first_action["decision_id"]
    spans = run.spans.get_finished_spans()
    [collect] = [s for s in spans if s.name == "collect" and s.attributes["autoscaler.sample_id"] == run.first_sample["sample_id"]]
    [evaluate] = [s for s in spans if s.name == "evaluate" and s.attributes.get(DECISION_ID_ATTRIBUTE) == decision_id]
    [scale] = [s for s in spans if s.name == "scale" and s.attributes.get(DECISION_ID_ATTRIBUTE) == decision_id]

    trace_id = collect.context.trace_id
    assert evaluate.context.trace_id == scale.context.trace_id == trace_id
    assert collect.parent is None
    assert evaluate.parent.span_id == collect.context.span_id
    assert scale.parent.span_id == evaluate.context.span_id
    assert scale.attributes["autoscaler.outcome"] == "applied"
    # The messages carry the W3C trace context of the span that sent them.
    assert run.first_sample["traceparent"].startswith(f"00-{trace_id:032x}-{collect.context.span_id:016x}-")
    assert run.first_action["traceparent"].startswith(f"00-{trace_id:032x}-{evaluate.context.span_id:016x}-")
    # Every collect run starts a trace per target: the decisions of one minute are not one trace.
    assert len({s.context.trace_id for s in spans if s.name == "collect"}) == 2 * MINUTES


def test_a_poison_message_recorded_counts_as_a_dead_letter_once() -> None:
    reader = InMemoryMetricReader()
    telemetry = OpenTelemetry(MeterProvider(metric_readers=[reader]), TracerProvider())
    service = DeadLetterService(MemoryStorage(), last_errors=LastErrors(), telemetry=telemetry)
    for _ in range(2):  # the second delivery finds the row: not counted again
        service.record_poison("scale", '{"target": "orders"}', dequeue_count=5, message_id="m-1")
    [metric] = [m for r in reader.get_metrics_data().resource_metrics for s in r.scope_metrics for m in s.metrics]
    [point] = metric.data.data_points
    assert (metric.name, dict(point.attributes), point.value) == ("autoscaler.dead_letters", {"function": "scale"}, 1)


def test_without_the_connection_string_nothing_is_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_configure(**options) -> None:
        raise AssertionError("configured without APPLICATIONINSIGHTS_CONNECTION_STRING")

    assert monitor.telemetry_from_environment({}, configure=must_not_configure) is None
    assert monitor.telemetry_from_environment({"APPLICATIONINSIGHTS_CONNECTION_STRING": " "}, configure=must_not_configure) is None
    monkeypatch.delenv("APPLICATIONINSIGHTS_CONNECTION_STRING", raising=False)
    assert bootstrap.telemetry_for({}) is NO_TELEMETRY
    assert bootstrap.telemetry_for() is NO_TELEMETRY


def test_with_the_connection_string_azure_monitor_is_configured_once_with_the_managed_identity() -> None:
    calls = []
    environ = {"APPLICATIONINSIGHTS_CONNECTION_STRING": "InstrumentationKey=00000000-0000-0000-0000-000000000000;"
                                                        "IngestionEndpoint=https://127.0.0.1/",
               "AZURE_CLIENT_ID": "client-1"}
    monitor.forget_configuration()
    try:
        first = monitor.telemetry_from_environment(environ, configure=lambda **options: calls.append(options),
                                                   credential_for=lambda client_id: f"identity {client_id}")
        again = monitor.telemetry_from_environment(environ, configure=lambda **options: calls.append(options),
                                                   credential_for=lambda client_id: f"identity {client_id}")
    finally:
        monitor.forget_configuration()
    assert isinstance(first, OpenTelemetry) and again is first
    assert calls == [{"connection_string": environ["APPLICATIONINSIGHTS_CONNECTION_STRING"],
                      "credential": "identity client-1", "logger_name": "scaling"}]


def test_the_trace_context_in_messages_is_optional_and_bounded(run: Run) -> None:
    sample = parse_sample(json.dumps(run.first_sample))
    assert sample.traceparent == run.first_sample["traceparent"]
    assert "traceparent" not in json.loads(sample.__class__(sample.target, sample.collected_at, sample.capacity,
                                                            sample.sources).to_json())
    with pytest.raises(SampleError, match="traceparent"):
        parse_sample(json.dumps({**run.first_sample, "traceparent": "0" * 500}))
    action = parse_action(json.dumps(run.first_action))
    assert action.traceparent == run.first_action["traceparent"]
    without = {key: value for key, value in run.first_action.items() if key != "traceparent"}
    assert parse_action(json.dumps(without)).traceparent is None
    assert "traceparent" not in parse_action(json.dumps(without)).to_dict()
    with pytest.raises(ActionError, match="traceparent"):
        parse_action(json.dumps({**run.first_action, "traceparent": 7}))


def test_the_contract_in_code_is_the_one_the_workbook_and_alerts_query() -> None:
    from tests.infra.bicep_rules import TELEMETRY_METRICS

    assert {spec.name: frozenset(spec.dimensions) for spec in METRICS} == TELEMETRY_METRICS


def test_the_functions_host_and_worker_run_in_opentelemetry_mode() -> None:
    host = json.loads((ROOT / "host.json").read_text(encoding="utf-8"))
    assert host["telemetryMode"] == "OpenTelemetry"
    function_bicep = (ROOT / "infra" / "app" / "function.bicep").read_text(encoding="utf-8")
    assert "name: 'PYTHON_ENABLE_OPENTELEMETRY'\n          value: 'true'" in function_bicep


def test_a_reissue_counts_as_a_decision_with_reason_reconcile_in_the_decision_s_trace() -> None:
    from tests.unit.test_reconcile_service import Loop

    reader, exporter, tracer_provider = InMemoryMetricReader(), InMemorySpanExporter(), TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = OpenTelemetry(MeterProvider(metric_readers=[reader]), tracer_provider)
    loop = Loop(telemetry=telemetry)
    loop.step(500)
    loop.lose = 1
    loop.step(5000)  # decides 3; the action is lost
    while loop.capacity() != 3:
        loop.step(500)  # the reconciliation re-issues after the grace
    reissue = loop.sent[-1]["decision_id"]
    points = Run(reader, exporter, {}, {}).points()
    orders = {"target": "orders"}
    assert points[("autoscaler.decisions", frozenset({**orders, "direction": "up", "reason": "reconcile"}.items()))] == 1
    assert points[("autoscaler.arm_writes", frozenset({**orders, "outcome": "applied"}.items()))] == 1
    [scale] = [s for s in exporter.get_finished_spans() if s.name == "scale"]
    [evaluate] = [s for s in exporter.get_finished_spans() if s.attributes.get(DECISION_ID_ATTRIBUTE) == reissue
                  and s.name == "evaluate"]
    assert scale.attributes[DECISION_ID_ATTRIBUTE] == reissue and scale.parent.span_id == evaluate.context.span_id


def test_a_failing_configuration_leaves_scaling_running_without_telemetry(caplog: pytest.LogCaptureFixture) -> None:
    calls = []

    def broken(**options) -> None:
        calls.append(options)
        raise ValueError("malformed connection string")

    monitor.forget_configuration()
    try:
        for _ in range(2):
            assert monitor.telemetry_from_environment({"APPLICATIONINSIGHTS_CONNECTION_STRING": "x"}, configure=broken,
                                                      credential_for=lambda client_id: None) is None
    finally:
        monitor.forget_configuration()
    assert len(calls) == 1 and "configuring Azure Monitor failed" in caplog.text
