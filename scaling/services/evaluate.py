"""The evaluate service: one ``metrics`` message in, at most one ``actions`` message out.

Per sample: validate (malformed -> dead-letter row, return normally), append to history
(create-if-absent: a duplicate changes nothing), read the window (one range query), run the
rule engine over it with the target's state, and commit the new state with the decision rows
and the outbox action in one entity-group transaction guarded by the state's ETag. On a
conflict the state is re-read and the sample evaluated again, so two concurrent evaluations of a
target never both act.

Exactly-once evaluation: the state remembers which samples (by collection second) it has
evaluated, atomically with the state itself. A duplicate delivery finds its sample there and
stops; a redelivery (dequeue count above one) of the sample whose evaluation decided the outbox
action re-sends that recorded action instead of deciding again, because the output binding's
send may have failed after the commit.

Late samples are stored and evaluated with the window by collection time; the decision then
belongs to the window's newest sample, and a decision id already acted on never acts twice.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from scaling.domain.conflict import DEFAULT_EXTERNAL_CHANGES_LIMIT
from scaling.domain.decisions import HOLD, Decision
from scaling.domain.evaluation import EvaluationSettings, Prior, plan_evaluation
from scaling.domain.forecast_record import REFIT_EVERY, StoredProfile
from scaling.domain.knobs import SETTING
from scaling.domain.names import safe_text
from scaling.domain.namespace.policy import EventHubsNamespaceTarget
from scaling.domain.namespace.samples import is_namespace_message
from scaling.domain.namespace.sizing import EGRESS_BOUND, NamespaceStatus
from scaling.domain.outcomes import Act
from scaling.domain.pause import STATE_UNREADABLE
from scaling.domain.policy import Policy, TargetPolicy
from scaling.domain.reconcile import EXTERNAL_CHANGE, REISSUE, Reconciliation
from scaling.domain.samples import MAX_CLOCK_SKEW, MetricSample, SampleError, parse_sample
from scaling.domain.telemetry import (
    ARRIVAL_RATE,
    BACKLOG,
    CAPACITY_DESIRED,
    DEAD_LETTERS,
    DECISION_ID_ATTRIBUTE,
    DECISIONS,
    OLDEST_EVENT_AGE,
    PREDICTED_AGE,
    SAMPLES,
    SLO_SECONDS,
    TARGET_ATTRIBUTE,
    THROUGHPUT_PER_INSTANCE,
)
from scaling.services.telemetry import NO_TELEMETRY, Span, Telemetry, number
from scaling.storage.actions import MAX_REASON_CHARS
from scaling.storage.base import EntityTooLarge, EvaluateStore
from scaling.storage.records import (
    ActionMessage,
    DeadLetter,
    DecisionRecord,
    StoredState,
    body_text,
    target_of,
    utc_now,
)
from scaling.storage.unit_of_work import Write, commit_state

if TYPE_CHECKING:
    from scaling.domain.forecast import Outlook

logger = logging.getLogger(__name__)

FUNCTION_NAME = "evaluate"
#: Samples evaluated this long before the window's start are still remembered (clock skew
#: between workers, a policy whose window grows).
EVALUATED_MARGIN = timedelta(minutes=10)
#: How long the plan may differ from the desired capacity before the target is re-issued: one
#: collect interval for the action to travel, one for the plan read, and a minute to spare.
RECONCILE_GRACE = timedelta(seconds=SETTING["RECONCILE_GRACE_SECONDS"].default)
#: How many decision-log rows from a sample's collection on a redelivery reads to find the action
#: that sample decided, once the outbox has moved on: bounded, it is a rare path.
LOGGED_ACTION_SEARCH = 500


@dataclass(frozen=True, slots=True)
class EvaluateOutcome:
    """What one message led to. ``messages`` go to the ``actions`` queue (output binding).

    ``status``: ``evaluated``, ``duplicate`` (already evaluated), ``resent`` (redelivery that
    re-sends the recorded action), ``late`` (older than the window: stored only) or
    ``dead_lettered``.
    """

    status: str
    messages: tuple[str, ...] = ()
    sample_id: str | None = None
    target: str | None = None
    decision: Decision | None = None
    action: ActionMessage | None = None
    error: str | None = None
    attempts: int = 0


class NamespaceHandler(Protocol):
    """Evaluates the namespace targets' samples (scaling/services/namespace.py)."""

    def handle(self, body: str | bytes, *, dequeue_count: int = 1, message_id: str | None = None) -> EvaluateOutcome: ...


