"""The stress command (scaling/benchmarks/stress.py): its cells, how each cell's goals are
judged against the clairvoyant, and one real run on a tiny trace (the simulated world, no Azure)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scaling.__main__ import main
from scaling.benchmarks.jobs import Job
from scaling.benchmarks.runs import run_job
from scaling.benchmarks.stress import Cell, cells, outcomes, table
from scaling.simulation.world.scenario import Scenario


def test_cells_are_the_baseline_each_skew_under_each_assignment_and_realistic_per_seed() -> None:
    chosen = cells((0.02, 0.05), ("modulo", "balanced"), (1, 2))
    assert [cell.label for cell in chosen] == [
        "standard",
        "standard skew=0.02 assignment=modulo", "standard skew=0.02 assignment=balanced",
        "standard skew=0.05 assignment=modulo", "standard skew=0.05 assignment=balanced",
        "realistic seed=1", "realistic seed=2",
    ]
    worlds = [Scenario.named(cell.scenario, **dict(cell.overrides)) for cell in chosen]
    assert [(world.skew, world.assignment) for world in worlds[1:5]] == [
        (0.02, "modulo"), (0.02, "balanced"), (0.05, "modulo"), (0.05, "balanced")]
    assert [world.seed for world in worlds[5:]] == [1, 2]
    assert worlds[5].skew == Scenario.named("realistic").skew  # the named set's own values stay
    assert [cell.label for cell in cells((0.02, 0.02), ("modulo",), (1, 1))] == [
        "standard", "standard skew=0.02 assignment=modulo", "realistic seed=1"]


def _row(algorithm: str, cost: float, *, violations: int = 0, actions: int = 10, minutes: int = 1000, knob: str = "",
         cell: str = "standard", scenario: str = "standard", **extra) -> dict:
    return {"cell": cell, "scenario": scenario, "trace": "t/a.csv", "algorithm": algorithm, "knob": knob or f"c={cost}",
            "cost_ratio": cost, "slo_violation_minutes": violations, "minutes": minutes, "scale_actions": actions,
            "max_age_minutes": 4.0, "meets_slo": violations <= minutes // 1000, **extra}


@pytest.mark.parametrize(
    ("rows", "versus", "goals"),
    [
        pytest.param([_row("project-default", 1.30, actions=33), _row("clairvoyant", 1.30, knob="h=3")],
                     1.0, {"slo": True, "clairvoyant": True, "actions": True}, id="equal-to-clairvoyant-and-30.3-min-per-action"),
        pytest.param([_row("project-default", 1.31, actions=34), _row("clairvoyant", 1.30)],
                     1.31 / 1.30, {"slo": True, "clairvoyant": False, "actions": False}, id="dearer-and-29.4-min-per-action"),
        pytest.param([_row("project-default", 1.20), _row("clairvoyant", 1.10, violations=5), _row("clairvoyant", 1.25)],
                     1.20 / 1.25, {"slo": True, "clairvoyant": True, "actions": True}, id="a-violating-horizon-is-no-reference"),
        pytest.param([_row("project-default", 1.20, violations=2), _row("clairvoyant", 1.10, violations=5)],
                     None, {"slo": False, "clairvoyant": None, "actions": True}, id="no-horizon-meets-the-slo"),
        pytest.param([_row("project-default", 1.20, actions=0)], None, {"slo": True, "clairvoyant": None, "actions": True},
                     id="no-action-at-all"),
        pytest.param([_row("project-default", 1.20, violations=9, scenario="hot", avoidable_violation_minutes=1)],
                     None, {"slo": True, "clairvoyant": None, "actions": True}, id="hot-judged-on-its-avoidable-minutes"),
        pytest.param([_row("project-default", 1.20, violations=9, scenario="hot", servable_partitions_meet_slo=True,
                           avoidable_violation_minutes=2)],
                     None, {"slo": False, "clairvoyant": None, "actions": True}, id="hot-servable-partitions-alone-do-not-meet"),
        pytest.param([_row("project-default", 1.20, violations=9, cell="standard skew=0.02", judge="avoidable",
                           judged_violation_minutes=1, judged_meets_slo=True)],
                     None, {"slo": True, "clairvoyant": None, "actions": True}, id="a-skew-cell-judged-by-its-row"),
    ],
)
def test_goals_of_a_cell(rows: list[dict], versus: float | None, goals: dict) -> None:
    [outcome] = outcomes(rows)
    assert outcome.versus_clairvoyant == (pytest.approx(versus) if versus is not None else None)
    assert outcome.goals == goals


def test_each_cell_and_trace_is_judged_on_its_own_rows() -> None:
    rows = [_row("project-default", 1.3, cell="standard"), _row("clairvoyant", 1.2, cell="standard"),
            _row("project-default", 1.5, cell="realistic seed=1"), _row("clairvoyant", 1.6, cell="realistic seed=1"),
            {**_row("project-default", 1.1), "trace": "t/b.csv"}]
    found = {(outcome.cell, outcome.trace): outcome for outcome in outcomes(rows)}
    assert set(found) == {("standard", "t/a.csv"), ("realistic seed=1", "t/a.csv"), ("standard", "t/b.csv")}
    assert found[("standard", "t/a.csv")].clairvoyant["cost_ratio"] == 1.2
    assert found[("realistic seed=1", "t/a.csv")].clairvoyant["cost_ratio"] == 1.6
    assert found[("standard", "t/b.csv")].clairvoyant is None


def test_the_table_sums_up_the_realistic_seeds() -> None:
    rows = [_row("project-default", cost, violations=violations, actions=actions, cell=f"realistic seed={seed}",
                 scenario="realistic", max_age_minutes=age)
            for seed, cost, violations, actions, age in ((1, 1.4, 0, 20, 4.5), (2, 1.6, 3, 50, 5.5))]
    text = table(outcomes(rows))
    assert "realistic over 2 seeds: mean cost / fluid bound 1.500, 3 SLO-violation minutes in all, worst max age 5.50 min, " \
           "fewest minutes per action 20.0." in text
    assert text.count("none meets the SLO") == 2
    assert "| realistic seed=2 | 1.600 | none meets the SLO | – | 3 | 5.50 | 20.0 | **no** | – | **no** |" in text


@pytest.fixture(scope="module")
def tiny_trace(tmp_path_factory) -> Path:
    """150 minutes: quiet, a ramp to the peak, quiet again."""
    counts = np.concatenate([np.full(50, 200.0), np.linspace(200, 1000, 50), np.full(50, 300.0)])
    path = tmp_path_factory.mktemp("traces") / "tiny.csv"
    path.write_text("minute,count\n" + "".join(f"{i},{c:.0f}\n" for i, c in enumerate(counts)), encoding="utf-8")
    return path


def test_the_command_runs_every_cell_in_its_own_world(tiny_trace: Path, tmp_path: Path) -> None:
    """A real run (the simulated world and the engine, in worker processes): every cell has the
    default and each clairvoyant horizon, and a cell's default row is the benchmark's job with
    that cell's scenario fields (so the skew really reaches the world)."""
    out = tmp_path / "stress.json"
    markdown = tmp_path / "stress.md"
    assert main(["stress", "--trace", str(tiny_trace), "--json", str(out), "--markdown", str(markdown),
                 "--skews", "0.05", "--assignments", "balanced", "--seeds", "2", "--workers", "1"]) == 0
    rows = json.loads(out.read_text(encoding="utf-8"))
    labels = ["standard", "standard skew=0.05 assignment=balanced", "realistic seed=2"]
    assert sorted({(row["cell"], row["algorithm"], row["knob"]) for row in rows}) == sorted(
        (label, algorithm, knob) for label in labels
        for algorithm, knob in (("project-default", "default"), ("clairvoyant", "h=1"), ("clairvoyant", "h=3"), ("clairvoyant", "h=5")))
    defaults = {row["cell"]: row for row in rows if row["algorithm"] == "project-default"}
    skewed = Cell("standard", (("skew", 0.05), ("assignment", "balanced")))
    alone = run_job(Job(str(tiny_trace), "project-default", "default", scenario=skewed.scenario, overrides=skewed.overrides))
    for field in ("cost_ratio", "slo_violation_minutes", "scale_actions", "max_age_minutes"):
        assert defaults[skewed.label][field] == alone[field]
    assert defaults[skewed.label]["max_age_minutes"] != defaults["standard"]["max_age_minutes"]
    text = markdown.read_text(encoding="utf-8")
    assert "--skews 0.05 --assignments balanced --seeds 2" in text
    assert all(f"| {label} |" in text for label in labels)


@pytest.mark.parametrize(("flag", "value"), [("--assignments", "modulo,roundrobin"), ("--skews", "0.02,lots"), ("--seeds", "")])
def test_a_bad_list_fails_naming_its_flag(flag: str, value: str, tiny_trace: Path, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["stress", "--trace", str(tiny_trace), "--json", str(tmp_path / "x.json"), flag, value])
    assert f"argument {flag}" in capsys.readouterr().err


def test_the_default_stress_set_runs_skew_0_02_and_0_03_under_both_load_balancers() -> None:
    labels = [cell.label for cell in cells()]
    for skew in (0.02, 0.03):
        for assignment in ("modulo", "balanced"):
            assert f"standard skew={skew} assignment={assignment}" in labels
