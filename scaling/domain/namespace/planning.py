"""What one evaluation of a namespace target decides, around the sizing: a pure function.

``plan_namespace`` takes what the namespace's stored state holds (``NamespacePrior``), the sample,
the consumer targets' planned catch-up reads (the service reads them from their states) and the
time, and returns the next state, the decision-log rows and at most one action
(``NamespacePlan``). The namespace evaluate service reads, turns the plan into its records and
messages and commits them under the ETag (``services/namespace.py``). In the plan targets' order
(``domain/evaluation.py``):

1. stored fields that could not be read count as unset, and a pause whose time is up ends
   (``outcomes.expiries``);
2. a late sample (older than the newest evaluated one) is remembered, never acted on;
3. the desired count is reconciled against the observed one (``reconcile.py``);
4. the sizing decides (``sizing.py``), or holds when the namespace was not read; a raise, ours or
   auto-inflate's, starts the scale-down hold; a pause holds the decision;
5. one of: send a pin once; log what a pause would do (once per change of mind); act (never twice
   on one decision, never again on a count already asked for); else log a change of reason; a
   re-issue or an external change the reconciliation found goes last (not while paused unpinned).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from scaling.domain.decisions import HOLD, UP, Decision, ScalerState, decision_id_for
from scaling.domain.namespace.policy import EventHubsNamespaceTarget
from scaling.domain.namespace.samples import NamespaceSample
from scaling.domain.namespace.sizing import ConsumerCatchUp, size_namespace
from scaling.domain.outcomes import Act, LogRow, Notice, expiries, pin_act, reconciled_act
from scaling.domain.pause import Pause, paused_reason
from scaling.domain.reconcile import EXTERNAL_CHANGE, REISSUE, DesiredCapacity, reconcile

#: Reason code of a sample older than the newest evaluated one.
LATE_SAMPLE = "late_sample"
#: Reason code when the namespace itself could not be read (no capacity to size from).
CAPACITY_UNKNOWN = "capacity_unknown"
#: A namespace action's reason is cut here (a decision's reasons are a few lines).
REASON_CHARS = 1000


@dataclass(frozen=True, slots=True)
class NamespacePrior:
    """What the evaluation reads of the namespace's stored state. ``latest_decision_id`` is the
    newest acting decision (never acted on twice); ``version`` the entity's ETag (an unreadable
    state's row is named after it, once per version)."""

    state: ScalerState
    desired: DesiredCapacity | None = None
    pause: Pause | None = None
    latest_decision_id: str | None = None
    unreadable: tuple[str, ...] = ()
    version: str | None = None


@dataclass(frozen=True, slots=True)
class NamespaceSettings:
    """The service's settings that shape a decision: the grace before a lost write is re-issued
    and the tolerated clock skew between workers."""

    reconcile_grace: timedelta
    clock_skew: timedelta


@dataclass(frozen=True, slots=True)
class NamespacePlan:
    """What to commit: the fields of the next stored state, the log rows and the action.
    ``traced`` says whether the action answers the sample (a decision or a pin: it carries the
    sample's trace context) or the reconciliation (a re-issue: it does not)."""

    decision: Decision
    state: ScalerState
    desired: DesiredCapacity | None
    pause: Pause | None
    rows: tuple[LogRow, ...] = ()
    act: Act | None = None
    traced: bool = False
    notices: tuple[Notice, ...] = ()


def held_by_pause(decision: Decision, pause: Pause) -> Decision:
    """Paused or pinned, as a plan target is (docs/operations.md): the sizing is logged as what it
    would have done, never sent; a pin's count goes out once through the outbox."""
    would = decision.target_capacity if decision.acts else None
    return replace(decision, direction=HOLD, target_capacity=decision.current_capacity, reason_code=pause.code,
                   reasons=(*((paused_reason(pause, decision.current_capacity, would),) if would else ()),
                            pause.describe(), *decision.reasons),
                   metrics={**decision.metrics, **({"would_scale_to": would} if would else {})})


def sized_decision(target: EventHubsNamespaceTarget, sample: NamespaceSample, consumers: Sequence[ConsumerCatchUp],
                   now: datetime, decision_id: str, last_raise_at: datetime | None) -> Decision:
    """The sizing's decision (``sizing.py``), or a hold when the namespace was not read."""
    reading = sample.reading
    if reading is None:
        return Decision(decision_id, target.name, now, None, None, HOLD, CAPACITY_UNKNOWN,
                        (f"namespace not read: {sample.error}",), {})
    tu = size_namespace(reading, consumers, target.tu_settings, sample.collected_at, last_raise_at)
    notes = (f"metrics: {sample.error}",) if sample.error else ()
    return Decision(decision_id, target.name, now, tu.capacity, tu.target_capacity, tu.direction,
                    tu.reason_code, (*tu.reasons, *notes), dict(tu.metrics))


