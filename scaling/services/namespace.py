"""The namespace target's collect and evaluate; its writes go through the ordinary
scale service (``RoutingPlanAdapter`` sends namespace ids to the Event Hubs adapter).

- ``NamespaceCollector``: per namespace target, the namespace (capacity, auto-inflate) and its
  per-minute metrics over the scale-down hold, concurrently; a failed read is a sample with
  ``error`` (never a crash of the others). ``CombinedCollector`` puts those samples on the
  ``metrics`` queue after the plan targets' ones.
- ``NamespaceEvaluateService``: the same contract as the plan targets' evaluate: a malformed
  sample is dead-lettered; a sample is evaluated once (the state remembers it under its ETag);
  a redelivery re-sends its recorded action; the desired TU count is reconciled against the
  observed one (``domain/reconcile.py``: a lost write is re-issued after the grace, an external
  change adopted or reverted); an action goes out through the state's outbox, committed with the
  decision row in one transaction. What to decide is the pure ``domain/namespace/planning.py``;
  this service reads what it needs first, commits the plan and logs it. The consumer targets' planned catch-up reads come from their
  states (desired count times learned throughput per instance).

The namespace's state also tells its consumer targets whether egress is the bottleneck now:
``last_reason_code`` is the decision's reason (``egress_bound``) and ``last_decision_id`` the
decision, read by the plan targets' evaluate (``evaluate.namespace_status``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from scaling.domain.decisions import HOLD, Decision
from scaling.domain.names import safe_text
from scaling.domain.namespace.planning import NamespacePrior, NamespaceSettings, plan_namespace
from scaling.domain.namespace.policy import EventHubsNamespaceTarget
from scaling.domain.namespace.samples import NamespaceSample, parse_namespace_sample
from scaling.domain.namespace.sizing import ConsumerCatchUp
from scaling.domain.policy import Policy
from scaling.domain.samples import MAX_CLOCK_SKEW, SampleError
from scaling.domain.telemetry import DECISIONS, SAMPLES, THROTTLED_REQUESTS, THROUGHPUT_UNITS
from scaling.services.evaluate import RECONCILE_GRACE, EvaluateOutcome, to_action
from scaling.services.telemetry import NO_TELEMETRY, Telemetry
from scaling.storage.base import EvaluateStore
from scaling.storage.records import ActionMessage, DeadLetter, DecisionRecord, StoredState, body_text, target_of, utc_now
from scaling.storage.unit_of_work import Write, commit_state

logger = logging.getLogger(__name__)

FUNCTION_NAME = "evaluate"
#: How long an evaluated sample's time is remembered (a redelivery within it is a duplicate).
EVALUATED_FOR = timedelta(hours=2)


class NamespaceReader(Protocol):
    """The namespace's SKU capacity and auto-inflate (the Event Hubs management adapter)."""

    async def current_namespace(self, resource_id: str) -> Any: ...


class NamespaceMetricsReader(Protocol):
    async def namespace_minutes(self, resource_id: str, now: datetime, lookback: timedelta) -> tuple: ...


class MessageCollector(Protocol):
    async def collect_messages(self) -> list[str]: ...

    async def aclose(self) -> None: ...


