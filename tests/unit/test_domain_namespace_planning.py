"""``domain/namespace/planning.py::plan_namespace``: one table row per branch of what a namespace
target's evaluation decides around the sizing (a late sample, a re-issue, an external change,
a pin, a pause's log, act, a decision already taken, a change of reason, nothing to do), on plain
values: no store, no service (tests/unit/test_namespace_service.py and
tests/integration/test_namespace_arm.py run the service around it)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.decisions import DOWN, HOLD, UP, ScalerState, decision_id_for
from scaling.domain.namespace.planning import (
    CAPACITY_UNKNOWN,
    LATE_SAMPLE,
    REASON_CHARS,
    NamespacePrior,
    NamespaceSettings,
    plan_namespace,
)
from scaling.domain.namespace.policy import EventHubsNamespaceTarget
from scaling.domain.namespace.samples import NamespaceSample
from scaling.domain.namespace.sizing import (
    SCALE_DOWN_HOLD,
    TU_SCALE_UP,
    TU_STEADY,
    ConsumerCatchUp,
    NamespaceMinute,
)
from scaling.domain.outcomes import RECONCILE
from scaling.domain.pause import PAUSE_EXPIRED, PAUSED, PINNED, STATE_UNREADABLE, Pause
from scaling.domain.reconcile import EXTERNAL_CHANGE, DesiredCapacity

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(seconds=5)
NAMESPACE = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/ns"
TARGET = EventHubsNamespaceTarget(name="ns", resource_id=NAMESPACE, consumer_targets=("orders",))
SETTINGS = NamespaceSettings(reconcile_grace=timedelta(minutes=5), clock_skew=timedelta(seconds=30))
TRACE = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
BUSY = 2_000  # events/s of 1 KB for an hour: 3 TUs wanted
DECISION_ID = decision_id_for("ns", NamespaceSample("ns", T0, 1).sample_id)


def sample(capacity: int | None = 1, *, at: datetime = T0, rate: float = BUSY, error: str | None = None) -> NamespaceSample:
    minutes = tuple(NamespaceMinute(at - timedelta(minutes=60 - i), rate * 60e3, rate * 60, rate * 60e3, rate * 60)
                    for i in range(60))
    return NamespaceSample("ns", at, capacity, minutes=minutes, error=error, traceparent=TRACE)


def pause(*, pinned_at: int | None = None, until: datetime = T0 + timedelta(hours=1), **fields) -> Pause:
    return Pause("p1", "incident", "alice", T0 - timedelta(hours=1), until, pinned_at, **fields)


def asked(capacity: int, *, before: int, at: datetime = T0 - timedelta(minutes=10), confirmed: bool = False):
    return replace(DesiredCapacity.decided(capacity, "earlier", at, before), confirmed=confirmed)


def prior(capacity: int | None = 1, *, last_reason: str | None = None, **fields) -> NamespacePrior:
    state = ScalerState("ns", capacity=capacity, last_sample_at=T0 - timedelta(minutes=1), last_reason_code=last_reason)
    return NamespacePrior(state, **fields)


CASES = {
    # name: (prior, sample, target (on_external_change), decision's reason, rows' reasons, action (count, direction) or None, traced)
    "act: a new decision goes out with the sample's trace": (
        prior(1), sample(1), TARGET, TU_SCALE_UP, (TU_SCALE_UP,), (3, UP), True),
    "never act twice on one decision": (
        prior(1, latest_decision_id=DECISION_ID), sample(1), TARGET, TU_SCALE_UP, (TU_SCALE_UP,), None, False),
    "a count already asked for waits for its write": (
        prior(1, desired=asked(3, before=1, at=T0 - timedelta(minutes=1)), last_reason=TU_SCALE_UP), sample(1), TARGET,
        TU_SCALE_UP, (), None, False),
    "reconciliation re-issues a lost write after the grace, untraced": (
        prior(1, desired=asked(3, before=1), last_reason=TU_SCALE_UP), sample(1), TARGET, TU_SCALE_UP, (RECONCILE,),
        (3, UP), False),
    "an external change is reverted": (
        prior(3, desired=asked(3, before=3, confirmed=True), last_reason=SCALE_DOWN_HOLD), sample(5),
        replace(TARGET, on_external_change="revert"), SCALE_DOWN_HOLD, (EXTERNAL_CHANGE,), (3, DOWN), False),
    "an external change is adopted": (
        prior(3, desired=asked(3, before=3, confirmed=True), last_reason=SCALE_DOWN_HOLD), sample(5), TARGET,
        SCALE_DOWN_HOLD, (EXTERNAL_CHANGE,), None, False),
    "a pin's count goes out once": (
        prior(1, pause=pause(pinned_at=4)), sample(1), TARGET, PINNED, (PINNED,), (4, UP), True),
    "a pin already sent holds": (
        prior(4, pause=pause(pinned_at=4, pin_requested=True), last_reason=PINNED), sample(4), TARGET, PINNED, (),
        None, False),
    "a pause logs what it would do": (
        prior(1, pause=pause()), sample(1), TARGET, PAUSED, (PAUSED,), None, False),
    "a pause logs it once per change of mind": (
        prior(1, pause=pause(logged_would=3), last_reason=PAUSED), sample(1), TARGET, PAUSED, (), None, False),
    "a pause holds a re-issue too": (
        prior(1, pause=pause(logged_would=3), desired=asked(3, before=1), last_reason=PAUSED), sample(1), TARGET,
        PAUSED, (), None, False),
    "a change of reason is logged": (
        prior(3, last_reason=TU_SCALE_UP), sample(3), TARGET, TU_STEADY, (TU_STEADY,), None, False),
    "nothing to do": (
        prior(3, last_reason=TU_STEADY), sample(3), TARGET, TU_STEADY, (), None, False),
    "a late sample is remembered, never acted on": (
        replace(prior(1), state=ScalerState("ns", capacity=1, last_sample_at=T0 + timedelta(minutes=1))), sample(1),
        TARGET, LATE_SAMPLE, (), None, False),
    "a namespace not read holds": (
        prior(1, last_reason=CAPACITY_UNKNOWN), sample(None, error="namespace: timeout"), TARGET, CAPACITY_UNKNOWN, (),
        None, False),
    "unreadable fields and an expired pause are said once, then it acts": (
        prior(1, pause=pause(until=NOW - timedelta(seconds=1)), unreadable=("external_writer: bad",), version="e1"),
        sample(1), TARGET, TU_SCALE_UP, (STATE_UNREADABLE, PAUSE_EXPIRED, TU_SCALE_UP), (3, UP), True),
}


@pytest.mark.parametrize("old, new, target, reason, rows, action, traced", CASES.values(), ids=CASES.keys())
def test_each_branch_of_a_namespace_evaluation(old, new, target, reason, rows, action, traced) -> None:
    plan = plan_namespace(target, old, new, (), NOW, SETTINGS)
    assert plan.decision.reason_code == reason
    assert tuple(row.reason_code for row in plan.rows) == rows
    assert ((plan.act.target_capacity, plan.act.direction) if plan.act else None) == action
    assert plan.traced == traced
    # The action's row carries it; every other row holds.
    assert [row.carries_action for row in plan.rows] == [plan.act is not None and row.acts for row in plan.rows]
    if plan.act is not None:
        assert plan.desired is not None and plan.desired.capacity == plan.act.target_capacity


def test_an_action_is_remembered_as_the_desired_count_and_the_last_raise() -> None:
    plan = plan_namespace(TARGET, prior(1), sample(1), (), NOW, SETTINGS)
    assert plan.act is not None and plan.act.decision_id == DECISION_ID and plan.act.decided_at == NOW
    assert plan.desired.decision_id == DECISION_ID and plan.desired.capacity_before == 1
    assert (plan.state.last_action_at, plan.state.last_direction, plan.state.last_decision_id) == (NOW, UP, DECISION_ID)
    assert (plan.state.capacity, plan.state.last_sample_at, plan.state.last_reason_code) == (1, T0, TU_SCALE_UP)


def test_a_late_sample_changes_neither_the_state_nor_the_desired_count() -> None:
    old = replace(prior(1, desired=asked(3, before=1)), state=ScalerState("ns", capacity=1, last_sample_at=T0 + timedelta(minutes=1)))
    plan = plan_namespace(TARGET, old, sample(1), (), NOW, SETTINGS)
    assert (plan.state, plan.desired, plan.act, plan.rows) == (old.state, old.desired, None, ())


def test_a_pin_is_marked_sent_and_a_pause_remembers_what_it_logged() -> None:
    pinned = plan_namespace(TARGET, prior(1, pause=pause(pinned_at=4)), sample(1), (), NOW, SETTINGS)
    assert pinned.pause.pin_requested and pinned.act.decision_id == decision_id_for("ns", "pin|p1")
    paused = plan_namespace(TARGET, prior(1, pause=pause()), sample(1), (), NOW, SETTINGS)
    assert paused.pause.logged_would == 3 and paused.rows[0].metrics["would_scale_to"] == 3
    assert paused.rows[0].direction == HOLD and paused.state.last_action_at is None


def test_expiries_end_the_pause_and_tell_the_operator() -> None:
    old = prior(1, pause=pause(until=NOW - timedelta(seconds=1)), unreadable=("external_writer: bad",), version="e1")
    plan = plan_namespace(TARGET, old, sample(1), (), NOW, SETTINGS)
    assert plan.pause is None
    assert [notice.level for notice in plan.notices] == ["error", "warning"]
    assert plan.rows[0].decision_id == decision_id_for("ns", "unreadable|e1")


def test_the_consumers_planned_reads_raise_the_egress_need() -> None:
    alone = plan_namespace(TARGET, prior(3, last_reason=TU_STEADY), sample(3), (), NOW, SETTINGS)
    reading = plan_namespace(TARGET, prior(3, last_reason=TU_STEADY), sample(3),
                             (ConsumerCatchUp("orders", 40_000.0),), NOW, SETTINGS)
    assert alone.act is None
    assert reading.act is not None and reading.act.target_capacity > 3


def test_an_action_reason_is_cut_to_what_a_namespace_message_carries() -> None:
    long = sample(1, error="x" * 3 * REASON_CHARS)
    plan = plan_namespace(TARGET, prior(1), long, (), NOW, SETTINGS)
    assert plan.act is not None and len(plan.act.reason) == REASON_CHARS
