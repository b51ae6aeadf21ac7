"""The benchmark's family set (scaling/benchmarks/family.py): which jobs a member runs, how its
arrivals are found, and the tables per shape and per noise level, on small synthetic rows."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.benchmarks import family
from scaling.benchmarks.jobs import jobs_for
from scaling.benchmarks.tables import mark_best
from scaling.simulation.world import trace_family

MEMBER = "family/flash-seed3-noise10"


def test_the_family_is_every_member_by_name() -> None:
    traces = family.family_traces()
    assert len(traces) == 30 and all(trace.startswith("family/") for trace in traces)
    assert MEMBER in traces


def test_a_member_is_generated_and_a_file_is_read(tmp_path) -> None:
    np.testing.assert_array_equal(family.load_arrivals(MEMBER), trace_family.generate(MEMBER).arrivals)
    path = tmp_path / "t.csv"
    path.write_text("minute,count\n0,5\n1,7\n", encoding="utf-8")
    np.testing.assert_array_equal(family.load_arrivals(str(path)), [5.0, 7.0])
    assert family.trace_label(MEMBER) == MEMBER
    assert family.trace_label(str(path)) == f"{tmp_path.name}/t.csv"


#: Each peer's documented default (KEDA 64, Functions maxEventBatchSize 100).
DEFAULTS = {"keda-hpa": 64.0, "functions-target": 100.0}


@pytest.mark.parametrize("algorithm", ["keda-hpa", "functions-target", "azure-monitor", "seed", "clairvoyant"])
def test_a_member_runs_each_peer_at_the_family_sweep_only(algorithm: str) -> None:
    kept = [job for job in jobs_for(MEMBER) if job.algorithm == algorithm and family.keeps(job)]
    full = [job for job in jobs_for(MEMBER) if job.algorithm == algorithm]
    assert 1 <= len(kept) <= len(full)
    values = {(job.value, job.step) if algorithm == "azure-monitor" else job.value for job in kept}
    assert values == set(family.FAMILY_SWEEPS[algorithm])  # every family value is one of the full sweep's
    if algorithm in DEFAULTS:
        assert DEFAULTS[algorithm] in values


@pytest.mark.parametrize(("algorithm", "scenario", "kept"),
                         [("project-default", "standard", True), ("project-default", "realistic", True),
                          ("a-new-peer", "realistic", True), ("project-tuned", "standard", True),
                          ("project-tuned", "realistic", True)])
def test_algorithms_without_a_family_sweep_run_whole_and_the_tuned_one_in_standard(algorithm: str, scenario: str,
                                                                                   kept: bool) -> None:
    from scaling.benchmarks.jobs import Job

    assert family.keeps(Job(MEMBER, algorithm, "anything", 123.0, scenario=scenario)) is kept


def row(trace: str, algorithm: str, cost: float, *, meets: bool = True, actions: int = 100, scenario: str = "standard",
        violations: int = 0, knob: str = "k") -> dict:
    return {"scenario": scenario, "trace": "family/" + trace, "algorithm": algorithm, "knob": knob, "cost_ratio": cost,
            "meets_slo": meets, "slo_violation_minutes": violations if not meets else 0, "minutes": 20160,
            "scale_actions": actions, "best": False}


ROWS = [
    # flash, two members: the clairvoyant meets the SLO on both.
    row("flash-seed1-noise02", "clairvoyant", 1.0), row("flash-seed1-noise02", "project-default", 0.9, actions=672),
    row("flash-seed1-noise02", "keda-hpa", 1.5), row("flash-seed1-noise02", "keda-hpa", 1.2, meets=False, violations=40),
    row("flash-seed2-noise05", "clairvoyant", 2.0), row("flash-seed2-noise05", "project-default", 2.2, actions=336),
    row("flash-seed2-noise05", "keda-hpa", 9.0, meets=False, violations=50),
    # steps: the default misses the SLO; the clairvoyant misses it too (no cost / clairvoyant).
    row("steps-seed1-noise02", "clairvoyant", 1.0, meets=False, violations=30),
    row("steps-seed1-noise02", "project-default", 1.3, meets=False, violations=25),
    row("steps-seed1-noise02", "keda-hpa", 1.4),
]


@pytest.fixture
def figures() -> dict:
    rows = [dict(r) for r in ROWS]
    mark_best(rows)
    return family.member_figures(rows)


@pytest.mark.parametrize(
    ("algorithm", "members", "expected"),
    [
        pytest.param("project-default", ["flash-seed1-noise02", "flash-seed2-noise05"],
                     {"meeting": 2, "median_versus": 1.0, "worst_versus": 1.1, "median_ratio": 1.55, "worst_ratio": 2.2,
                      "violation_minutes": 0, "median_minutes_per_action": 45.0, "least_minutes_per_action": 30.0},
                     id="default-on-flash"),
        pytest.param("keda-hpa", ["flash-seed1-noise02", "flash-seed2-noise05"],
                     {"meeting": 1, "median_versus": 1.5, "worst_versus": 1.5, "violation_minutes": 50,
                      "worst_violation_minutes": 50}, id="a-member-where-no-setting-meets-counts-its-closest"),
        pytest.param("project-default", ["steps-seed1-noise02"],
                     {"meeting": 0, "median_versus": None, "median_ratio": 1.3, "violation_minutes": 25,
                      "compared": 0}, id="the-default-missing-the-slo-keeps-its-cost"),
        pytest.param("clairvoyant", ["steps-seed1-noise02"],
                     {"meeting": 0, "median_versus": None, "median_ratio": None, "violation_minutes": 30},
                     id="a-swept-algorithm-missing-the-slo-has-no-cost"),
        pytest.param("keda-hpa", ["steps-seed1-noise02"],
                     {"meeting": 1, "median_versus": None, "median_ratio": 1.4, "compared": 0},
                     id="no-clairvoyant-reference-no-versus"),
    ],
)
def test_group_figures(figures: dict, algorithm: str, members: list[str], expected: dict) -> None:
    numbers = family.group_figures(figures, "standard", algorithm, ["family/" + m for m in members])
    for key, value in expected.items():
        assert numbers[key] == (pytest.approx(value) if isinstance(value, float) else value), key


def test_the_markdown_has_a_table_per_shape_and_per_noise_level() -> None:
    rows = [dict(r) for r in ROWS]
    mark_best(rows)
    text = family.family_markdown(rows)
    assert "### The family (standard)" in text and "#### Per shape (standard)" in text
    assert "#### Per noise level (standard)" in text
    assert "| flash | project-default | 2/2 | 1.000 | 1.100 | 1.550 | 2.200 | 0 | 0 | 0 | 45.0 | 30.0 |" in text
    assert "| 2% | project-default | 1/2 |" in text and "| 5% | project-default | 1/1 |" in text
    assert "| steps-seed1-noise02 | (1.300), 201.6, misses (25 min) | miss (30 min) | (1.400), 201.6 |" in text
    assert family.readme_summary(rows).startswith("**family (standard, 3 members; judged by the whole hub's violation minutes)**")


def test_public_traces_stay_out_of_the_family_tables() -> None:
    rows = [dict(r) for r in ROWS] + [{**ROWS[1], "trace": "worldcup98/per_minute.csv", "cost_ratio": 50.0}]
    mark_best(rows)
    assert "worldcup98" not in family.family_markdown(rows)
    assert "3 members" in family.readme_summary(rows)


def test_realistic_members_are_judged_by_their_avoidable_minutes() -> None:
    """In realistic (uneven partitions) a member whose violation minutes no count avoids meets the
    SLO; the tables count the avoidable minutes and report the whole hub's beside them."""
    rows = [{**row("diurnal-seed2-noise05", "project-default", 1.4, meets=False), "scenario": "realistic",
             "slo_violation_minutes": 291, "avoidable_violation_minutes": 0},
            {**row("bursts-seed1-noise02", "project-default", 1.5, meets=False), "scenario": "realistic",
             "slo_violation_minutes": 105, "avoidable_violation_minutes": 95}]
    mark_best(rows)
    assert [r["best"] for r in rows] == [True, False]
    text = family.family_markdown(rows)
    assert "judged by the avoidable violation minutes" in text
    assert "| all | project-default | 1/2 | – | – | 1.450 | 1.500 | 95 | 95 | 396 |" in text


