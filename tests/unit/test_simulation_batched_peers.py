"""The peers' sweeps as batches (scaling/simulation/peers/batched.py) against each peer run alone
through ``simulate``: every number must agree, bit for bit, in the standard world and in a
stressed one (failures, rebalance pauses, a moving hot spot, slow consumers, drawn delays).

Any mismatch is a bug in batched_peers.py (peers.py driven by ``simulate`` is the reference)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scaling.benchmarks.jobs import jobs_for, work_units
from scaling.benchmarks.runs import run_job, run_unit
from scaling.simulation.peers import looped as peers
from scaling.simulation.peers.batched import (
    AzureMonitorBatch,
    ClairvoyantBatch,
    FlinkBatch,
    FunctionsTargetBatch,
    KedaHpaBatch,
    simulate_peers,
)
from scaling.simulation.peers.flink import FlinkSettings
from scaling.simulation.world.loop import Scenario, simulate
from tests.helpers import assert_same_run, noisy_diurnal, step_surge

P = 8
THRESHOLDS = (40.0, 150.0, 700.0, 3000.0)
MONITOR = ((30.0, 1), (30.0, 4), (400.0, 1), (2500.0, 2))
HORIZONS = (1, 4)
FLINK = (FlinkSettings(), FlinkSettings(utilization_target=0.9, metrics_window_minutes=5, catch_up_minutes=5.0,
                                        scale_down_interval_minutes=0),
         FlinkSettings(utilization_target=0.5, scale_down_interval_minutes=30))

SCENARIOS = {
    "standard": Scenario(partitions=P, peak_instances=6.0),
    "stressed": Scenario.named("realistic", partitions=P, peak_instances=6.0, instance_failures_per_day=40.0,
                               hot_spot_rotation_minutes=45, throughput_wave=(0.2, 90.0),
                               slowdowns=((200.0, 60.0, 0.6, 400.0),)),
    "slow-collection": Scenario(partitions=P, peak_instances=6.0, collection_interval_minutes=2, checkpoint_delay_seconds=50.0),
}


def loop_peers(arrivals: np.ndarray, scenario: Scenario) -> list:
    return ([peers.KedaHpa(value, P) for value in THRESHOLDS] + [peers.FunctionsTargetBased(value, P) for value in THRESHOLDS]
            + [peers.AzureMonitorStyle(value, step=step, maximum=P) for value, step in MONITOR]
            + [peers.Clairvoyant(arrivals, scenario, horizon) for horizon in HORIZONS]
            + [peers.Flink(settings, P, interval_minutes=scenario.collection_interval_minutes) for settings in FLINK])


def peer_batches(arrivals: np.ndarray, scenario: Scenario) -> list:
    labels = [str(value) for value in THRESHOLDS]
    return [KedaHpaBatch(THRESHOLDS, P, labels), FunctionsTargetBatch(THRESHOLDS, P, labels),
            AzureMonitorBatch([value for value, _ in MONITOR], [step for _, step in MONITOR], [str(m) for m in MONITOR],
                              maximum=P),
            ClairvoyantBatch(arrivals, scenario, HORIZONS, [str(h) for h in HORIZONS]),
            FlinkBatch(FLINK, P, interval_minutes=scenario.collection_interval_minutes)]


@pytest.mark.parametrize("world", sorted(SCENARIOS))
@pytest.mark.parametrize("shape", ["diurnal", "surge"])
def test_every_setting_of_a_batch_runs_as_its_peer_alone(world: str, shape: str) -> None:
    scenario = SCENARIOS[world]
    arrivals = (noisy_diurnal(480, seed=4) if shape == "diurnal" else step_surge(480)) * 0.5  # an 8-partition hub: peak about 6 instances
    batched = simulate_peers(arrivals, peer_batches(arrivals, scenario), scenario, score_from=60)
    assert len(batched) == len(loop_peers(arrivals, scenario))
    for autoscaler, result in zip(loop_peers(arrivals, scenario), batched, strict=True):
        alone = simulate(arrivals, autoscaler, scenario, score_from=60)
        assert_same_run(alone, result, f"{result.algorithm} {result.knob}")
    assert [result.algorithm for result in batched] == (["keda-hpa"] * 4 + ["functions-target"] * 4 + ["azure-monitor"] * 4
                                                         + ["clairvoyant"] * 2 + ["flink"] * 3)
    assert sum(result.scale_actions for result in batched) > 50  # the settings act, and differently
    assert len({tuple(result.capacity) for result in batched}) > 8


@pytest.fixture(scope="module")
def short_trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("traces") / "short.csv"
    counts = noisy_diurnal(300, seed=8)
    path.write_text("minute,count\n" + "".join(f"{i},{c:.0f}\n" for i, c in enumerate(counts)), encoding="utf-8")
    return path


@pytest.mark.parametrize("scenario", ["standard", "realistic"])
def test_the_benchmarks_work_units_give_every_row_run_job_gives(short_trace: Path, scenario: str) -> None:
    jobs = [job for job in jobs_for(str(short_trace), scenario) if job.algorithm not in ("project-tuned", "project-default")]
    units = work_units(jobs, {str(short_trace): 300})
    assert sorted(len(unit) for unit in units) == [9, 99]  # the seed rule's sweep; every other peer's
    batched = {(row["algorithm"], row["knob"]): {**row, "seconds": 0} for unit in units for row in run_unit(unit)}
    assert batched == {(job.algorithm, job.knob): {**run_job(job), "seconds": 0} for job in jobs}


@pytest.mark.parametrize("world", ["standard", "stressed", "hot"])
def test_settings_on_different_traces_in_one_batch_run_as_each_alone(world: str) -> None:
    """The benchmark runs family members of one length as columns of one step (``trace_of``):
    each setting on its own trace gives, bit for bit, what it gives alone on that trace (in
    ``hot`` too, whose servable partitions differ by trace)."""
    scenario = SCENARIOS[world] if world in SCENARIOS else Scenario.named("hot", partitions=P, peak_instances=6.0)
    # the third so quiet that in ``hot`` each of its partitions stays within one instance
    traces = [noisy_diurnal(360, seed=4) * 0.5, step_surge(360) * 0.5, noisy_diurnal(360, seed=11) * 0.05]
    table = np.column_stack(traces)
    thresholds = [value for _ in traces for value in THRESHOLDS]
    labels = [str(value) for value in thresholds]
    per_trace = [index for index in range(len(traces)) for _ in THRESHOLDS]
    horizons = [horizon for _ in traces for horizon in HORIZONS]
    horizon_trace = [index for index in range(len(traces)) for _ in HORIZONS]
    flink_trace = [index for index in range(len(traces)) for _ in FLINK]
    batches = [KedaHpaBatch(thresholds, P, labels), FunctionsTargetBatch(thresholds, P, labels),
               ClairvoyantBatch(table, scenario, horizons, [str(h) for h in horizons], trace_of=horizon_trace),
               FlinkBatch([settings for _ in traces for settings in FLINK], P, interval_minutes=scenario.collection_interval_minutes)]
    trace_of = per_trace + per_trace + horizon_trace + flink_trace
    batched = simulate_peers(table, batches, scenario, score_from=60, trace_of=trace_of)
    alone = [(arrivals, autoscaler) for arrivals in traces for autoscaler in [peers.KedaHpa(value, P) for value in THRESHOLDS]]
    alone += [(arrivals, peers.FunctionsTargetBased(value, P)) for arrivals in traces for value in THRESHOLDS]
    alone += [(arrivals, peers.Clairvoyant(arrivals, scenario, horizon)) for arrivals in traces for horizon in HORIZONS]
    alone += [(arrivals, peers.Flink(settings, P, interval_minutes=scenario.collection_interval_minutes))
              for arrivals in traces for settings in FLINK]
    assert len(batched) == len(alone)
    for (arrivals, autoscaler), result in zip(alone, batched, strict=True):
        single = simulate(arrivals, autoscaler, scenario, score_from=60)
        assert_same_run(single, result, f"{result.algorithm} {result.knob}")
        assert (result.servable_partitions_violation_minutes, result.avoidable_violation_minutes) == (
            single.servable_partitions_violation_minutes, single.avoidable_violation_minutes)
    # the traces differ, and each column saw its own
    assert len({tuple(result.arrivals) for result in batched}) == len(traces)
    if world == "hot":  # judged by the servable partitions only where a trace has one beyond an instance:
        # in these 360 minutes the step surge's, not the diurnal half-load's nor the quiet one's
        judged = [result.servable_partitions_violation_minutes is not None for result in batched]
        assert judged == [index == 1 for index in trace_of]


@pytest.fixture(scope="module")
def short_traces(tmp_path_factory) -> list[str]:
    """Two traces of one length and one longer: the first two share work units."""
    folder = tmp_path_factory.mktemp("members")
    paths = []
    for name, counts in (("a", noisy_diurnal(240, seed=8)), ("b", step_surge(240) * 0.6), ("c", noisy_diurnal(260, seed=3))):
        path = folder / f"{name}.csv"
        path.write_text("minute,count\n" + "".join(f"{i},{c:.0f}\n" for i, c in enumerate(counts)), encoding="utf-8")
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("scenario", ["standard", "realistic"])
def test_traces_of_one_length_share_work_units_and_give_every_row_run_job_gives(short_traces: list[str], scenario: str) -> None:
    jobs = []
    for trace in short_traces:  # the project's rows and the first two settings of every peer (the seed rule's too)
        for job in jobs_for(trace, scenario):
            if (job.algorithm != "project-tuned" or scenario == "standard") and sum(
                    other.algorithm == job.algorithm and other.trace == trace for other in jobs) < 2:
                jobs.append(job)
    units = work_units(jobs, {trace: 240 if trace[-5] in "ab" else 260 for trace in short_traces})
    shared = [unit for unit in units if len({job.trace for job in unit}) > 1]
    # the peers, the seed rule, and the project's (the tuned one tuned with the default beside it in standard)
    assert sorted(tuple(sorted({job.algorithm for job in unit})) for unit in shared) == [
        ("azure-monitor", "clairvoyant", "flink", "functions-target", "keda-hpa"),
        ("project-default",) if scenario == "realistic" else ("project-default", "project-tuned"), ("seed",)]
    assert all({job.trace for job in unit} == set(short_traces[:2]) for unit in shared)  # the longer one runs alone
    batched = {(row["trace"], row["algorithm"], row["knob"]): {**row, "seconds": 0} for unit in shared for row in run_unit(unit)}
    alone = {(row["trace"], row["algorithm"], row["knob"]): {**row, "seconds": 0}
             for row in (run_job(job) for job in jobs if job.trace in short_traces[:2])}
    assert batched == alone
