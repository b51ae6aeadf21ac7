"""export-history on a real Azurite: history rows written by the storage layer's own writer
(``TableStorage.add_sample``), read back by a paged RowKey range query, de-duplicated and
written as Parquet that ``read_history`` returns unchanged."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

import pytest
from azure.data.tables import TableClient

from scaling.domain.samples import sample_id_for
from scaling.storage.base import TableNames, history_row_key, partition_key
from scaling.storage.synthetic import hub_sample, queue_sample
from scaling.storage.tables import TableStorage
from scaling.tuning import export
from scaling.tuning.history import read_history

T0 = datetime(2024, 5, 1, 23, 50, tzinfo=UTC)


def minute(index: int) -> datetime:
    return T0 + timedelta(minutes=index)


@pytest.fixture
def tables(azurite, unique_name):
    storage = TableStorage.from_connection_string(azurite.connection_string, TableNames.with_prefix(unique_name))
    storage.ensure_tables()
    yield storage
    storage.close()


def run_export(connection_string: str, table: str, out, *extra: str) -> int:
    parser = argparse.ArgumentParser()
    export.configure(parser)
    args = parser.parse_args(["--connection-string", connection_string, "--table", table, "--out", str(out), *extra])
    return export.run(args)


def test_export_reads_pages_in_the_time_range_and_round_trips(azurite, tables, tmp_path, capsys):
    written = [hub_sample("orders", minute(i), [i, 2 * i, 3], capacity=1 + i % 3) for i in range(25)]
    written += [queue_sample("billing", minute(i), 40 + i, capacity=2) for i in range(25)]
    for sample in written:
        assert tables.add_sample(sample)
    out = tmp_path / "history"
    code = run_export(azurite.connection_string, tables.names.history, out,
                      "--since", minute(5).isoformat(), "--until", minute(20).isoformat(), "--page-size", "7")
    assert code == 0
    printed = capsys.readouterr().out
    assert "exported 30 samples" in printed
    back = read_history(out)
    expected = sorted((s for s in written if minute(5) <= s.collected_at < minute(20)), key=lambda s: (s.target, s.collected_at))
    assert [(s.target, s.collected_at, s.sample_id, s.capacity, s.backlog) for s in back] == \
           [(s.target, s.collected_at, s.sample_id, s.capacity, s.backlog) for s in expected]
    first_back = next(s for s in back if s.target == "orders")
    first_written = next(s for s in expected if s.target == "orders")

    def readings(sample):  # owners are not exported
        return [(p.partition_id, p.beginning, p.last_enqueued, p.checkpoint, p.backlog) for p in sample.sources[0].partitions]

    assert readings(first_back) == readings(first_written)
    # Partitioned by target and UTC date (the range crosses midnight).
    assert sorted(p.name for p in (out / "target=orders").iterdir()) == ["date=2024-05-01", "date=2024-05-02"]


def test_export_one_target_skips_unreadable_rows_and_duplicates(azurite, tables, tmp_path, capsys):
    for i in range(6):
        tables.add_sample(hub_sample("orders", minute(i), [i, 1], capacity=2))
        tables.add_sample(hub_sample("other", minute(i), [i], capacity=1))
    # A malformed row in the same layout, and a second copy of a sample under another RowKey
    # (a late write with a different clock rounding): both must neither crash nor double-count.
    client = TableClient.from_connection_string(azurite.connection_string, table_name=tables.names.history)
    bad_time = minute(3) + timedelta(seconds=30)
    client.create_entity({"PartitionKey": partition_key("orders"), "RowKey": f"{int(bad_time.timestamp()):012d}-broken",
                          "sample_id": "broken", "sample": "{not json"})
    copy = hub_sample("orders", minute(2), [2, 1], capacity=2)
    client.create_entity({"PartitionKey": partition_key("orders"), "RowKey": history_row_key(copy) + "-copy",
                          "sample_id": copy.sample_id, "sample": copy.to_json()})
    client.close()
    out = tmp_path / "orders"
    code = run_export(azurite.connection_string, tables.names.history, out, "--target", "orders",
                      "--since", minute(0).isoformat(), "--until", minute(10).isoformat())
    captured = capsys.readouterr()
    assert code == 0
    assert "exported 6 samples" in captured.out and "1 duplicates dropped" in captured.out
    assert "unreadable history row skipped" in captured.err and "broken" in captured.err
    back = read_history(out)
    assert {s.target for s in back} == {"orders"}
    assert [s.sample_id for s in back] == [sample_id_for("orders", minute(i)) for i in range(6)]


def test_export_of_an_empty_range_or_a_missing_table_says_so(azurite, tables, tmp_path, capsys):
    code = run_export(azurite.connection_string, tables.names.history, tmp_path / "none",
                      "--since", "2020-01-01T00:00:00Z", "--until", "2020-01-02T00:00:00Z")
    assert code == 1
    assert "no history between" in capsys.readouterr().err
    code = run_export(azurite.connection_string, "tnosuchtable", tmp_path / "none",
                      "--since", "2020-01-01T00:00:00Z", "--until", "2020-01-02T00:00:00Z")
    assert code == 2
    assert "does not exist" in capsys.readouterr().err
    code = run_export(azurite.connection_string, tables.names.history, tmp_path / "none",
                      "--since", "2020-01-02T00:00:00Z", "--until", "2020-01-01T00:00:00Z")
    assert code == 2
