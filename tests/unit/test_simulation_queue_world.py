"""The queue-shaped simulated world (scaling/simulation/queue/world.py) and the SLO mode on it
beside the seed rule."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from scaling.domain.samples import parse_sample
from scaling.simulation.queue.world import (
    QueueEngineAutoscaler,
    QueueWorld,
    compare_on_queue,
    minute_time,
    queue_sample,
    queue_target,
    simulate_queue,
)
from scaling.simulation.world.scenario import Scenario
from tests.unit.test_cli import scaling

MU = 1000.0


def run(world: QueueWorld, minutes: int) -> None:
    for _ in range(minutes):
        world.advance()


@pytest.mark.parametrize(
    ("rate", "capacity", "backlog_per_minute"),
    [pytest.param(600, 1, 0, id="keeping-up"), pytest.param(1500, 1, 500, id="one-of-two-short"),
     pytest.param(2500, 2, 500, id="two-competing")],
)
def test_competing_consumers_serve_n_times_mu_first_in_first_out(rate, capacity, backlog_per_minute) -> None:
    """The head advances ``n x mu`` messages a minute through arrivals of ``rate`` a minute, so
    after ``m`` minutes it arrived at ``n mu m / rate`` and is ``m (1 - n mu / rate)`` old."""
    world = QueueWorld(np.full(10, float(rate)), Scenario(initial_capacity=capacity, events_per_instance_per_minute=MU))
    run(world, 10)
    expected_age = max(10 * (1 - capacity * MU / rate), 0.0)
    assert world.backlog == pytest.approx(10 * backlog_per_minute)
    assert world.age_series[-1] == pytest.approx(expected_age)
    observed = world.observe()
    if backlog_per_minute:
        assert observed.oldest_enqueued_minute == pytest.approx(10 - expected_age)
    else:
        assert observed.oldest_enqueued_minute is None and observed.active_messages == 0
    assert world.result().final_backlog == pytest.approx(world.backlog)


def test_a_scale_out_serves_after_the_provisioning_delay_and_a_scale_in_at_once() -> None:
    scenario = Scenario(initial_capacity=1, provisioning_delay_minutes=2, events_per_instance_per_minute=MU)
    world = QueueWorld(np.full(12, 5000.0), scenario)
    run(world, 3)
    world.request(4)
    run(world, 4)
    world.request(2)
    run(world, 2)
    assert world.serving_series[:9].tolist() == [1, 1, 1, 1, 1, 4, 4, 2, 2]
    assert world.capacity_series[:9].tolist() == [1, 1, 1, 4, 4, 4, 4, 2, 2]
    assert world.scale_actions == 2


@pytest.mark.parametrize("lag", [0, 1, 3])
def test_azure_monitor_rates_trail_by_the_metrics_lag(lag: int) -> None:
    arrivals = np.arange(1.0, 11.0) * 100
    world = QueueWorld(arrivals, Scenario(events_per_instance_per_minute=MU), metrics_lag_minutes=lag)
    seen = []
    for _ in range(6):
        world.advance()
        seen.append(world.observe().incoming_per_minute)
    assert seen == [None] * lag + [float(arrivals[m]) for m in range(6 - lag)]


def test_the_sample_is_what_the_service_bus_source_collects() -> None:
    world = QueueWorld(np.full(5, 1500.0), Scenario(events_per_instance_per_minute=MU))
    run(world, 5)
    observation = world.observe()
    sample = queue_sample("queue-slo", observation)
    reading = sample.sources[0]
    assert (reading.kind, reading.active_messages, reading.incoming_per_minute) == ("servicebus", 2500, 1500.0)
    assert reading.oldest_age_seconds(sample.collected_at) == pytest.approx(world.age_series[-1] * 60, abs=1e-3)
    assert sample.collected_at == minute_time(5)
    assert parse_sample(sample.to_json()) == sample


def test_the_slo_mode_keeps_a_queue_within_the_slo_where_the_seed_rule_cannot() -> None:
    """A surge from 4 to 24 instances' worth: the SLO mode sizes for arrivals and age; the seed
    rule steps one instance per ten minutes at every threshold the benchmark tries."""
    scenario = Scenario()
    counts = np.asarray([100.0] * 30 + [600.0] * 40 + [150.0] * 30)
    arrivals = counts * scenario.peak_instances * scenario.events_per_instance_per_minute / counts.max()
    runs = compare_on_queue(arrivals, scenario, seed_upper=(1000, 4000, 16000))
    slo = runs.pop("slo")
    assert slo.meets_slo(scenario), slo.summary(scenario)
    assert all(seed.slo_violation_minutes > slo.slo_violation_minutes for seed in runs.values())
    assert slo.max_age_minutes < scenario.slo_minutes
    assert slo.scale_actions > 0 and slo.capacity.max() >= scenario.peak_instances


def test_the_slo_target_goes_through_the_real_engine() -> None:
    decisions = []
    scenario = Scenario()
    simulate_queue(np.full(30, 5000.0), QueueEngineAutoscaler(queue_target(scenario),
                                                              on_decision=lambda s, d: decisions.append(d)), scenario)
    assert len(decisions) == 30
    assert {"slo_at_risk", "throughput_unknown_queue_aging"} & {d.reason_code for d in decisions}


# --- the command --------------------------------------------------------------------------------------------


@pytest.fixture
def surge(tmp_path: Path) -> Path:
    counts = [100] * 20 + [600] * 30 + [150] * 20
    path = tmp_path / "surge.csv"
    path.write_text("minute,count\n" + "".join(f"{i},{c}\n" for i, c in enumerate(counts)), encoding="utf-8")
    return path


def test_simulate_source_servicebus_prints_slo_beside_the_seed_rule(tmp_path: Path, surge: Path) -> None:
    out = tmp_path / "queue.json"
    done = scaling("simulate", "--trace", str(surge), "--json", str(out), "--source", "servicebus", "--metrics-lag", "2")
    assert done.returncode == 0, done.stderr
    summary = json.loads(out.read_text(encoding="utf-8"))
    assert (summary["source"], summary["mode"]) == ("servicebus", "slo")
    assert "slo" in summary["runs"] and any(name.startswith("seed upper=") for name in summary["runs"])
    lines = done.stdout.splitlines()
    assert "Azure Monitor rates 2 min behind" in lines[0]
    assert lines[1].split()[:3] == ["run", "cost", "ratio"]
    assert {line.split()[0] for line in lines[2:]} == {"slo", "seed"}
    for row in summary["runs"].values():
        assert row["minutes"] == 70 and row["cost_ratio"] > 0


def test_simulate_source_servicebus_refuses_an_event_hubs_target(tmp_path: Path, surge: Path) -> None:
    done = scaling("simulate", "--trace", str(surge), "--json", str(tmp_path / "q.json"), "--source", "servicebus",
                   "--policy", "policy.sample.json")
    assert done.returncode == 2
    assert "needs a target whose sources are Service Bus queues" in done.stderr


# --- issue 51, point 8: every scenario knob a queue has, and the hub's outputs ----------------------------


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"slowdowns": ((5.0, 10.0, 0.5, 0.0),)}, id="slowdown"),
        pytest.param({"throughput_wave": (0.3, 20.0)}, id="throughput-wave"),
        pytest.param({"provisioning_delay_range": (3, 6)}, id="provisioning-delay-range"),
        pytest.param({"instance_failures_per_day": 200.0}, id="instance-failures"),
    ],
)
def test_the_queue_world_honours_the_scenario_knobs(changes) -> None:
    """On d0d07e7 the queue world read none of these: the same run with or without them."""
    arrivals = np.full(40, 5_500.0)
    base = Scenario(initial_capacity=4, events_per_instance_per_minute=MU)
    world, changed = QueueWorld(arrivals, base), QueueWorld(arrivals, replace(base, **changes))
    for each in (world, changed):
        run(each, 3)
        each.request(6)
        run(each, 37)
    assert not np.array_equal(world.completed_series, changed.completed_series)
    assert changed.result().final_backlog >= 0  # (messages conserved)


def test_a_failed_instance_stops_serving_until_restored() -> None:
    scenario = Scenario(initial_capacity=3, events_per_instance_per_minute=MU, instance_failures_per_day=1440.0 / 5)
    world = QueueWorld(np.full(30, 5_000.0), scenario)
    run(world, 30)
    assert (world.serving_series < 3).any() and world.serving_series.max() == 3


def test_each_scale_out_draws_its_delay_from_the_range() -> None:
    world = QueueWorld(np.full(12, 500.0), Scenario(events_per_instance_per_minute=MU, provisioning_delay_range=(1, 4)))
    for count in range(2, 10):
        world.request(count)
    delays = {ready_at for ready_at, _ in world._pending}
    assert delays <= {1, 2, 3, 4} and len(delays) > 1


def test_simulate_source_servicebus_writes_the_report_history_and_reads_start(tmp_path: Path, surge: Path) -> None:
    out, report, history = tmp_path / "queue.json", tmp_path / "report.html", tmp_path / "history"
    done = scaling("simulate", "--trace", str(surge), "--json", str(out), "--source", "servicebus", "--scenario", "realistic",
                   "--slowdown", "5,10,0.5,0", "--report", str(report), "--history-out", str(history),
                   "--start", "2026-06-01T08:00:00+00:00")
    assert done.returncode == 0, done.stderr
    summary = json.loads(out.read_text(encoding="utf-8"))
    assert summary["scenario"] == "realistic"
    assert report.exists() and "<html" in report.read_text(encoding="utf-8").lower()
    from scaling.tuning.history import read_history

    samples = read_history(history)
    assert samples and samples[0].collected_at.isoformat().startswith("2026-06-01T08:01")


@pytest.mark.parametrize("flag", [["--partitions", "8"], ["--skew", "0.1"], ["--checkpoint-delay", "30"],
                                  ["--assignment", "balanced"], ["--rebalance-pause", "20"]])
def test_simulate_source_servicebus_refuses_a_partition_knob(tmp_path: Path, surge: Path, flag: list[str]) -> None:
    done = scaling("simulate", "--trace", str(surge), "--json", str(tmp_path / "q.json"), "--source", "servicebus", *flag)
    assert done.returncode == 2
    assert flag[0] in done.stderr and "cannot apply" in done.stderr
