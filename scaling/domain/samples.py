"""The metric sample: what ``collect`` sends to the ``metrics`` queue, one per target and time.

A versioned JSON document with a stable id (same target and collection time give the same id),
so that the at-least-once queue's duplicates are recognised downstream. Schema: docs/sample-schema.md.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from scaling.domain.knobs import MAX_FOREIGN_NAME_CHARS, MAX_MESSAGE_CHARS, MAX_NAME_CHARS, MAX_SOURCES, SETTING
from scaling.domain.lag import MAX_INT64, PartitionPosition, max_backlog, partition_backlog, total_backlog
from scaling.domain.names import target_name_problem, text_problem

SCHEMA_VERSION = 1
#: A sample stamped further ahead of the evaluator's clock than this is dead-lettered (the
#: evaluate service's ``CLOCK_SKEW_SECONDS`` setting; this is its default).
MAX_CLOCK_SKEW = timedelta(seconds=SETTING["CLOCK_SKEW_SECONDS"].default)
#: Bounds on every field, so that a sample that parses can be stored and evaluated.
MAX_CAPACITY = 10_000
MAX_PARTITIONS = 4096
MAX_NOTES = 64
MAX_AUTOSCALE_SETTINGS = 16
MAX_EXTRA_CHARS = 16_000
#: A W3C traceparent is 55 characters; room for a future version, never a payload.
MAX_TRACEPARENT_CHARS = 128
#: Messages per minute a queue's Azure Monitor rates may report (a namespace tops out far below).
MAX_MESSAGES_PER_MINUTE = 1e9
#: Times outside these years cannot be keyed or compared safely (and are never real).
EARLIEST_YEAR = 2000
LATEST_YEAR = 9000


class SampleError(ValueError):
    """A metric message that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class PartitionReading:
    """One partition as read at collection time."""

    partition_id: str
    beginning: int
    last_enqueued: int
    checkpoint: int | None
    backlog: int
    owner: str | None = None

    @classmethod
    def measure(
        cls, partition_id: str, beginning: int, last_enqueued: int, checkpoint: int | None, owner: str | None = None
    ) -> PartitionReading:
        """Build a reading and compute its backlog with the platform's lag rules."""
        backlog = partition_backlog(beginning=beginning, last_enqueued=last_enqueued, checkpoint=checkpoint)
        return cls(partition_id, beginning, last_enqueued, checkpoint, backlog, owner)


@dataclass(frozen=True, slots=True)
class SourceReading:
    """What one metric source reported for a target: partitions (Event Hubs) or a count (Service Bus).

    ``ok`` is false when the source failed or timed out; ``error`` then says why, and the
    evaluator never scales in on a sample with a failed source. A Service Bus queue read for the
    SLO mode also carries what a queue offers instead of sequence numbers: the enqueued time of
    its oldest active message (``None`` when it is empty) and the arrival and completion rates
    per minute from Azure Monitor (``None`` when the metrics had no complete minute yet).
    """

    name: str
    kind: str
    ok: bool = True
    error: str | None = None
    partitions: tuple[PartitionReading, ...] = ()
    active_messages: int | None = None
    owners: int | None = None
    unowned_partitions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    oldest_enqueued_at: datetime | None = None
    incoming_per_minute: float | None = None
    completed_per_minute: float | None = None

    def oldest_age_seconds(self, collected_at: datetime) -> float:
        """How long the oldest active message had waited at ``collected_at`` (0 when empty)."""
        if self.oldest_enqueued_at is None:
            return 0.0
        return max((collected_at - self.oldest_enqueued_at).total_seconds(), 0.0)

    @property
    def backlog(self) -> int:
        if self.active_messages is not None:
            return max(self.active_messages, 0)
        return total_backlog(p.backlog for p in self.partitions)


