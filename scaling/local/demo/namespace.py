"""``make demo DEMO_ARGS="--source namespace"``: throughput units and consumers scaling together
on real storage and the real management and metrics clients.

The world is the ``namespace`` scenario's (scaling/simulation/namespace/world.py): the trace's
events offered to a Standard namespace, two consumer groups reading them. Each minute:

1. the world runs the minute (ingress rejections, egress caps, the consumers' reads);
2. its per-minute totals go to the local ARM endpoint's Azure Monitor stand-in (there is no Event
   Hubs, ARM or Azure Monitor emulator: ``scaling.plans.namespace.local`` answers their HTTP);
3. the namespace target is collected by the production ``NamespaceCollector`` (the real
   ``EventHubManagementClient`` and ``MetricsQueryClient``), the consumer target's sample is what
   collect reads of the simulated partitions (``observation_sample``);
4. both are evaluated by the production evaluate service on Azurite tables, and their actions
   applied by the production scale service (the real ``WebSiteManagementClient`` for the plan,
   ``EventHubManagementClient`` for ``sku.capacity``);
5. the plan's and the namespace's capacities, as the local ARM endpoint now holds them, are what
   the world serves with (after their provisioning delays).

The services are called directly, not through the in-process Functions host (the hub demo's
path); the report page shows the consumers' plan and the namespace's TUs on one axis, with both
targets' decisions.
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import sys
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

from scaling.local.demo.config import PLAN_ID, PLAN_TIER, SUBSCRIPTION, DemoError, DemoOptions

NAMESPACE_ID = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/demo/providers/Microsoft.EventHub/namespaces/demo-ns"
CONSUMERS = "demo"
NAMESPACE_TARGET = "demo-namespace"


def namespace_policy(scenario: Any) -> Any:
    """The consumer target (the demo's plan, SLO mode) and the namespace target reading it."""
    from scaling.domain.policy import Policy, policy_from_dict

    document = {"version": 1, "targets": [{
        "name": CONSUMERS, "plan": {"resource_id": PLAN_ID},
        "sources": [{"name": "hub", "fully_qualified_namespace": "demo-ns.servicebus.windows.net", "event_hub_name": "hub",
                     "checkpoint_account_url": "https://demo.blob.core.windows.net"}],
        "bounds": {"min_instances": 1, "max_instances": scenario.partitions}}],
        "namespaces": [{"name": NAMESPACE_TARGET, "resource_id": NAMESPACE_ID, "min_tus": scenario.min_tus,
                        "max_tus": scenario.max_tus, "consumer_targets": [CONSUMERS]}]}
    policy: Policy = policy_from_dict(document)
    return policy


def run_namespace_demo(options: DemoOptions, stream: TextIO | None = None) -> dict[str, Any]:
    """Run the demo; Azurite and the local ARM endpoint are stopped before it returns. Returns the summary."""
    import logging

    from scaling.local.azurite import Azurite
    from scaling.plans.local_arm import serve_local_arm
    from scaling.simulation.namespace.bench import namespace_arrivals
    from scaling.simulation.namespace.world import NamespaceScenario

    stream = stream or sys.stdout
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    if not Path(options.trace).is_file():
        raise DemoError(f"--trace {options.trace}: no such file (the public traces ship in data/traces)")
    scenario = NamespaceScenario()
    arrivals = namespace_arrivals(str(options.trace), scenario)[options.start:]
    if options.minutes is not None:
        arrivals = arrivals[:options.minutes]
    if len(arrivals) == 0:
        raise DemoError(f"--start {options.start}: the trace has no minutes from there")
    # Started mid-traffic: the namespace begins with the TUs its first minutes need (as an operator set it).
    first = float(arrivals[:10].max()) / scenario.ingress_events_per_tu_minute * 1.2
    scenario = replace(scenario, initial_tus=min(max(math.ceil(first), scenario.min_tus), scenario.max_tus))
    started = time.monotonic()
    azurite = Azurite()
    try:
        endpoints = azurite.start()
        with serve_local_arm() as arm:
            summary = asyncio.run(_run(options, scenario, arrivals, endpoints.connection_string, arm, stream))
    finally:
        azurite.stop()
    summary["wall_seconds"] = round(time.monotonic() - started, 1)
    out = Path(options.out)
    (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary


async def _run(options: DemoOptions, scenario: Any, arrivals: Any, connection: str, arm: Any, stream: TextIO) -> dict:
    from azure.monitor.query.aio import MetricsQueryClient

    from scaling.plans.appservice import AppServicePlanAdapter
    from scaling.plans.local_arm import AsyncStaticTokenCredential
    from scaling.plans.namespace.arm import EventHubsNamespaceAdapter, RoutingPlanAdapter
    from scaling.services.evaluate import EvaluateService
    from scaling.services.namespace import NamespaceCollector, NamespaceEvaluateService
    from scaling.services.scale import ScaleService
    from scaling.simulation.namespace.world import NamespaceWorld, score
    from scaling.simulation.peers.looped import EPOCH, observation_sample
    from scaling.sources.namespace import MonitorNamespaceMetrics
    from scaling.storage.base import TableNames
    from scaling.storage.tables import TableStorage

    policy = namespace_policy(scenario)
    world = NamespaceWorld(arrivals, scenario)
    clock_at = {"now": EPOCH + timedelta(minutes=options.start)}

    def clock():
        return clock_at["now"]

    arm.arm.add_plan(PLAN_ID, capacity=1, tier=PLAN_TIER)
    namespaces = arm.arm.event_hubs
    namespaces.add_namespace(NAMESPACE_ID, capacity=scenario.initial_tus)
    client_kwargs = {"retry_total": 2, "retry_backoff_factor": 0.01, **arm.client_kwargs()}
    plans = AppServicePlanAdapter(arm.credential, base_url=arm.base_url, polling_interval=0, **client_kwargs)
    namespace_adapter = EventHubsNamespaceAdapter(arm.credential, base_url=arm.base_url, **client_kwargs)
    tables = TableStorage.from_connection_string(connection, TableNames())
    tables.ensure_tables()
    evaluate = EvaluateService(tables, policy, clock=clock,
                               namespaces=NamespaceEvaluateService(tables, policy, clock=clock))
    scale = ScaleService(tables, RoutingPlanAdapter(plans, namespace_adapter), policy, clock=clock)
    metrics_client = MetricsQueryClient(AsyncStaticTokenCredential(), endpoint=arm.base_url, connection_verify=arm.ca_file)
    collector = NamespaceCollector(policy, namespace_adapter, MonitorNamespaceMetrics(metrics_client), clock=clock)
    rows = []
    try:
        for _ in range(len(arrivals)):
            record = world.advance()
            clock_at["now"] = EPOCH + timedelta(minutes=options.start + world.minute, seconds=5)
            minute_start = EPOCH + timedelta(minutes=options.start + world.minute - 1)
            namespaces.set_minute(NAMESPACE_ID, minute_start, IncomingBytes=record.incoming_bytes,
                                  IncomingMessages=record.incoming_messages, OutgoingBytes=record.outgoing_bytes,
                                  OutgoingMessages=record.outgoing_messages, ThrottledRequests=record.throttled_requests)
            messages = [*(await collector.collect_messages(clock_at["now"]))]
            observation = world.observe()
            messages.append(observation_sample(CONSUMERS, observation, start=EPOCH + timedelta(minutes=options.start))
                            .to_json())
            for message in messages:
                for action in evaluate.handle(message).messages:
                    scale.handle(action)
            world.fleet.request(arm.arm.capacity(PLAN_ID), world.minute)
            world.request_tus(namespaces.capacity(NAMESPACE_ID))
            series = world.series
            rows.append({"minute": world.minute - 1, "arrivals": series.offered[-1], "rejected": series.rejected[-1],
                         "read": series.read[-1], "serving": world.fleet.capacity(world.minute) / scenario.events_per_instance_per_minute,
                         "backlog": world.fleet.backlog, "oldest_age_minutes": series.age[-1],
                         "capacity": world.fleet.requested, "throughput_units": world.tus_requested,
                         "egress_capped": int(series.read_capped[-1])})
            if options.live and world.minute % 60 == 0:
                stream.write(f"minute {world.minute:5d}: {series.offered[-1]:8.0f} events/min, {world.fleet.requested:2d} "
                             f"instances per group, {world.tus_requested:2d} TUs\n")
        decisions = tables.decisions(CONSUMERS) + tables.decisions(NAMESPACE_TARGET)
    finally:
        await metrics_client.close()
        plans.close()
        namespace_adapter.close()
        tables.close()
    result = score(world, "demo:joint")
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "minutes.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    report = write_namespace_report(out, rows, decisions, options, scenario)
    return {"source": "namespace", "trace": str(options.trace), "start": options.start, "minutes": len(rows),
            **result.row(), "plan_writes": len(arm.arm.writes), "tu_writes": len(namespaces.writes),
            "decisions": len(decisions), "report": str(report)}


def write_namespace_report(out: Path, rows: list[dict], decisions: list[Any], options: DemoOptions, scenario: Any) -> Path:
    """The report page: the consumers' series, their plan and the namespace's TUs, both targets' decisions."""
    from scaling.report.page import Point, ReportData, render
    from scaling.report.runs import write_page
    from scaling.simulation.peers.looped import EPOCH

    start = EPOCH + timedelta(minutes=options.start)
    points = [Point(at=start + timedelta(minutes=row["minute"] + 1), arrival_rate=row["arrivals"] / 60.0,
                    serving_rate=row["serving"] * scenario.events_per_instance_per_minute / 60.0, backlog=row["backlog"],
                    oldest_age_seconds=row["oldest_age_minutes"] * 60.0, capacity=int(row["capacity"]),
                    throughput_units=int(row["throughput_units"])) for row in rows]
    data = ReportData(target=f"{CONSUMERS} + {NAMESPACE_TARGET}", points=points,
                      decisions=sorted(decisions, key=lambda record: record.evaluated_at),
                      slo_seconds=scenario.slo_minutes * 60.0,
                      origin=f"make demo --source namespace: {len(rows)} simulated minutes of {options.trace} from minute "
                             f"{options.start}, {scenario.groups} consumer groups, {scenario.event_bytes:g}-byte events; "
                             "decisions read back from the decision table",
                      notes=("Bottom chart: the consumers' instances per group and the namespace's throughput units; "
                             "markers of both targets' decisions (hover for the reason).",))
    return write_page(out / "report.html", render(data))
