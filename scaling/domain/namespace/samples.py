"""The namespace target's sample: what collect read of one Event Hubs namespace in one run.

It travels on the ``metrics`` queue next to the plan targets' samples, told apart by
``"kind": "eventhubs_namespace"``, and carries the whole scale-down hold of per-minute metrics
(so evaluate needs no history table for it). Parsing bounds every field and names the wrong
one, as ``parse_sample`` does for plan samples.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scaling.domain.namespace.sizing import NamespaceMinute, NamespaceReading
from scaling.domain.samples import MAX_CLOCK_SKEW, SampleError, check_inner_time, format_time, parse_time, sample_id_for

NAMESPACE_SAMPLE_KIND = "eventhubs_namespace"
NAMESPACE_SCHEMA_VERSION = 1
#: One day of minutes at most (the longest scale-down hold).
MAX_MINUTES = 1_440
MAX_TOTAL = 1e15
MAX_TUS = 1_000
MAX_ERROR_CHARS = 1_000
_METRIC_FIELDS = ("incoming_bytes", "incoming_messages", "outgoing_bytes", "outgoing_messages", "throttled_requests")


@dataclass(frozen=True, slots=True)
class NamespaceSample:
    """One namespace reading; ``capacity`` is ``None`` with ``error`` when the namespace could not be read."""

    target: str
    collected_at: datetime
    capacity: int | None
    auto_inflate: bool = False
    auto_inflate_max: int | None = None
    minutes: tuple[NamespaceMinute, ...] = ()
    error: str | None = None
    traceparent: str | None = None

    @property
    def sample_id(self) -> str:
        return sample_id_for(self.target, self.collected_at)

    @property
    def reading(self) -> NamespaceReading | None:
        if self.capacity is None:
            return None
        return NamespaceReading(self.capacity, self.auto_inflate, self.auto_inflate_max, self.minutes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": NAMESPACE_SAMPLE_KIND, "schema_version": NAMESPACE_SCHEMA_VERSION, "sample_id": self.sample_id,
            "target": self.target, "collected_at": format_time(self.collected_at), "capacity": self.capacity,
            "auto_inflate": self.auto_inflate, "auto_inflate_max": self.auto_inflate_max, "error": self.error,
            "minutes": [[format_time(m.minute), *(getattr(m, name) for name in _METRIC_FIELDS)] for m in self.minutes],
            **({"traceparent": self.traceparent} if self.traceparent else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))


def is_namespace_message(body: str | bytes) -> bool:
    """Cheap first look: only a body naming the kind is parsed as a namespace sample."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    if NAMESPACE_SAMPLE_KIND not in text:
        return False
    try:
        document = json.loads(text)
    except ValueError:
        return False
    return isinstance(document, dict) and document.get("kind") == NAMESPACE_SAMPLE_KIND


def _number(value: Any, path: str, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SampleError(f"{path} must be a finite number")
    if not 0 <= value <= high:
        raise SampleError(f"{path} must be within 0..{high:g}, got {value!r}")
    return float(value)


def _count(value: Any, path: str, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    number = _number(value, path, MAX_TUS)
    if number != int(number):
        raise SampleError(f"{path} must be a whole number, got {value!r}")
    return int(number)


def parse_namespace_sample(body: str | bytes, *, now: datetime, clock_skew: timedelta = MAX_CLOCK_SKEW) -> NamespaceSample:
    """A namespace sample from a queue message, or ``SampleError`` naming the field."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise SampleError(f"the message is not valid JSON: {error}") from error
    if not isinstance(document, dict) or document.get("kind") != NAMESPACE_SAMPLE_KIND:
        raise SampleError(f"kind must be {NAMESPACE_SAMPLE_KIND!r}")
    if document.get("schema_version") != NAMESPACE_SCHEMA_VERSION:
        raise SampleError(f"schema_version must be {NAMESPACE_SCHEMA_VERSION}, got {document.get('schema_version')!r}")
    target = document.get("target")
    if not isinstance(target, str) or not target or len(target) > 128 or not target.isprintable():
        raise SampleError("target must be a printable name of 1-128 characters")
    collected_at = parse_time(document.get("collected_at"), "collected_at")
    if collected_at > now + clock_skew:
        raise SampleError(f"collected_at {format_time(collected_at)} is in the future")
    rows = document.get("minutes") or []
    if not isinstance(rows, list) or len(rows) > MAX_MINUTES:
        raise SampleError(f"minutes must be a list of at most {MAX_MINUTES} rows")
    minutes = []
    for index, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != 1 + len(_METRIC_FIELDS):
            raise SampleError(f"minutes[{index}] must be [time, {', '.join(_METRIC_FIELDS)}]")
        values = [_number(value, f"minutes[{index}].{name}", MAX_TOTAL) for name, value in zip(_METRIC_FIELDS, row[1:], strict=True)]
        minutes.append(NamespaceMinute(parse_time(row[0], f"minutes[{index}][0]"), *values))
    if any(b.minute <= a.minute for a, b in zip(minutes, minutes[1:], strict=False)):
        raise SampleError("minutes must be in increasing time order")
    for index in {0, len(minutes) - 1} if minutes else ():  # in order: the first and the last bound them all
        # A minute row starts before collection (the newest complete minute) and within the
        # longest scale-down hold of it: one dated otherwise would drive a TU write on made-up load.
        check_inner_time(minutes[index].minute, collected_at, f"minutes[{index}][0]", clock_skew,
                         oldest=timedelta(minutes=MAX_MINUTES + 1))
    error = document.get("error")
    if error is not None and (not isinstance(error, str) or len(error) > MAX_ERROR_CHARS):
        raise SampleError(f"error must be text of at most {MAX_ERROR_CHARS} characters")
    capacity = _count(document.get("capacity"), "capacity", optional=True)
    if capacity is None and error is None:
        raise SampleError("capacity is required unless error says why it is missing")
    if not isinstance(document.get("auto_inflate", False), bool):
        raise SampleError("auto_inflate must be true or false")
    traceparent = document.get("traceparent")
    sample = NamespaceSample(target, collected_at, capacity, bool(document.get("auto_inflate", False)),
                             _count(document.get("auto_inflate_max"), "auto_inflate_max", optional=True), tuple(minutes),
                             error, traceparent if isinstance(traceparent, str) and len(traceparent) <= 128 else None)
    declared = document.get("sample_id")
    if declared is not None and declared != sample.sample_id:
        raise SampleError(f"sample_id {declared!r} does not match target and collected_at")
    return sample
