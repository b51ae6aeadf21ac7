"""The peers' sweeps as batches (scaling/simulation/batched_peers.py) against each peer run alone
through ``simulate``: every number must agree, bit for bit, in the standard world and in a
stressed one (failures, rebalance pauses, a moving hot spot, slow consumers, drawn delays).

Any mismatch is a bug in batched_peers.py (peers.py driven by ``simulate`` is the reference)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scaling.simulation import peers
from scaling.simulation.batched_peers import (
    AzureMonitorBatch,
    ClairvoyantBatch,
    FlinkBatch,
    FunctionsTargetBatch,
    KedaHpaBatch,
    simulate_peers,
)
from scaling.simulation.benchmark import jobs_for, run_job, run_unit, work_units
from scaling.simulation.flink import FlinkSettings
from scaling.simulation.world import Scenario, simulate
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
