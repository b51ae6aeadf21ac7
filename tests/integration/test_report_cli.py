"""``python -m scaling report`` against a real Azurite: the page is built from the history and
decision tables, bounded by --since/--until."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from scaling.domain.decisions import ScalerState
from scaling.domain.samples import MetricSample, PartitionReading, SourceReading
from scaling.report import cli
from scaling.storage.base import TableNames
from scaling.storage.records import DecisionRecord, StoredState
from scaling.storage.tables import TableStorage

T0 = datetime(2026, 3, 1, 15, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    return parser.parse_args(argv)


def sample(minute: int) -> MetricSample:
    partitions = tuple(PartitionReading.measure(str(i), 0, 60 * minute + 59, 60 * minute) for i in range(4))
    return MetricSample(target="orders", collected_at=T0 + timedelta(minutes=minute), capacity=2 + minute // 10,
                        sources=(SourceReading("hub", "eventhub", partitions=partitions),))


def record(minute: int, acts: bool, reason: str, after: int) -> DecisionRecord:
    return DecisionRecord(target="orders", decision_id=f"d{minute:03d}", evaluated_at=T0 + timedelta(minutes=minute, seconds=5),
                          trigger_sample_id=f"s{minute}", acts=acts, direction="up" if acts else "none",
                          reason_code=reason, reasons=(f"reason at minute {minute}",),
                          metrics={"backlog": 236, "throughput_per_instance": 4.0}, capacity_before=after - 1 if acts else after,
                          capacity_after=after)


def fill(connection_string: str, names: TableNames) -> None:
    tables = TableStorage.from_connection_string(connection_string, names)
    tables.ensure_tables()
    for minute in range(30):
        tables.add_sample(sample(minute))
    decisions = [record(1, False, "too_few_samples", 2), record(9, True, "slo_at_risk", 3),
                 record(19, True, "slo_at_risk", 4), record(25, False, "cooldown", 4)]
    tables.commit(StoredState(ScalerState("orders", capacity=4)), decisions)
    tables.close()


def test_report_writes_the_page_from_the_tables(azurite, unique_name, tmp_path, capsys):
    names = TableNames.with_prefix(unique_name)
    fill(azurite.connection_string, names)
    out = tmp_path / "report.html"
    code = cli.run(parse(["--target", "orders", "--connection-string", azurite.connection_string,
                          "--history-table", names.history, "--state-table", names.state,
                          "--since", "2026-03-01T14:00:00Z", "--until", "2026-03-01T16:00:00Z",
                          "--slo-seconds", "240", "--out", str(out)]))
    assert code == 0
    assert capsys.readouterr().out.strip().endswith(f"30 samples, 4 decisions (2 acting) -> {out}")
    page = out.read_text(encoding="utf-8")
    assert re.findall(r'data-reason="([^"]+)" data-acts="(true|false)"', page) == [
        ("too_few_samples", "false"), ("slo_at_risk", "true"), ("slo_at_risk", "true"), ("cooldown", "false")]
    assert "30 samples" in page and "SLO: oldest event under 240 s" in page and "reason at minute 19" in page


def test_since_and_until_bound_samples_and_decisions(azurite, unique_name, tmp_path, capsys):
    names = TableNames.with_prefix(unique_name)
    fill(azurite.connection_string, names)
    out = tmp_path / "window.html"
    code = cli.run(parse(["--target", "orders", "--connection-string", azurite.connection_string,
                          "--history-table", names.history, "--state-table", names.state,
                          "--since", "2026-03-01T15:05:00Z", "--until", "2026-03-01T15:20:00Z", "--out", str(out)]))
    assert code == 0
    assert "16 samples, 2 decisions (2 acting)" in capsys.readouterr().out  # minutes 5..20; decisions at 9 and 19
    assert "SLO:" not in out.read_text(encoding="utf-8")  # no policy in the environment, no --slo-seconds


def test_report_explains_bad_times(azurite, unique_name, tmp_path, capsys):
    argv = ["--target", "orders", "--connection-string", azurite.connection_string, "--out", str(tmp_path / "x.html")]
    assert cli.run(parse([*argv, "--since", "yesterday"])) == 2
    assert "--since" in capsys.readouterr().err
    assert cli.run(parse([*argv, "--since", "2026-03-02T00:00:00Z", "--until", "2026-03-01T00:00:00Z"])) == 2
    assert not (tmp_path / "x.html").exists()


def test_a_target_without_rows_gets_an_empty_page(azurite, unique_name, tmp_path, capsys):
    names = TableNames.with_prefix(unique_name)
    fill(azurite.connection_string, names)
    out = tmp_path / "nobody.html"
    assert cli.run(parse(["--target", "nobody", "--connection-string", azurite.connection_string,
                          "--history-table", names.history, "--state-table", names.state, "--out", str(out)])) == 0
    assert "0 samples, 0 decisions (0 acting)" in capsys.readouterr().out
    assert "no samples" in out.read_text(encoding="utf-8")


def test_the_slo_line_comes_from_the_apps_policy():
    environ = {"AUTOSCALER_POLICY_FILE": str(ROOT / "policy.sample.json")}
    assert cli.policy_slo_seconds(environ, "orders-consumers") == 300.0
    assert cli.policy_slo_seconds(environ, "billing-workers") is None  # rules mode: no SLO
    assert cli.policy_slo_seconds(environ, "nobody") is None
    assert cli.policy_slo_seconds({}, "orders-consumers") is None


def test_the_page_shows_a_pause_in_force_who_asked_and_when_it_ends(azurite, unique_name, tmp_path, capsys):
    from scaling.services.pause import PauseService
    from scaling.storage.records import utc_now

    names = TableNames.with_prefix(unique_name)
    fill(azurite.connection_string, names)
    tables = TableStorage.from_connection_string(azurite.connection_string, names)
    until = utc_now() + timedelta(hours=2)
    PauseService(tables).pause("orders", reason="INC-9 <failover>", requested_by="judy", until=until)
    tables.close()
    out = tmp_path / "report.html"
    argv = ["--target", "orders", "--connection-string", azurite.connection_string, "--history-table", names.history,
            "--state-table", names.state, "--out", str(out)]
    assert cli.run(parse(argv)) == 0
    page = out.read_text(encoding="utf-8")
    [shown] = re.findall(r'<p class="pause" id="pause">(.*?)</p>', page)
    assert "paused by judy until" in shown and until.strftime("%Y-%m-%dT%H:%M") in shown
    assert "INC-9 &lt;failover&gt;" in shown  # escaped
    assert 'data-reason="paused"' in page  # the operator's row in the decision log
