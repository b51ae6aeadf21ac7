"""What one evaluation of a plan target decides, around the rule engine: a pure function.

``plan_evaluation`` takes the target's stored state (as domain values), the sample, the window
and the namespace status, and returns the next state, the decision-log rows and at most one
action. The evaluate service reads, converts these into its records and commits them under the
ETag (``services/evaluate.py``); this module decides. In order:

1. stored fields that could not be read count as unset, said once in the log; a pause whose
   time is up ends by itself (a row of the log);
2. the desired capacity is reconciled against the plan (``reconcile.py``), unless paused (not
   pinned) or a dry run; the first sample after an autoscale setting let go adopts the plan's
   count instead of counting an external change;
3. another controller driving the plan (an autoscale setting, or too many external changes in
   the hour: ``conflict.py``) holds the target; the desired count follows the plan;
4. the rule engine decides, held by the pause or the conflict; a namespace whose egress is the
   bottleneck holds a scale-out (``namespace/sizing.py``);
5. one of: log a conflict's hold; send a pin once; log what a pause would do; skip acting on a
   stale window; never act twice on one decision; act (a new decision supersedes a re-issue);
   else log a change of reason; then a re-issue or an external change the reconciliation found.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from scaling.domain.conflict import (
    AUTOSCALE_SETTING,
    EXTERNAL_WRITER,
    ConflictHold,
    ExternalChange,
    ExternalWriterHold,
    autoscale_setting_reason,
    external_writer,
    recent_changes,
)
from scaling.domain.decisions import HOLD, Decision, ScalerState, decision_id_for, restore_learning
from scaling.domain.engine import evaluate
from scaling.domain.forecast import Outlook
from scaling.domain.namespace.sizing import NamespaceStatus, egress_bound_hold
from scaling.domain.outcomes import Act, LogRow, Notice, expiries, pin_act, reconciled_act
from scaling.domain.pause import Pause
from scaling.domain.policy import TargetPolicy
from scaling.domain.reconcile import EXTERNAL_CHANGE, REISSUE, DesiredCapacity, Reconciliation, reconcile
from scaling.domain.samples import MetricSample

#: Reason code of the row that says what the look-ahead would have done (``forecast: shadow``).
FORECAST_SHADOW = "forecast_shadow"


@dataclass(frozen=True, slots=True)
class Prior:
    """What the evaluation reads of the target's stored state. ``version`` is the entity's
    version (its ETag): an unreadable state's log row is named after it, once per version."""

    state: ScalerState
    desired: DesiredCapacity | None = None
    pause: Pause | None = None
    external_changes: tuple[ExternalChange, ...] = ()
    external_writer: ExternalWriterHold | None = None
    unreadable: tuple[str, ...] = ()
    version: str | None = None


@dataclass(frozen=True, slots=True)
class EvaluationSettings:
    """The service's settings that shape a decision."""

    reconcile_grace: timedelta
    clock_skew: timedelta
    external_changes_limit: int
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class EvaluationPlan:
    """What to commit: the fields of the next stored state, the log rows and the action."""

    decision: Decision
    state: ScalerState
    desired: DesiredCapacity | None
    pause: Pause | None
    external_changes: tuple[ExternalChange, ...]
    external_writer: ExternalWriterHold | None
    rows: tuple[LogRow, ...]
    act: Act | None
    reconciliation: Reconciliation | None
    previous: MetricSample | None
    notices: tuple[Notice, ...] = ()


def layout_notes(sample: MetricSample) -> tuple[str, ...]:
    """The sample's ``checkpoint_layout`` notes (what the collector found in the checkpoint store,
    per source), added to its rows' reasons: the log says which layout the backlog was read from."""
    return tuple(f"{source.name}: {note}" for source in sample.sources for note in source.notes
                 if note.startswith("checkpoint_layout"))


def _noted(row: LogRow, notes: tuple[str, ...]) -> LogRow:
    return replace(row, reasons=(*row.reasons, *notes)) if notes else row


def decision_reason(decision: Decision) -> str:
    """An acting decision's action reason: its code and its reasons."""
    return f"{decision.reason_code}: {'; '.join(decision.reasons)}" if decision.reasons else decision.reason_code


