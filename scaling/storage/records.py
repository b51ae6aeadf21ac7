"""What the storage layer keeps and sends, as plain values (no Azure imports).

- ``ActionMessage`` (defined in ``actions.py``): the ``actions`` queue message, absolute target capacity;
- ``StoredState``: the scaler state plus what makes evaluation exactly-once (the set of samples
  already evaluated, the outbox action, the latest decision) and the entity's ETag;
- ``DecisionRecord``: one row of the decision log;
- ``AppliedRecord``: the scale function's idempotency record for one decision;
- ``DeadLetter``: a message that could not be used, with its error.

Table layout and the reasons behind it: docs/storage.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from scaling.domain.conflict import MAX_CHANGES_KEPT, ExternalChange, ExternalWriterHold
from scaling.domain.decisions import Decision, ScalerState
from scaling.domain.forecast_record import SeasonalIndex, StoredProfile
from scaling.domain.names import safe_text, target_name_problem
from scaling.domain.outcomes import LogRow
from scaling.domain.pause import Pause
from scaling.domain.reconcile import MAX_EARLIER_CAPACITIES, DesiredCapacity
from scaling.domain.samples import SampleError, format_time, parse_time

# The action message is part of what storage keeps and sends: re-exported here.
from scaling.storage.actions import ACTION_SCHEMA_VERSION as ACTION_SCHEMA_VERSION
from scaling.storage.actions import ActionError as ActionError
from scaling.storage.actions import ActionMessage as ActionMessage
from scaling.storage.actions import action_for as action_for
from scaling.storage.actions import action_from_dict as action_from_dict
from scaling.storage.actions import parse_action as parse_action

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Applied-record statuses. Final ones end the action; the others may be taken over.
APPLYING = "applying"
ABANDONED = "abandoned"
APPLIED = "applied"
UNCHANGED = "unchanged"
STALE = "stale"
FAILED = "failed"
DRY_RUN = "dry_run"
#: Not written: another controller (an enabled Azure Monitor autoscale setting) drives the plan.
CONFLICT = "conflict"
FINAL_STATUSES = frozenset({APPLIED, UNCHANGED, STALE, FAILED, DRY_RUN, CONFLICT})


def utc_now() -> datetime:
    return datetime.now(UTC)


def epoch_seconds(moment: datetime) -> int:
    """Whole seconds since the epoch, rounded down (exact integer arithmetic)."""
    return (moment.astimezone(UTC) - EPOCH) // timedelta(seconds=1)


def epoch_millis(moment: datetime) -> int:
    return (moment.astimezone(UTC) - EPOCH) // timedelta(milliseconds=1)


def _time_or_none(value: Any, path: str) -> datetime | None:
    return None if value is None else parse_time(value, path)


# --- the scaler state --------------------------------------------------------------------------


def _datetime_fields() -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(ScalerState) if "datetime" in str(f.type))


def state_to_dict(state: ScalerState) -> dict[str, Any]:
    """Every ``ScalerState`` field, times as ISO-8601 text (new fields are carried automatically)."""
    result: dict[str, Any] = {}
    for item in dataclasses.fields(ScalerState):
        value = getattr(state, item.name)
        result[item.name] = format_time(value) if isinstance(value, datetime) else value
    return result


def state_from_dict(document: Mapping[str, Any], target: str) -> ScalerState:
    """The inverse of ``state_to_dict``; unknown keys are ignored, missing ones take defaults."""
    times = _datetime_fields()
    values: dict[str, Any] = {}
    for item in dataclasses.fields(ScalerState):
        if item.name not in document or item.name == "target":
            continue
        value = document[item.name]
        values[item.name] = _time_or_none(value, item.name) if item.name in times else value
    return ScalerState(target=target, **values)


#: Actions kept in the outbox (the newest; an older action is superseded anyway).
OUTBOX_KEEP = 8


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """An action and the sample whose evaluation decided it."""

    trigger: str
    action: ActionMessage


@dataclass(frozen=True, slots=True)
class StoredState:
    """The state entity of one target.

    ``etag`` is ``None`` until the entity exists. ``evaluated`` holds the collection times (epoch
    seconds; the sample id is a function of target and second) of the samples already evaluated
    whose time is still inside the window: a sample found there is never evaluated again.
    ``outbox`` holds the last few actions decided (newest last), each with the sample whose
    evaluation decided it: a redelivery of that sample re-sends its action instead of deciding
    again (``scale`` then applies it, or skips it as stale if a newer one exists).
    ``latest_decision_id``/``latest_decided_at`` name the newest acting decision (never reset;
    ``scale`` skips older actions as stale). ``retention_at`` is when history was last pruned.
    ``desired`` is the capacity the plan should have (level-triggered reconciliation).
    ``written_by`` is the token of the invocation that wrote it last (to recognise one's own
    commit after a lost reply). ``pause`` is an operator's pause or pin (``domain/pause.py``), kept
    here so that it is written under the same ETag as everything the evaluation writes.
    ``external_changes`` are the plan's resizes from outside within the last hour and
    ``external_writer`` the hold they led to (``domain/conflict.py``; ``resume`` ends it).
    ``unreadable`` names the fields the read had to drop.
    """

    state: ScalerState
    etag: str | None = None
    evaluated: frozenset[int] = frozenset()
    outbox: tuple[OutboxEntry, ...] = ()
    latest_decision_id: str | None = None
    latest_decided_at: datetime | None = None
    retention_at: datetime | None = None
    updated_at: datetime | None = None
    desired: DesiredCapacity | None = None
    written_by: str | None = None
    pause: Pause | None = None
    external_changes: tuple[ExternalChange, ...] = ()
    external_writer: ExternalWriterHold | None = None
    #: Fields the last read could not parse, each ``"name: error"``; they read as their defaults
    #: and are never written back (``stored_state_from_document``).
    unreadable: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return self.state.target

    def outbox_for(self, sample_id: str) -> ActionMessage | None:
        """The action decided when this sample was evaluated, if it is still in the outbox."""
        for entry in reversed(self.outbox):
            if entry.trigger == sample_id:
                return entry.action
        return None

    def with_outbox(self, trigger: str, action: ActionMessage) -> StoredState:
        return replace(self, outbox=(*self.outbox, OutboxEntry(trigger, action))[-OUTBOX_KEEP:])

    def was_evaluated(self, collected_at: datetime) -> bool:
        return epoch_seconds(collected_at) in self.evaluated

    def with_evaluated(self, collected_at: datetime, keep_after: datetime, limit: int = 5000) -> StoredState:
        """Add one sample time and drop those at or before ``keep_after`` (and beyond ``limit``)."""
        floor = epoch_seconds(keep_after)
        kept = sorted({*(s for s in self.evaluated if s > floor), epoch_seconds(collected_at)})[-limit:]
        return replace(self, evaluated=frozenset(kept))


def encode_evaluated(evaluated: Iterable[int]) -> str:
    return ",".join(str(second) for second in sorted(evaluated))


def decode_evaluated(text: str | None) -> frozenset[int]:
    if not text:
        return frozenset()
    if not isinstance(text, str):
        raise TypeError(f"not text: {text!r:.40}")
    return frozenset(int(part) for part in text.split(",") if part)


def stored_state_to_document(stored: StoredState) -> dict[str, Any]:
    """Everything but the ETag, as JSON-compatible values (used by both stores)."""
    return {
        "state": state_to_dict(stored.state),
        "evaluated": encode_evaluated(stored.evaluated),
        "outbox": [{"trigger": entry.trigger, "action": entry.action.to_dict()} for entry in stored.outbox],
        "latest_decision_id": stored.latest_decision_id,
        "latest_decided_at": format_time(stored.latest_decided_at) if stored.latest_decided_at else None,
        "retention_at": format_time(stored.retention_at) if stored.retention_at else None,
        "updated_at": format_time(stored.updated_at) if stored.updated_at else None,
        "desired": desired_to_dict(stored.desired) if stored.desired else None,
        "written_by": stored.written_by,
        "pause": stored.pause.to_dict() if stored.pause else None,
        "external_changes": [change.to_dict() for change in stored.external_changes],
        "external_writer": stored.external_writer.to_dict() if stored.external_writer else None,
    }


def desired_to_dict(desired: DesiredCapacity) -> dict[str, Any]:
    return {"capacity": desired.capacity, "decision_id": desired.decision_id, "set_at": format_time(desired.set_at),
            "capacity_before": desired.capacity_before, "issued_at": format_time(desired.issued_at),
            "confirmed": desired.confirmed, "reissues": desired.reissues,
            "earlier_capacities": list(desired.earlier_capacities)}


def desired_from_dict(document: Mapping[str, Any]) -> DesiredCapacity:
    return DesiredCapacity(capacity=int(document["capacity"]), decision_id=str(document["decision_id"]),
                           set_at=parse_time(document["set_at"], "desired.set_at"),
                           capacity_before=document.get("capacity_before"),
                           issued_at=parse_time(document["issued_at"], "desired.issued_at"),
                           confirmed=bool(document.get("confirmed")), reissues=int(document.get("reissues") or 0),
                           earlier_capacities=tuple(int(c) for c in document.get("earlier_capacities") or ())[
                               :MAX_EARLIER_CAPACITIES])


#: What reading one stored field may raise when an out-of-band edit or an older writer left it
#: unreadable (a missing key, a wrong type, a time that is no time, a number that is no number).
_UNREADABLE = (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError)
#: The fields whose loss holds a target (``resume`` clears them).
HOLD_FIELDS = ("pause", "external_writer")


def _field(document: Mapping[str, Any], name: str, parse, default: Any, errors: list[str]) -> Any:
    """``parse(document[name])`` when the field is there (``default`` when absent or empty); an
    unreadable one is ``default`` and its error goes to ``errors``, never up: one bad field
    must not make every sample of the target fail into poison."""
    value = document.get(name)
    if value is None or value == "" or value == [] or value == {}:
        return default
    try:
        return parse(value)
    except _UNREADABLE as error:
        errors.append(f"{name}: {safe_text(str(error))[:300] or type(error).__name__}")
        return default


def unreadable_document(text: str, target: str, etag: str | None) -> StoredState:
    """A state entity whose document is not JSON: a fresh state (under the entity's ETag, so that
    the next commit replaces it) that says so."""
    return StoredState(state=ScalerState(target=target), etag=etag,
                       unreadable=(f"document: not JSON ({safe_text(text[:80])!r})",))


def stored_state_from_document(document: Mapping[str, Any], target: str, etag: str | None) -> StoredState:
    """The stored state; a field that cannot be read takes its default (no pause, no hold, no
    desired capacity, ...) and is named with its error in ``unreadable``: the evaluation that
    reads it logs a ``state_unreadable`` row and its commit writes the state without it
    (docs/reliability.md, "No stored state can wedge a target")."""
    errors: list[str] = []
    if not isinstance(document, Mapping):
        return StoredState(state=ScalerState(target=target), etag=etag,
                           unreadable=(f"document: not an object ({type(document).__name__})",))
    return StoredState(
        state=_field(document, "state", lambda value: state_from_dict(value, target), ScalerState(target=target), errors),
        etag=etag,
        evaluated=_field(document, "evaluated", decode_evaluated, frozenset(), errors),
        outbox=_field(document, "outbox", lambda value: tuple(
            OutboxEntry(str(entry["trigger"]), action_from_dict(entry["action"])) for entry in value), (), errors),
        latest_decision_id=_field(document, "latest_decision_id", _text, None, errors),
        latest_decided_at=_field(document, "latest_decided_at", lambda value: parse_time(value, "latest_decided_at"),
                                 None, errors),
        retention_at=_field(document, "retention_at", lambda value: parse_time(value, "retention_at"), None, errors),
        updated_at=_field(document, "updated_at", lambda value: parse_time(value, "updated_at"), None, errors),
        desired=_field(document, "desired", desired_from_dict, None, errors),
        written_by=_field(document, "written_by", _text, None, errors),
        pause=_field(document, "pause", Pause.from_dict, None, errors),
        external_changes=_field(document, "external_changes", lambda value: tuple(
            ExternalChange.from_dict(item) for item in value)[-MAX_CHANGES_KEPT:], (), errors),
        external_writer=_field(document, "external_writer", ExternalWriterHold.from_dict, None, errors),
        unreadable=tuple(errors),
    )


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"not text: {value!r:.40}")
    return value


# --- the decision log --------------------------------------------------------------------------


def decision_row_key(decided_at: datetime, decision_id: str) -> str:
    """Decision rows sort by time; the action's ``decided_at`` and id locate the row again."""
    return f"d-{epoch_millis(decided_at):013d}-{decision_id}"


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """One decision-log row: every acting evaluation, and every change of reason while holding."""

    target: str
    decision_id: str
    evaluated_at: datetime
    trigger_sample_id: str
    acts: bool
    direction: str
    reason_code: str
    reasons: tuple[str, ...]
    metrics: Mapping[str, Any] = field(default_factory=dict)
    capacity_before: int | None = None
    capacity_after: int | None = None
    action: ActionMessage | None = None
    outcome: str | None = None
    outcome_detail: str | None = None
    outcome_at: datetime | None = None

    @property
    def row_key(self) -> str:
        return decision_row_key(self.evaluated_at, self.decision_id)

    @classmethod
    def from_row(cls, target: str, row: LogRow, trigger_sample_id: str, action: ActionMessage | None = None) -> DecisionRecord:
        """The record of one of a plan's log rows (the action's row carries it)."""
        return cls(target, row.decision_id, row.evaluated_at, trigger_sample_id, acts=row.acts, direction=row.direction,
                   reason_code=row.reason_code, reasons=row.reasons, metrics=row.metrics,
                   capacity_before=row.capacity_before, capacity_after=row.capacity_after,
                   action=action if row.carries_action else None)

    @classmethod
    def from_decision(cls, decision: Decision, trigger_sample_id: str, action: ActionMessage | None) -> DecisionRecord:
        """The record of an engine decision, acting when ``action`` is given (``LogRow.of``'s row)."""
        return cls.from_row(decision.target, LogRow.of(decision, acting=action is not None), trigger_sample_id, action)


