"""The namespace target end to end on real parts: Azurite tables, the REAL
``azure.mgmt.eventhub.EventHubManagementClient`` and ``azure.monitor.query.aio.MetricsQueryClient``
against the local ARM endpoint (``scaling.plans.local_arm``, TLS with a throwaway CA).

There is no Event Hubs or ARM emulator: the namespace (GET/PATCH of
``Microsoft.EventHub/namespaces``) and its Azure Monitor metrics are a local stand-in behind the
same HTTP interface (``scaling.plans.namespace.local``). Covered: collect, decide, write (once per
decision), a lost reply (the write applied, its reply dropped: no second write, the read-back
confirms), reconciliation of a lost action and of an outside change, dead letters, and a
consumer target that does not scale out while its namespace's egress is the bottleneck.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.decisions import ScalerState
from scaling.domain.namespace.policy import EventHubsNamespaceTarget
from scaling.domain.namespace.sizing import EGRESS_BOUND, NAMESPACE_EGRESS_BOUND
from scaling.domain.policy import Policy
from scaling.plans.appservice import AppServicePlanAdapter
from scaling.plans.local_arm import AsyncStaticTokenCredential, serve_local_arm
from scaling.plans.namespace.arm import EventHubsNamespaceAdapter, RoutingPlanAdapter
from scaling.services.evaluate import EvaluateService
from scaling.services.namespace import NamespaceCollector, NamespaceEvaluateService
from scaling.services.scale import ScaleService
from scaling.sources.namespace import MonitorNamespaceMetrics
from scaling.storage.base import TableNames
from scaling.storage.records import StoredState
from scaling.storage.synthetic import queue_sample, rules_target
from scaling.storage.tables import TableStorage
from tests.helpers import Clock

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NAMESPACE = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-consumers/providers/Microsoft.EventHub/namespaces/orders-ns"
KB = 1_000


@pytest.fixture(scope="module")
def endpoint():
    with serve_local_arm() as served:
        yield served


def minute_totals(events_in: float = 0, events_out: float = 0, size: float = KB, throttled: float = 0) -> dict:
    return {"IncomingBytes": events_in * size * 60, "IncomingMessages": events_in * 60,
            "OutgoingBytes": events_out * size * 60, "OutgoingMessages": events_out * 60, "ThrottledRequests": throttled}


class World:
    """One namespace target with consumer target ``orders``, wired as bootstrap wires them."""

    def __init__(self, azurite, unique_name, endpoint, *, capacity: int = 1, consumers: bool = True) -> None:
        self.arm = endpoint.arm.event_hubs
        self.arm.namespaces.clear()
        self.arm.writes.clear()
        self.arm.add_namespace(NAMESPACE, capacity=capacity)
        self.consumer = rules_target("orders", min_samples=1)
        self.target = EventHubsNamespaceTarget(name="orders-ns", resource_id=NAMESPACE, max_tus=10,
                                               consumer_targets=("orders",) if consumers else ())
        self.policy = Policy(targets=(self.consumer,), namespaces=(self.target,))
        self.connection = azurite.connection_string
        self.tables = TableStorage.from_connection_string(azurite.connection_string, TableNames.with_prefix(unique_name))
        self.tables.ensure_tables()
        self.tables.commit(StoredState(ScalerState("orders", capacity=2)))
        self.clock = Clock(T0)
        options = {"retry_total": 2, "retry_backoff_factor": 0.01, **endpoint.client_kwargs()}
        self.namespaces = EventHubsNamespaceAdapter(endpoint.credential, base_url=endpoint.base_url, sleep=lambda _: None,
                                                    **options)
        self.plans = AppServicePlanAdapter(endpoint.credential, base_url=endpoint.base_url, polling_interval=0, **options)
        self.endpoint = endpoint
        evaluator = NamespaceEvaluateService(self.tables, self.policy, clock=self.clock)
        self.evaluate = EvaluateService(self.tables, self.policy, clock=self.clock, namespaces=evaluator)
        self.scale = ScaleService(self.tables, RoutingPlanAdapter(self.plans, self.namespaces), self.policy, clock=self.clock)

    def metrics(self, minutes: int, **rates) -> None:
        """``minutes`` complete minutes before the clock's minute, all at these rates."""
        now = self.clock.now.replace(second=0)
        for back in range(1, minutes + 1):
            self.arm.set_minute(NAMESPACE, now - timedelta(minutes=back), **minute_totals(**rates))

    def collect(self) -> str:
        from azure.monitor.query.aio import MetricsQueryClient

        async def run() -> list[str]:
            client = MetricsQueryClient(AsyncStaticTokenCredential(), endpoint=self.endpoint.base_url,
                                        connection_verify=self.endpoint.ca_file)
            collector = NamespaceCollector(self.policy, self.namespaces, MonitorNamespaceMetrics(client), clock=self.clock)
            try:
                return await collector.collect_messages()
            finally:
                await client.close()

        [message] = asyncio.run(run())
        return message

    def advance(self, minutes: int = 1) -> None:
        self.clock.now += timedelta(minutes=minutes)

    def close(self) -> None:
        self.namespaces.close()
        self.plans.close()
        self.tables.close()


