"""``domain/evaluation.py::plan_evaluation``: one table row per branch of what an evaluation
decides around the rule engine (conflict, pin, pause, stale window, a decision already taken,
act, change of reason, re-issue, external change), on plain values: no store, no service."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.conflict import AUTOSCALE_SETTING, EXTERNAL_WRITER, ExternalChange, ExternalWriterHold
from scaling.domain.decisions import DOWN, UP, ScalerState, decision_id_for
from scaling.domain.evaluation import EvaluationSettings, Prior, plan_evaluation
from scaling.domain.namespace.sizing import NAMESPACE_EGRESS_BOUND, NamespaceStatus
from scaling.domain.pause import PAUSE_EXPIRED, PINNED, STATE_UNREADABLE, Pause
from scaling.domain.reconcile import EXTERNAL_CHANGE, DesiredCapacity
from scaling.storage.synthetic import queue_sample, rules_target

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(seconds=5)
TARGET = rules_target("orders", min_samples=1)
SETTINGS = EvaluationSettings(reconcile_grace=timedelta(minutes=3), clock_skew=timedelta(minutes=2),
                              external_changes_limit=3)
HIGH, MIDDLE = 5000, 500  # backlog: scale out from 2 to 3, and hold at 2


def pause(*, pinned_at=None, until=T0 + timedelta(hours=1), **fields) -> Pause:
    return Pause("p1", "incident", "alice", T0 - timedelta(hours=1), until, pinned_at, **fields)


def desired(capacity: int, *, before: int | None = None, at=T0 - timedelta(minutes=10),
            confirmed=True) -> DesiredCapacity:
    before = capacity if before is None else before
    return replace(DesiredCapacity.decided(capacity, "earlier", at, before), confirmed=confirmed)


def run(backlog=HIGH, capacity=2, *, prior_fields=None, state_fields=None, settings=SETTINGS, namespace=None,
        autoscale=()):
    sample = replace(queue_sample("orders", T0, backlog, capacity=capacity), autoscale_settings=autoscale)
    state = ScalerState("orders", capacity=2, **(state_fields or {}))
    prior = Prior(state, **{"desired": desired(2), **(prior_fields or {})})
    return sample, plan_evaluation(TARGET, prior, sample, [sample], NOW, settings, namespace=namespace)


def acted(plan):
    return (plan.act.target_capacity, plan.act.direction) if plan.act else None


def codes(plan):
    return [(row.reason_code, row.acts) for row in plan.rows]


CASES = [
    # id, run() arguments, (action, rows, decision reason)
    ("acts", {}, ((3, UP), [("rule_scale_up", True)], "rule_scale_up")),
    ("holds-and-logs-a-new-reason", {"backlog": MIDDLE}, (None, [("within_thresholds", False)], "within_thresholds")),
    ("holds-silently-on-the-same-reason", {"backlog": MIDDLE, "state_fields": {"last_reason_code": "within_thresholds"}},
     (None, [], "within_thresholds")),
    ("a-decision-already-taken-is-not-taken-again",
     {"state_fields": {"last_decision_id": decision_id_for("orders", queue_sample("orders", T0, 0).sample_id)}},
     (None, [], "rule_scale_up")),
    ("a-stale-window-does-not-act", {"state_fields": {"last_sample_at": T0 + timedelta(minutes=1)}},
     (None, [], "rule_scale_up")),
    ("paused-logs-what-it-would-do", {"prior_fields": {"pause": pause()}},
     (None, [("paused", False)], "paused")),
    ("pinned-sends-the-pin-once", {"backlog": MIDDLE, "prior_fields": {"pause": pause(pinned_at=1)}},
     ((1, DOWN), [(PINNED, True)], "within_thresholds")),
    ("a-pin-already-sent-holds", {"backlog": MIDDLE, "prior_fields": {"pause": pause(pinned_at=1, pin_requested=True)}},
     (None, [("within_thresholds", False)], "within_thresholds")),
    ("an-expired-pause-ends-and-the-target-acts", {"prior_fields": {"pause": pause(until=T0 - timedelta(minutes=1))}},
     ((3, UP), [(PAUSE_EXPIRED, False), ("rule_scale_up", True)], "rule_scale_up")),
    ("unreadable-fields-are-logged-once", {"prior_fields": {"unreadable": ("pause: bad",), "version": "e1"}},
     ((3, UP), [(STATE_UNREADABLE, False), ("rule_scale_up", True)], "rule_scale_up")),
    ("an-autoscale-setting-holds", {"autoscale": ("portal-rule",)},
     (None, [(AUTOSCALE_SETTING, False)], AUTOSCALE_SETTING)),
    ("an-external-writer-holds",
     {"prior_fields": {"external_writer": ExternalWriterHold(T0, (ExternalChange(T0, 4, 2),))}},
     (None, [(EXTERNAL_WRITER, False)], EXTERNAL_WRITER)),
    ("a-lost-action-is-reissued-after-the-grace",
     {"backlog": MIDDLE, "state_fields": {"last_reason_code": "within_thresholds"},
      "prior_fields": {"desired": desired(3, before=2, confirmed=False)}},
     ((3, UP), [("reconcile", True)], "within_thresholds")),
    ("an-external-change-is-adopted-and-logged",
     {"backlog": MIDDLE, "capacity": 4, "state_fields": {"last_reason_code": "within_thresholds"}},
     (None, [(EXTERNAL_CHANGE, False)], "within_thresholds")),
    ("a-new-decision-supersedes-an-external-change", {"capacity": 1},
     ((2, UP), [(EXTERNAL_CHANGE, False), ("rule_scale_up", True)], "rule_scale_up")),
    ("a-dry-run-never-reconciles",
     {"backlog": MIDDLE, "capacity": 4, "state_fields": {"last_reason_code": "within_thresholds"},
      "settings": replace(SETTINGS, dry_run=True)}, (None, [], "within_thresholds")),
    ("an-egress-bound-namespace-holds-the-scale-out",
     {"namespace": NamespaceStatus("orders-ns", "ns-decision", True, T0)},
     (None, [(NAMESPACE_EGRESS_BOUND, False)], NAMESPACE_EGRESS_BOUND)),
]


@pytest.mark.parametrize(("arguments", "expected"), [pytest.param(a, e, id=i) for i, a, e in CASES])
def test_plan_evaluation_branches(arguments, expected):
    _, plan = run(**arguments)
    assert (acted(plan), codes(plan), plan.decision.reason_code) == expected
    # Exactly the row of the action carries it, and the action is the desired capacity's.
    assert sum(row.carries_action for row in plan.rows) == (plan.act is not None)
    if plan.act is not None:
        assert plan.desired.capacity == plan.act.target_capacity


def test_a_pin_is_marked_sent_and_its_count_becomes_desired():
    _, plan = run(MIDDLE, prior_fields={"pause": pause(pinned_at=1)})
    assert plan.pause.pin_requested and plan.desired.decision_id == plan.act.decision_id
    assert plan.state.last_decision_id == plan.act.decision_id and plan.reconciliation is None


def test_what_a_pause_would_do_is_remembered_so_it_is_logged_once_per_change_of_mind():
    _, first = run(prior_fields={"pause": pause()})
    assert first.pause.logged_would == 3
    _, again = run(prior_fields={"pause": first.pause}, state_fields={"last_reason_code": "paused"})
    assert again.rows == () and again.act is None


def test_an_autoscale_setting_makes_the_desired_capacity_follow_the_plan():
    _, plan = run(capacity=5, autoscale=("portal-rule",))
    assert (plan.desired.capacity, plan.desired.confirmed, plan.act) == (5, True, None)


def test_the_plan_is_pure_the_same_inputs_give_the_same_plan():
    assert run()[1] == run()[1]