class NamespaceCollector:
    """One ``NamespaceSample`` per namespace target of the policy."""

    def __init__(self, policy: Policy, namespaces: NamespaceReader, metrics: NamespaceMetricsReader, *,
                 clock: Callable[[], datetime] = utc_now, timeout_seconds: float = 20.0,
                 closers: Iterable[Callable[[], Any]] = ()) -> None:
        self.policy = policy
        self.namespaces = namespaces
        self.metrics = metrics
        self.clock = clock
        self.timeout_seconds = timeout_seconds
        self.closers = tuple(closers)

    async def collect(self, now: datetime | None = None) -> list[NamespaceSample]:
        moment = (now or self.clock()).replace(microsecond=0)
        return list(await asyncio.gather(*(self._collect(target, moment) for target in self.policy.namespaces)))

    async def collect_messages(self, now: datetime | None = None) -> list[str]:
        return [sample.to_json() for sample in await self.collect(now)]

    async def _collect(self, target: EventHubsNamespaceTarget, moment: datetime) -> NamespaceSample:
        lookback = timedelta(seconds=target.tu_settings.lookback_seconds)
        info, minutes = await asyncio.gather(
            asyncio.wait_for(self.namespaces.current_namespace(target.resource_id), self.timeout_seconds),
            asyncio.wait_for(self.metrics.namespace_minutes(target.resource_id, moment, lookback), self.timeout_seconds),
            return_exceptions=True)
        errors = [f"{what}: {type(value).__name__}: {value}" for what, value in (("namespace", info), ("metrics", minutes))
                  if isinstance(value, BaseException)]
        if isinstance(info, BaseException):
            logger.warning("collect %s: %s", target.name, "; ".join(errors))
            return NamespaceSample(target.name, moment, None, error=safe_text("; ".join(errors))[:1000])
        return NamespaceSample(target.name, moment, info.capacity, info.auto_inflate, info.auto_inflate_max,
                               () if isinstance(minutes, BaseException) else tuple(minutes),
                               error=safe_text("; ".join(errors))[:1000] if errors else None)

    async def aclose(self) -> None:
        for closer in self.closers:
            result = closer()
            if asyncio.iscoroutine(result):
                await result


class CombinedCollector:
    """The plan targets' samples, then the namespace targets' ones: one ``collect`` function."""

    def __init__(self, plans: MessageCollector, namespaces: NamespaceCollector) -> None:
        self.plans = plans
        self.namespaces = namespaces

    async def collect_messages(self) -> list[str]:
        plan_messages, namespace_messages = await asyncio.gather(self.plans.collect_messages(),
                                                                 self.namespaces.collect_messages())
        return [*plan_messages, *namespace_messages]

    async def aclose(self) -> None:
        await self.plans.aclose()
        await self.namespaces.aclose()