@pytest.fixture
def world(azurite, unique_name, endpoint):
    made = []

    def build(**kwargs) -> World:
        made.append(World(azurite, unique_name, endpoint, **kwargs))
        return made[-1]

    yield build
    for item in made:
        item.close()


def test_collect_reads_capacity_auto_inflate_and_the_five_metrics_with_the_real_clients(world) -> None:
    w = world()
    w.arm.namespaces[NAMESPACE.lower()].document["properties"].update(isAutoInflateEnabled=True, maximumThroughputUnits=6)
    w.metrics(61, events_in=2_000, events_out=4_000)
    sample = json.loads(w.collect())
    assert (sample["kind"], sample["capacity"], sample["auto_inflate"], sample["auto_inflate_max"]) == \
        ("eventhubs_namespace", 1, True, 6)
    assert len(sample["minutes"]) == 61 and sample["minutes"][-1][1:] == [120_000_000.0, 120_000.0, 240_000_000.0, 240_000.0, 0.0]
    query = w.arm.metric_queries[-1]
    assert set(query["metricnames"].split(",")) == {"IncomingBytes", "IncomingMessages", "OutgoingBytes", "OutgoingMessages",
                                                    "ThrottledRequests"}
    assert (query["interval"], query["aggregation"].lower()) == ("PT1M", "total")


def test_collect_decide_and_write_sku_capacity_once_per_decision(world) -> None:
    w = world()
    w.metrics(60, events_in=2_000, events_out=2_000)  # 2 MB/s in: 2 TU, with 20% headroom 3
    outcome = w.evaluate.handle(w.collect())
    assert outcome.decision.reason_code == "tu_scale_up" and outcome.action.target_capacity == 3
    [message] = outcome.messages
    for dequeue_count in (1, 1, 2):  # duplicated and redelivered
        w.scale.handle(message, dequeue_count=dequeue_count)
    assert [write.body["sku"]["capacity"] for write in w.arm.writes] == [3]
    assert w.arm.capacity(NAMESPACE) == 3
    [row] = [row for row in w.tables.decisions("orders-ns") if row.acts]
    assert row.outcome == "applied"
    w.advance()
    w.metrics(60, events_in=2_000, events_out=2_000)
    steady = w.evaluate.handle(w.collect())
    assert (steady.decision.reason_code, steady.messages) == ("tu_steady", ())
    assert w.tables.load_state("orders-ns").desired.confirmed


