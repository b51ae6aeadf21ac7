"""Bad history: clear messages, no crash, no silent garbage."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pytest

from scaling.domain.policy import Policy, policy_to_dict, with_slo
from scaling.domain.samples import MetricSample, PartitionReading, SourceReading
from scaling.simulation.peers.looped import observation_sample, simulated_target
from scaling.simulation.world.loop import Scenario, simulate
from scaling.tuning import job
from scaling.tuning.history import write_history
from scaling.tuning.recovery import recover_histories
from scaling.tuning.synthetic import daily_wave, simulated_samples
from scaling.tuning.transforms import read_history_df

pytestmark = pytest.mark.spark

SCENARIO = Scenario(partitions=8, events_per_instance_per_minute=600.0)


def tune(spark, history, out, *extra: str) -> int:
    parser = argparse.ArgumentParser()
    job.configure(parser)
    return job.run(parser.parse_args(["--history", str(history), "--out", str(out), *extra]), spark=spark)


@pytest.fixture(scope="module")
def samples():
    arrivals = daily_wave(720, low=300, high=3000, period=720)
    found, _ = simulated_samples(arrivals, SCENARIO, simulated_target(SCENARIO, name="orders"))
    return found


def recovered(spark, directory):
    histories, messages = recover_histories(spark, read_history_df(spark, str(directory)), steady_samples=4)
    return {h.target: h for h in histories}, messages


def test_empty_or_missing_history_is_an_error_that_says_so(spark, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert tune(spark, tmp_path / "empty", tmp_path / "out.json") == 2
    assert "holds no Parquet files" in capsys.readouterr().err
    assert tune(spark, tmp_path / "missing", tmp_path / "out.json") == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


def test_never_saturated_target_is_skipped_unless_a_prior_is_configured(spark, tmp_path, capsys):
    # Eight instances all along, for arrivals that never need more than five: throughput unknown.
    scenario = replace(SCENARIO, initial_capacity=8)
    arrivals = daily_wave(960, low=300, high=2500, period=960)  # the shortest history the job tunes: 900 minutes
    found = []
    simulate(arrivals, type("Fixed", (), {"decide": lambda self, o: None})(), scenario,
             on_minute=lambda minute, observation, wanted: found.append(observation_sample("steady", observation)))
    write_history(found, tmp_path / "history")
    out = tmp_path / "recommended.json"
    assert tune(spark, tmp_path / "history", out, "--grid", "small") == 1
    captured = capsys.readouterr()
    assert "per-instance throughput is not identifiable" in captured.err and "never saturated" in captured.err
    assert not out.exists()
    evidence = json.loads((tmp_path / "recommended.evidence.json").read_text())
    assert evidence["targets"]["steady"]["status"] == "skipped"
    assert evidence["targets"]["steady"]["throughput"]["saturated_minutes"] == 0

    prior = with_slo(simulated_target(SCENARIO, name="steady"), events_per_instance_per_second=10.0)
    (tmp_path / "policy.json").write_text(json.dumps(policy_to_dict(Policy(targets=(prior,)))))
    assert tune(spark, tmp_path / "history", out, "--policy", str(tmp_path / "policy.json"), "--grid", "small") == 0
    evidence = json.loads((tmp_path / "recommended.evidence.json").read_text())
    item = evidence["targets"]["steady"]
    assert item["throughput"]["events_per_instance_per_minute"] == 600.0
    assert any("using the configured prior" in message for message in item["messages"])


def test_duplicates_gaps_and_partition_changes_are_reported(spark, samples, tmp_path):
    clean, _ = recovered(spark, _write(tmp_path / "clean", samples))
    base = clean["orders"]

    twice, _ = recovered(spark, _write(tmp_path / "twice", samples, samples))
    assert any("duplicated history rows ignored" in note for note in twice["orders"].messages)
    assert twice["orders"].throughput_per_minute == base.throughput_per_minute
    assert list(twice["orders"].arrivals) == list(base.arrivals)

    gappy, _ = recovered(spark, _write(tmp_path / "gaps", [s for i, s in enumerate(samples) if not 300 <= i < 330]))
    history = gappy["orders"]
    assert any("1 gaps in the history (30 minutes missing)" in note for note in history.messages)
    assert len(history.arrivals) == len(base.arrivals)
    assert history.arrivals.sum() == pytest.approx(base.arrivals.sum(), rel=1e-9)

    grown = [_with_new_partitions(s, i - 400) if i >= 400 else s for i, s in enumerate(samples)]
    changed, _ = recovered(spark, _write(tmp_path / "grown", grown))
    history = changed["orders"]
    assert history.partitions == 10
    assert any("partition count changed 1 times (8, 10)" in note for note in history.messages)


def test_service_bus_only_target_is_skipped_with_a_reason(spark, tmp_path):
    queue = [MetricSample("billing", samples_time(i), 2, (SourceReading("q", "servicebus", active_messages=i),)) for i in range(10)]
    found, messages = recovered(spark, _write(tmp_path / "sb", queue))
    assert "billing" not in found
    assert any("billing: skipped: no Event Hubs partition readings" in message for message in messages)


def samples_time(index: int):
    from datetime import UTC, datetime, timedelta

    return datetime(2024, 1, 1, tzinfo=UTC) + timedelta(minutes=index)


def _write(directory, *groups):
    for group in groups:
        write_history(group, directory)
    return directory


def _with_new_partitions(sample: MetricSample, age: int) -> MetricSample:
    source = sample.sources[0]
    extra = tuple(PartitionReading.measure(str(8 + k), 0, 10 * (age + 1), 10 * age) for k in range(2))
    return replace(sample, sources=(replace(source, partitions=source.partitions + extra),))


@pytest.mark.parametrize(("option", "value", "message"), [("--folds", "0", "--folds must be between 1 and 10"),
                                                          ("--folds", "11", "--folds must be between 1 and 10"),
                                                          ("--train-fraction", "0.99", "--train-fraction must be between")])
def test_split_options_out_of_range_fail_naming_the_option(spark, tmp_path, capsys, option, value, message):
    assert tune(spark, tmp_path / "missing", tmp_path / "out.json", option, value) == 2
    assert message in capsys.readouterr().err
