"""The tuning job's choice (scaling/tuning/choice.py) is the robust selection the benchmark's
project-tuned runs: the job's executor tasks (``run_chunk``, here without Spark), its stress works
and ``choose`` give the very ``Selection`` that ``robust.tune`` gives in-process, and the
benchmark's project-tuned row is what ``robust.tune`` chose."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scaling.simulation.drivers.candidates import Candidate, all_candidates, slo_candidates
from scaling.simulation.peers.looped import simulated_target
from scaling.simulation.world.loop import Scenario, load_trace, scale_trace
from scaling.tuning import robust, stress_replays
from scaling.tuning.choice import choose, next_stress_round, selection_evidence, stress_works
from scaling.tuning.folds import blocked_folds
from scaling.tuning.tasks import CURRENT, TargetWork, run_chunk

SCENARIO = Scenario(partitions=8, peak_instances=4)  # the surge replay grows it to 6


def history() -> np.ndarray:
    minutes = np.arange(900)
    wave = 300 + 700 * 0.5 * (1 - np.cos(2 * np.pi * minutes / 300))
    return scale_trace(wave + np.where((minutes > 500) & (minutes < 540), 400.0, 0.0), SCENARIO)


def first_pass(arrivals: np.ndarray, candidates: tuple) -> tuple[TargetWork, list[dict]]:
    """The job's work for one target over 3 folds after 40% of training, and its first pass's rows."""
    folds = blocked_folds(len(arrivals), 3, 0.4)
    work = TargetWork("orders", arrivals, SCENARIO, folds.train_ends[0], candidates, folds.train_ends)
    return work, run_chunk(("orders", list(range(len(candidates)))), {"orders": work})


def test_the_job_chooses_exactly_what_robust_tune_chooses() -> None:
    arrivals = history()
    base = simulated_target(SCENARIO, name="orders")
    candidates = (Candidate(CURRENT, base), *all_candidates(base, "small"))
    # What the executors would return: the first pass, then the stress works, round by round.
    work, rows = first_pass(arrivals, candidates)
    stress_rows: list[dict] = []
    rounds = 0
    while batch := next_stress_round(work, rows, stress_rows):
        replays = stress_works(work, batch)
        assert {replay for _, replay in replays} == set(stress_replays.STRESS_SETS)
        stress_rows += [row for key, replay in replays.items()
                        for row in run_chunk((key, list(range(len(replay.candidates)))), replays)]
        rounds += 1
    assert 1 <= rounds <= 2
    job = choose(work, rows, stress_rows)
    alone = robust.tune(arrivals, SCENARIO, candidates, current_index=0, folds=3, first_train_fraction=0.4)
    assert (job.index, job.kept_current, job.reason, job.safer) == (alone.index, alone.kept_current, alone.reason, alone.safer)
    assert job.failures == alone.failures
    assert job.risk == alone.risk and job.current_risk == alone.current_risk
    assert job.regime == alone.regime
    # The job's rows hold the numbers the selection read: per fold, and over all validation blocks.
    assert [len(row["folds"]) for row in rows] == [3] * len(candidates)
    assert all(row["replay"] in stress_replays.STRESS_SETS for row in stress_rows)
    assert_report_says_cost_risk_and_regime(work, job)


def assert_report_says_cost_risk_and_regime(work: TargetWork, selection: robust.Selection) -> None:
    """The summary's table per target: expected cost and SLO risk as min / median / max across
    folds, the stress replays' worst fold, and the regime check."""
    from scaling.tuning.report import summary_markdown

    evidence = {"history": "h", "grid": "small", "train_fraction": 0.4, "folds": 3, "messages": [],
                "simulation": {"candidate_policy_minutes": 1, "seconds": 1.0, "parallelism": 2, "minutes_per_second": 1.0},
                "targets": {"orders": {"status": "kept current" if selection.kept_current else "tuned", "messages": [],
                                       "selection": selection_evidence(work, selection)}}}
    text = summary_markdown(evidence)
    cost = selection.risk["cost_ratio"]
    assert f"{cost['min']:g} / {cost['median']:g} / {cost['max']:g}" in text
    for name, replay in selection.risk["stress"].items():
        assert f"{name}: {replay['worst_p99_age_minutes']:g} / {replay['worst_max_age_minutes']:g}" in text
    assert "Regime change (validation traffic unlike its training window): " in text
    assert "p99 <= 0.9 x SLO and max <= 0.95 x SLO" in text


def test_the_benchmark_project_tuned_row_is_robust_tune_s_choice(tmp_path: Path) -> None:
    from scaling.benchmarks.jobs import TRAIN_FRACTION, TUNING_GRID, Job
    from scaling.benchmarks.runs import run_job

    counts = np.concatenate([np.full(200, 200.0), np.linspace(200, 1000, 200), np.full(200, 300.0)])
    trace = tmp_path / "small.csv"
    trace.write_text("minute,count\n" + "".join(f"{i},{c:.0f}\n" for i, c in enumerate(counts)), encoding="utf-8")
    row = run_job(Job(str(trace), "project-tuned", "tuned on first 30%"))
    scenario = Scenario()
    arrivals = scale_trace(load_trace(trace), scenario)
    base = simulated_target(scenario, name="tuned")
    candidates = [Candidate("default (kept)", base), *all_candidates(base, TUNING_GRID)]
    chosen = robust.tune(arrivals[: int(len(arrivals) * TRAIN_FRACTION)], scenario, candidates)
    assert row["knob"] == candidates[chosen.index].label
    assert row["tuning"] == {"kept_default": chosen.kept_current, "reason": chosen.reason}


def test_stress_works_replay_the_given_candidates_from_a_warm_up_before_validation() -> None:
    arrivals = history()
    base = simulated_target(SCENARIO, name="orders")
    candidates = (Candidate(CURRENT, base), *slo_candidates(base, "small"))
    work, rows = first_pass(arrivals, candidates)
    folds = blocked_folds(len(arrivals), 3, 0.4)
    listed = robust.shortlist(sorted(rows, key=lambda row: row["index"]), 0, SCENARIO.slo_minutes)
    first = next_stress_round(work, rows, [])
    assert first == listed[:robust.STRESS_ROUND + 1] and first[0] == 0
    start = max(folds.train_ends[0] - stress_replays.STRESS_WARMUP_MINUTES, 0)
    for (target, name), replay in stress_works(work, first).items():
        assert target == "orders" and replay.replay == name
        assert replay.candidates == tuple(candidates[index] for index in first)
        assert len(replay.arrivals) == len(arrivals) - start
        assert replay.folds.validation == tuple((a - start, b - start) for a, b in folds.validation)


def test_the_grid_help_counts_what_the_grid_gives() -> None:
    """The job's ``--grid`` help names the candidates the large grid really gives a target (it
    said 96 after the grid had grown to 142)."""
    import argparse

    from scaling.tuning import job
    from scaling.tuning.planning import default_target

    parser = argparse.ArgumentParser()
    job.configure(parser)
    text = " ".join(next(action.help for action in parser._actions if "--grid" in action.option_strings).split())
    total = len(all_candidates(default_target("target", 32), "large"))
    assert f"{total} in all" in text and total == 142