def test_the_sweep_edges_count_members_whose_best_is_the_lowest_or_highest_value() -> None:
    rows = [row("flash-seed1-noise02", "keda-hpa", 1.5, knob="unprocessedEventThreshold=64"),
            row("flash-seed2-noise05", "keda-hpa", 1.5, knob="unprocessedEventThreshold=1000"),
            row("steps-seed1-noise02", "keda-hpa", 1.5, knob="unprocessedEventThreshold=400"),
            row("steps-seed3-noise10", "functions-target", 1.5, knob="target=1000"),
            row("steps-seed4-noise20", "functions-target", 1.5, knob="target=100", meets=False),
            row("steps-seed1-noise02", "seed", 1.5, knob="upper=1000"),
            row("steps-seed2-noise05", "azure-monitor", 1.5, knob="per-instance>200 step=4")]
    mark_best(rows)
    assert family.sweep_edges(rows) == {"keda-hpa": {"best": 3, "lowest": 1, "highest": 1},  # one value: no edges
                                        "functions-target": {"best": 1, "lowest": 0, "highest": 1}}


def test_the_family_tables_compare_project_tuned_with_the_default_on_the_same_minutes() -> None:
    """Per scenario: how many members project-tuned is at least 3% cheaper on than the default's run
    scored from the split, dearer on, and outside the SLO on; cold (nothing tuned) has no line."""
    rows = []
    for member, tuned_cost, window_cost in (("flash-seed1-noise02", 1.20, 1.30), ("flash-seed2-noise05", 1.30, 1.29),
                                            ("steps-seed1-noise02", 1.40, 1.40)):
        rows += [{**row(member, "project-default", 1.35), "scenario": "realistic",
                  "tuned_window": {"cost_ratio": window_cost, "slo_violation_minutes": 0, "max_age_minutes": 3.0}},
                 {**row(member, "project-tuned", tuned_cost), "scenario": "realistic"},
                 {**row(member, "project-default", 1.35), "scenario": "cold"}]
    mark_best(rows)
    expected = "at least 3% cheaper on 1 of 3 members, dearer on 1 (worst 1.008"
    assert expected in family.family_markdown(rows) and expected in family.readme_summary(rows)
    assert "project-tuned | 0/0" not in family.readme_summary(rows)