@dataclass(frozen=True, slots=True)
class MetricSample:
    """All sources of one target at one collection time, plus the plan's capacity then."""

    target: str
    collected_at: datetime
    capacity: int | None
    sources: tuple[SourceReading, ...]
    sample_id: str = ""
    schema_version: int = SCHEMA_VERSION
    capacity_error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: The W3C ``traceparent`` of the collect span, so evaluate and scale join its trace.
    traceparent: str | None = None
    #: Names of the enabled Azure Monitor autoscale settings whose target is the plan (another
    #: controller: the target holds while there is one; ``domain/conflict.py``).
    autoscale_settings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.collected_at.tzinfo is None:
            raise SampleError("collected_at must be timezone-aware (UTC)")
        if not self.sample_id:
            object.__setattr__(self, "sample_id", sample_id_for(self.target, self.collected_at))

    @property
    def ok(self) -> bool:
        return all(source.ok for source in self.sources) and self.capacity_error is None

    @property
    def backlog(self) -> int:
        return total_backlog(source.backlog for source in self.sources if source.ok)

    @property
    def partition_count(self) -> int:
        return sum(len(source.partitions) for source in self.sources)

    @property
    def max_partition_backlog(self) -> int:
        return max_backlog(p.backlog for source in self.sources for p in source.partitions)

    def positions(self) -> dict[str, PartitionPosition]:
        """Partition positions keyed ``source/partition`` for rate computations."""
        return {
            f"{source.name}/{p.partition_id}": PartitionPosition(p.last_enqueued, p.checkpoint)
            for source in self.sources
            if source.ok
            for p in source.partitions
        }

    def to_json(self) -> str:
        return json.dumps(sample_to_dict(self), separators=(",", ":"))


def sample_id_for(target: str, collected_at: datetime) -> str:
    """Stable id: the same target and collection second always give the same id."""
    stamp = collected_at.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    digest = hashlib.sha256(f"{target}|{stamp}".encode()).hexdigest()[:16]
    return f"{stamp}-{digest}"


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_time(text: Any, path: str) -> datetime:
    if not isinstance(text, str):
        raise SampleError(f"{path} must be an ISO-8601 string")
    if len(text) > 64:
        raise SampleError(f"{path} is not an ISO-8601 time: {text[:64]!r}...")
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as error:
        raise SampleError(f"{path} is not an ISO-8601 time: {text!r}") from error
    if moment.tzinfo is None:
        raise SampleError(f"{path} must carry a UTC offset")
    try:
        moment = moment.astimezone(UTC)
    except (OverflowError, ValueError):
        raise SampleError(f"{path} {text!r} is out of range once converted to UTC") from None
    if not EARLIEST_YEAR <= moment.year <= LATEST_YEAR:
        raise SampleError(f"{path} {text!r} is outside the years {EARLIEST_YEAR}..{LATEST_YEAR}")
    return moment


def sample_to_dict(sample: MetricSample) -> dict[str, Any]:
    return {
        "schema_version": sample.schema_version,
        "sample_id": sample.sample_id,
        "target": sample.target,
        "collected_at": format_time(sample.collected_at),
        "capacity": sample.capacity,
        "capacity_error": sample.capacity_error,
        "sources": [
            {
                "name": source.name,
                "kind": source.kind,
                "ok": source.ok,
                "error": source.error,
                "backlog": source.backlog,
                "active_messages": source.active_messages,
                "owners": source.owners,
                "unowned_partitions": list(source.unowned_partitions),
                "notes": list(source.notes),
                **_queue_fields(source),
                "partitions": [
                    {
                        "id": p.partition_id,
                        "beginning": p.beginning,
                        "last_enqueued": p.last_enqueued,
                        "checkpoint": p.checkpoint,
                        "backlog": p.backlog,
                        "owner": p.owner,
                    }
                    for p in source.partitions
                ],
            }
            for source in sample.sources
        ],
        **({"extra": dict(sample.extra)} if sample.extra else {}),
        **({"traceparent": sample.traceparent} if sample.traceparent else {}),
        **({"autoscale_settings": list(sample.autoscale_settings)} if sample.autoscale_settings else {}),
    }


def _queue_fields(source: SourceReading) -> dict[str, Any]:
    """The SLO inputs of a Service Bus queue, written only when read (older readers never see them)."""
    fields: dict[str, Any] = {}
    if source.oldest_enqueued_at is not None:
        fields["oldest_enqueued_at"] = format_time(source.oldest_enqueued_at)
    if source.incoming_per_minute is not None:
        fields["incoming_per_minute"] = source.incoming_per_minute
    if source.completed_per_minute is not None:
        fields["completed_per_minute"] = source.completed_per_minute
    return fields