def test_a_lost_reply_is_confirmed_by_reading_back_and_never_written_twice(world) -> None:
    w = world()
    w.metrics(60, events_in=2_000)
    [message] = w.evaluate.handle(w.collect()).messages
    w.arm.lose_replies(1)  # the PATCH is applied, its reply is a 504
    outcome = w.scale.handle(message)
    assert (outcome.status, outcome.capacity_after) == ("applied", 3)
    assert len(w.arm.writes) == 1 and w.arm.capacity(NAMESPACE) == 3
    w.scale.handle(message, dequeue_count=2)
    assert len(w.arm.writes) == 1


def test_a_lost_action_is_reissued_after_the_grace_and_an_outside_change_is_adopted(world) -> None:
    w = world()
    w.metrics(60, events_in=2_000)
    first = w.evaluate.handle(w.collect())
    assert first.action.target_capacity == 3  # ... and the message is lost: scale never sees it
    reissued = None
    for _ in range(5):
        w.advance()
        w.metrics(60, events_in=2_000)
        outcome = w.evaluate.handle(w.collect())
        if outcome.messages:
            reissued = outcome
            break
    assert reissued is not None and reissued.action.decision_id == f"{first.action.decision_id}-r1"
    w.scale.handle(reissued.messages[0])
    assert w.arm.capacity(NAMESPACE) == 3 and len(w.arm.writes) == 1
    # auto-inflate (or the portal) raises it: adopted, not fought
    w.arm.set_capacity(NAMESPACE, 5)
    w.advance()
    w.metrics(60, events_in=2_000)
    outcome = w.evaluate.handle(w.collect())
    assert outcome.messages == () and w.tables.load_state("orders-ns").desired.capacity == 5
    assert any(row.reason_code == "external_change" for row in w.tables.decisions("orders-ns"))


def test_a_malformed_namespace_sample_is_dead_lettered(world) -> None:
    w = world()
    body = json.dumps({"kind": "eventhubs_namespace", "schema_version": 1, "target": "orders-ns",
                       "collected_at": "2026-03-01T12:00:00Z", "capacity": -3})
    assert w.evaluate.handle(body).status == "dead_lettered"
    [letter] = w.tables.dead_letters_for("evaluate")
    assert "capacity must be within" in letter.error


def test_a_consumer_does_not_scale_out_while_its_namespace_is_egress_bound(world) -> None:
    w = world(capacity=2)
    # two consumer groups read 8,192 events/s of 100 bytes: the egress ceiling of 2 TUs, and throttled
    w.metrics(60, events_in=1_000, events_out=8_192, size=100, throttled=120)
    namespace = w.evaluate.handle(w.collect())
    assert namespace.decision.reason_code == EGRESS_BOUND and namespace.action.target_capacity == 3
    consumer = w.evaluate.handle(queue_sample("orders", w.clock.now, 50_000, capacity=2).to_json())
    assert consumer.messages == () and consumer.decision.reason_code == NAMESPACE_EGRESS_BOUND
    assert consumer.decision.metrics["namespace_decision_id"] == namespace.decision.decision_id
    [row] = [row for row in w.tables.decisions("orders") if row.reason_code == NAMESPACE_EGRESS_BOUND]
    assert namespace.decision.decision_id in row.reasons[0]


def test_a_consumer_of_no_namespace_scales_out_as_before(world) -> None:
    w = world(capacity=2, consumers=False)
    w.metrics(60, events_in=1_000, events_out=8_192, size=100, throttled=120)
    assert w.evaluate.handle(w.collect()).decision.reason_code == EGRESS_BOUND
    consumer = w.evaluate.handle(queue_sample("orders", w.clock.now, 50_000, capacity=2).to_json())
    assert consumer.action is not None and consumer.action.target_capacity == 3