def namespace_status(stored: StoredState, namespace: EventHubsNamespaceTarget) -> NamespaceStatus | None:
    """What a consumer target reads of its namespace target's state: whether the namespace's
    latest decision found egress to be the bottleneck, which decision, and when."""
    if stored.etag is None:
        return None
    state = stored.state
    return NamespaceStatus(namespace.name, state.last_decision_id, state.last_reason_code == EGRESS_BOUND, state.last_sample_at)


@dataclass(frozen=True, slots=True)
class _Plan:
    stored: StoredState
    records: tuple[DecisionRecord, ...]
    decision: Decision
    action: ActionMessage | None
    purge: bool
    reconciliation: Reconciliation | None = None
    previous: MetricSample | None = None


def to_action(act: Act, target: str, resource_id: str, traceparent: str | None, *,
              max_reason_chars: int = MAX_REASON_CHARS) -> ActionMessage:
    """The ``actions`` message of a plan's action (its reason cut to what a message carries)."""
    return ActionMessage(decision_id=act.decision_id, target=target, plan_resource_id=resource_id,
                         target_capacity=act.target_capacity, direction=act.direction,
                         reason=act.reason[:max_reason_chars], decided_at=act.decided_at, traceparent=traceparent)


def decision_time(now: datetime, stored: StoredState) -> datetime:
    """``now``, but never at or before the target's latest decision (workers' clocks differ), so
    that the newest decision always carries the newest ``decided_at`` and ``scale`` can skip
    older actions as stale by time."""
    if stored.latest_decided_at is not None and now <= stored.latest_decided_at:
        return stored.latest_decided_at + timedelta(milliseconds=1)
    return now


def source_arrival_rates(previous: MetricSample | None, sample: MetricSample) -> dict[str, float]:
    """Events per second per source between two samples, from the partitions' last enqueued
    sequence numbers (sources without partitions, or failed in either sample, have none)."""
    if previous is None or sample.collected_at <= previous.collected_at:
        return {}
    seconds = (sample.collected_at - previous.collected_at).total_seconds()
    before = {source.name: source for source in previous.sources if source.ok and source.partitions}
    rates = {}
    for source in sample.sources:
        earlier = before.get(source.name)
        if not source.ok or earlier is None or not source.partitions:
            continue
        last = {p.partition_id: p.last_enqueued for p in earlier.partitions}
        arrived = sum(max(p.last_enqueued - last[p.partition_id], 0) for p in source.partitions if p.partition_id in last)
        rates[source.name] = arrived / seconds
    return rates