def decided_act(decision: Decision, now: datetime) -> Act:
    """The action of an acting sizing decision (its reason cut to ``REASON_CHARS``)."""
    return Act(decision.decision_id, decision.target_capacity or 0, decision.direction,
               f"{decision.reason_code}: {'; '.join(decision.reasons)}"[:REASON_CHARS], now)


def plan_namespace(target: EventHubsNamespaceTarget, prior: NamespacePrior, sample: NamespaceSample,
                   consumers: Sequence[ConsumerCatchUp], now: datetime, settings: NamespaceSettings) -> NamespacePlan:
    """Everything one evaluation of ``sample`` decides (the steps in the module doc); ``consumers``
    are the consumer targets' planned reads (only the sizing reads them), ``now`` the decision
    time. One function on purpose: the order of its steps is the rule, and reads top to bottom,
    as ``evaluation.plan_evaluation`` does for a plan target."""
    old = prior.state
    decision_id = decision_id_for(target.name, sample.sample_id)
    ended = expiries(target.name, prior.unreadable, prior.version, prior.pause, now, old.capacity)
    rows, pause = list(ended.rows), ended.pause
    if old.last_sample_at is not None and sample.collected_at < old.last_sample_at:
        # A late sample knows less than one evaluated already: remembered, never acted on.
        late = Decision(decision_id, target.name, now, sample.capacity, None, HOLD, LATE_SAMPLE,
                        (f"collected at {sample.collected_at.isoformat()}, before the newest evaluated sample "
                         f"({old.last_sample_at.isoformat()}); not acted on",), {})
        return NamespacePlan(late, old, prior.desired, pause, tuple(rows), notices=ended.notices)
    reconciliation = reconcile(prior.desired, sample.capacity, sample.collected_at, grace=settings.reconcile_grace,
                               on_external_change=target.on_external_change, clock_skew=settings.clock_skew)
    desired = reconciliation.desired
    # A raise, ours or the platform's (auto-inflate), starts the scale-down hold.
    raised = old.capacity is not None and sample.capacity is not None and sample.capacity > old.capacity
    last_raise_at = sample.collected_at if raised else (old.last_action_at if old.last_direction == UP else None)
    decision = sized_decision(target, sample, consumers, now, decision_id, last_raise_at)
    if pause is not None:
        decision = held_by_pause(decision, pause)
        if pause.pinned_at is None:  # nothing at all goes to scale while paused: no re-issue either
            reconciliation, desired = replace(reconciliation, kind="held"), prior.desired
    state = replace(old, capacity=sample.capacity if sample.capacity is not None else old.capacity,
                    last_sample_at=sample.collected_at, last_reason_code=decision.reason_code,
                    last_decision_id=decision_id)
    if raised:
        state = replace(state, last_action_at=sample.collected_at, last_direction=UP)
    # A count already asked for (its write not seen yet) is reconciliation's to re-issue, not a new decision.
    asked = desired is not None and decision.target_capacity == desired.capacity
    act, traced, reconciled = None, False, False
    if pause is not None and pause.pinned_at is not None and not pause.pin_requested:
        # Pinned: the count is requested once, like any decision, then held.
        act, row = pin_act(target.name, pause, now, decision.current_capacity)
        traced = True
        rows.append(row)
        pause = replace(pause, pin_requested=True)
    elif pause is not None:
        # Paused: log what it would have done, once per change of mind.
        would = decision.metrics.get("would_scale_to")
        if would != pause.logged_would or decision.reason_code != old.last_reason_code:
            rows.append(LogRow.of(decision))
            pause = replace(pause, logged_would=would)
        reconciled = True
    elif decision.acts and decision_id != prior.latest_decision_id and not asked:
        act, traced = decided_act(decision, now), True
        rows.append(LogRow.of(decision, acting=True))
    else:
        if decision.reason_code != old.last_reason_code:
            rows.append(LogRow.of(decision))
        reconciled = True
    if act is not None:
        desired = DesiredCapacity.decided(act.target_capacity, act.decision_id, now, decision.current_capacity,
                                          previous=desired, clock_skew=settings.clock_skew)
        state = replace(state, last_action_at=now, last_direction=act.direction)
    elif reconciled and reconciliation.kind in (REISSUE, EXTERNAL_CHANGE) and desired is not None:
        act, row = reconciled_act(reconciliation, now)
        rows.append(row)
        if act is not None:
            act = replace(act, reason=act.reason[:REASON_CHARS])
    return NamespacePlan(decision, state, desired, pause, tuple(rows), act, traced, ended.notices)
