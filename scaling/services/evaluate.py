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
from typing import Protocol

from scaling.domain.conflict import (
    AUTOSCALE_SETTING,
    DEFAULT_EXTERNAL_CHANGES_LIMIT,
    EXTERNAL_WRITER,
    ConflictHold,
    ExternalChange,
    autoscale_setting_reason,
    external_writer,
    recent_changes,
)
from scaling.domain.decisions import DOWN, HOLD, UP, Decision, ScalerState, decision_id_for
from scaling.domain.engine import evaluate
from scaling.domain.names import safe_text
from scaling.domain.namespace_samples import is_namespace_message
from scaling.domain.pause import PAUSE_EXPIRED, PINNED, STATE_UNREADABLE, Pause, unreadable_reasons
from scaling.domain.policy import Policy, TargetPolicy
from scaling.domain.policy_namespace import EventHubsNamespaceTarget
from scaling.domain.reconcile import EXTERNAL_CHANGE, REISSUE, DesiredCapacity, Reconciliation, reconcile
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
from scaling.domain.throughput_units import EGRESS_BOUND, NamespaceStatus, egress_bound_hold
from scaling.services.telemetry import NO_TELEMETRY, Span, Telemetry, number
from scaling.storage.base import EntityTooLarge, EvaluateStore
from scaling.storage.records import (
    ActionMessage,
    DeadLetter,
    DecisionRecord,
    StoredState,
    action_for,
    body_text,
    restore_learning,
    target_of,
    utc_now,
)
from scaling.storage.unit_of_work import Write, commit_state

logger = logging.getLogger(__name__)

FUNCTION_NAME = "evaluate"
#: Samples evaluated this long before the window's start are still remembered (clock skew
#: between workers, a policy whose window grows).
EVALUATED_MARGIN = timedelta(minutes=10)
#: How long the plan may differ from the desired capacity before the target is re-issued: one
#: collect interval for the action to travel, one for the plan read, and a minute to spare.
RECONCILE_GRACE = timedelta(minutes=3)
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


def pause_expired_record(target: str, pause: Pause, trigger: str, now: datetime, capacity: int | None) -> DecisionRecord:
    """The decision-log row of a pause that ended by itself (plan and namespace targets alike)."""
    logger.warning("evaluate %s: the pause ended at %s (%s); the autoscaler acts again", target,
                   pause.until.isoformat(), pause.describe())
    return DecisionRecord(target, decision_id_for(target, f"expired|{pause.pause_id}"), now, trigger,
                          acts=False, direction=HOLD, reason_code=PAUSE_EXPIRED,
                          reasons=(f"ended by itself: {pause.describe()}",), metrics={},
                          capacity_before=capacity, capacity_after=capacity)


def unreadable_record(target: str, stored: StoredState, trigger: str, now: datetime, capacity: int | None) -> DecisionRecord:
    """The decision-log row of stored fields that could not be read and count as unset."""
    logger.error("evaluate %s: the stored state has unreadable fields (%s); they count as unset",
                 target, "; ".join(stored.unreadable))
    return DecisionRecord(target, decision_id_for(target, f"unreadable|{stored.etag}"), now, trigger,
                          acts=False, direction=HOLD, reason_code=STATE_UNREADABLE,
                          reasons=unreadable_reasons(stored.unreadable), metrics={},
                          capacity_before=capacity, capacity_after=capacity)


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


