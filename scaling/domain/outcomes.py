"""What one evaluation puts out besides its next state, for plan and namespace targets alike: the
action to send (``Act``), the decision-log rows (``LogRow``) and what the operator's log should say
(``Notice``); and the rows both kinds of target write the same way: the expiries (unreadable stored
fields, a pause whose time is up), a pin's one action, a re-issue or an external change.

A module of its own so that ``evaluation.py`` (plan targets) and ``namespace/planning.py``
(namespace targets) share them without importing each other; the services turn these values into
their records and messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scaling.domain.decisions import DOWN, HOLD, UP, Decision, decision_id_for
from scaling.domain.pause import PAUSE_EXPIRED, PINNED, STATE_UNREADABLE, Pause, unreadable_reasons
from scaling.domain.reconcile import EXTERNAL_CHANGE, REISSUE, Reconciliation

#: Reason code of a re-issue's log row (an external change's is ``EXTERNAL_CHANGE``).
RECONCILE = "reconcile"


@dataclass(frozen=True, slots=True)
class Act:
    """The action to send: set the target to ``target_capacity`` (absolute)."""

    decision_id: str
    target_capacity: int
    direction: str
    reason: str
    decided_at: datetime


@dataclass(frozen=True, slots=True)
class LogRow:
    """One decision-log row; ``carries_action`` when it is the row of the plan's action."""

    decision_id: str
    evaluated_at: datetime
    acts: bool
    direction: str
    reason_code: str
    reasons: tuple[str, ...]
    metrics: dict[str, Any] = field(default_factory=dict)
    capacity_before: int | None = None
    capacity_after: int | None = None
    carries_action: bool = False

    @classmethod
    def of(cls, decision: Decision, *, acting: bool = False) -> LogRow:
        """The row of an engine decision (held unless ``acting``)."""
        return cls(decision.decision_id, decision.evaluated_at, acting, decision.direction if acting else HOLD,
                   decision.reason_code, tuple(decision.reasons), dict(decision.metrics), decision.current_capacity,
                   decision.target_capacity if acting else decision.current_capacity, carries_action=acting)


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the operator's log should say (``level``: ``info``, ``warning`` or ``error``)."""

    level: str
    text: str


@dataclass(frozen=True, slots=True)
class Expiries:
    """The first step of every evaluation: what is left of the stored pause, and the rows and
    notices that said what ended."""

    pause: Pause | None
    rows: tuple[LogRow, ...] = ()
    notices: tuple[Notice, ...] = ()


def unreadable_row(target: str, unreadable: tuple[str, ...], version: str | None, now: datetime,
                   capacity: int | None) -> tuple[LogRow, Notice]:
    """The row of stored fields that could not be read and count as unset (named after the
    entity's ``version``, its ETag: said once per version)."""
    notice = Notice("error", f"evaluate {target}: the stored state has unreadable fields "
                             f"({'; '.join(unreadable)}); they count as unset")
    return LogRow(decision_id_for(target, f"unreadable|{version}"), now, False, HOLD, STATE_UNREADABLE,
                  unreadable_reasons(unreadable), {}, capacity, capacity), notice


def pause_expired_row(target: str, pause: Pause, now: datetime, capacity: int | None) -> tuple[LogRow, Notice]:
    """The row of a pause that ended by itself."""
    notice = Notice("warning", f"evaluate {target}: the pause ended at {pause.until.isoformat()} ({pause.describe()}); "
                               "the autoscaler acts again")
    return LogRow(decision_id_for(target, f"expired|{pause.pause_id}"), now, False, HOLD, PAUSE_EXPIRED,
                  (f"ended by itself: {pause.describe()}",), {}, capacity, capacity), notice


def expiries(target: str, unreadable: tuple[str, ...], version: str | None, pause: Pause | None, now: datetime,
             capacity: int | None) -> Expiries:
    """Stored fields that could not be read (out-of-band edits, an older writer) count as unset (an
    unreadable pause as expired), and a forgotten pause ends by itself: each said once in the log."""
    rows: list[LogRow] = []
    notices: list[Notice] = []
    if unreadable:
        row, notice = unreadable_row(target, unreadable, version, now, capacity)
        rows.append(row)
        notices.append(notice)
    if pause is not None and not pause.active(now):
        row, notice = pause_expired_row(target, pause, now, capacity)
        rows.append(row)
        notices.append(notice)
        pause = None
    return Expiries(pause, tuple(rows), tuple(notices))


def pin_act(target: str, pause: Pause, now: datetime, capacity: int | None) -> tuple[Act, LogRow]:
    """The one action of a pin and its row (the id is the pause's: a retry or a redelivery asks
    for the same decision, which ``scale`` applies at most once)."""
    assert pause.pinned_at is not None
    decision_id = decision_id_for(target, f"pin|{pause.pause_id}")
    direction = DOWN if capacity is not None and pause.pinned_at < capacity else UP
    act = Act(decision_id, pause.pinned_at, direction, f"{PINNED}: {pause.describe()}", now)
    row = LogRow(decision_id, now, True, direction, PINNED, (pause.describe(),),
                 {"pinned_at": pause.pinned_at, "until": pause.until.isoformat()}, capacity, pause.pinned_at,
                 carries_action=True)
    return act, row


def reconciled_act(reconciliation: Reconciliation, now: datetime) -> tuple[Act | None, LogRow]:
    """The row of a re-issue or an external change, and the action to send (if any)."""
    desired = reconciliation.desired
    assert desired is not None and reconciliation.observed is not None
    code = RECONCILE if reconciliation.kind == REISSUE else EXTERNAL_CHANGE
    metrics = {"observed_capacity": reconciliation.observed, "desired_capacity": desired.capacity,
               "desired_decision_id": desired.decision_id, "reissues": desired.reissues}
    act = None
    if reconciliation.acts:
        assert reconciliation.reissue_id is not None
        act = Act(reconciliation.reissue_id, desired.capacity, reconciliation.direction or UP,
                  f"{code}: {'; '.join(reconciliation.reasons)}", now)
    row = LogRow(reconciliation.reissue_id or desired.decision_id, now, act is not None,
                 act.direction if act else HOLD, code, reconciliation.reasons, metrics, reconciliation.observed,
                 desired.capacity, carries_action=act is not None)
    return act, row
