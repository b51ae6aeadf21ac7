"""The ``actions`` queue message: what ``evaluate`` asks ``scale`` to do, an absolute capacity.

Parsing validates every field with bounds before anything is written (a bad action is
dead-lettered, never retried); the schema is in docs/storage.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scaling.domain.decisions import DOWN, UP, Decision
from scaling.domain.names import DECISION_ID, target_name_problem, text_problem
from scaling.domain.policy import TargetPolicy
from scaling.domain.samples import MAX_CAPACITY, MAX_CLOCK_SKEW, MAX_TRACEPARENT_CHARS, format_time, parse_time

ACTION_SCHEMA_VERSION = 1
#: An action's reason is the decision's reasons joined; longer text is cut when the action is made.
MAX_REASON_CHARS = 8_000


class ActionError(ValueError):
    """An ``actions`` message that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class ActionMessage:
    """What ``evaluate`` asks ``scale`` to do: set a plan to an absolute capacity."""

    decision_id: str
    target: str
    plan_resource_id: str
    target_capacity: int
    direction: str
    reason: str
    decided_at: datetime
    schema_version: int = ACTION_SCHEMA_VERSION
    #: The W3C ``traceparent`` of the evaluate span, so the scale span joins the decision's trace.
    traceparent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "decision_id": self.decision_id,
            "target": self.target,
            "plan_resource_id": self.plan_resource_id,
            "target_capacity": self.target_capacity,
            "direction": self.direction,
            "reason": self.reason,
            "decided_at": format_time(self.decided_at),
            **({"traceparent": self.traceparent} if self.traceparent else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))


def action_for(decision: Decision, target: TargetPolicy) -> ActionMessage:
    """The action message for an acting decision."""
    if not decision.acts or decision.target_capacity is None:
        raise ValueError(f"decision {decision.decision_id} does not act")
    reason = decision.reason_code
    if decision.reasons:
        reason = f"{reason}: {'; '.join(decision.reasons)}"[:MAX_REASON_CHARS]
    return ActionMessage(
        decision_id=decision.decision_id,
        target=decision.target,
        plan_resource_id=target.plan.resource_id,
        target_capacity=decision.target_capacity,
        direction=decision.direction,
        reason=reason,
        decided_at=decision.evaluated_at,
    )


def action_from_dict(document: Any) -> ActionMessage:
    if not isinstance(document, Mapping):
        raise ActionError("the message must be a JSON object")
    version = document.get("schema_version")
    if version != ACTION_SCHEMA_VERSION:
        raise ActionError(f"schema_version {version!r} is not supported (expected {ACTION_SCHEMA_VERSION})")
    for key in ("decision_id", "target", "plan_resource_id", "direction", "decided_at", "target_capacity"):
        if key not in document:
            raise ActionError(f"{key} is missing")
    for key, max_chars in (("decision_id", 128), ("plan_resource_id", 1024)):
        problem = text_problem(document[key], max_chars=max_chars)
        if problem:
            raise ActionError(f"{key} {problem}")
    if not DECISION_ID.fullmatch(document["decision_id"]):
        raise ActionError(f"decision_id must be letters, digits, '-' and '_', got {document['decision_id']!r:.80}")
    problem = target_name_problem(document["target"])
    if problem:
        raise ActionError(f"target {problem}")
    capacity = document["target_capacity"]
    if isinstance(capacity, bool) or not isinstance(capacity, int | float) or not math.isfinite(capacity) \
            or int(capacity) != capacity or not 1 <= capacity <= MAX_CAPACITY:
        raise ActionError(f"target_capacity must be a positive integer at most {MAX_CAPACITY}, got {capacity!r:.40}")
    direction = document["direction"]
    if direction not in (UP, DOWN):
        raise ActionError(f"direction must be {UP!r} or {DOWN!r}, got {direction!r}")
    reason = document.get("reason", "")
    problem = text_problem(reason, max_chars=MAX_REASON_CHARS, allow_empty=True)
    if problem:
        raise ActionError(f"reason {problem}")
    traceparent = document.get("traceparent")
    problem = None if traceparent is None else text_problem(traceparent, max_chars=MAX_TRACEPARENT_CHARS)
    if problem:
        raise ActionError(f"traceparent {problem}")
    try:
        decided_at = parse_time(document["decided_at"], "decided_at")
    except ValueError as error:
        raise ActionError(str(error)) from None
    return ActionMessage(
        decision_id=document["decision_id"],
        target=document["target"],
        plan_resource_id=document["plan_resource_id"],
        target_capacity=int(capacity),
        direction=direction,
        reason=reason,
        decided_at=decided_at,
        traceparent=traceparent,
    )


def parse_action(body: str | bytes, *, now: datetime | None = None,
                 clock_skew: timedelta = MAX_CLOCK_SKEW) -> ActionMessage:
    """Parse an ``actions`` queue message, or raise ``ActionError`` naming the problem.

    With ``now``, an action decided more than ``clock_skew`` ahead of it is refused, as samples
    are: ``scale`` skips actions older than the newest decision, so one forged (or from a clock
    gone wrong) far in the future would make every real decision after it stale."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise ActionError(f"the message is not valid JSON: {error}") from error
    action = action_from_dict(document)
    if now is not None and action.decided_at - now > clock_skew:
        raise ActionError(f"decided_at {format_time(action.decided_at)} is in the future: "
                          f"{(action.decided_at - now).total_seconds():.0f} s ahead of the scaler's clock "
                          f"({format_time(now)}); at most {clock_skew.total_seconds():.0f} s of clock skew is tolerated")
    return action