def json_text(value: Any) -> str:
    """Compact JSON that never fails on odd values (non-finite floats, times, tuples)."""

    def fallback(item: Any) -> Any:
        if isinstance(item, datetime):
            return format_time(item)
        if isinstance(item, set | frozenset | tuple):
            return list(item)
        return str(item)

    return json.dumps(value, separators=(",", ":"), default=fallback)


# --- the scale function's idempotency record ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppliedRecord:
    """What ``scale`` did with one decision (``appliedactions``, PartitionKey target, RowKey id).

    ``claimed_by`` is the token of the invocation holding the claim (to recognise its own claim
    after a lost reply); ``message_id``/``dequeue_count`` the delivery that claimed it.
    """

    target: str
    decision_id: str
    status: str
    decided_at: datetime
    requested_capacity: int
    claimed_at: datetime
    capacity_before: int | None = None
    capacity_after: int | None = None
    detail: str | None = None
    finished_at: datetime | None = None
    attempts: int = 1
    etag: str | None = None
    claimed_by: str | None = None
    message_id: str | None = None
    dequeue_count: int = 1

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES

    def claimed_by_earlier_delivery(self, message_id: str | None, dequeue_count: int) -> bool:
        """Whether this claim was left by an earlier delivery of the same queue message. The queue
        redelivers only once that delivery has ended (it failed, or its worker died), so its
        claim can be taken over at once instead of waiting for the lease."""
        return message_id is not None and self.message_id == message_id and self.dequeue_count < dequeue_count


