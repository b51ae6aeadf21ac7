"""``python -m scaling decisions`` and ``bench-storage`` against a real Azurite."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

from scaling.commands import bench_storage as bench
from scaling.domain.decisions import ScalerState
from scaling.services.evaluate import EvaluateService
from scaling.storage import cli
from scaling.storage.base import TableNames
from scaling.storage.records import StoredState
from scaling.storage.synthetic import policy_of, queue_sample, rules_target
from scaling.storage.tables import TableStorage

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def parse(module, argv):
    parser = argparse.ArgumentParser()
    module.configure(parser)
    return parser.parse_args(argv)


def test_decisions_prints_the_log_as_a_table(azurite, unique_name, capsys):
    names = TableNames.with_prefix(unique_name)
    tables = TableStorage.from_connection_string(azurite.connection_string, names)
    tables.ensure_tables()
    tables.commit(StoredState(ScalerState("orders", capacity=2)))
    clock = {"now": T0}
    service = EvaluateService(tables, policy_of(rules_target("orders", up_cooldown=600)), clock=lambda: clock["now"])
    for index, backlog in enumerate([300, 300, 300, 5000, 5000, 5000]):
        clock["now"] = T0 + timedelta(minutes=index, seconds=5)
        service.handle(queue_sample("orders", T0 + timedelta(minutes=index), backlog).to_json())
    tables.close()

    code = cli.run(parse(cli, ["--target", "orders", "--connection-string", azurite.connection_string,
                               "--table", names.state]))
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "decision log of orders (4 rows)"
    assert lines[1].split()[:4] == ["time", "(UTC)", "action", "capacity"]
    body = lines[3:]
    assert [line.split()[2] for line in body] == ["hold", "hold", "up", "hold"]
    assert "2 -> 3" in body[2] and "queue.up=" in body[2] and "backlog=" in body[2] and "rule_scale_up" in body[2] and "pending" in body[2]
    assert "too_few_samples" in body[0] and "cooldown" in body[3]

    code = cli.run(parse(cli, ["--target", "orders", "--connection-string", azurite.connection_string,
                               "--table", names.state, "--since", "2024-05-01T12:04:00Z"]))
    assert code == 0 and "(1 rows)" in capsys.readouterr().out


def test_decisions_says_so_when_nothing_is_logged(azurite, unique_name, capsys):
    names = TableNames.with_prefix(unique_name)
    TableStorage.from_connection_string(azurite.connection_string, names).ensure_tables()
    assert cli.run(parse(cli, ["--target", "nobody", "--connection-string", azurite.connection_string,
                               "--table", names.state])) == 0
    assert "no decisions logged" in capsys.readouterr().out


def test_decisions_rejects_a_bad_since(capsys):
    assert cli.run(parse(cli, ["--target", "x", "--since", "yesterday", "--connection-string", "UseDevelopmentStorage=true"])) == 2
    assert "--since" in capsys.readouterr().err


def test_bench_storage_reports_three_round_trips_per_sample(azurite, capsys, tmp_path):
    result_file = tmp_path / "bench.json"
    code = bench.run(parse(bench, ["--samples", "40", "--warmup", "5", "--partitions", "8",
                                   "--connection-string", azurite.connection_string, "--json", str(result_file)]))
    assert code == 0
    out = capsys.readouterr().out
    assert "round trips per sample:        3.0 mean, 3 max" in out
    import json

    result = json.loads(result_file.read_text())
    assert result["steady_round_trips_by_kind"] == {"insert": 1.0, "query": 1.0, "transaction": 1.0}
    assert result["duplicate_round_trips_mean"] == 1.0
    assert result["samples_per_second"] > 0