class NamespaceEvaluateService:
    """Evaluates namespace samples against the policy's namespace targets (see the module doc)."""

    def __init__(self, store: EvaluateStore, policy: Policy, *, clock: Callable[[], datetime] = utc_now,
                 clock_skew: timedelta = MAX_CLOCK_SKEW, reconcile_grace: timedelta = RECONCILE_GRACE,
                 max_attempts: int = 10, telemetry: Telemetry = NO_TELEMETRY) -> None:
        self.store = store
        self.telemetry = telemetry
        self.policy = policy
        self.clock = clock
        self.clock_skew = clock_skew
        self.reconcile_grace = reconcile_grace
        self.max_attempts = max_attempts

    def handle(self, body: str | bytes, *, dequeue_count: int = 1, message_id: str | None = None) -> EvaluateOutcome:
        now = self.clock()
        try:
            sample = parse_namespace_sample(body, now=now, clock_skew=self.clock_skew)
            target = self.policy.namespace(sample.target)
        except SampleError as error:
            return self._dead_letter(body, str(error), now, dequeue_count, message_id)
        except KeyError:
            known = ", ".join(n.name for n in self.policy.namespaces) or "none"
            return self._dead_letter(body, f"namespace target {target_of(body_text(body))!r} is not in the policy "
                                           f"(known: {known})", now, dequeue_count, message_id)

        def done(stored: StoredState, attempt: int) -> EvaluateOutcome | None:
            if not stored.was_evaluated(sample.collected_at):
                return None
            recorded = stored.outbox_for(sample.sample_id) if dequeue_count > 1 else None
            if recorded is not None:
                return EvaluateOutcome("resent", (recorded.to_json(),), sample.sample_id, target.name, action=recorded,
                                       attempts=attempt)
            return EvaluateOutcome("duplicate", sample_id=sample.sample_id, target=target.name, attempts=attempt)

        def decide(stored: StoredState) -> Write[tuple[Decision, ActionMessage | None]]:
            next_stored, records, decision, action = self._plan(target, stored, sample, now)
            return Write(next_stored, records, (decision, action))

        def on_conflict(attempt: int) -> None:
            logger.info("evaluate %s: state changed under sample %s (attempt %d); re-reading", target.name,
                        sample.sample_id, attempt)

        unit = commit_state(self.store, target.name, decide, done=done, max_attempts=self.max_attempts,
                            on_conflict=on_conflict, what=f"evaluate {target.name}: sample {sample.sample_id}")
        if unit.finished is not None:
            return unit.finished
        assert unit.plan is not None
        decision, action = unit.plan
        if unit.reply_lost:
            logger.warning("evaluate %s: the commit for sample %s landed although its reply was lost; sending its "
                           "action now", target.name, sample.sample_id)
        if action is not None:
            logger.info("evaluate %s: %s TUs %s -> %s (%s)", target.name, action.direction, decision.current_capacity,
                        action.target_capacity, action.reason)
        self._report(target, sample, decision, action)
        return EvaluateOutcome("evaluated", (action.to_json(),) if action else (), sample.sample_id, target.name,
                               decision, action, attempts=unit.attempts)

    def consumers(self, target: EventHubsNamespaceTarget) -> list[ConsumerCatchUp]:
        """Each consumer target's planned read rate: its desired count times its throughput per instance."""
        planned = []
        for name in target.consumer_targets:
            state = self.store.load_state(name)
            consumer = self.policy.target(name)
            count = state.desired.capacity if state.desired is not None else state.state.capacity
            rate = (state.state.throughput_per_instance or state.state.throughput_floor
                    or consumer.slo.events_per_instance_per_second)
            if count is not None and rate:
                planned.append(ConsumerCatchUp(name, count * rate))
        return planned

    def _plan(self, target: EventHubsNamespaceTarget, stored: StoredState, sample: NamespaceSample,
              now: datetime) -> tuple[StoredState, list[DecisionRecord], Decision, ActionMessage | None]:
        """The domain's plan (``domain/namespace/planning.py``) as the records to commit; the
        consumer targets' planned reads are read first (only a read namespace is sized)."""
        consumers = self.consumers(target) if sample.reading is not None else []
        prior = NamespacePrior(stored.state, stored.desired, stored.pause, stored.latest_decision_id, stored.unreadable,
                               stored.etag)
        plan = plan_namespace(target, prior, sample, consumers, now,
                              NamespaceSettings(self.reconcile_grace, self.clock_skew))
        for notice in plan.notices:
            getattr(logger, notice.level)("%s", notice.text)
        action = None
        if plan.act is not None:
            action = to_action(plan.act, target.name, target.resource_id, sample.traceparent if plan.traced else None)
        records = [DecisionRecord.from_row(target.name, row, sample.sample_id, action) for row in plan.rows]
        next_stored = replace(stored.with_evaluated(sample.collected_at, keep_after=now - EVALUATED_FOR), unreadable=(),
                              pause=plan.pause)
        if action is not None:
            next_stored = replace(next_stored.with_outbox(sample.sample_id, action), latest_decision_id=action.decision_id,
                                  latest_decided_at=action.decided_at)
        next_stored = replace(next_stored, state=plan.state, desired=plan.desired, updated_at=now)
        return next_stored, records, plan.decision, action

    def _report(self, target: EventHubsNamespaceTarget, sample: NamespaceSample, decision: Decision,
                action: ActionMessage | None) -> None:
        """The namespace's TUs and throttling for the workbook and the alert (docs/operations-monitoring.md)."""
        name = {"target": target.name}
        self.telemetry.record(SAMPLES, 1, name)
        self.telemetry.record(DECISIONS, 1, {**name, "direction": action.direction if action else HOLD,
                                             "reason": decision.reason_code})
        if sample.capacity is not None:
            self.telemetry.record(THROUGHPUT_UNITS, sample.capacity, name)
        if sample.minutes:
            self.telemetry.record(THROTTLED_REQUESTS, sample.minutes[-1].throttled_requests, name)

    def _dead_letter(self, body: str | bytes, error: str, now: datetime, dequeue_count: int,
                     message_id: str | None) -> EvaluateOutcome:
        error = safe_text(error)
        logger.error("evaluate: namespace message %s dead-lettered: %s", message_id or "?", error)
        text = body_text(body)
        self.store.dead_letter(DeadLetter(FUNCTION_NAME, text, error, now, dequeue_count, message_id, target=target_of(text)))
        return EvaluateOutcome("dead_lettered", error=error)

