"""The namespace sample on the metrics queue (scaling/domain/namespace/samples.py) and the
metrics reader's minutes (scaling/sources/namespace.py): round trip, and every bad field
named."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from scaling.domain.namespace.samples import NamespaceSample, is_namespace_message, parse_namespace_sample
from scaling.domain.namespace.sizing import NamespaceMinute
from scaling.domain.samples import SampleError
from scaling.sources.namespace import NAMESPACE_METRICS, minutes_from_metrics

NOW = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC)
SAMPLE = NamespaceSample("ns", NOW.replace(second=0), 3, True, 8,
                         (NamespaceMinute(NOW - timedelta(minutes=2, seconds=30), 1e6, 1e3, 2e6, 2e3, 0.0),
                          NamespaceMinute(NOW - timedelta(minutes=1, seconds=30), 1e6, 1e3, 2e6, 2e3, 4.0)))


def test_round_trip_and_recognition() -> None:
    body = SAMPLE.to_json()
    assert is_namespace_message(body) and is_namespace_message(body.encode())
    assert parse_namespace_sample(body, now=NOW) == SAMPLE
    assert not is_namespace_message('{"target": "eventhubs_namespace"}')  # the kind, not the word anywhere


def broken(**changes) -> str:
    document = {**json.loads(SAMPLE.to_json()), **changes}
    return json.dumps(document)


@pytest.mark.parametrize(("body", "message"), [
    (broken(schema_version=2), "schema_version must be 1"),
    (broken(target=""), "target must be"),
    (broken(capacity=2.5), "capacity must be a whole number"),
    (broken(capacity=-1), "capacity must be within"),
    (broken(capacity=None), "capacity is required unless error"),
    (broken(collected_at="2026-03-01T13:00:00Z"), "is in the future"),
    (broken(minutes=[["2026-03-01T11:58:00Z", 1, 2, 3]]), r"minutes\[0\] must be"),
    (broken(minutes=[["2026-03-01T11:58:00Z", 1, 2, 3, 4, "x"]]), r"minutes\[0\].throttled_requests must be a finite number"),
    (broken(minutes=[["2026-03-01T11:59:00Z", 0, 0, 0, 0, 0], ["2026-03-01T11:58:00Z", 0, 0, 0, 0, 0]]), "increasing time order"),
    (broken(sample_id="x"), "does not match"),
    (broken(auto_inflate="yes"), "auto_inflate must be true or false"),
    ("not json", "not valid JSON"),
])
def test_each_bad_field_is_named(body: str, message: str) -> None:
    with pytest.raises(SampleError, match=message):
        parse_namespace_sample(body, now=NOW)


def test_a_failed_read_travels_as_an_error() -> None:
    failed = NamespaceSample("ns", NOW.replace(second=0), None, error="namespace: 403")
    assert parse_namespace_sample(failed.to_json(), now=NOW).reading is None


def metric(name: str, points: list[tuple[datetime, float | None]]) -> SimpleNamespace:
    return SimpleNamespace(name=name, timeseries=[SimpleNamespace(data=[SimpleNamespace(timestamp=t, total=v) for t, v in points])])


def test_minutes_need_all_five_metrics_and_must_have_ended() -> None:
    first, second, current = (NOW.replace(second=0) - timedelta(minutes=m) for m in (2, 1, 0))
    result = SimpleNamespace(metrics=[metric(name, [(first, 1.0), (second, None if name == "ThrottledRequests" else 2.0),
                                                    (current, 3.0)]) for name in NAMESPACE_METRICS])
    [only] = minutes_from_metrics(result, NOW)  # the second lacks a total, the current one has not ended
    assert only.minute == first and only.incoming_bytes == only.throttled_requests == 1.0