def _rate(value: Any, path: str) -> float | None:
    """A messages-per-minute rate: a finite number in 0..MAX_MESSAGES_PER_MINUTE, or null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SampleError(f"{path} must be a finite number, got {value!r}")
    if not 0 <= value <= MAX_MESSAGES_PER_MINUTE:
        raise SampleError(f"{path} must be between 0 and {MAX_MESSAGES_PER_MINUTE:g}, got {value!r}")
    return float(value)


def _integer(value: Any, path: str, *, allow_none: bool = False, minimum: int | None = None,
             maximum: int = MAX_INT64) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SampleError(f"{path} must be an integer, got {value!r}")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise SampleError(f"{path} must be an integer, got {value!r}")
    number = int(value)
    if minimum is not None and number < minimum:
        raise SampleError(f"{path} must be at least {minimum}, got {number}")
    if number > maximum:
        raise SampleError(f"{path} must be at most {maximum}, got {number}")
    return number


def _boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise SampleError(f"{path} must be true or false, got {value!r}")
    return value


def _required(document: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in document:
        raise SampleError(f"{path}{key} is missing")
    return document[key]


def _text(value: Any, path: str, *, max_chars: int = MAX_MESSAGE_CHARS, allow_none: bool = False,
          allow_empty: bool = False) -> str | None:
    if value is None and allow_none:
        return None
    problem = text_problem(value, max_chars=max_chars, allow_empty=allow_empty)
    if problem:
        raise SampleError(f"{path} {problem}")
    return value


def _identifier(value: Any, path: str) -> str:
    """A partition id: text, or an integer as the SDK's older callers write it."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INT64:
        return str(value)
    return _text(value, path, max_chars=MAX_FOREIGN_NAME_CHARS)


def _list(value: Any, path: str, max_items: int) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise SampleError(f"{path} must be a list, got {type(value).__name__}")
    if len(value) > max_items:
        raise SampleError(f"{path} has {len(value)} items; at most {max_items}")
    return value


def _texts(value: Any, path: str, max_items: int) -> tuple[str, ...]:
    return tuple(_text(item, f"{path}[{index}]", allow_empty=True) for index, item in enumerate(_list(value, path, max_items)))


