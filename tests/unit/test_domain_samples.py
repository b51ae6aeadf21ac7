"""The metric sample (scaling/domain/samples.py): JSON round trip, stable ids, and every
malformed message rejected with a SampleError that names the field."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from scaling.domain.samples import (
    SCHEMA_VERSION,
    MetricSample,
    PartitionReading,
    SampleError,
    SourceReading,
    parse_sample,
    sample_from_dict,
    sample_id_for,
)

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def eventhub_source(name: str = "orders", *, ok: bool = True, error: str | None = None) -> SourceReading:
    partitions = (
        PartitionReading.measure("0", 0, 1_000, 900, owner="worker-a"),
        PartitionReading.measure("1", 0, 2_000, None),
        PartitionReading.measure("2", 0, -1, None),
    )
    return SourceReading(name=name, kind="eventhub", ok=ok, error=error, partitions=partitions, owners=1,
                         unowned_partitions=("1",), notes=("partition 2 empty",))


def servicebus_source(active: int = 42) -> SourceReading:
    return SourceReading(name="invoices", kind="servicebus", active_messages=active)


def queue_for_slo(**changes) -> SourceReading:
    values = dict(name="jobs", kind="servicebus", active_messages=120, oldest_enqueued_at=T0 - timedelta(seconds=75),
                  incoming_per_minute=600.0, completed_per_minute=540.5, notes=("azure monitor rates of 11:58Z",))
    values.update(changes)
    return SourceReading(**values)


def full_sample(**changes) -> MetricSample:
    values = dict(target="orders-consumers", collected_at=T0, capacity=3,
                  sources=(eventhub_source(), servicebus_source()), extra={"collector": "test"})
    values.update(changes)
    return MetricSample(**values)


@pytest.mark.parametrize(
    "sample",
    [
        pytest.param(full_sample(), id="eventhub-and-servicebus"),
        pytest.param(full_sample(sources=(eventhub_source(ok=False, error="timeout after 10s"),)), id="failed-source"),
        pytest.param(full_sample(capacity=None, capacity_error="ARM 503"), id="capacity-unknown"),
        pytest.param(full_sample(collected_at=T0 + timedelta(microseconds=250_000)), id="sub-second-time"),
        pytest.param(full_sample(collected_at=datetime(2026, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))),
                     id="non-utc-offset"),
        pytest.param(full_sample(sources=(), extra={}), id="no-sources"),
        pytest.param(full_sample(sources=(queue_for_slo(),)), id="servicebus-queue-for-slo"),
        pytest.param(full_sample(sources=(queue_for_slo(oldest_enqueued_at=None, incoming_per_minute=0.0,
                                                        completed_per_minute=None),)), id="servicebus-queue-empty"),
    ],
)
def test_json_round_trip(sample: MetricSample) -> None:
    parsed = parse_sample(sample.to_json())
    assert parsed == sample
    assert parsed.sample_id == sample.sample_id
    assert parsed.backlog == sample.backlog
    assert parsed.collected_at.utcoffset() == timedelta(0)
    # and it is stable: a second trip gives the same bytes
    assert parsed.to_json() == sample.to_json()


def test_round_trip_as_bytes() -> None:
    sample = full_sample()
    assert parse_sample(sample.to_json().encode("utf-8")) == sample


def test_backlog_counts_ok_sources_only_and_uses_lag_rules() -> None:
    sample = full_sample(sources=(eventhub_source(), servicebus_source(42), eventhub_source("broken", ok=False)))
    # partition 0: 1000 - 900; partition 1: no checkpoint, 2000 - 0 + 1; partition 2: empty
    assert [p.backlog for p in sample.sources[0].partitions] == [100, 2001, 0]
    assert sample.backlog == 100 + 2001 + 42
    assert sample.max_partition_backlog == 2001
    assert not sample.ok
    assert set(sample.positions()) == {"orders/0", "orders/1", "orders/2"}


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        (("orders", T0), ("orders", T0), True),
        (("orders", T0), ("orders", T0.astimezone(timezone(timedelta(hours=-5)))), True),  # same instant
        (("orders", T0), ("orders", T0 + timedelta(microseconds=900_000)), True),  # same collection second
        (("orders", T0), ("orders", T0 + timedelta(seconds=1)), False),
        (("orders", T0), ("billing", T0), False),
        (("orders", T0), ("orders", T0 + timedelta(minutes=1)), False),
    ],
)
def test_sample_id_is_stable(first, second, same: bool) -> None:
    assert (sample_id_for(*first) == sample_id_for(*second)) is same
    a = MetricSample(target=first[0], collected_at=first[1], capacity=1, sources=())
    b = MetricSample(target=second[0], collected_at=second[1], capacity=5, sources=(servicebus_source(),))
    assert (a.sample_id == b.sample_id) is same  # content does not change the id


def test_naive_collected_at_is_rejected_at_construction() -> None:
    with pytest.raises(SampleError, match="collected_at"):
        MetricSample(target="orders", collected_at=datetime(2026, 3, 1, 12, 0), capacity=1, sources=())


def _good_document() -> dict:
    return json.loads(full_sample().to_json())


def _mutated(mutate) -> str:
    document = copy.deepcopy(_good_document())
    mutate(document)
    return json.dumps(document)


def _set(path: list, value):
    def mutate(document):
        node = document
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return mutate


def _delete(path: list):
    def mutate(document):
        node = document
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return mutate


def _queue_mutated(mutate) -> str:
    document = json.loads(full_sample(sources=(queue_for_slo(),)).to_json())
    mutate(document)
    return json.dumps(document)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        pytest.param("{not json", "not valid JSON", id="bad-json"),
        pytest.param(b"\xff\xfe\x00", "not valid JSON", id="bad-bytes"),
        pytest.param("[1, 2]", "JSON object", id="not-an-object"),
        pytest.param(_mutated(_set(["schema_version"], 2)), "schema_version 2", id="schema-version-2"),
        pytest.param(_mutated(_delete(["schema_version"])), "schema_version is missing", id="no-schema-version"),
        pytest.param(_mutated(_delete(["target"])), "target is missing", id="missing-target"),
        pytest.param(_mutated(_set(["target"], "")), "target must be a non-empty string", id="empty-target"),
        pytest.param(_mutated(_delete(["collected_at"])), "collected_at is missing", id="missing-time"),
        pytest.param(_mutated(_set(["collected_at"], "2026-03-01T12:00:00")), "collected_at must carry a UTC offset",
                     id="naive-time"),
        pytest.param(_mutated(_set(["collected_at"], "yesterday")), "collected_at is not an ISO-8601 time", id="garbage-time"),
        pytest.param(_mutated(_set(["collected_at"], 1_700_000_000)), "collected_at must be an ISO-8601 string",
                     id="epoch-number-time"),
        pytest.param(_mutated(_set(["capacity"], -1)), "capacity must be at least 0", id="negative-capacity"),
        pytest.param(_mutated(_set(["capacity"], 2.5)), "capacity must be an integer", id="fractional-capacity"),
        pytest.param(_mutated(_set(["capacity"], True)), "capacity must be an integer", id="boolean-capacity"),
        pytest.param(_mutated(_delete(["sources"])), "sources is missing", id="missing-sources"),
        pytest.param(_mutated(_set(["sources"], {"a": 1})), "sources must be a list", id="sources-not-list"),
        pytest.param(_mutated(_set(["sources", 0], "x")), "sources[0] must be an object", id="source-not-object"),
        pytest.param(_mutated(_delete(["sources", 1, "name"])), "sources[1].name is missing", id="source-without-name"),
        pytest.param(_mutated(_set(["sources", 0, "partitions", 1, "backlog"], -5)),
                     "sources[0].partitions[1].backlog must be at least 0", id="negative-backlog"),
        pytest.param(_mutated(_set(["sources", 0, "partitions", 0, "backlog"], "12")),
                     "sources[0].partitions[0].backlog must be an integer", id="string-backlog"),
        pytest.param(_mutated(_set(["sources", 0, "partitions", 0, "last_enqueued"], 1.5)),
                     "sources[0].partitions[0].last_enqueued must be an integer", id="non-integer-sequence"),
        pytest.param(_mutated(_set(["sources", 0, "partitions", 0, "checkpoint"], -2)),
                     "sources[0].partitions[0].checkpoint must be at least -1", id="checkpoint-below-minus-one"),
        pytest.param(_mutated(_delete(["sources", 0, "partitions", 2, "beginning"])),
                     "sources[0].partitions[2].beginning is missing", id="missing-beginning"),
        pytest.param(_mutated(_set(["sources", 1, "active_messages"], -3)),
                     "sources[1].active_messages must be at least 0", id="negative-active-messages"),
        pytest.param(_queue_mutated(_set(["sources", 0, "incoming_per_minute"], -1)),
                     "sources[0].incoming_per_minute must be between 0 and 1e+09", id="negative-rate"),
        pytest.param(_queue_mutated(_set(["sources", 0, "completed_per_minute"], 2e9)),
                     "sources[0].completed_per_minute must be between 0 and 1e+09", id="rate-too-big"),
        pytest.param(_queue_mutated(_set(["sources", 0, "incoming_per_minute"], "600")),
                     "sources[0].incoming_per_minute must be a finite number", id="string-rate"),
        pytest.param(_queue_mutated(_set(["sources", 0, "incoming_per_minute"], True)),
                     "sources[0].incoming_per_minute must be a finite number", id="boolean-rate"),
        pytest.param(_queue_mutated(_set(["sources", 0, "oldest_enqueued_at"], "2026-03-01T11:59:00")),
                     "sources[0].oldest_enqueued_at must carry a UTC offset", id="naive-enqueued-time"),
        pytest.param(_queue_mutated(_set(["sources", 0, "oldest_enqueued_at"], "1970-01-01T00:00:00Z")),
                     "sources[0].oldest_enqueued_at '1970-01-01T00:00:00Z' is outside the years", id="ancient-enqueued-time"),
        pytest.param(_mutated(_set(["sample_id"], "20260301T120000Z-0000000000000000")), "sample_id",
                     id="mismatching-sample-id"),
        pytest.param(_mutated(_set(["target"], "billing")), "does not match", id="id-of-another-target"),
    ],
)
def test_malformed_messages_name_the_field(body, fragment: str) -> None:
    with pytest.raises(SampleError) as caught:
        parse_sample(body)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("ahead", "accepted"),
    [
        (timedelta(0), True),
        (timedelta(seconds=59), True),  # tolerated clock skew (60 s by default)
        (timedelta(seconds=60), True),
        (timedelta(seconds=61), False),
        (timedelta(minutes=9), False),  # issue 11 case 5: froze scaling for 9 minutes
        (timedelta(days=1), False),
        (-timedelta(days=30), True),  # old is fine: it is late, not malformed
    ],
)
def test_far_future_time_is_rejected_given_now(ahead: timedelta, accepted: bool) -> None:
    body = full_sample().to_json()
    now = T0 - ahead
    if accepted:
        assert parse_sample(body, now=now).collected_at == T0
    else:
        with pytest.raises(SampleError, match="collected_at .* is in the future"):
            parse_sample(body, now=now)
    # without a clock, the time is not judged
    assert parse_sample(body).collected_at == T0


def test_sample_without_declared_id_gets_the_stable_one() -> None:
    document = _good_document()
    del document["sample_id"]
    sample = sample_from_dict(document)
    assert sample.sample_id == sample_id_for("orders-consumers", T0)
    assert sample.schema_version == SCHEMA_VERSION


@pytest.mark.parametrize("value", ["false", "no", 0.5, [False]])
def test_source_ok_must_be_a_boolean(value) -> None:
    body = _mutated(_set(["sources", 0, "ok"], value))
    with pytest.raises(SampleError, match=r"sources\[0\]\.ok"):
        parse_sample(body)


@pytest.mark.parametrize(
    ("enqueued_before", "age"),
    [pytest.param(None, 0.0, id="empty"), pytest.param(timedelta(seconds=75), 75.0, id="waiting"),
     pytest.param(timedelta(seconds=-5), 0.0, id="stamped-ahead")],
)
def test_oldest_age_is_read_from_the_enqueued_time(enqueued_before, age) -> None:
    source = queue_for_slo(oldest_enqueued_at=None if enqueued_before is None else T0 - enqueued_before)
    assert source.oldest_age_seconds(T0) == age


def test_queue_fields_are_left_out_when_not_read() -> None:
    """Samples of counted-only sources keep their shape: no null queue fields."""
    written = json.loads(full_sample().to_json())["sources"][1]
    assert not {"oldest_enqueued_at", "incoming_per_minute", "completed_per_minute"} & set(written)
