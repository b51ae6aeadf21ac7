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

from scaling.domain.lag import PartitionPosition, max_backlog, partition_backlog, total_backlog

SCHEMA_VERSION = 1
#: A sample stamped further ahead of the evaluator's clock than this is rejected as malformed.
MAX_CLOCK_SKEW = timedelta(minutes=10)


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
    evaluator never scales in on a sample with a failed source.
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
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as error:
        raise SampleError(f"{path} is not an ISO-8601 time: {text!r}") from error
    if moment.tzinfo is None:
        raise SampleError(f"{path} must carry a UTC offset")
    return moment.astimezone(UTC)


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
    }


def _integer(value: Any, path: str, *, allow_none: bool = False, minimum: int | None = None) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SampleError(f"{path} must be an integer, got {value!r}")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise SampleError(f"{path} must be an integer, got {value!r}")
    number = int(value)
    if minimum is not None and number < minimum:
        raise SampleError(f"{path} must be at least {minimum}, got {number}")
    return number


def _boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise SampleError(f"{path} must be true or false, got {value!r}")
    return value


def _required(document: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in document:
        raise SampleError(f"{path}{key} is missing")
    return document[key]


def sample_from_dict(document: Any, *, now: datetime | None = None) -> MetricSample:
    """Parse and validate a sample; every error names the offending field."""
    if not isinstance(document, Mapping):
        raise SampleError("the message must be a JSON object")
    version = _required(document, "schema_version", "")
    if version != SCHEMA_VERSION:
        raise SampleError(f"schema_version {version!r} is not supported (expected {SCHEMA_VERSION})")
    target = _required(document, "target", "")
    if not isinstance(target, str) or not target:
        raise SampleError("target must be a non-empty string")
    collected_at = parse_time(_required(document, "collected_at", ""), "collected_at")
    if now is not None and collected_at - now > MAX_CLOCK_SKEW:
        raise SampleError(f"collected_at {format_time(collected_at)} is in the future (now {format_time(now)})")
    capacity = _integer(document.get("capacity"), "capacity", allow_none=True, minimum=0)
    raw_sources = _required(document, "sources", "")
    if not isinstance(raw_sources, list):
        raise SampleError("sources must be a list")
    sources = []
    for index, raw in enumerate(raw_sources):
        path = f"sources[{index}]."
        if not isinstance(raw, Mapping):
            raise SampleError(f"sources[{index}] must be an object")
        partitions = []
        for p_index, raw_partition in enumerate(raw.get("partitions") or []):
            p_path = f"{path}partitions[{p_index}]."
            if not isinstance(raw_partition, Mapping):
                raise SampleError(f"{p_path[:-1]} must be an object")
            partitions.append(
                PartitionReading(
                    partition_id=str(_required(raw_partition, "id", p_path)),
                    beginning=_integer(_required(raw_partition, "beginning", p_path), p_path + "beginning", minimum=-1),
                    last_enqueued=_integer(
                        _required(raw_partition, "last_enqueued", p_path), p_path + "last_enqueued", minimum=-1
                    ),
                    checkpoint=_integer(raw_partition.get("checkpoint"), p_path + "checkpoint", allow_none=True, minimum=-1),
                    backlog=_integer(_required(raw_partition, "backlog", p_path), p_path + "backlog", minimum=0),
                    owner=raw_partition.get("owner"),
                )
            )
        sources.append(
            SourceReading(
                name=str(_required(raw, "name", path)),
                kind=str(_required(raw, "kind", path)),
                ok=_boolean(raw.get("ok", True), path + "ok"),
                error=raw.get("error"),
                partitions=tuple(partitions),
                active_messages=_integer(raw.get("active_messages"), path + "active_messages", allow_none=True, minimum=0),
                owners=_integer(raw.get("owners"), path + "owners", allow_none=True, minimum=0),
                unowned_partitions=tuple(str(x) for x in raw.get("unowned_partitions") or ()),
                notes=tuple(str(x) for x in raw.get("notes") or ()),
            )
        )
    sample = MetricSample(
        target=target,
        collected_at=collected_at,
        capacity=capacity,
        sources=tuple(sources),
        capacity_error=document.get("capacity_error"),
        extra=dict(document.get("extra") or {}),
    )
    declared_id = document.get("sample_id")
    if declared_id is not None and declared_id != sample.sample_id:
        raise SampleError(f"sample_id {declared_id!r} does not match target and collected_at")
    return sample


def parse_sample(body: str | bytes, *, now: datetime | None = None) -> MetricSample:
    """Parse a queue message body into a sample, or raise ``SampleError`` naming the problem."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise SampleError(f"the message is not valid JSON: {error}") from error
    return sample_from_dict(document, now=now)