class EvaluateService:
    """Evaluates samples against ``policy`` with ``store`` (Table storage or memory).

    The state entity read or written last is cached per target with its ETag, so in steady
    state the state is not read at all: the commit's ETag condition detects any other writer.
    """

    def __init__(
        self,
        store: EvaluateStore,
        policy: Policy,
        *,
        clock: Callable[[], datetime] = utc_now,
        retention_days: float = 30.0,
        retention_every: timedelta = timedelta(hours=1),
        retention_limit: int = 500,
        max_attempts: int = 10,
        cache_state: bool = True,
        clock_skew: timedelta = MAX_CLOCK_SKEW,
        reconcile_grace: timedelta = RECONCILE_GRACE,
        dry_run: bool = False,
        telemetry: Telemetry = NO_TELEMETRY,
        external_changes_limit: int = DEFAULT_EXTERNAL_CHANGES_LIMIT,
        namespaces: NamespaceHandler | None = None,
    ) -> None:
        self.store = store
        self.namespaces = namespaces
        self.policy = policy
        self.clock = clock
        self.retention = timedelta(days=retention_days)
        self.retention_every = retention_every
        self.retention_limit = retention_limit
        self.max_attempts = max_attempts
        self.cache_state = cache_state
        self.clock_skew = clock_skew
        self.reconcile_grace = reconcile_grace
        self.dry_run = dry_run
        self.telemetry = telemetry
        self.external_changes_limit = external_changes_limit
        self.settings = EvaluationSettings(reconcile_grace, clock_skew, external_changes_limit, dry_run)
        self._cache: dict[str, StoredState] = {}
        self._profiles: dict[str, StoredProfile | None] = {}
        self._refit_failed_at: dict[str, datetime] = {}

    # --- the entry point -----------------------------------------------------------------------

    def handle(self, body: str | bytes, *, dequeue_count: int = 1, message_id: str | None = None) -> EvaluateOutcome:
        if self.namespaces is not None and is_namespace_message(body):
            return self.namespaces.handle(body, dequeue_count=dequeue_count, message_id=message_id)
        now = self.clock()
        try:
            sample = parse_sample(body, now=now, clock_skew=self.clock_skew)
        except SampleError as error:
            return self._dead_letter(body, str(error), now, dequeue_count, message_id)
        except (ValueError, TypeError, OverflowError, RecursionError) as error:
            # Validation missed a case: still a bad message, not a reason to retry it five times.
            return self._dead_letter(body, f"unreadable sample ({type(error).__name__}: {error})", now, dequeue_count,
                                     message_id)
        # A child of the collect span whose traceparent the sample carries: one trace per decision.
        with self.telemetry.span("evaluate", parent=sample.traceparent,
                                 attributes={TARGET_ATTRIBUTE: sample.target, "autoscaler.sample_id": sample.sample_id}) as span:
            outcome = self._handle_sample(sample, body, now, dequeue_count, message_id, span)
            span.set_attribute("autoscaler.outcome", outcome.status)
            decision_id = outcome.action.decision_id if outcome.action else \
                outcome.decision.decision_id if outcome.decision else None
            if decision_id:
                span.set_attribute(DECISION_ID_ATTRIBUTE, decision_id)
            return outcome

    def _handle_sample(self, sample: MetricSample, body: str | bytes, now: datetime, dequeue_count: int,
                       message_id: str | None, span: Span) -> EvaluateOutcome:
        try:
            target = self.policy.target(sample.target)
        except KeyError:
            known = ", ".join(t.name for t in self.policy.targets)
            return self._dead_letter(body, f"target {sample.target!r} is not in the policy (known: {known})",
                                     now, dequeue_count, message_id, target=sample.target)
        try:
            self.store.add_sample(sample)
        except EntityTooLarge as error:
            return self._dead_letter(body, str(error), now, dequeue_count, message_id, target=sample.target)

        window_start = now - timedelta(seconds=target.window_seconds or 600)
        stored = None
        if dequeue_count > 1:
            # A redelivery: if this sample decided an action, send that again (even if the
            # sample has aged out of the window since), never decide anew. Read fresh: another
            # worker may have written the outbox after this worker cached the state.
            stored = self.store.load_state(target.name)
            self._remember(stored)
            recorded = stored.outbox_for(sample.sample_id)
            if recorded is None and (sample.collected_at <= window_start or stored.was_evaluated(sample.collected_at)):
                recorded = self._logged_action(sample)  # the outbox has moved on since
            if recorded is not None:
                return self._resent(sample, recorded, dequeue_count, 1)
        if sample.collected_at <= window_start:
            logger.info("evaluate %s: sample %s is older than the %ss window; stored only",
                        target.name, sample.sample_id, target.window_seconds)
            return EvaluateOutcome("late", sample_id=sample.sample_id, target=target.name)

        stored = stored or self._cached(target.name) or self.store.load_state(target.name)

        def done(current: StoredState, attempt: int) -> EvaluateOutcome | None:
            if not current.was_evaluated(sample.collected_at):
                return None
            self._remember(current)
            return self._already_evaluated(current, sample, dequeue_count, attempt)

        def decide(current: StoredState) -> Write[_Plan]:
            history = self.store.load_window(target.name, window_start, now + self.clock_skew)
            plan = self._plan(target, current, sample, history, decision_time(now, current), window_start,
                              traceparent=span.traceparent)
            return Write(plan.stored, plan.records, plan)

        def on_conflict(attempt: int) -> None:
            logger.info("evaluate %s: state changed under sample %s (attempt %d); re-reading",
                        target.name, sample.sample_id, attempt)
            self._cache.pop(target.name, None)
            time.sleep(random.uniform(0, 0.01 * attempt))

        unit = commit_state(self.store, target.name, decide, done=done, first=stored, max_attempts=self.max_attempts,
                            on_conflict=on_conflict, what=f"evaluate {target.name}: sample {sample.sample_id}")
        if unit.finished is not None:
            return unit.finished
        plan, saved, attempt = unit.plan, unit.stored, unit.attempts
        assert plan is not None
        if unit.reply_lost:
            logger.warning("evaluate %s: the commit for sample %s landed although its reply was lost",
                           target.name, sample.sample_id)
        self._remember(saved)
        if plan.purge:
            self._purge(target.name, now)
        self._log(plan, sample)
        self._report(target, plan, sample)
        self._refit(target, now)
        messages = (plan.action.to_json(),) if plan.action else ()
        return EvaluateOutcome("evaluated", messages, sample.sample_id, target.name, plan.decision,
                               plan.action, attempts=attempt)

    # --- steps ------------------------------------------------------------------------------------

    def _plan(self, target: TargetPolicy, stored: StoredState, sample: MetricSample, history: list[MetricSample],
              now: datetime, window_start: datetime, *, traceparent: str | None = None) -> _Plan:
        """The domain's plan (``domain/evaluation.py``) as the records to commit."""
        prior = Prior(stored.state, stored.desired, stored.pause, stored.external_changes, stored.external_writer,
                      stored.unreadable, stored.etag)
        namespace = self.policy.namespace_of(target.name)
        status = namespace_status(self.store.load_state(namespace.name), namespace) if namespace is not None else None
        plan = plan_evaluation(target, prior, sample, history, now, self.settings, namespace=status,
                               outlook=self._outlook(target, history, sample))
        for notice in plan.notices:
            getattr(logger, notice.level)("%s", notice.text)
        action = to_action(plan.act, target.name, target.plan.resource_id, traceparent) if plan.act else None
        records = tuple(DecisionRecord.from_row(target.name, row, sample.sample_id, action) for row in plan.rows)
        next_stored = replace(stored.with_evaluated(sample.collected_at, keep_after=window_start - EVALUATED_MARGIN),
                              pause=plan.pause, external_changes=plan.external_changes,
                              external_writer=plan.external_writer, unreadable=())
        if action is not None:
            next_stored = replace(next_stored.with_outbox(sample.sample_id, action),
                                  latest_decision_id=action.decision_id, latest_decided_at=action.decided_at)
        purge = stored.retention_at is None or now - stored.retention_at >= self.retention_every
        next_stored = replace(next_stored, state=plan.state, updated_at=now, desired=plan.desired,
                              retention_at=now if purge else stored.retention_at)
        return _Plan(next_stored, records, plan.decision, action, purge, plan.reconciliation, plan.previous)

    # --- the look-ahead (docs/forecast.md) ---------------------------------------------------------

    def _profile(self, target: str) -> StoredProfile | None:
        """The target's stored profile, read once per refit (an hour) rather than every minute."""
        if target not in self._profiles:
            self._profiles[target] = self.store.load_profile(target)
        return self._profiles[target]

    def _outlook(self, target: TargetPolicy, history: list[MetricSample], sample: MetricSample) -> Outlook | None:
        """What the look-ahead expects from the sample's minute on: the stored profile times the
        level of the window's arrivals (``None`` with ``forecast: off``: nothing read, nothing said)."""
        if target.forecast == "off":
            return None
        from scaling.domain import forecast  # numpy: loaded by the engine already, never at start-up

        window = history if any(item.sample_id == sample.sample_id for item in history) else [*history, sample]
        recent, _ = forecast.arrivals_per_minute(forecast.enqueued_points(window))
        # From the window's newest sample on: the one the engine decides on (a late sample's
        # window ends after it).
        return forecast.outlook_from(self._profile(target.name), recent, max(item.collected_at for item in window))

    def _refit(self, target: TargetPolicy, now: datetime) -> None:
        """Refit the target's profile on its recorded history when it is older than an hour, after
        the decision (a slow read never delays one). Best effort: a failure is logged and the old
        profile, or none, is used until the next try."""
        if target.forecast == "off":
            return
        stored = self._profile(target.name)
        failed = self._refit_failed_at.get(target.name)
        if (stored is not None and not stored.stale(now)) or (failed is not None and now - failed < REFIT_EVERY):
            return
        from scaling.domain import forecast

        try:
            samples: list[MetricSample] = []
            start = now - self.retention
            while start < now:  # day-sized range queries: one month is 30 of them
                end = min(start + timedelta(days=1), now)
                samples.extend(self.store.load_window(target.name, start, end))
                start = end
            arrivals, origin = forecast.arrivals_per_minute(forecast.enqueued_points(samples))
            result = forecast.forecast(arrivals)
            profile = forecast.stored_profile(target.name, result, origin or now, now)
            self.store.save_profile(profile)
        except Exception:
            logger.exception("evaluate %s: refitting the look-ahead's profile failed; retrying in an hour", target.name)
            self._refit_failed_at[target.name] = now
            return
        self._profiles[target.name] = profile
        logger.info("evaluate %s: look-ahead profile refit on %d minutes: %s", target.name, result.history_minutes,
                    "trusted, periods " + ", ".join(str(period) for period in profile.periods) if profile.trusted
                    else "not trusted: " + "; ".join(profile.reasons))

    def _already_evaluated(self, stored: StoredState, sample: MetricSample, dequeue_count: int, attempt: int) -> EvaluateOutcome:
        # A redelivery re-sends the action this sample decided (the output binding's send may have
        # failed after the commit); ``scale`` applies a decision id at most once. A plain
        # duplicate delivery sends nothing. (The decision log was read, if need be, when the
        # redelivery came in; a state re-read after a conflict holds the other writer's action
        # in its outbox.)
        recorded = stored.outbox_for(sample.sample_id) if dequeue_count > 1 else None
        if recorded is not None:
            return self._resent(sample, recorded, dequeue_count, attempt)
        logger.info("evaluate %s: sample %s was already evaluated; nothing to do", sample.target, sample.sample_id)
        return EvaluateOutcome("duplicate", sample_id=sample.sample_id, target=sample.target, attempts=attempt)

    def _resent(self, sample: MetricSample, recorded: ActionMessage, dequeue_count: int, attempt: int) -> EvaluateOutcome:
        logger.warning("evaluate %s: sample %s seen again (dequeue count %d); re-sending recorded action %s",
                       sample.target, sample.sample_id, dequeue_count, recorded.decision_id)
        return EvaluateOutcome("resent", (recorded.to_json(),), sample.sample_id, sample.target,
                               action=recorded, attempts=attempt)

    def _logged_action(self, sample: MetricSample) -> ActionMessage | None:
        """The action ``sample`` decided, from the decision log. The outbox keeps the last
        ``OUTBOX_KEEP`` actions only; a redelivery that comes after that many newer ones must
        still re-send its own, or its decision never reaches ``scale`` (which records it stale,
        older than an applied one) and its fate stays unknown. Best effort: a storage error here
        sends nothing, as before the log was read."""
        try:
            rows = self.store.decisions(sample.target, since=sample.collected_at, limit=LOGGED_ACTION_SEARCH)
        except Exception:
            logger.warning("evaluate %s: could not read the decision log for sample %s's action", sample.target,
                           sample.sample_id, exc_info=True)
            return None
        actions = [row.action for row in rows if row.trigger_sample_id == sample.sample_id and row.action is not None]
        return actions[-1] if actions else None

    def _purge(self, target: str, now: datetime) -> None:
        try:
            removed = self.store.purge_history(target, now - self.retention, self.retention_limit)
        except Exception:  # retention is housekeeping: never fail an evaluation for it
            logger.exception("evaluate %s: history retention failed; retrying in %s", target, self.retention_every)
            return
        if removed:
            logger.info("evaluate %s: removed %d history rows older than %s", target, removed, self.retention)

    def _dead_letter(self, body: str | bytes, error: str, now: datetime, dequeue_count: int,
                     message_id: str | None, *, target: str | None = None) -> EvaluateOutcome:
        error = safe_text(error)
        logger.error("evaluate: message %s dead-lettered: %s", message_id or "?", error)
        text = body_text(body)
        self.store.dead_letter(DeadLetter(FUNCTION_NAME, text, error, now, dequeue_count, message_id,
                                          target=target or target_of(text)))
        self.telemetry.record(DEAD_LETTERS, 1, {"function": FUNCTION_NAME})
        return EvaluateOutcome("dead_lettered", target=target, error=error)

    def _log(self, plan: _Plan, sample: MetricSample) -> None:
        decision = plan.decision
        if plan.action:
            logger.info("evaluate %s: %s %s -> %s (%s) decision %s", decision.target, plan.action.direction,
                        decision.current_capacity, plan.action.target_capacity, plan.action.reason, plan.action.decision_id)
        else:
            logger.info("evaluate %s: sample %s holds at %s (%s)", decision.target, sample.sample_id,
                        decision.current_capacity, decision.reason_code)

    def _report(self, target: TargetPolicy, plan: _Plan, sample: MetricSample) -> None:
        """The metrics of one evaluated sample (docs/operations-monitoring.md)."""
        record, name = self.telemetry.record, {"target": target.name}
        decision, metrics = plan.decision, plan.decision.metrics or {}
        record(SAMPLES, 1, name)
        # The direction of what was sent (a decision already acted on is not counted as a second
        # scale); the reason of a re-issue or an external change when the reconciliation spoke.
        direction = plan.action.direction if plan.action else HOLD
        reason, reconciled = decision.reason_code, plan.reconciliation
        if reconciled is not None and reconciled.kind in (REISSUE, EXTERNAL_CHANGE):
            reason = "reconcile" if reconciled.kind == REISSUE else EXTERNAL_CHANGE
        record(DECISIONS, 1, {**name, "direction": direction, "reason": reason})
        if any(row.reason_code == STATE_UNREADABLE for row in plan.records):
            # The state-unreadable alert's signal (infra/app/operations.bicep), beside the decision.
            record(DECISIONS, 1, {**name, "direction": HOLD, "reason": STATE_UNREADABLE})
        for source in sample.sources:
            if source.ok:
                record(BACKLOG, source.backlog, {**name, "source": source.name})
        for source, rate in source_arrival_rates(plan.previous, sample).items():
            record(ARRIVAL_RATE, rate, {**name, "source": source})
        for spec, key in ((OLDEST_EVENT_AGE, "oldest_age_seconds"), (PREDICTED_AGE, "predicted_age_seconds"),
                          (THROUGHPUT_PER_INSTANCE, "throughput_per_instance")):
            value = number(metrics.get(key))
            if value is not None:
                record(spec, value, name)
        if target.mode == "slo":
            record(SLO_SECONDS, target.slo.max_event_age_seconds, name)
        if plan.stored.desired is not None:
            record(CAPACITY_DESIRED, plan.stored.desired.capacity, name)

    # --- the state cache ---------------------------------------------------------------------------

    def _cached(self, target: str) -> StoredState | None:
        return self._cache.get(target) if self.cache_state else None

    def _remember(self, stored: StoredState) -> None:
        if self.cache_state and stored.etag is not None:
            self._cache[stored.target] = stored

    def forget(self) -> None:
        """Drop every cached state (the next evaluation of each target re-reads it)."""
        self._cache.clear()
