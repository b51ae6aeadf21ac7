"""The scale service: one ``actions`` message in, at most one plan write out.

- Malformed actions go to the dead-letter table; the function returns normally.
- Idempotent: the decision id is claimed in ``appliedactions`` (create-if-absent) before ARM is
  called, so duplicated or concurrent deliveries write the plan at most once. A claim left by a
  worker that died is taken over (ETag) after ``claim_lease``.
- Stale: an action older than the target's latest decision is skipped (actions carry absolute
  capacities, so only the newest one matters).
- The capacity is clamped to the policy bounds (the widest any schedule profile sets) and to the SKU's instance limit; when the plan
  already has it nothing is written. ``dry_run`` logs what would happen and calls no ARM at all.
- When ARM fails for good (the client's bounded retries are spent), the failure is recorded on
  the applied record and on the decision row, logged as an error, and the target's cooldown is
  reset in the state so that the next evaluation decides again.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from scaling.domain.conflict import autoscale_setting_reason
from scaling.domain.decisions import HOLD
from scaling.domain.names import safe_text
from scaling.domain.policy import Policy, TargetPolicy
from scaling.domain.profiles import widest_bounds
from scaling.domain.samples import MAX_CLOCK_SKEW
from scaling.domain.telemetry import (
    ARM_WRITE_DURATION,
    ARM_WRITES,
    CAPACITY_REQUESTED,
    DEAD_LETTERS,
    DECISION_ID_ATTRIBUTE,
    TARGET_ATTRIBUTE,
)
from scaling.plans.base import ControllerReader, PlanAdapter, PlanError, clamp_capacity
from scaling.services.telemetry import NO_TELEMETRY, Telemetry
from scaling.storage.base import ConcurrencyConflict, ScaleStore
from scaling.storage.records import (
    ABANDONED,
    APPLIED,
    APPLYING,
    CONFLICT,
    DRY_RUN,
    FAILED,
    STALE,
    UNCHANGED,
    ActionError,
    ActionMessage,
    AppliedRecord,
    DeadLetter,
    StoredState,
    body_text,
    parse_action,
    target_of,
    utc_now,
)
from scaling.storage.unit_of_work import Write, commit_state

logger = logging.getLogger(__name__)

FUNCTION_NAME = "scale"
#: The reason code the state carries after a failed scale, so the next hold is logged.
SCALE_FAILED = "scale_failed"
#: The outcomes counted in ``autoscaler.arm_writes`` (duplicates and in-progress deliveries are not writes).
WRITE_OUTCOMES = frozenset({APPLIED, UNCHANGED, STALE, FAILED, DRY_RUN, CONFLICT})


@dataclass(frozen=True, slots=True)
class ScaleOutcome:
    """``status``: applied, unchanged, dry_run, stale, failed, conflict, duplicate, in_progress, dead_lettered."""

    status: str
    decision_id: str | None = None
    target: str | None = None
    capacity_before: int | None = None
    capacity_after: int | None = None
    detail: str | None = None


class ScaleService:
    def __init__(
        self,
        store: ScaleStore,
        plans: PlanAdapter,
        policy: Policy,
        *,
        dry_run: bool = False,
        clock: Callable[[], datetime] = utc_now,
        claim_lease: timedelta = timedelta(minutes=5),
        max_state_attempts: int = 5,
        telemetry: Telemetry = NO_TELEMETRY,
        timer: Callable[[], float] = time.perf_counter,
        clock_skew: timedelta = MAX_CLOCK_SKEW,
        controllers: ControllerReader | None = None,
    ) -> None:
        self.store = store
        self.plans = plans
        self.policy = policy
        self.dry_run = dry_run
        self.clock = clock
        self.claim_lease = claim_lease
        self.max_state_attempts = max_state_attempts
        self.telemetry = telemetry
        self.timer = timer
        self.clock_skew = clock_skew
        self.controllers = controllers

    def handle(self, body: str | bytes, *, dequeue_count: int = 1, message_id: str | None = None) -> ScaleOutcome:
        now = self.clock()
        try:
            action = parse_action(body, now=now, clock_skew=self.clock_skew)
        except ActionError as error:
            return self._dead_letter(body, str(error), now, dequeue_count, message_id)
        except (ValueError, TypeError, OverflowError, RecursionError) as error:
            return self._dead_letter(body, f"unreadable action ({type(error).__name__}: {error})", now, dequeue_count,
                                     message_id)
        # A child of the evaluate span whose traceparent the action carries.
        with self.telemetry.span("scale", parent=action.traceparent,
                                 attributes={TARGET_ATTRIBUTE: action.target, DECISION_ID_ATTRIBUTE: action.decision_id}) as span:
            outcome = self._handle_action(action, body, now, dequeue_count, message_id)
            span.set_attribute("autoscaler.outcome", outcome.status)
        if outcome.status in WRITE_OUTCOMES and outcome.target:
            self.telemetry.record(ARM_WRITES, 1, {"target": outcome.target, "outcome": outcome.status})
            if outcome.status == APPLIED and outcome.capacity_after is not None:
                self.telemetry.record(CAPACITY_REQUESTED, outcome.capacity_after, {"target": outcome.target})
        return outcome

    def _handle_action(self, action: ActionMessage, body: str | bytes, now: datetime, dequeue_count: int,
                       message_id: str | None) -> ScaleOutcome:
        try:
            # A plan target, or a namespace target (its "plan" is the namespace: sku.capacity in TUs).
            target = self.policy.scale_target(action.target)
        except KeyError:
            return self._dead_letter(body, f"target {action.target!r} is not in the policy", now, dequeue_count, message_id)
        if target.plan.resource_id.lower() != action.plan_resource_id.lower():
            return self._dead_letter(body, f"plan {action.plan_resource_id} is not target {target.name!r}'s plan "
                                           f"({target.plan.resource_id}) in the policy", now, dequeue_count, message_id)

        record = self.store.get_applied(target.name, action.decision_id)
        if record is not None and record.final:
            logger.info("scale %s: decision %s already handled (%s); acknowledged", target.name, action.decision_id, record.status)
            return ScaleOutcome("duplicate", action.decision_id, target.name, record.capacity_before, record.capacity_after,
                                record.status)
        if record is not None and record.status == APPLYING and now - record.claimed_at < self.claim_lease \
                and not record.claimed_by_earlier_delivery(message_id, dequeue_count):
            logger.info("scale %s: decision %s is being applied by another worker since %s", target.name,
                        action.decision_id, record.claimed_at.isoformat())
            return ScaleOutcome("in_progress", action.decision_id, target.name)

        stored = self.store.load_state(target.name)
        problem = self._not_committed(action, stored)
        if problem is not None:
            return self._dead_letter(body, problem, now, dequeue_count, message_id)
        stale = (stored.latest_decision_id is not None and stored.latest_decision_id != action.decision_id
                 and stored.latest_decided_at is not None and action.decided_at < stored.latest_decided_at)
        claim = AppliedRecord(target.name, action.decision_id, STALE if stale else APPLYING, action.decided_at,
                              action.target_capacity, now, attempts=(record.attempts + 1) if record else 1,
                              finished_at=now if stale else None,
                              detail=f"superseded by decision {stored.latest_decision_id}" if stale else None,
                              claimed_by=uuid.uuid4().hex, message_id=message_id, dequeue_count=dequeue_count)
        try:
            claim = self.store.claim_applied(claim) if record is None else self.store.save_applied(replace(claim, etag=record.etag))
        except ConcurrencyConflict:
            # Ours, if azure-core retried a claim whose reply was lost; someone else's otherwise.
            current = self.store.get_applied(target.name, action.decision_id)
            if current is None or current.claimed_by != claim.claimed_by:
                logger.info("scale %s: decision %s was claimed concurrently; acknowledged", target.name, action.decision_id)
                return ScaleOutcome("in_progress", action.decision_id, target.name)
            claim = current
        if stale:
            logger.info("scale %s: action %s (%s) is older than the latest decision %s (%s); skipped as stale",
                        target.name, action.decision_id, action.decided_at.isoformat(), stored.latest_decision_id,
                        stored.latest_decided_at.isoformat() if stored.latest_decided_at else "?")
            self._note(action, STALE, claim.detail, now)
            return ScaleOutcome("stale", action.decision_id, target.name, detail=claim.detail)

        seen: dict[str, int] = {}
        try:
            status, before, after, detail = self._apply(action, target, seen)
        except PlanError as error:
            confirmed = self._confirm_write(action, seen, error)
            if confirmed is None:
                return self._failed(action, target, claim, error, now, seen.get("capacity"))
            status, before, after, detail = confirmed
        except BaseException:
            self._abandon(claim)
            raise
        finished = replace(claim, status=status, capacity_before=before, capacity_after=after, detail=detail,
                           finished_at=self.clock())
        try:
            self.store.save_applied(finished)
        except ConcurrencyConflict:
            logger.warning("scale %s: applied record %s changed while applying", target.name, action.decision_id)
        self._note(action, status, detail, finished.finished_at)
        return ScaleOutcome(status, action.decision_id, target.name, before, after, detail)

    # --- steps ------------------------------------------------------------------------------------

    def _not_committed(self, action: ActionMessage, stored: StoredState) -> str | None:
        """Why ``action`` is not what evaluate committed for its target (``None`` when it is).

        Evaluate commits every action it sends (a decision, a re-issue, a pin) to the state's
        outbox and the decision log in one transaction before the message leaves, so a genuine
        action is always found by its decision id with the same capacity: in the outbox (the
        last few, no extra read), as the desired capacity, or in its decision-log row (one point
        read, for an action delivered after the outbox moved on). Anything else was written to the
        queue by someone else, or changed on the way: it must not resize the plan."""
        for entry in reversed(stored.outbox):
            if entry.action.decision_id == action.decision_id:
                return self._capacity_differs(action, entry.action.target_capacity, "the state's outbox")
        desired = stored.desired
        if desired is not None and (action.decision_id == desired.decision_id
                                    or action.decision_id.startswith(f"{desired.decision_id}-r")):
            return self._capacity_differs(action, desired.capacity, "the desired capacity")
        row = self.store.decision_row(action.target, action.decided_at, action.decision_id)
        if row is not None and row.acts:
            committed = row.action.target_capacity if row.action is not None else row.capacity_after
            return self._capacity_differs(action, committed, "the decision log")
        return (f"decision {action.decision_id} ({action.target_capacity} for {action.target}, decided at "
                f"{action.decided_at.isoformat()}) was not committed by evaluate: it is in neither the target's "
                "state nor its decision log; a queue message alone does not resize a plan")

    @staticmethod
    def _capacity_differs(action: ActionMessage, committed: int | None, where: str) -> str | None:
        if committed == action.target_capacity:
            return None
        return (f"decision {action.decision_id} asks {action.target_capacity} for {action.target}, but evaluate "
                f"committed {committed} for it ({where}); not applied")

    def _apply(self, action: ActionMessage, target: TargetPolicy, seen: dict[str, int]) -> tuple[str, int | None, int, str | None]:
        # The bounds in force (schedule profiles) were applied when deciding: clamp to the widest.
        low, high = widest_bounds(target)
        bounds = replace(target.bounds, min_instances=low, max_instances=high)
        if self.dry_run:
            wanted = max(bounds.min_instances, min(bounds.max_instances, action.target_capacity))
            detail = (f"dry run: would set plan {action.plan_resource_id} to {wanted} instances "
                      f"({action.direction}; {action.reason}); ARM not called")
            logger.warning("scale %s: %s", target.name, detail)
            return DRY_RUN, None, wanted, detail
        info = self.plans.get_plan(action.plan_resource_id)
        seen["capacity"] = info.capacity
        wanted = clamp_capacity(action.target_capacity, bounds, info)
        notes = []
        if wanted != action.target_capacity:
            notes.append(f"clamped {action.target_capacity} -> {wanted} (policy {bounds.min_instances}..{bounds.max_instances}, "
                         f"{info.sku_tier} {info.sku_name} allows {info.minimum_capacity}..{info.max_instances})")
        seen["wanted"] = wanted
        competing = self._autoscale_settings(action.plan_resource_id)
        if competing:
            detail = (f"{autoscale_setting_reason(competing)}; nothing written (plan at {info.capacity}, "
                      f"{action.target_capacity} asked)")
            logger.error("scale %s: %s (decision %s)", target.name, detail, action.decision_id)
            return CONFLICT, info.capacity, info.capacity, detail
        if info.capacity == wanted:
            notes.append(f"plan already at {wanted}; nothing written")
            logger.info("scale %s: plan %s already at %d; nothing written", target.name, info.resource_id, wanted)
            return UNCHANGED, info.capacity, wanted, "; ".join(notes)
        started = self.timer()
        try:
            after = self.plans.set_capacity(action.plan_resource_id, wanted)
        finally:
            self.telemetry.record(ARM_WRITE_DURATION, (self.timer() - started) * 1000.0, {"target": target.name})
        logger.info("scale %s: plan %s %s -> %s (decision %s: %s)", target.name, info.resource_id, info.capacity,
                    after.capacity, action.decision_id, action.reason)
        return APPLIED, info.capacity, after.capacity, "; ".join(notes) or None

    def competing_controllers(self) -> dict[str, tuple[str, ...]]:
        """Every target whose plan an enabled Azure Monitor autoscale setting drives, with the
        settings' names: checked once when the service starts (each one logged as an error),
        then before every write, and every minute by collect."""
        found = {}
        for target in self.policy.targets:
            names = self._autoscale_settings(target.plan.resource_id)
            if names:
                found[target.name] = names
                logger.error("scale %s: %s", target.name, autoscale_setting_reason(names))
        return found

    def _autoscale_settings(self, resource_id: str) -> tuple[str, ...]:
        """The enabled autoscale settings driving the plan, read right before a write (writes are
        rare; collect reads them every minute for evaluate). A failed read is logged and does not
        block the write: the role may be missing, and collect's reads keep the target held."""
        if self.controllers is None:
            return ()
        try:
            return tuple(self.controllers.enabled_autoscale_settings(resource_id))
        except PlanError as error:
            logger.warning("scale: could not list the autoscale settings of plan %s's resource group (%s); "
                           "writing without that check", resource_id, error)
            return ()

    def _confirm_write(self, action: ActionMessage, seen: dict[str, int],
                       error: PlanError) -> tuple[str, int | None, int, str | None] | None:
        """After a failed write, read the plan once: an ARM write can succeed while its reply is
        lost or late (a read timeout, a reset connection). ``None`` when the plan does not have
        the capacity asked for (the failure was real) or cannot be read."""
        wanted = seen.get("wanted")
        if wanted is None or "capacity" not in seen:
            return None
        try:
            info = self.plans.get_plan(action.plan_resource_id)
        except PlanError:
            return None
        if info.capacity != wanted:
            return None
        detail = f"the write answered {error} but the plan has {wanted}: applied"
        logger.warning("scale %s: %s (decision %s)", action.target, detail, action.decision_id)
        return APPLIED, seen["capacity"], wanted, detail

    def _failed(self, action: ActionMessage, target: TargetPolicy, claim: AppliedRecord, error: PlanError,
                now: datetime, capacity: int | None) -> ScaleOutcome:
        detail = str(error)
        logger.error("scale %s: decision %s (target capacity %d) failed: %s", target.name, action.decision_id,
                     action.target_capacity, detail)
        try:
            self.store.save_applied(replace(claim, status=FAILED, detail=detail, finished_at=self.clock()))
        except ConcurrencyConflict:
            logger.warning("scale %s: applied record %s changed while failing", target.name, action.decision_id)
        self._note(action, FAILED, detail, now)
        self._reset_state(action, target, capacity)
        return ScaleOutcome(FAILED, action.decision_id, target.name, capacity, capacity, detail)

    def _reset_state(self, action: ActionMessage, target: TargetPolicy, capacity: int | None) -> None:
        """Let the next evaluation decide again: no cooldown, and the capacity the plan really has
        (``None`` if unknown; the next sample carries it) instead of the one that was not applied."""
        def done(stored: StoredState, attempt: int) -> bool | None:
            return True if stored.latest_decision_id != action.decision_id else None  # a newer decision owns it

        def decide(stored: StoredState) -> Write[None]:
            state = replace(stored.state, last_action_at=None, pending_ready_at=None, ready_capacity=None,
                            capacity=capacity, last_direction=HOLD, last_reason_code=SCALE_FAILED)
            return Write(replace(stored, state=state, updated_at=self.clock()), (), None)

        try:
            commit_state(self.store, target.name, decide, done=done, max_attempts=self.max_state_attempts)
        except ConcurrencyConflict:
            logger.error("scale %s: could not reset the state after the failed decision %s", target.name,
                         action.decision_id)

    def _abandon(self, claim: AppliedRecord) -> None:
        try:
            self.store.save_applied(replace(claim, status=ABANDONED, finished_at=self.clock()))
        except Exception:  # the original error matters more; the lease expires anyway
            logger.exception("scale %s: could not release the claim on %s", claim.target, claim.decision_id)

    def _note(self, action: ActionMessage, outcome: str, detail: str | None, at: datetime) -> None:
        try:
            found = self.store.record_outcome(action.target, action.decided_at, action.decision_id, outcome, detail, at)
        except Exception:  # the applied record holds the outcome already
            logger.exception("scale %s: could not note the outcome on decision %s", action.target, action.decision_id)
            return
        if not found:
            logger.warning("scale %s: decision row for %s not found; outcome %s kept in the applied record only",
                           action.target, action.decision_id, outcome)

    def _dead_letter(self, body: str | bytes, error: str, now: datetime, dequeue_count: int,
                     message_id: str | None) -> ScaleOutcome:
        error = safe_text(error)
        logger.error("scale: message %s dead-lettered: %s", message_id or "?", error)
        text = body_text(body)
        self.store.dead_letter(DeadLetter(FUNCTION_NAME, text, error, now, dequeue_count, message_id, target=target_of(text)))
        self.telemetry.record(DEAD_LETTERS, 1, {"function": FUNCTION_NAME})
        return ScaleOutcome("dead_lettered", detail=error)