# --- dead letters ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message that could not be used: kept with its error, never retried, never dropped.

    ``letter_id`` is a function of the function, the message's queue id and its body, so that recording the same message twice (a redelivery after an ambiguous
    write) keeps one row. ``origin`` is ``handler`` (refused by the function) or ``poison``
    (drained from a poison queue). ``replayed_at`` is set when an operator re-queued it.
    """

    function: str
    body: str
    error: str
    received_at: datetime
    dequeue_count: int = 1
    message_id: str | None = None
    target: str | None = None
    origin: str = "handler"
    replayed_at: datetime | None = None

    @property
    def letter_id(self) -> str:
        identity = f"{self.function}|{self.origin}|{self.message_id or ''}|{self.body}"
        return hashlib.sha256(identity.encode("utf-8", "backslashreplace")).hexdigest()[:24]


def body_text(body: str | bytes) -> str:
    """The message body as storable text (undecodable bytes and lone surrogates replaced)."""
    if isinstance(body, bytes):
        return body.decode("utf-8", errors="replace")
    return safe_text(body)


def target_of(body: str) -> str | None:
    """The ``target`` a message body names, if it is readable enough to say (for listing)."""
    try:
        document = json.loads(body)
    except ValueError:
        return None
    target = document.get("target") if isinstance(document, dict) else None
    return target if isinstance(target, str) and target_name_problem(target) is None else None


# --- the look-ahead's profile (one entity per target beside the state: it changes hourly) --------

#: The RowKey of a target's profile in the state table (after the decision rows' ``d-``).
PROFILE_ROW = "forecast-profile"


def profile_to_document(profile: StoredProfile) -> dict[str, Any]:
    return {"fitted_at": format_time(profile.fitted_at), "origin": format_time(profile.origin),
            "history_minutes": profile.history_minutes, "trusted": profile.trusted, "reasons": list(profile.reasons),
            "periods": list(profile.periods), "error": profile.error, "persistence_error": profile.persistence_error,
            "seasonals": [{"period": item.period, "resolution": item.resolution, "index": list(item.index)}
                          for item in profile.seasonals]}


def profile_from_document(document: Mapping[str, Any], target: str) -> StoredProfile | None:
    """The stored profile, or ``None`` when it cannot be read (it is refit then, as if absent)."""
    try:
        seasonals = tuple(SeasonalIndex(int(item["period"]), int(item["resolution"]),
                                        tuple(float(value) for value in item["index"]))
                          for item in document.get("seasonals") or ())
        if any(item.period < 1 or item.resolution < 1 or len(item.index) != item.period // item.resolution
               for item in seasonals):
            return None
        return StoredProfile(target, parse_time(document["fitted_at"], "fitted_at"),
                             parse_time(document["origin"], "origin"), int(document["history_minutes"]),
                             bool(document["trusted"]), tuple(str(reason) for reason in document.get("reasons") or ()),
                             tuple(int(period) for period in document.get("periods") or ()), seasonals,
                             _float_or_none(document.get("error")), _float_or_none(document.get("persistence_error")))
    except (KeyError, TypeError, ValueError, SampleError):
        return None


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)