def test_a_patch_whose_reply_is_dropped_on_the_wire_is_confirmed_by_reading_back(world) -> None:
    """The lost reply at the TCP level: a fault proxy (tests/faultproxy.py) in front of the local ARM
    endpoint lets the PATCH through to be applied and resets the connection instead of its reply.
    The adapter reads the namespace back, finds the TUs there and reports the write applied: one
    write, no second PATCH."""
    from tests.faultproxy import FaultProxy

    w = world()
    w.metrics(60, events_in=2_000)
    [message] = w.evaluate.handle(w.collect()).messages
    with FaultProxy(w.endpoint.address, tls=True) as proxy:
        proxied = EventHubsNamespaceAdapter(w.endpoint.credential, base_url=proxy.url(), retry_total=2,
                                            retry_backoff_factor=0.01, sleep=lambda _: None, **w.endpoint.client_kwargs())
        scale = ScaleService(w.tables, RoutingPlanAdapter(w.plans, proxied), w.policy, clock=w.clock)
        proxy.applied_then_reset(skip=2, times=1)  # scale's GET and the adapter's GET pass; the PATCH's reply is lost
        try:
            outcome = scale.handle(message)
        finally:
            proxied.close()
        assert proxy.counts().faulted == {"applied_then_reset": 1}
    assert (outcome.status, outcome.capacity_after) == ("applied", 3)
    assert len(w.arm.writes) == 1 and w.arm.capacity(NAMESPACE) == 3


@pytest.mark.parametrize(("shift", "fragment"), [
    pytest.param(timedelta(days=1), "after collected_at", id="minutes-a-day-after"),
    pytest.param(timedelta(days=-2), "before collected_at", id="minutes-two-days-before"),
])
def test_a_namespace_sample_whose_minutes_disagree_with_its_collection_is_dead_lettered(world, shift, fragment) -> None:
    """Issue 49: minute rows dated a day after ``collected_at`` drove a TU write on d0d07e7."""
    w = world()
    w.metrics(60, events_in=2_000, events_out=2_000)  # would scale 1 -> 3 TUs
    document = json.loads(w.collect())
    for row in document["minutes"]:
        row[0] = (datetime.fromisoformat(row[0].replace("Z", "+00:00")) + shift).isoformat()
    outcome = w.evaluate.handle(json.dumps(document))
    assert (outcome.status, outcome.messages) == ("dead_lettered", ())
    [letter] = w.tables.dead_letters_for("evaluate")
    assert letter.error.startswith("minutes[0][0] ") and fragment in letter.error
    assert w.arm.writes == [] and w.tables.decisions("orders-ns") == []
    # The same minutes as collected: evaluated and acted on.
    assert w.evaluate.handle(w.collect()).action.target_capacity == 3


def _command(w, tmp_path, *arguments: str) -> tuple[int, str]:
    """``python -m scaling ARGUMENTS`` against this world's tables and policy; exit code and output."""
    import contextlib
    import io

    from scaling.__main__ import main
    from scaling.domain.policy import policy_to_dict

    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(policy_to_dict(w.policy)), encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main([*arguments, "--target", "orders-ns", "--policy", str(policy), "--connection-string", w.connection,
                     "--table", w.tables.names.state, "--by", "alice"])
    return code, out.getvalue()


def test_a_paused_namespace_target_logs_what_it_would_do_writes_nothing_and_resumes(world, tmp_path) -> None:
    """Issue 49: on d0d07e7 ``pause`` said paused and the namespace evaluation kept resizing; with
    ``--policy`` it said the namespace target was not in the policy."""
    w = world()
    code, said = _command(w, tmp_path, "pause", "--for", "2h", "--reason", "INC-9 hub migration")
    assert code == 0 and "orders-ns: paused by alice" in said
    w.clock.now = datetime.now(UTC).replace(microsecond=0)  # the command stamps its pause with the real clock
    for _ in range(2):
        w.metrics(60, events_in=2_000, events_out=2_000)  # would scale 1 -> 3
        outcome = w.evaluate.handle(w.collect())
        assert (outcome.status, outcome.messages) == ("evaluated", ())
        w.advance()
    assert w.arm.writes == []
    [row] = [row for row in w.tables.decisions("orders-ns") if row.reason_code == "paused" and row.trigger_sample_id != "operator"]
    assert row.reasons[0] == "paused: would scale 1 -> 3" and "INC-9 hub migration" in row.reasons[1]
    code, said = _command(w, tmp_path, "resume")
    assert code == 0 and "orders-ns: resumed (was paused by alice" in said
    w.metrics(60, events_in=2_000, events_out=2_000)
    [message] = w.evaluate.handle(w.collect()).messages
    w.scale.handle(message)
    assert w.arm.capacity(NAMESPACE) == 3


