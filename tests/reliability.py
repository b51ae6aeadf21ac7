"""A test rig for issue 11: evaluate and scale through the real functions of ``function_app``,
on Azurite tables behind a fault proxy and the local ARM endpoint (real azure-mgmt-web client)
behind a TLS fault proxy, fed one sample per step.

Queues are modelled here, not on Azurite: ``AtLeastOnceQueue`` redelivers a failed message at the
next step with its dequeue count raised and moves it to its poison list after five deliveries,
as the Functions host does (``host.json`` ``maxDequeueCount``), without the host's 30-second
visibility timeout, so that a fault schedule over a whole day runs in seconds. The real queue
path (Azurite queues, the in-process host) is covered by tests/e2e.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.functions.queue import QueueMessage

from scaling.functions import evaluate as evaluate_module
from scaling.functions import poison as poison_module
from scaling.functions import scale as scale_module
from scaling.plans.appservice import AppServicePlanAdapter
from scaling.services.dead_letters import DeadLetterService
from scaling.services.evaluate import EvaluateService
from scaling.services.scale import ScaleService
from scaling.storage.base import TableNames
from scaling.storage.synthetic import policy_of, queue_sample, rules_target
from scaling.storage.tables import TableStorage
from tests.faultproxy import FaultProxy, proxied_connection_string
from tests.helpers import Clock, app_function

T0 = datetime(2024, 5, 1, 0, 0, tzinfo=UTC)
MAX_DEQUEUE_COUNT = 5


class Out:
    """An output binding as the host passes it."""

    def __init__(self) -> None:
        self.value: Any = None

    def set(self, value: Any) -> None:
        self.value = value


@dataclass
class Message:
    body: str
    message_id: str
    dequeue_count: int = 0


@dataclass
class AtLeastOnceQueue:
    """Messages stay until a delivery succeeds; after five failed deliveries they go to ``poison``."""

    name: str
    messages: list[Message] = field(default_factory=list)
    poison: list[Message] = field(default_factory=list)
    sent: int = 0
    bodies: list[str] = field(default_factory=list)

    def send(self, body: str) -> None:
        self.sent += 1
        self.bodies.append(body)
        self.messages.append(Message(body, f"{self.name}-{self.sent}"))

    def deliver(self, handler, *, queue: list[Message] | None = None) -> int:
        """Offer every waiting message once; returns how many failed."""
        queue = self.messages if queue is None else queue
        failed = 0
        for message in list(queue):
            message.dequeue_count += 1
            try:
                handler(QueueMessage(id=message.message_id, body=message.body.encode(), dequeue_count=message.dequeue_count))
            except Exception:
                failed += 1
                if queue is self.messages and message.dequeue_count >= MAX_DEQUEUE_COUNT:
                    queue.remove(message)
                    self.poison.append(Message(message.body, f"{message.message_id}-poison"))
                continue
            queue.remove(message)
        return failed


class CountingPlans:
    """The real plan adapter, counting plan writes (to prove no decision is applied twice)."""

    def __init__(self, inner: AppServicePlanAdapter) -> None:
        self.inner = inner
        self.writes = 0

    def get_plan(self, resource_id: str):
        return self.inner.get_plan(resource_id)

    def set_capacity(self, resource_id: str, capacity: int):
        self.writes += 1
        return self.inner.set_capacity(resource_id, capacity)


class Rig:
    """One target ``orders`` (rules mode, one instance per 12,000 events a minute, 1..8 instances)."""

    def __init__(self, azurite, table_proxy: FaultProxy, arm_endpoint, arm_proxy: FaultProxy, prefix: str, *,
                 capacity: int = 2, on_external_change: str = "adopt", read_timeout: float = 2.0,
                 table_retries: int = 2) -> None:
        self.target = replace(rules_target("orders", up_above=16_000, down_below=8_000, window_seconds=60, min_samples=1,
                                           up_cooldown=0, down_cooldown=0, max_instances=8),
                              on_external_change=on_external_change)
        self.plan = self.target.plan.resource_id
        self.arm = arm_endpoint.arm
        self.arm.add_plan(self.plan, capacity=capacity)
        names = TableNames.with_prefix(prefix)
        self.names = names
        connection = proxied_connection_string(azurite, table=table_proxy)
        self.tables = TableStorage.from_connection_string(connection, names, retry_total=table_retries,
                                                          retry_backoff_factor=0.01, read_timeout=read_timeout)
        self.tables.ensure_tables()
        self.direct = TableStorage.from_connection_string(azurite.connection_string, names)  # behind the proxy's back
        self.adapter = AppServicePlanAdapter(arm_endpoint.credential, base_url=arm_proxy.url(), retry_total=1,
                                             retry_backoff_factor=0.01, polling_interval=0, read_timeout=read_timeout,
                                             **arm_endpoint.client_kwargs())
        self.plans = CountingPlans(self.adapter)
        self.clock = Clock(T0)
        policy = policy_of(self.target)
        self.evaluate = EvaluateService(self.tables, policy, clock=self.clock)
        self.scale = ScaleService(self.tables, self.plans, policy, clock=self.clock)
        self.dead_letters = DeadLetterService(self.tables, clock=self.clock)
        self.metrics = AtLeastOnceQueue("metrics")
        self.actions = AtLeastOnceQueue("actions")
        self.functions = {name: app_function(name).get_user_function()
                          for name in ("evaluate", "scale", "evaluate_poison", "scale_poison")}
        self.samples_sent: list[str] = []
        self.writes_by_decision: Counter[str] = Counter()
        self.minute = 0
        self.lose_actions = False

    def __enter__(self) -> Rig:
        self._previous = (evaluate_module.set_service(self.evaluate), scale_module.set_service(self.scale),
                          poison_module.set_service(self.dead_letters))
        return self

    def __exit__(self, *exc: object) -> None:
        for module, service in zip((evaluate_module, scale_module, poison_module), self._previous, strict=True):
            module.set_service(service)
        self.tables.close()
        self.direct.close()
        self.adapter.close()

    # --- one step: collect, evaluate, scale, poison ------------------------------------------------

    def capacity(self) -> int:
        return self.arm.capacity(self.plan)

    def collect(self, arrivals: float, *, observed: bool = True) -> str:
        """The sample collect would send now: a backlog of the arrivals per instance, the plan's capacity."""
        at = T0 + timedelta(minutes=self.minute)
        self.clock.now = at + timedelta(seconds=5)
        capacity = self.capacity()
        sample = queue_sample("orders", at, int(arrivals / max(capacity, 1)), capacity if observed else None)
        self.samples_sent.append(sample.sample_id)
        self.metrics.send(sample.to_json())
        return sample.to_json()

    def _evaluate(self, message: QueueMessage) -> None:
        out = Out()
        self.functions["evaluate"](message, out)
        for body in out.value or []:
            if not self.lose_actions:
                self.actions.send(body)

    def _scale(self, message: QueueMessage) -> None:
        before = self.plans.writes
        try:
            self.functions["scale"](message)
        finally:
            decision_id = json.loads(message.get_body())["decision_id"]
            self.writes_by_decision[decision_id] += self.plans.writes - before

    def deliver(self) -> None:
        self.metrics.deliver(self._evaluate)
        self.actions.deliver(self._scale)
        self.metrics.deliver(self.functions["evaluate_poison"], queue=self.metrics.poison)
        self.actions.deliver(self.functions["scale_poison"], queue=self.actions.poison)

    def step(self, arrivals: float, *, minutes: int = 1, observed: bool = True) -> None:
        self.collect(arrivals, observed=observed)
        self.deliver()
        self.minute += minutes

    # --- what must hold --------------------------------------------------------------------------

    def desired(self) -> int | None:
        desired = self.direct.load_state("orders").desired
        return desired.capacity if desired else None

    def unaccounted_actions(self) -> dict[str, str]:
        """Actions sent whose fate nobody recorded: each must be in the applied table (applied,
        unchanged, stale...) or in the dead-letter table with its decision row saying what became
        of it (superseded, or dead-lettered and left to reconciliation). Decision id -> why not."""
        letters = {json.loads(letter.body).get("decision_id") for letter in self.direct.dead_letters_for("scale")}
        missing = {}
        for body in self.actions.bodies:
            action = json.loads(body)
            decision_id = action["decision_id"]
            if self.direct.get_applied("orders", decision_id) is not None:
                continue
            row = next((row for row in self.direct.decisions("orders") if row.decision_id == decision_id and row.acts), None)
            if decision_id not in letters:
                missing[decision_id] = "neither applied nor dead-lettered"
            elif row is None or row.outcome is None:
                missing[decision_id] = "dead-lettered, but its decision row does not say what became of it"
        return missing

    def unaccounted_samples(self) -> set[str]:
        """Samples sent that are neither in history nor in the dead-letter table."""
        stored = {sample.sample_id for sample in self.direct.load_window("orders", T0 - timedelta(seconds=1),
                                                                          T0 + timedelta(days=3))}
        for letter in self.direct.dead_letters_for():
            try:
                stored.add(json.loads(letter.body).get("sample_id", ""))
            except ValueError:
                continue
        return set(self.samples_sent) - stored