def conflict_hold(prior: Prior, newest: MetricSample, reconciliation: Reconciliation | None,
                  limit: int) -> tuple[ConflictHold | None, Prior, Notice | None]:
    """Whether another controller drives the plan (``conflict.py``), and the prior with the plan's
    external changes of the last hour counted (one more when this observation is one): an enabled
    autoscale setting in the sample, or more external changes in the hour than ``limit``, which
    holds until ``resume``."""
    writer, seen, notice = prior.external_writer, None, None
    # A resize while an enabled autoscale setting holds the target is that setting's: counted
    # as an external writer's, four of them would latch a hold that outlives the setting.
    if writer is None and reconciliation is not None and reconciliation.kind == EXTERNAL_CHANGE \
            and not newest.autoscale_settings \
            and prior.desired is not None and reconciliation.observed is not None:
        seen = ExternalChange(newest.collected_at, reconciliation.observed, prior.desired.capacity)
    changes = recent_changes(prior.external_changes, seen, newest.collected_at)
    if seen is not None:
        writer = external_writer(changes, newest.collected_at, limit)
        if writer is not None:
            notice = Notice("error", f"evaluate {prior.state.target}: {writer.describe()}")
    prior = replace(prior, external_changes=changes, external_writer=writer)
    if newest.autoscale_settings:
        return ConflictHold(AUTOSCALE_SETTING, autoscale_setting_reason(newest.autoscale_settings)), prior, notice
    if writer is not None:
        return ConflictHold(EXTERNAL_WRITER, writer.describe()), prior, notice
    return None, prior, notice


def superseded_change_row(reconciliation: Reconciliation, now: datetime, decision_id: str) -> LogRow:
    """The row of an external change that a new decision of the same evaluation supersedes: the
    operator still sees that someone resized the plan."""
    _, row = reconciled_act(replace(reconciliation, reissue_id=None, direction=None), now)
    return replace(row, reasons=(*row.reasons, f"superseded by decision {decision_id}"))


def shadow_row(target: TargetPolicy, decision: Decision) -> LogRow | None:
    """With ``forecast: shadow``, a row of what the look-ahead would have done where it differs from
    the decision (the decision itself unchanged): the operator reads it before turning it on."""
    would = decision.metrics.get("forecast_would_scale_to")
    if target.forecast != "shadow" or would is None:
        return None
    decided = decision.target_capacity if decision.acts else decision.current_capacity
    if would == decided:
        return None
    what = "raise the floor" if decision.metrics.get("forecast_raised_floor") else "hold the scale-in"
    reason = (f"shadow: the look-ahead would {what} to {would} (expected peak "
              f"{decision.metrics.get('forecast_expected_peak')} events/min in "
              f"{decision.metrics.get('forecast_expected_peak_in_minutes')} min); decided {decided}")
    return LogRow(decision_id_for(target.name, f"forecast|{decision.decision_id}"), decision.evaluated_at, False, HOLD,
                  FORECAST_SHADOW, (reason,), dict(decision.metrics), decision.current_capacity, decision.current_capacity)


