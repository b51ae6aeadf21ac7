"""The queue benchmark's peers (scaling/simulation/queue/bench.py) at their documented rules, and
how its rows are judged against issue 51's acceptance."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.simulation.queue.bench import (
    QueueAzureMonitor,
    QueueClairvoyant,
    QueueFunctions,
    QueueJob,
    QueueKeda,
    acceptance,
    judged,
    run_job,
)
from scaling.simulation.queue.world import QueueObservation
from scaling.simulation.world.scenario import Scenario


def seen(minute: int, capacity: int, active: int, backlog: float | None = None) -> QueueObservation:
    return QueueObservation(minute=minute, capacity=capacity, active_messages=active, oldest_enqueued_minute=None,
                            incoming_per_minute=None, completed_per_minute=None,
                            true_backlog=float(active if backlog is None else backlog))


@pytest.mark.parametrize(
    ("capacity", "active", "wanted"),
    [
        pytest.param(4, 4_000, 4, id="within-tolerance"),
        pytest.param(4, 10_000, 10, id="ceil-of-count-over-target"),
        pytest.param(2, 100_000, 32, id="capped-at-the-plan"),
        pytest.param(1, 100_000, 32, id="scale-up-policy-doubles-or-adds-four-per-sync"),
    ],
)
def test_keda_servicebus_sizes_by_active_messages_per_replica(capacity, active, wanted) -> None:
    assert QueueKeda(1_000).decide(seen(10, capacity, active)) == wanted


def test_keda_holds_a_scale_down_for_its_stabilization_window() -> None:
    keda = QueueKeda(1_000)
    assert keda.decide(seen(10, 10, 10_000)) == 10
    assert keda.decide(seen(11, 10, 1_000)) == 10  # the 5-minute window still holds 10
    assert keda.decide(seen(17, 10, 1_000)) == 1


def test_functions_adds_at_most_four_per_vote_and_waits_to_scale_in() -> None:
    functions = QueueFunctions(1_000)
    assert functions.decide(seen(1, 1, 30_000)) == 25  # six votes of +4
    assert functions.decide(seen(2, 25, 100)) == 25  # within 180 s of the last scale-out
    assert functions.decide(seen(5, 25, 100)) == 1


def test_the_azure_monitor_rule_reads_the_metric_lag_minutes_late() -> None:
    """Five minutes of 1,000 per instance then a surge: at lag 2 the rule sees the surge two
    minutes after the count does."""
    for lag, fires_at in ((0, 6), (2, 8)):
        rule = QueueAzureMonitor(2_000, lag=lag)
        actions = {}
        for minute in range(1, 12):
            active = 1_000 if minute <= 5 else 50_000
            wanted = rule.decide(seen(minute, 1, active))
            if wanted is not None:
                actions[minute] = wanted
        assert min(actions) == fires_at


def test_the_clairvoyant_serves_what_comes_after_the_provisioning_delay() -> None:
    scenario = Scenario()
    arrivals = np.array([1_000.0] * 10 + [10_000.0] * 10)
    clairvoyant = QueueClairvoyant(arrivals, scenario, horizon=1)
    assert clairvoyant.decide(seen(5, 1, 0)) == 1
    assert clairvoyant.decide(seen(8, 1, 0)) == 10  # minute 10 arrives once its instances serve
    assert clairvoyant.decide(seen(12, 10, 8_000)) == 12  # and drains what waits over the SLO less a minute


def test_judging_names_the_misses_and_the_cheaper_peers() -> None:
    def row(algorithm, cost, meets, trace="family/x", lag=1):
        return {"scenario": "standard", "metrics_lag_minutes": lag, "trace": trace, "algorithm": algorithm, "knob": "k",
                "cost": cost, "meets_slo": meets, "slo_violation_minutes": 0 if meets else 9, "max_age_minutes": 1.0,
                "scale_actions": 3}
    rows = [row("project-default", 100, True), row("clairvoyant", 110, True), row("keda-servicebus", 90, True),
            row("keda-servicebus", 80, False), row("functions-target", 120, True),
            row("project-default", 100, False, "other"), row("clairvoyant", 100, True, "other"),
            row("seed", 150, True, "other")]
    verdicts = {v["trace"]: v for v in judged(rows)}
    assert verdicts["family/x"]["peers"]["keda-servicebus"]["cost"] == 90
    assert verdicts["family/x"]["vs_clairvoyant"] == pytest.approx(100 / 110, abs=1e-3)
    summary = acceptance(list(verdicts.values()))["standard lag 1"]
    assert summary["misses_where_a_peer_meets"] == ["other"]
    assert summary["not_cheaper_than_a_peer"] == ["family/x", "other"]
    assert summary["family_median_vs_clairvoyant"] == pytest.approx(0.909, abs=1e-3)


def test_a_job_runs_every_algorithm_at_every_lag() -> None:
    rows = run_job(QueueJob("family/bursts-seed1-noise02", "standard", minutes=30))
    assert {row["metrics_lag_minutes"] for row in rows} == {1, 2, 3}
    by_lag = [row for row in rows if row["metrics_lag_minutes"] == 2]
    assert {row["algorithm"] for row in by_lag} == {"project-default", "seed", "keda-servicebus", "functions-target",
                                                    "azure-monitor", "clairvoyant"}
