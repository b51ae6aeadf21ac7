"""Table-driven boundaries of the checkpoint blob names, metadata values and legacy bodies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.lag import MAX_INT64
from scaling.services.collect import collection_time
from scaling.sources.base import CallTimeout, error_text
from scaling.sources.checkpoints import (
    CheckpointLocation,
    OwnershipRecord,
    classify_blob_name,
    legacy_partition_id,
    parse_legacy_checkpoint,
    parse_sequence_number,
    summarize_ownership,
)
from scaling.sources.eventhub import namespace_from_connection_string, normalize_namespace, properties_from_sdk

PREFIX = "ns.servicebus.windows.net/orders-hub/$default/"


@pytest.mark.parametrize(
    ("raw", "value", "problem"),
    [
        ("0", 0, None),
        ("42", 42, None),
        (" 42 ", 42, None),
        (str(MAX_INT64), MAX_INT64, None),
        (str(MAX_INT64 + 1), None, "beyond int64"),
        ("", None, "empty"),
        ("   ", None, "empty"),
        (None, None, "missing"),
        ("-1", None, "not a non-negative integer"),
        ("12abc", None, "not a non-negative integer"),
        ("1.5", None, "not a non-negative integer"),
        ("1e3", None, "not a non-negative integer"),
        ("\u0663", None, "not a non-negative integer"),  # Arabic-Indic digit three: str.isdigit() would accept it
        (7, 7, None),
        (-3, None, "negative"),
        (True, None, "not a number"),
        (1.0, None, "not a number"),
    ],
)
def test_parse_sequence_number(raw, value, problem):
    parsed, reported = parse_sequence_number(raw)
    assert parsed == value
    if problem is None:
        assert reported is None
    else:
        assert problem in reported


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (PREFIX + "checkpoint/0", ("checkpoint", "0")),
        (PREFIX + "checkpoint/31", ("checkpoint", "31")),
        (PREFIX + "ownership/7", ("ownership", "7")),
        (PREFIX + "checkpoint/", None),  # no partition id
        (PREFIX + "checkpoint/0/extra", None),  # deeper than the layout
        (PREFIX + "Checkpoint/0", None),  # the layout is lower-case
        (PREFIX + "0", None),  # a legacy blob is not a current-layout blob
        (PREFIX + "leases/0", None),
        ("ns.servicebus.windows.net/orders-hub/other/checkpoint/0", None),  # another consumer group
        ("ns.servicebus.windows.net/orders-hub/$default-2/checkpoint/0", None),  # a group sharing the prefix text
    ],
)
def test_classify_blob_name(name, expected):
    assert classify_blob_name(name, PREFIX) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (PREFIX + "0", "0"),
        (PREFIX + "15", "15"),
        (PREFIX, None),
        (PREFIX + "checkpoint/0", None),  # current layout under the same prefix
        (PREFIX + "ownership/0", None),
        ("elsewhere/0", None),
    ],
)
def test_legacy_partition_id(name, expected):
    assert legacy_partition_id(name, PREFIX) == expected


@pytest.mark.parametrize(
    ("body", "sequence", "owner", "problem"),
    [
        (b'{"PartitionId":"0","Owner":"host-1","Token":"t","Epoch":3,"Offset":"1024","SequenceNumber":57}', 57, "host-1", None),
        ('\ufeff{"Offset":"1","SequenceNumber":5,"Owner":""}', 5, None, None),  # BOM, released lease
        (b'\xef\xbb\xbf{"Offset":"1","SequenceNumber":"9"}', 9, None, None),  # UTF-8 BOM, number as text
        (b'{"PartitionId":"0","Owner":"h","Offset":null,"SequenceNumber":0}', None, "h", None),  # created, never checkpointed
        (b'{"Offset":"0","SequenceNumber":0}', 0, None, None),  # a real checkpoint at 0
        (b'{"Offset":"5"}', None, None, "SequenceNumber missing"),
        (b'{"SequenceNumber":null,"Offset":"5"}', None, None, "SequenceNumber missing"),
        (b'{"SequenceNumber":"x"}', None, None, "SequenceNumber not a non-negative integer"),
        (b'{"SequenceNumber":-4}', None, None, "SequenceNumber negative"),
        (b"", None, None, "not JSON"),
        (b"not json", None, None, "not JSON"),
        (b"\xff\xfe", None, None, "not JSON"),
        (b"[1, 2]", None, None, "not a JSON object"),
    ],
)
def test_parse_legacy_checkpoint(body, sequence, owner, problem):
    parsed = parse_legacy_checkpoint(body)
    assert parsed.sequence_number == sequence
    assert parsed.owner == owner
    if problem is None:
        assert parsed.problem is None
    else:
        assert problem in parsed.problem


@pytest.mark.parametrize(
    ("fqns", "hub", "group", "lower", "expected"),
    [
        ("NS.servicebus.windows.net", "Orders-Hub", "$Default", True, "ns.servicebus.windows.net/orders-hub/$default/"),
        ("NS.servicebus.windows.net", "Orders-Hub", "$Default", False, "NS.servicebus.windows.net/Orders-Hub/$Default/"),
    ],
)
def test_checkpoint_prefix(fqns, hub, group, lower, expected):
    assert CheckpointLocation(fqns, hub, group).prefix(lower=lower) == expected


NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("age_seconds", "owner", "leased", "live"),
    [
        (0, "a", None, True),
        (60, "a", None, True),  # exactly at the expiry still counts
        (61, "a", None, False),
        (3600, "a", None, False),
        (0, "", None, False),  # released by its owner
        (0, None, None, False),
        (3600, "a", True, True),  # legacy: the lease decides, not the age
        (0, "a", False, False),
    ],
)
def test_ownership_liveness(age_seconds, owner, leased, live):
    record = OwnershipRecord("0", owner, NOW - timedelta(seconds=age_seconds), leased=leased)
    assert record.is_live(NOW, 60) is live


def test_summarize_ownership_counts_distinct_live_owners_and_unowned_partitions():
    fresh, stale = NOW - timedelta(seconds=5), NOW - timedelta(seconds=300)
    records = [
        OwnershipRecord("0", "a", fresh),
        OwnershipRecord("1", "a", fresh),
        OwnershipRecord("2", "b", fresh),
        OwnershipRecord("3", "c", stale),
        OwnershipRecord("9", "d", fresh),  # not a partition of the hub (any more)
    ]
    summary = summarize_ownership(records, ["0", "1", "2", "3", "4"], NOW, 60)
    assert summary.owner_by_partition == {"0": "a", "1": "a", "2": "b"}
    assert summary.live_owners == 2
    assert summary.unowned_partitions == ("3", "4")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ns.servicebus.windows.net", "ns.servicebus.windows.net"),
        ("sb://ns.servicebus.windows.net/", "ns.servicebus.windows.net"),
        (" sb://ns.servicebus.windows.net/hub ", "ns.servicebus.windows.net"),
    ],
)
def test_normalize_namespace(text, expected):
    assert normalize_namespace(text) == expected


@pytest.mark.parametrize(
    ("connection", "expected"),
    [
        ("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=x", "ns.servicebus.windows.net"),
        ("SharedAccessKeyName=k;endpoint=sb://other.servicebus.windows.net/;EntityPath=hub", "other.servicebus.windows.net"),
        ("SharedAccessKeyName=k;SharedAccessKey=x", None),
        ("", None),
    ],
)
def test_namespace_from_connection_string(connection, expected):
    if expected is None:
        with pytest.raises(ValueError, match="Endpoint"):
            namespace_from_connection_string(connection)
    else:
        assert namespace_from_connection_string(connection) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"id": "3", "beginning_sequence_number": 10, "last_enqueued_sequence_number": 99, "is_empty": False},
         ("3", 10, 99, False)),
        ({"id": 4, "beginning_sequence_number": 0, "last_enqueued_sequence_number": -1, "is_empty": True},
         ("4", 0, -1, True)),
    ],
)
def test_properties_from_sdk(raw, expected):
    p = properties_from_sdk(raw)
    assert (p.partition_id, p.beginning_sequence_number, p.last_enqueued_sequence_number, p.is_empty) == expected


def test_properties_from_sdk_names_a_missing_key():
    with pytest.raises(ValueError, match="last_enqueued_sequence_number"):
        properties_from_sdk({"id": "0", "beginning_sequence_number": 0, "is_empty": False})


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (CallTimeout("get_partition_ids timed out after 2s"), "get_partition_ids timed out after 2s"),
        (ConnectionError("refused\n  by host"), "ConnectionError: refused by host"),
        (RuntimeError(), "RuntimeError"),
    ],
)
def test_error_text(error, expected):
    assert error_text(error) == expected


def test_error_text_is_bounded():
    assert len(error_text(RuntimeError("x" * 5000))) == 500


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (datetime(2026, 3, 1, 10, 0, 59, 999_999, tzinfo=UTC), datetime(2026, 3, 1, 10, 0, 59, tzinfo=UTC)),
        (datetime(2026, 3, 1, 11, 0, 0, 1, tzinfo=UTC).astimezone(), datetime(2026, 3, 1, 11, 0, 0, tzinfo=UTC)),
    ],
)
def test_collection_time_is_utc_floored_to_the_second(moment, expected):
    floored = collection_time(moment)
    assert floored == expected
    assert floored.utcoffset() == timedelta(0)


def test_collection_time_rejects_naive_clocks():
    with pytest.raises(ValueError, match="timezone-aware"):
        collection_time(datetime(2026, 1, 1))