def plan_evaluation(target: TargetPolicy, prior: Prior, sample: MetricSample, history: list[MetricSample],
                    now: datetime, settings: EvaluationSettings, *,
                    namespace: NamespaceStatus | None = None, outlook: Outlook | None = None) -> EvaluationPlan:
    """Everything one evaluation of ``sample`` decides (the steps in the module doc). ``history``
    is the window read for it, ``now`` the decision time, ``namespace`` the status of the
    namespace target the target consumes from (``None`` when it has none), ``outlook`` what the
    target's look-ahead expects (``forecast: shadow`` or ``on``; the engine applies it after the
    mode's proposal, before the bounds and gates). One function of
    ~110 lines on purpose: the order of its steps is the rule, and reads top to bottom."""
    old = prior.state
    if not any(item.sample_id == sample.sample_id for item in history):
        history = [*history, sample]
    # What could not be read counts as unset (the commit writes it cleanly); a forgotten pause ends.
    ended = expiries(target.name, prior.unreadable, prior.version, prior.pause, now, old.capacity)
    rows, notices, pause = list(ended.rows), list(ended.notices), ended.pause
    prior = replace(prior, unreadable=(), pause=pause)
    previous = max((item for item in history if item.collected_at < sample.collected_at),
                   key=lambda item: item.collected_at, default=None)
    newest = max((item for item in history if item.collected_at <= now + settings.clock_skew),
                 key=lambda item: item.collected_at, default=sample)
    # Paused (not pinned), nothing at all goes to scale: no re-issue either.
    holding_still = pause is not None and pause.pinned_at is None
    reconciliation = None if settings.dry_run or holding_still else reconcile(
        prior.desired, newest.capacity, newest.collected_at, grace=settings.reconcile_grace,
        on_external_change=target.on_external_change, clock_skew=settings.clock_skew)
    if reconciliation is not None and reconciliation.kind == EXTERNAL_CHANGE and not newest.autoscale_settings \
            and old.last_reason_code == AUTOSCALE_SETTING and newest.capacity is not None:
        # The first sample after an autoscale setting let go: the plan moved under the setting,
        # not under an external writer. Act from the capacity the plan has, as when it holds.
        reconciliation = None
        prior = replace(prior, desired=DesiredCapacity.observed(newest.capacity, newest.collected_at, "released"))
    conflict, prior, notice = conflict_hold(prior, newest, reconciliation, settings.external_changes_limit)
    if notice is not None:
        notices.append(notice)
    if conflict is not None:
        # Another controller drives the plan: never contest it. The desired capacity follows
        # the plan, so that acting again later starts from what it has.
        reconciliation = None
        if newest.capacity is not None:
            prior = replace(prior, desired=DesiredCapacity.observed(newest.capacity, newest.collected_at, "held"))
    decision = evaluate(target, old, history, now, clock_skew=settings.clock_skew, pause=conflict or pause,
                        outlook=outlook)
    decision = egress_bound_hold(decision, namespace, old, newest.collected_at)
    if conflict is not None and decision.reason_code != conflict.code:
        # Held whatever the rules say: the log's reason is the conflict from its first sample.
        decision = replace(decision, reason_code=conflict.code, reasons=(conflict.describe(), *decision.reasons),
                           state=replace(decision.state or old, last_reason_code=conflict.code))
    desired = reconciliation.desired if reconciliation else prior.desired
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
    notes = layout_notes(sample)
    act = None
    reason_changed = decision.reason_code != old.last_reason_code
    if conflict is not None:
        if reason_changed and not stale_window:
            rows.append(_noted(LogRow.of(decision), notes))
    elif pause is not None and pause.pinned_at is not None and not pause.pin_requested:
        # Pinned: the count is requested once, like any decision, then held.
        act, row = pin_act(target.name, pause, now, decision.current_capacity)
        rows.append(row)
        pause = replace(pause, pin_requested=True)
        desired = DesiredCapacity.decided(act.target_capacity, act.decision_id, now, decision.current_capacity,
                                          previous=desired, clock_skew=settings.clock_skew)
        new_state = replace(new_state, last_action_at=now, last_decision_id=act.decision_id)
        reconciliation = None
        if decision.metrics.get("would_scale_to") is not None:
            rows.append(LogRow.of(decision))
            pause = replace(pause, logged_would=decision.metrics["would_scale_to"])
    elif pause is not None and "would_scale_to" in decision.metrics:
        # Paused: log what it would have done, once per change of mind.
        would = decision.metrics["would_scale_to"]
        if would != pause.logged_would or reason_changed:
            rows.append(_noted(LogRow.of(decision), notes))
            pause = replace(pause, logged_would=would)
    elif decision.acts and stale_window:
        notices.append(Notice("info", f"evaluate {target.name}: the window of sample {sample.sample_id} ends at "
                                      f"{newest.collected_at.isoformat()}, before the newest evaluated sample "
                                      f"({old.last_sample_at.isoformat() if old.last_sample_at else '?'}); "
                                      "not acting on it"))
    elif decision.acts and decision.decision_id == old.last_decision_id:
        # Already acted on this decision (same newest sample): never a second action.
        notices.append(Notice("info", f"evaluate {target.name}: decision {decision.decision_id} was already taken; "
                                      "not acting again"))
        new_state = old
    elif decision.acts:
        assert decision.target_capacity is not None
        act = Act(decision.decision_id, decision.target_capacity, decision.direction, decision_reason(decision),
                  decision.evaluated_at)
        if reconciliation is not None and reconciliation.kind == EXTERNAL_CHANGE:
            rows.append(superseded_change_row(reconciliation, now, decision.decision_id))
        rows.append(_noted(LogRow.of(decision, acting=True), notes))
        # A new decision supersedes whatever the reconciliation wanted to re-issue.
        desired = DesiredCapacity.decided(act.target_capacity, decision.decision_id, now, decision.current_capacity,
                                          previous=desired, clock_skew=settings.clock_skew)
        reconciliation = None
    elif reason_changed and not stale_window:
        rows.append(_noted(LogRow.of(decision), notes))
    shadow = shadow_row(target, decision)
    if shadow is not None and not stale_window:
        rows.append(shadow)
    if reconciliation is not None and reconciliation.kind in (REISSUE, EXTERNAL_CHANGE):
        reissued, row = reconciled_act(reconciliation, now)
        rows.append(row)
        act = reissued or act
    return EvaluationPlan(decision, new_state, desired, pause, prior.external_changes, prior.external_writer,
                          tuple(rows), act, reconciliation, previous, tuple(notices))
