"""The storage contracts over Azure Table storage (azure-data-tables; Azurite locally).

One adapter class over the four tables, on purpose one piece (~450 lines): it owns one set of
clients and one recovery path (tables re-created when storage comes back empty), and each
table's entity mapping stands next to the queries that read it.

Round trips per sample in steady state (see docs/storage.md): one insert into the history
table, one range query for the window, one entity-group transaction for the state and the
decision rows. The state entity's ETag is kept by the caller between evaluations, so the state
is re-read only after a conflict.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.data.tables import EdmType, TableClient, TableTransactionError, UpdateMode

from scaling.domain.decisions import ScalerState
from scaling.domain.forecast_record import StoredProfile
from scaling.domain.names import safe_text
from scaling.domain.samples import MetricSample, SampleError, format_time, parse_time, sample_from_dict
from scaling.storage.base import (
    STATE_ROW,
    ConcurrencyConflict,
    TableNames,
    history_bound,
    history_row_key,
    join_text,
    partition_key,
    plain_value,
    split_text,
)
from scaling.storage.records import (
    PROFILE_ROW,
    AppliedRecord,
    DeadLetter,
    DecisionRecord,
    StoredState,
    action_from_dict,
    decision_row_key,
    json_text,
    profile_from_document,
    profile_to_document,
    stored_state_from_document,
    stored_state_to_document,
    unreadable_document,
)

logger = logging.getLogger(__name__)
Result = TypeVar("Result")

#: Parsed history samples kept in memory (a window of 10-30 samples for each of ~100 targets).
PARSED_CACHE_SIZE = 2048
#: Rows deleted per entity-group transaction (the service's limit is 100 operations).
DELETE_BATCH = 100
CONFLICT_STATUSES = (404, 409, 412)


def quote_literal(value: str) -> str:
    """An OData string literal."""
    return "'" + value.replace("'", "''") + "'"


def _int64(value: int | None) -> Any:
    return None if value is None else (int(value), EdmType.INT64)


def _int(value: Any) -> int | None:
    value = plain_value(value)
    return None if value is None else int(value)


def _time(value: Any, name: str) -> datetime | None:
    return None if value in (None, "") else parse_time(value, name)


def table_missing(error: BaseException) -> bool:
    """Whether a storage error says the table does not exist (storage restarted empty, or a
    table deleted under a running worker)."""
    if getattr(error, "status_code", None) != 404:
        return False
    code = getattr(error, "error_code", None)
    return getattr(code, "value", code) == "TableNotFound" or "TableNotFound" in str(error)


def _drop_none(entity: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in entity.items() if value is not None}


class TableStorage:
    """History, state, decision log, dead letters and applied actions in four tables.

    ``client_for`` makes the ``TableClient`` of a table name; ``from_connection_string``
    (Azurite) and ``from_endpoint`` (identity) provide it. ``names`` lets tests use fresh tables.
    """

    def __init__(self, client_for: Callable[[str], TableClient], names: TableNames = TableNames(),
                 *, parsed_cache_size: int = PARSED_CACHE_SIZE) -> None:
        self.names = names
        # History rows never change once written, so a parsed sample can be reused by the next
        # window queries (parsing dominates the CPU time of an evaluation of a large sample).
        self._parsed: OrderedDict[tuple[str, str], MetricSample] = OrderedDict()
        self._parsed_size = parsed_cache_size
        self._parsed_lock = threading.Lock()
        self.history = client_for(names.history)
        self.state = client_for(names.state)
        self.dead_letters = client_for(names.dead_letters)
        self.applied = client_for(names.applied)

    # --- construction ---------------------------------------------------------------------------

    @classmethod
    def from_connection_string(cls, connection_string: str, names: TableNames = TableNames(), **client_kwargs: Any) -> TableStorage:
        """Locally (Azurite). ``client_kwargs`` go to every ``TableClient`` (e.g. ``per_call_policies``)."""
        return cls(lambda name: TableClient.from_connection_string(connection_string, table_name=name, **client_kwargs),
                   names)

    @classmethod
    def from_endpoint(cls, endpoint: str, credential: Any, names: TableNames = TableNames(), **client_kwargs: Any) -> TableStorage:
        """In Azure: the table service URI and a token credential (managed identity)."""
        return cls(lambda name: TableClient(endpoint, table_name=name, credential=credential, **client_kwargs), names)

    def ensure_tables(self) -> None:
        """Create the tables that do not exist yet (idempotent; once per process)."""
        for client in (self.history, self.state, self.dead_letters, self.applied):
            try:
                client.create_table()
            except ResourceExistsError:
                pass
            except HttpResponseError as error:
                if error.status_code != 403:
                    raise
                # An identity allowed to use but not to create tables: the infrastructure creates them.
                logger.warning("cannot create table %s (403); assuming the deployment created it", client.table_name)

    def close(self) -> None:
        for client in (self.history, self.state, self.dead_letters, self.applied):
            client.close()

    def _recovering(self, operation: Callable[[], Result]) -> Result:
        """Run ``operation``; if a table is missing, create the tables and run it once more, so
        that a running worker recovers by itself when storage comes back empty."""
        try:
            return operation()
        except (HttpResponseError, TableTransactionError) as error:
            if not table_missing(error):
                raise
            logger.warning("a table is missing (%s); re-creating the tables", getattr(error, "error_code", error))
            self.ensure_tables()
            return operation()

    # --- history ----------------------------------------------------------------------------------

    def add_sample(self, sample: MetricSample) -> bool:
        entity = {
            "PartitionKey": partition_key(sample.target),
            "RowKey": history_row_key(sample),
            "sample_id": sample.sample_id,
            "collected_at": sample.collected_at,
            "backlog": _int64(sample.backlog),
            "capacity": sample.capacity,
            "ok": sample.ok,
            "schema_version": sample.schema_version,
            **split_text("sample", sample.to_json()),
        }
        try:
            self._recovering(lambda: self.history.create_entity(_drop_none(entity)))
        except ResourceExistsError:
            return False
        self._remember_parsed((entity["PartitionKey"], entity["RowKey"]), sample)
        return True

    def _remember_parsed(self, key: tuple[str, str], sample: MetricSample) -> None:
        with self._parsed_lock:
            self._parsed[key] = sample
            self._parsed.move_to_end(key)
            while len(self._parsed) > self._parsed_size:
                self._parsed.popitem(last=False)

    def _parsed_sample(self, key: tuple[str, str]) -> MetricSample | None:
        with self._parsed_lock:
            sample = self._parsed.get(key)
            if sample is not None:
                self._parsed.move_to_end(key)
            return sample

    def load_window(self, target: str, start: datetime, end: datetime) -> list[MetricSample]:
        query = (f"PartitionKey eq {quote_literal(partition_key(target))} "
                 f"and RowKey gt {quote_literal(history_bound(start))} "
                 f"and RowKey lt {quote_literal(f'{int(history_bound(end)) + 1:012d}')}")
        samples = []
        for entity in self._recovering(lambda: list(self.history.query_entities(query))):
            key = (entity["PartitionKey"], entity["RowKey"])
            sample = self._parsed_sample(key)
            if sample is None:
                try:
                    sample = sample_from_dict(json.loads(join_text(entity, "sample") or ""))
                except (ValueError, SampleError) as error:
                    logger.warning("history row %s/%s is unreadable and skipped: %s", target, entity.get("RowKey"), error)
                    continue
                self._remember_parsed(key, sample)
            samples.append(sample)
        return sorted(samples, key=lambda sample: sample.collected_at)

    def purge_history(self, target: str, before: datetime, limit: int) -> int:
        query = (f"PartitionKey eq {quote_literal(partition_key(target))} "
                 f"and RowKey lt {quote_literal(history_bound(before))}")
        keys: list[dict[str, str]] = []
        pages = self.history.query_entities(query, select=["PartitionKey", "RowKey"],
                                            results_per_page=min(limit, DELETE_BATCH)).by_page()
        for page in pages:
            keys.extend({"PartitionKey": e["PartitionKey"], "RowKey": e["RowKey"]} for e in page)
            if len(keys) >= limit:
                break
        keys = keys[:limit]
        for index in range(0, len(keys), DELETE_BATCH):
            self.history.submit_transaction([("delete", key) for key in keys[index:index + DELETE_BATCH]])
        return len(keys)

    # --- state and decision log ------------------------------------------------------------------

    def load_state(self, target: str) -> StoredState:
        try:
            entity = self._recovering(lambda: self.state.get_entity(partition_key(target), STATE_ROW))
        except ResourceNotFoundError:
            return StoredState(state=_fresh_state(target))
        text = join_text(entity, "document") or "{}"
        try:
            document = json.loads(text)
        except (ValueError, RecursionError):
            return unreadable_document(text, target, entity.metadata["etag"])
        return stored_state_from_document(document, target, entity.metadata["etag"])

    def _state_entity(self, stored: StoredState) -> dict[str, Any]:
        state = stored.state
        return _drop_none({
            "PartitionKey": partition_key(stored.target),
            "RowKey": STATE_ROW,
            # Readable copies for Storage Explorer; the document is what is read back.
            "capacity": state.capacity,
            "last_action_at": format_time(state.last_action_at) if state.last_action_at else None,
            "last_decision_id": state.last_decision_id,
            "last_reason_code": state.last_reason_code,
            "last_sample_at": format_time(state.last_sample_at) if state.last_sample_at else None,
            **split_text("document", json_text(stored_state_to_document(stored))),
        })

    def commit(self, stored: StoredState, decisions: Sequence[DecisionRecord] = ()) -> StoredState:
        entity = self._state_entity(stored)
        if stored.etag is None:
            operations: list[tuple] = [("create", entity)]
        else:
            operations = [("update", entity, {"mode": UpdateMode.REPLACE, "etag": stored.etag,
                                              "match_condition": MatchConditions.IfNotModified})]
        operations.extend(("upsert", _decision_entity(record), {"mode": UpdateMode.REPLACE}) for record in decisions)
        try:
            result = self._recovering(lambda: self.state.submit_transaction(operations))
        except TableTransactionError as error:
            if error.status_code in CONFLICT_STATUSES:
                raise ConcurrencyConflict(f"state of {stored.target!r} changed: {error.error_code}") from error
            raise
        return _with_etag(stored, result[0].get("etag"))

    def record_outcome(self, target: str, decided_at: datetime, decision_id: str, outcome: str,
                       detail: str | None, at: datetime) -> bool:
        entity = _drop_none({
            "PartitionKey": partition_key(target),
            "RowKey": decision_row_key(decided_at, decision_id),
            "outcome": outcome,
            "outcome_detail": detail[:MAX_DETAIL] if detail else None,
            "outcome_at": format_time(at),
        })
        try:
            # An unconditional update is sent with If-Match "*": only an existing row is annotated.
            self.state.update_entity(entity, mode=UpdateMode.MERGE)
        except (ResourceNotFoundError, HttpResponseError) as error:
            if isinstance(error, ResourceNotFoundError) or error.status_code in (404, 412):
                return False
            raise
        return True

    def decision_row(self, target: str, decided_at: datetime, decision_id: str) -> DecisionRecord | None:
        try:
            entity = self._recovering(lambda: self.state.get_entity(partition_key(target),
                                                                    decision_row_key(decided_at, decision_id)))
        except ResourceNotFoundError:
            return None
        return _decision_from_entity(target, entity)

    def decisions(self, target: str, since: datetime | None = None, limit: int | None = None) -> list[DecisionRecord]:
        low = decision_row_key(since, "") if since else "d-"
        query = (f"PartitionKey eq {quote_literal(partition_key(target))} "
                 f"and RowKey ge {quote_literal(low)} and RowKey lt 'd.'")
        records = []
        for entity in self.state.query_entities(query):
            records.append(_decision_from_entity(target, entity))
            if limit is not None and len(records) >= limit:
                break
        return records

    # --- the look-ahead's profile ---------------------------------------------------------------------

    def load_profile(self, target: str) -> StoredProfile | None:
        try:
            entity = self._recovering(lambda: self.state.get_entity(partition_key(target), PROFILE_ROW))
        except ResourceNotFoundError:
            return None
        try:
            document = json.loads(join_text(entity, "document") or "{}")
        except (ValueError, RecursionError):
            return None
        return profile_from_document(document, target) if isinstance(document, dict) else None

    def save_profile(self, profile: StoredProfile) -> None:
        entity = {"PartitionKey": partition_key(profile.target), "RowKey": PROFILE_ROW,
                  # Readable copies for Storage Explorer; the document is what is read back.
                  "fitted_at": format_time(profile.fitted_at), "trusted": profile.trusted,
                  "periods": ",".join(str(period) for period in profile.periods),
                  **split_text("document", json_text(profile_to_document(profile)))}
        self._recovering(lambda: self.state.upsert_entity(entity, mode=UpdateMode.REPLACE))

    # --- dead letters ------------------------------------------------------------------------------

    def dead_letter(self, letter: DeadLetter) -> bool:
        """Record ``letter`` once (create-if-absent on its id); ``False`` if it was already there."""
        body = letter.body
        truncated = False
        limit = 32_000 * 14
        if len(body) > limit:
            body, truncated = body[:limit], True
        entity = _drop_none({
            "PartitionKey": letter.function,
            "RowKey": letter.letter_id,
            "error": safe_text(letter.error)[:MAX_DETAIL],
            "received_at": letter.received_at,
            "dequeue_count": letter.dequeue_count,
            "message_id": letter.message_id,
            "target": letter.target,
            "origin": letter.origin,
            "body_length": len(letter.body),
            "body_truncated": truncated,
            **split_text("body", body),
        })
        try:
            self._recovering(lambda: self.dead_letters.create_entity(entity))
        except ResourceExistsError:
            return False
        return True

    def dead_letters_for(self, function: str | None = None) -> list[DeadLetter]:
        """Dead letters of one function (or all), oldest first."""
        query = f"PartitionKey eq {quote_literal(function)}" if function else None
        entities = self.dead_letters.query_entities(query) if query else self.dead_letters.list_entities()
        letters = [_letter_from_entity(entity) for entity in entities]
        return sorted(letters, key=lambda letter: letter.received_at)

    def mark_replayed(self, letter: DeadLetter, at: datetime) -> None:
        self.dead_letters.update_entity({"PartitionKey": letter.function, "RowKey": letter.letter_id,
                                         "replayed_at": format_time(at)}, mode=UpdateMode.MERGE)

    # --- applied actions -----------------------------------------------------------------------

    def get_applied(self, target: str, decision_id: str) -> AppliedRecord | None:
        try:
            entity = self._recovering(lambda: self.applied.get_entity(partition_key(target), decision_id))
        except ResourceNotFoundError:
            return None
        return AppliedRecord(
            target=target,
            decision_id=decision_id,
            status=entity["status"],
            decided_at=parse_time(entity["decided_at"], "decided_at"),
            requested_capacity=_int(entity.get("requested_capacity")) or 0,
            claimed_at=parse_time(entity["claimed_at"], "claimed_at"),
            capacity_before=_int(entity.get("capacity_before")),
            capacity_after=_int(entity.get("capacity_after")),
            detail=entity.get("detail"),
            finished_at=_time(entity.get("finished_at"), "finished_at"),
            attempts=_int(entity.get("attempts")) or 1,
            etag=entity.metadata["etag"],
            claimed_by=entity.get("claimed_by"),
            message_id=entity.get("message_id"),
            dequeue_count=_int(entity.get("dequeue_count")) or 1,
        )

    def _applied_entity(self, record: AppliedRecord) -> dict[str, Any]:
        return _drop_none({
            "PartitionKey": partition_key(record.target),
            "RowKey": record.decision_id,
            "status": record.status,
            "decided_at": format_time(record.decided_at),
            "requested_capacity": record.requested_capacity,
            "claimed_at": format_time(record.claimed_at),
            "capacity_before": record.capacity_before,
            "capacity_after": record.capacity_after,
            "detail": record.detail[:MAX_DETAIL] if record.detail else None,
            "finished_at": format_time(record.finished_at) if record.finished_at else None,
            "attempts": record.attempts,
            "claimed_by": record.claimed_by,
            "message_id": record.message_id,
            "dequeue_count": record.dequeue_count,
        })

    def claim_applied(self, record: AppliedRecord) -> AppliedRecord:
        try:
            metadata = self._recovering(lambda: self.applied.create_entity(self._applied_entity(record)))
        except ResourceExistsError as error:
            raise ConcurrencyConflict(f"decision {record.decision_id} is already claimed") from error
        return _replace_etag(record, metadata.get("etag"))

    def save_applied(self, record: AppliedRecord) -> AppliedRecord:
        try:
            metadata = self.applied.update_entity(self._applied_entity(record), mode=UpdateMode.REPLACE,
                                                  etag=record.etag, match_condition=MatchConditions.IfNotModified)
        except HttpResponseError as error:
            if error.status_code in CONFLICT_STATUSES:
                raise ConcurrencyConflict(f"applied record {record.decision_id} changed") from error
            raise
        return _replace_etag(record, metadata.get("etag"))


MAX_DETAIL = 16_000


def _fresh_state(target: str) -> ScalerState:
    return ScalerState(target=target)


def _with_etag(stored: StoredState, etag: str | None) -> StoredState:
    return replace(stored, etag=etag)


def _replace_etag(record: AppliedRecord, etag: str | None) -> AppliedRecord:
    return replace(record, etag=etag)


def _decision_entity(record: DecisionRecord) -> dict[str, Any]:
    return _drop_none({
        "PartitionKey": partition_key(record.target),
        "RowKey": record.row_key,
        "decision_id": record.decision_id,
        "evaluated_at": format_time(record.evaluated_at),
        "trigger_sample_id": record.trigger_sample_id,
        "acts": record.acts,
        "direction": record.direction,
        "reason_code": record.reason_code,
        "capacity_before": record.capacity_before,
        "capacity_after": record.capacity_after,
        "action": record.action.to_json() if record.action else None,
        "outcome": record.outcome,
        "outcome_detail": record.outcome_detail,
        "outcome_at": format_time(record.outcome_at) if record.outcome_at else None,
        **split_text("reasons", json_text(list(record.reasons))),
        **split_text("metrics", json_text(record.metrics)),
    })


def _letter_from_entity(entity: dict[str, Any]) -> DeadLetter:
    return DeadLetter(function=entity["PartitionKey"], body=join_text(entity, "body") or "", error=entity.get("error", ""),
                      received_at=entity["received_at"], dequeue_count=_int(entity.get("dequeue_count")) or 1,
                      message_id=entity.get("message_id"), target=entity.get("target"),
                      origin=entity.get("origin", "handler"), replayed_at=_time(entity.get("replayed_at"), "replayed_at"))


def _decision_from_entity(target: str, entity: dict[str, Any]) -> DecisionRecord:
    action = entity.get("action")
    return DecisionRecord(
        target=target,
        decision_id=entity["decision_id"],
        evaluated_at=parse_time(entity["evaluated_at"], "evaluated_at"),
        trigger_sample_id=entity.get("trigger_sample_id", ""),
        acts=bool(entity.get("acts")),
        direction=entity.get("direction", "none"),
        reason_code=entity.get("reason_code", ""),
        reasons=tuple(json.loads(join_text(entity, "reasons") or "[]")),
        metrics=json.loads(join_text(entity, "metrics") or "{}"),
        capacity_before=_int(entity.get("capacity_before")),
        capacity_after=_int(entity.get("capacity_after")),
        action=action_from_dict(json.loads(action)) if action else None,
        outcome=entity.get("outcome"),
        outcome_detail=entity.get("outcome_detail"),
        outcome_at=_time(entity.get("outcome_at"), "outcome_at"),
    )