def _extra(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SampleError(f"extra must be an object, got {type(value).__name__}")
    for key in value:
        _text(key, "extra key", max_chars=MAX_FOREIGN_NAME_CHARS)
    try:
        text = json.dumps(value, ensure_ascii=False)
        text.encode("utf-8")
    except (ValueError, TypeError) as error:
        raise SampleError(f"extra cannot be serialised: {error}") from None
    except UnicodeEncodeError:
        raise SampleError("extra contains a lone surrogate (not valid Unicode text)") from None
    if len(text) > MAX_EXTRA_CHARS:
        raise SampleError(f"extra is {len(text)} characters as JSON; at most {MAX_EXTRA_CHARS}")
    return dict(value)


def _partition(raw: Any, path: str) -> PartitionReading:
    if not isinstance(raw, Mapping):
        raise SampleError(f"{path[:-1]} must be an object")
    return PartitionReading(
        partition_id=_identifier(_required(raw, "id", path), path + "id"),
        beginning=_integer(_required(raw, "beginning", path), path + "beginning", minimum=-1),
        last_enqueued=_integer(_required(raw, "last_enqueued", path), path + "last_enqueued", minimum=-1),
        checkpoint=_integer(raw.get("checkpoint"), path + "checkpoint", allow_none=True, minimum=-1),
        backlog=_integer(_required(raw, "backlog", path), path + "backlog", minimum=0, maximum=MAX_INT64 + 1),
        owner=_text(raw.get("owner"), path + "owner", max_chars=MAX_FOREIGN_NAME_CHARS, allow_none=True, allow_empty=True),
    )


def _source(raw: Any, path: str) -> SourceReading:
    if not isinstance(raw, Mapping):
        raise SampleError(f"{path[:-1]} must be an object")
    partitions = _list(raw.get("partitions"), path + "partitions", MAX_PARTITIONS)
    return SourceReading(
        name=_text(_required(raw, "name", path), path + "name", max_chars=MAX_NAME_CHARS),
        kind=_text(_required(raw, "kind", path), path + "kind", max_chars=MAX_FOREIGN_NAME_CHARS),
        ok=_boolean(raw.get("ok", True), path + "ok"),
        error=_text(raw.get("error"), path + "error", allow_none=True, allow_empty=True),
        partitions=tuple(_partition(item, f"{path}partitions[{index}].") for index, item in enumerate(partitions)),
        active_messages=_integer(raw.get("active_messages"), path + "active_messages", allow_none=True, minimum=0),
        owners=_integer(raw.get("owners"), path + "owners", allow_none=True, minimum=0, maximum=MAX_PARTITIONS),
        unowned_partitions=_texts(raw.get("unowned_partitions"), path + "unowned_partitions", MAX_PARTITIONS),
        notes=_texts(raw.get("notes"), path + "notes", MAX_NOTES),
        oldest_enqueued_at=(None if raw.get("oldest_enqueued_at") is None
                            else parse_time(raw["oldest_enqueued_at"], path + "oldest_enqueued_at")),
        incoming_per_minute=_rate(raw.get("incoming_per_minute"), path + "incoming_per_minute"),
        completed_per_minute=_rate(raw.get("completed_per_minute"), path + "completed_per_minute"),
    )


def sample_from_dict(document: Any, *, now: datetime | None = None, clock_skew: timedelta = MAX_CLOCK_SKEW) -> MetricSample:
    """Parse and validate a sample; every error names the offending field.

    Every field is checked with bounds before anything is stored, so that a sample that parses
    can be written to Table storage and evaluated (see docs/sample-schema.md). With ``now``, a
    sample stamped more than ``clock_skew`` ahead of it is refused: it would take the id of a
    real sample collected later and stand as the window's newest sample until then.
    """
    if not isinstance(document, Mapping):
        raise SampleError("the message must be a JSON object")
    version = _required(document, "schema_version", "")
    if version != SCHEMA_VERSION:
        raise SampleError(f"schema_version {version!r} is not supported (expected {SCHEMA_VERSION})")
    target = _required(document, "target", "")
    problem = target_name_problem(target)
    if problem:
        raise SampleError(f"target {problem}")
    collected_at = parse_time(_required(document, "collected_at", ""), "collected_at")
    if now is not None and collected_at - now > clock_skew:
        raise SampleError(f"collected_at {format_time(collected_at)} is in the future: "
                          f"{(collected_at - now).total_seconds():.0f} s ahead of the evaluator's clock ({format_time(now)}); at most {clock_skew.total_seconds():.0f} s "
                          "of clock skew is tolerated")
    capacity = _integer(document.get("capacity"), "capacity", allow_none=True, minimum=0, maximum=MAX_CAPACITY)
    raw_sources = _list(_required(document, "sources", ""), "sources", MAX_SOURCES)
    sources = tuple(_source(raw, f"sources[{index}].") for index, raw in enumerate(raw_sources))
    sample = MetricSample(
        target=target,
        collected_at=collected_at,
        capacity=capacity,
        sources=sources,
        capacity_error=_text(document.get("capacity_error"), "capacity_error", allow_none=True, allow_empty=True),
        extra=_extra(document.get("extra")),
        traceparent=_text(document.get("traceparent"), "traceparent", max_chars=MAX_TRACEPARENT_CHARS, allow_none=True),
        autoscale_settings=tuple(_text(item, f"autoscale_settings[{index}]", max_chars=MAX_FOREIGN_NAME_CHARS) for index, item
                                 in enumerate(_list(document.get("autoscale_settings") or [], "autoscale_settings",
                                                    MAX_AUTOSCALE_SETTINGS))),
    )
    for index, source in enumerate(sources):
        if source.oldest_enqueued_at is not None:
            check_inner_time(source.oldest_enqueued_at, collected_at, f"sources[{index}].oldest_enqueued_at", clock_skew)
    declared_id = document.get("sample_id")
    if declared_id is not None and declared_id != sample.sample_id:
        raise SampleError(f"sample_id {declared_id!r} does not match target and collected_at")
    return sample


def check_inner_time(moment: datetime, collected_at: datetime, path: str, clock_skew: timedelta,
                     *, oldest: timedelta | None = None) -> None:
    """``SampleError`` when a time inside a sample disagrees with its ``collected_at``: after it by
    more than the clock skew tolerated (nothing read at collection can be dated later), or, with
    ``oldest``, before it by more than that and the tolerance. Such a sample was forged or
    mangled, and what it says (an oldest message from the future, tomorrow's metrics) would drive
    a write."""
    if moment - collected_at > clock_skew:
        raise SampleError(f"{path} {format_time(moment)} is {(moment - collected_at).total_seconds():.0f} s after "
                          f"collected_at {format_time(collected_at)}; at most {clock_skew.total_seconds():.0f} s of "
                          "clock skew is tolerated")
    if oldest is not None and collected_at - moment > oldest + clock_skew:
        raise SampleError(f"{path} {format_time(moment)} is {(collected_at - moment).total_seconds():.0f} s before "
                          f"collected_at {format_time(collected_at)}; a sample covers at most "
                          f"{oldest.total_seconds():.0f} s (and {clock_skew.total_seconds():.0f} s of clock skew)")


def parse_sample(body: str | bytes, *, now: datetime | None = None, clock_skew: timedelta = MAX_CLOCK_SKEW) -> MetricSample:
    """Parse a queue message body into a sample, or raise ``SampleError`` naming the problem."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise SampleError(f"the message is not valid JSON: {error}") from error
    return sample_from_dict(document, now=now, clock_skew=clock_skew)