def test_a_pinned_namespace_target_gets_its_count_once_then_holds(world, tmp_path) -> None:
    w = world()
    assert _command(w, tmp_path, "pause", "--at", "11", "--reason", "load test")[0] == 2  # max_tus is 10
    code, said = _command(w, tmp_path, "pause", "--at", "5", "--for", "1h", "--reason", "load test LT-3")
    assert code == 0 and "orders-ns: pinned at 5 by alice" in said
    w.clock.now = datetime.now(UTC).replace(microsecond=0)
    w.metrics(60, events_in=2_000, events_out=2_000)  # the sizing alone would ask for 3
    outcome = w.evaluate.handle(w.collect())
    assert (outcome.action.target_capacity, outcome.action.reason.split(":")[0]) == (5, "pinned")
    for dequeue_count in (1, 2):
        w.scale.handle(outcome.messages[0], dequeue_count=dequeue_count)
    assert [write.body["sku"]["capacity"] for write in w.arm.writes] == [5]
    w.advance()
    w.metrics(60, events_in=2_000, events_out=2_000)
    held = w.evaluate.handle(w.collect())
    assert held.messages == () and held.decision.reason_code == "pinned"
    assert w.arm.capacity(NAMESPACE) == 5 and len(w.arm.writes) == 1


@pytest.mark.parametrize("fault", ["status", "reset"])
def test_a_namespace_commit_whose_reply_is_lost_sends_its_action_at_once(world, azurite, fault) -> None:
    """The evaluation's transaction lands in Azurite and its reply is lost (a 503 that azure-core
    retries into a 412, or a reset connection that fails the invocation and the queue redelivers):
    the state carries the evaluation's writer token, so the TU action goes out now. Without the
    token the namespace evaluate took its own commit for a duplicate, sent nothing, and the TUs
    waited for reconciliation's re-issue after the grace."""
    from tests.faultproxy import FaultProxy, proxied_connection_string

    w = world()
    w.metrics(60, events_in=2_000, events_out=2_000)
    body = w.collect()
    with FaultProxy(("127.0.0.1", azurite.table_port)) as proxy:
        proxied = TableStorage.from_connection_string(proxied_connection_string(azurite, table=proxy), w.tables.names,
                                                      retry_total=2, retry_backoff_factor=0.01)
        service = NamespaceEvaluateService(proxied, w.policy, clock=w.clock)
        try:
            if fault == "status":
                proxy.applied_then_status(503, method="POST", path_contains="$batch", times=1)
                outcome = service.handle(body)
            else:
                proxy.applied_then_reset(method="POST", path_contains="$batch", times=1)
                with pytest.raises(Exception):  # noqa: B017 - the invocation fails; the queue redelivers
                    service.handle(body)
                outcome = service.handle(body, dequeue_count=2)
        finally:
            proxied.close()
        assert sum(proxy.counts().faulted.values()) == 1
    assert outcome.status in ("evaluated", "resent") and outcome.action.target_capacity == 3
    w.scale.handle(outcome.messages[0])
    assert w.arm.capacity(NAMESPACE) == 3 and len(w.arm.writes) == 1
    [row] = [row for row in w.tables.decisions("orders-ns") if row.acts]
    assert row.decision_id == outcome.action.decision_id
