"""The tuning job end to end on simulated history: it recovers the per-instance throughput the
simulator used, and its recommendation is a policy file that, replayed, meets the SLO."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import numpy as np
import pytest

from scaling.domain.policy import PlanSettings, load_policy
from scaling.simulation.peers.looped import EngineAutoscaler, simulated_target
from scaling.simulation.world.loop import Scenario, load_trace, scale_trace, simulate
from scaling.simulation.world.traces import PUBLIC_TRACES
from scaling.tuning import job
from scaling.tuning.history import write_history
from scaling.tuning.synthetic import daily_wave, simulated_samples

pytestmark = pytest.mark.spark

TRACES = PUBLIC_TRACES
MU = 600.0  # events per minute per instance: what the job must find
SCENARIO = Scenario(partitions=8, events_per_instance_per_minute=MU)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    arrivals = daily_wave(1440, low=300, high=3000)
    samples, _ = simulated_samples(arrivals, SCENARIO, simulated_target(SCENARIO, name="orders"))
    directory = tmp_path_factory.mktemp("synthetic") / "history"
    write_history(samples, directory)
    return arrivals, directory


def tune(spark, history, out, *extra: str) -> int:
    parser = argparse.ArgumentParser()
    job.configure(parser)
    return job.run(parser.parse_args(["--history", str(history), "--out", str(out), *extra]), spark=spark)


def test_recovers_throughput_and_recommends_a_policy_that_meets_the_slo(spark, synthetic, tmp_path):
    arrivals, history = synthetic
    out = tmp_path / "recommended.json"
    assert tune(spark, history, out, "--report", str(tmp_path / "report"), "--grid", "small") == 0
    evidence = json.loads((tmp_path / "recommended.evidence.json").read_text())
    item = evidence["targets"]["orders"]
    assert item["throughput"]["events_per_instance_per_minute"] == pytest.approx(MU, rel=0.05)
    assert item["throughput"]["saturated_minutes"] >= 3
    assert item["history"]["partitions"] == 8
    policy = load_policy(out)  # the rule engine loads it as is
    recommended = policy.target("orders")
    assert item["recommended"]["validation"]["meets_slo"]
    # Replayed in the true world (the simulator's own arrivals and throughput), on the validation window.
    split = int(len(arrivals) * 0.6)
    replay = simulate(arrivals, EngineAutoscaler(recommended), SCENARIO, score_from=split)
    assert replay.meets_slo(SCENARIO), replay
    # Evidence: every candidate, the current policy and the recommended one, with costs and actions.
    assert len(item["candidates"]) >= 8
    for key in ("cost_ratio", "slo_violation_minutes", "scale_actions"):
        assert key in item["current"]["validation"] and key in item["recommended"]["validation"]
    report = tmp_path / "report"
    assert (report / "pareto-orders.png").read_bytes()[:4] == b"\x89PNG"
    assert "orders" in (report / "summary.md").read_text()


def test_wc98_recommendation_meets_the_slo_and_costs_no_more_than_the_default(spark, tmp_path):
    trace = TRACES / "worldcup98" / "per_minute.csv"
    scenario = Scenario()  # the standard scenario
    arrivals = scale_trace(load_trace(trace), scenario)[: 2 * 1440]
    default = simulated_target(scenario, name="wc98")
    samples, _ = simulated_samples(arrivals, scenario, default)
    write_history(samples, tmp_path / "history")
    out = tmp_path / "recommended.json"
    assert tune(spark, tmp_path / "history", out) == 0
    recommended = load_policy(out).target("wc98")
    # The history's first minute has no predecessor: the job's series starts one minute later.
    series, split = arrivals[1:], int((len(arrivals) - 1) * 0.6)
    tuned = simulate(series, EngineAutoscaler(recommended), scenario, score_from=split)
    baseline = simulate(series, EngineAutoscaler(default), scenario, score_from=split)
    assert tuned.meets_slo(scenario), tuned
    assert tuned.cost <= baseline.cost


def test_current_policy_is_the_baseline_and_other_targets_are_kept(spark, synthetic, tmp_path):
    _, history = synthetic
    current = replace(simulated_target(SCENARIO, name="orders"), bounds=replace(simulated_target(SCENARIO).bounds, max_instances=8))
    other = replace(simulated_target(SCENARIO, name="not-in-history"),
                    plan=PlanSettings(current.plan.resource_id + "-other"))  # one target per plan
    from scaling.domain.policy import Policy, policy_to_dict

    policy_file = tmp_path / "current.json"
    policy_file.write_text(json.dumps(policy_to_dict(Policy(targets=(current, other)))))
    out = tmp_path / "recommended.json"
    assert tune(spark, history, out, "--policy", str(policy_file), "--train-fraction", "0.5") == 0
    policy = load_policy(out)
    assert {t.name for t in policy.targets} == {"orders", "not-in-history"}
    assert policy.target("not-in-history") == other
    assert policy.target("orders").bounds.max_instances == 8
    evidence = json.loads((tmp_path / "recommended.evidence.json").read_text())
    assert evidence["targets"]["not-in-history"]["status"] == "unchanged"
    assert evidence["targets"]["orders"]["current"]["label"] == "current"
    assert np.isfinite(evidence["targets"]["orders"]["current"]["validation"]["cost_ratio"])