def with_layout_notes(record: DecisionRecord, sample: MetricSample) -> DecisionRecord:
    """The record with the sample's ``checkpoint_layout`` notes (what the collector found in the
    checkpoint store, per source) added to its reasons, so that the decision log says which
    layout the backlog was read from, or that none matched."""
    notes = tuple(f"{source.name}: {note}" for source in sample.sources for note in source.notes
                  if note.startswith("checkpoint_layout"))
    return replace(record, reasons=(*record.reasons, *notes)) if notes else record


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
        self._cache: dict[str, StoredState] = {}

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
        messages = (plan.action.to_json(),) if plan.action else ()
        return EvaluateOutcome("evaluated", messages, sample.sample_id, target.name, plan.decision,
                               plan.action, attempts=attempt)

    # --- steps ------------------------------------------------------------------------------------

    def _plan(self, target: TargetPolicy, stored: StoredState, sample: MetricSample, history: list[MetricSample],
              now: datetime, window_start: datetime, *, traceparent: str | None = None) -> _Plan:
        old = stored.state
        if not any(item.sample_id == sample.sample_id for item in history):
            history = [*history, sample]
        records: list[DecisionRecord] = []
        if stored.unreadable:
            # Out-of-band edits or an older writer: what could not be read counts as unset (an
            # unreadable pause as expired), said once in the log; the commit writes it cleanly.
            records.append(self._unreadable(target, stored, sample.sample_id, now, old.capacity))
            stored = replace(stored, unreadable=())
        pause = stored.pause
        if pause is not None and not pause.active(now):
            # A forgotten pause ends by itself; its end is a row of the decision log.
            records.append(self._pause_expired(target, pause, sample.sample_id, now, old.capacity))
            stored, pause = replace(stored, pause=None), None
        previous = max((item for item in history if item.collected_at < sample.collected_at),
                       key=lambda item: item.collected_at, default=None)
        newest = max((item for item in history if item.collected_at <= now + self.clock_skew),
                     key=lambda item: item.collected_at, default=sample)
        # Paused (not pinned), nothing at all goes to scale: no re-issue either.
        holding_still = pause is not None and pause.pinned_at is None
        reconciliation = None if self.dry_run or holding_still else reconcile(
            stored.desired, newest.capacity, newest.collected_at, grace=self.reconcile_grace,
            on_external_change=target.on_external_change, clock_skew=self.clock_skew)
        if reconciliation is not None and reconciliation.kind == EXTERNAL_CHANGE and not newest.autoscale_settings \
                and old.last_reason_code == AUTOSCALE_SETTING and newest.capacity is not None:
            # The first sample after an autoscale setting let go: the plan moved under the setting,
            # not under an external writer. Act from the capacity the plan has, as when it holds.
            reconciliation = None
            stored = replace(stored, desired=DesiredCapacity.observed(newest.capacity, newest.collected_at, "released"))
        conflict, stored = self._conflict(stored, newest, reconciliation)
        if conflict is not None:
            # Another controller drives the plan: never contest it. The desired capacity follows
            # the plan, so that acting again later starts from what it has.
            reconciliation = None
            if newest.capacity is not None:
                stored = replace(stored, desired=DesiredCapacity.observed(newest.capacity, newest.collected_at, "held"))
        decision = evaluate(target, old, history, now, clock_skew=self.clock_skew, pause=conflict or pause)
        decision = self._egress_bound(target, decision, old, newest.collected_at)
        if conflict is not None and decision.reason_code != conflict.code:
            # Held whatever the rules say: the log's reason is the conflict from its first sample.
            decision = replace(decision, reason_code=conflict.code, reasons=(conflict.describe(), *decision.reasons),
                               state=replace(decision.state or old, last_reason_code=conflict.code))
        desired = reconciliation.desired if reconciliation else stored.desired
        new_state = decision.state or old
        # A window whose newest sample is older than one evaluated before (this worker's clock is
        # behind the one that evaluated it, within the skew tolerance): it knows less than a
        # decision already taken, so it neither acts nor overwrites the state. Acting would give an
        # older window's decision the last word, and a later evaluation of the newer window would
        # re-decide an id already acted on with another capacity.
        stale_window = old.last_sample_at is not None and newest.collected_at < old.last_sample_at
        if stale_window:
            new_state = old
        elif old.last_sample_at is not None and new_state.last_sample_at is not None \
                and new_state.last_sample_at <= old.last_sample_at:
            # The window's newest sample was evaluated before (this one is late): nothing new to learn.
            new_state = restore_learning(new_state, old)
        next_stored = stored.with_evaluated(sample.collected_at, keep_after=window_start - EVALUATED_MARGIN)
        action = None
        if conflict is not None:
            if decision.reason_code != old.last_reason_code and not stale_window:
                records.append(with_layout_notes(DecisionRecord.from_decision(decision, sample.sample_id, None), sample))
        elif pause is not None and pause.pinned_at is not None and not pause.pin_requested:
            # Pinned: the count is requested once, through the outbox like any decision, then held.
            action, record = self._pin(target, pause, sample.sample_id, now, decision.current_capacity, traceparent)
            records.append(record)
            pause = replace(pause, pin_requested=True)
            next_stored = replace(next_stored.with_outbox(sample.sample_id, action), pause=pause,
                                  latest_decision_id=action.decision_id, latest_decided_at=now)
            desired = DesiredCapacity.decided(action.target_capacity, action.decision_id, now, decision.current_capacity,
                                              previous=desired, clock_skew=self.clock_skew)
            new_state = replace(new_state, last_action_at=now, last_decision_id=action.decision_id)
            reconciliation = None
            if decision.metrics.get("would_scale_to") is not None:
                records.append(DecisionRecord.from_decision(decision, sample.sample_id, None))
                next_stored = replace(next_stored, pause=replace(pause, logged_would=decision.metrics["would_scale_to"]))
        elif pause is not None and "would_scale_to" in decision.metrics:
            # Paused: log what it would have done, once per change of mind.
            would = decision.metrics["would_scale_to"]
            if would != pause.logged_would or decision.reason_code != old.last_reason_code:
                records.append(with_layout_notes(DecisionRecord.from_decision(decision, sample.sample_id, None), sample))
                next_stored = replace(next_stored, pause=replace(pause, logged_would=would))
        elif decision.acts and stale_window:
            logger.info("evaluate %s: the window of sample %s ends at %s, before the newest evaluated sample (%s); "
                        "not acting on it", target.name, sample.sample_id, newest.collected_at.isoformat(),
                        old.last_sample_at.isoformat() if old.last_sample_at else "?")
        elif decision.acts and decision.decision_id == old.last_decision_id:
            # Already acted on this decision (same newest sample): never a second action.
            logger.info("evaluate %s: decision %s was already taken; not acting again", target.name, decision.decision_id)
            new_state = old
        elif decision.acts:
            action = replace(action_for(decision, target), traceparent=traceparent)
            if reconciliation is not None and reconciliation.kind == EXTERNAL_CHANGE:
                records.append(self._superseded_change(target, reconciliation, sample.sample_id, now, decision.decision_id))
            records.append(with_layout_notes(DecisionRecord.from_decision(decision, sample.sample_id, action), sample))
            next_stored = replace(next_stored.with_outbox(sample.sample_id, action),
                                  latest_decision_id=decision.decision_id, latest_decided_at=decision.evaluated_at)
            # A new decision supersedes whatever the reconciliation wanted to re-issue.
            desired = DesiredCapacity.decided(action.target_capacity, decision.decision_id, now, decision.current_capacity,
                                              previous=desired, clock_skew=self.clock_skew)
            reconciliation = None
        elif decision.reason_code != old.last_reason_code and not stale_window:
            records.append(with_layout_notes(DecisionRecord.from_decision(decision, sample.sample_id, None), sample))
        if reconciliation is not None and reconciliation.kind in (REISSUE, EXTERNAL_CHANGE):
            action, record = self._reconciled(target, reconciliation, sample.sample_id, now, traceparent)
            records.append(record)
            if action is not None:
                next_stored = replace(next_stored.with_outbox(sample.sample_id, action),
                                      latest_decision_id=action.decision_id, latest_decided_at=now)
        purge = stored.retention_at is None or now - stored.retention_at >= self.retention_every
        next_stored = replace(next_stored, state=new_state, updated_at=now, desired=desired,
                              retention_at=now if purge else stored.retention_at)
        return _Plan(next_stored, tuple(records), decision, action, purge, reconciliation, previous)

    def _egress_bound(self, target: TargetPolicy, decision: Decision, old: ScalerState, observed_at: datetime) -> Decision:
        """A consumer target whose namespace target finds egress the bottleneck: its scale-out is
        held (``namespace_egress_bound``) and the minute teaches nothing of its throughput. Only a
        target listed in a namespace's ``consumer_targets`` reads that state (one read per
        evaluation); every other target decides exactly as before."""
        namespace = self.policy.namespace_of(target.name)
        if namespace is None:
            return decision
        return egress_bound_hold(decision, namespace_status(self.store.load_state(namespace.name), namespace), old,
                                 observed_at)

    def _conflict(self, stored: StoredState, newest: MetricSample,
                  reconciliation: Reconciliation | None) -> tuple[ConflictHold | None, StoredState]:
        """Whether another controller drives the plan (``domain/conflict.py``), and the state with
        the plan's external changes of the last hour counted (one more when this observation is
        one): an enabled autoscale setting in the sample, or more external changes in the hour
        than ``external_changes_limit``, which holds until ``resume``."""
        writer, seen = stored.external_writer, None
        # A resize while an enabled autoscale setting holds the target is that setting's: counted
        # as an external writer's, four of them would latch a hold that outlives the setting.
        if writer is None and reconciliation is not None and reconciliation.kind == EXTERNAL_CHANGE \
                and not newest.autoscale_settings \
                and stored.desired is not None and reconciliation.observed is not None:
            seen = ExternalChange(newest.collected_at, reconciliation.observed, stored.desired.capacity)
        changes = recent_changes(stored.external_changes, seen, newest.collected_at)
        if seen is not None:
            writer = external_writer(changes, newest.collected_at, self.external_changes_limit)
            if writer is not None:
                logger.error("evaluate %s: %s", stored.target, writer.describe())
        stored = replace(stored, external_changes=changes, external_writer=writer)
        if newest.autoscale_settings:
            return ConflictHold(AUTOSCALE_SETTING, autoscale_setting_reason(newest.autoscale_settings)), stored
        if writer is not None:
            return ConflictHold(EXTERNAL_WRITER, writer.describe()), stored
        return None, stored

    def _pin(self, target: TargetPolicy, pause: Pause, trigger: str, now: datetime, capacity: int | None,
             traceparent: str | None) -> tuple[ActionMessage, DecisionRecord]:
        """The one action of a pin and its decision-log row (the id is the pause's: a retry or a
        redelivery asks for the same decision, which ``scale`` applies at most once)."""
        assert pause.pinned_at is not None
        decision_id = decision_id_for(target.name, f"pin|{pause.pause_id}")
        direction = DOWN if capacity is not None and pause.pinned_at < capacity else UP
        action = ActionMessage(decision_id=decision_id, target=target.name, plan_resource_id=target.plan.resource_id,
                               target_capacity=pause.pinned_at, direction=direction,
                               reason=f"{PINNED}: {pause.describe()}", decided_at=now, traceparent=traceparent)
        record = DecisionRecord(target.name, decision_id, now, trigger, acts=True, direction=direction,
                                reason_code=PINNED, reasons=(pause.describe(),),
                                metrics={"pinned_at": pause.pinned_at, "until": pause.until.isoformat()},
                                capacity_before=capacity, capacity_after=pause.pinned_at, action=action)
        return action, record

    def _pause_expired(self, target: TargetPolicy, pause: Pause, trigger: str, now: datetime,
                       capacity: int | None) -> DecisionRecord:
        return pause_expired_record(target.name, pause, trigger, now, capacity)

    def _unreadable(self, target: TargetPolicy, stored: StoredState, trigger: str, now: datetime,
                    capacity: int | None) -> DecisionRecord:
        return unreadable_record(target.name, stored, trigger, now, capacity)

    def _reconciled(self, target: TargetPolicy, reconciliation: Reconciliation, trigger: str,
                    now: datetime, traceparent: str | None = None) -> tuple[ActionMessage | None, DecisionRecord]:
        """The decision-log row of a re-issue or an external change, and the action to send (if any)."""
        desired = reconciliation.desired
        assert desired is not None and reconciliation.observed is not None
        code = "reconcile" if reconciliation.kind == REISSUE else EXTERNAL_CHANGE
        metrics = {"observed_capacity": reconciliation.observed, "desired_capacity": desired.capacity,
                   "desired_decision_id": desired.decision_id, "reissues": desired.reissues}
        action = None
        if reconciliation.acts:
            action = ActionMessage(decision_id=reconciliation.reissue_id, target=target.name,
                                   plan_resource_id=target.plan.resource_id, target_capacity=desired.capacity,
                                   direction=reconciliation.direction or UP,
                                   reason=f"{code}: {'; '.join(reconciliation.reasons)}", decided_at=now,
                                   traceparent=traceparent)
        record_id = reconciliation.reissue_id or desired.decision_id
        record = DecisionRecord(target.name, record_id, now, trigger, acts=action is not None,
                                direction=action.direction if action else HOLD, reason_code=code,
                                reasons=reconciliation.reasons, metrics=metrics,
                                capacity_before=reconciliation.observed,
                                capacity_after=desired.capacity, action=action)
        return action, record

    def _superseded_change(self, target: TargetPolicy, reconciliation: Reconciliation, trigger: str, now: datetime,
                           decision_id: str) -> DecisionRecord:
        """The decision-log row of an external change that a new decision of the same evaluation
        supersedes: the operator still sees that someone resized the plan."""
        _, record = self._reconciled(target, replace(reconciliation, reissue_id=None, direction=None), trigger, now)
        return replace(record, reasons=(*record.reasons, f"superseded by decision {decision_id}"))

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
