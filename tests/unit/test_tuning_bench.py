"""bench-tune's candidate sets (what it measures must be what the job's batched tasks run), its ratios, and
the trees ``--against`` compares."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from scaling.benchmarks.engine_speed import trees_to_compare
from scaling.benchmarks.tuning_speed import bench_rule_candidates, bench_slo_candidates, ratios_between, target_specs
from scaling.simulation.peers.looped import simulated_target
from scaling.simulation.world.loop import Scenario
from scaling.tuning.planning import plan_tasks, typical_instances
from scaling.tuning.tasks import TargetWork, batch_group


def test_bench_candidates_are_810_per_kind_and_each_kind_is_one_batch() -> None:
    scenario = Scenario(partitions=16)
    base = simulated_target(scenario, name="t")
    for make, kind in ((bench_rule_candidates, "rules"), (bench_slo_candidates, "slo")):
        candidates = tuple(make(base))
        assert len(candidates) == 810
        assert len({candidate.label for candidate in candidates}) == 810
        work = TargetWork("t", None, scenario, 0, candidates)
        groups = {batch_group(work, index) for index in range(len(candidates))}
        assert len(groups) == 1 and next(iter(groups))[0] == kind


def test_bench_targets_vary_traces_sizes_and_partitions() -> None:
    specs = target_specs(8)
    assert len({spec["name"] for spec in specs}) == 8
    assert {spec["trace"] for spec in specs} == {"worldcup98/per_minute.csv", "nasa_jul95/per_minute.csv"}
    assert len({spec["partitions"] for spec in specs}) >= 4 and len({spec["mu"] for spec in specs}) == 8


def _result(rules: float, slo: float, combined: float) -> dict:
    return {"runs": {kind: {"candidate_policy_minutes_per_second": rate}
                     for kind, rate in (("rules_batched", rules), ("slo_batched", slo), ("combined", combined))}}


@pytest.mark.parametrize(("numerator", "denominator", "expected"), [
    (_result(2.0e6, 8.0e5, 1.2e6), _result(1.0e6, 4.0e5, 6.0e5), {"rules_batched": 2.0, "slo_batched": 2.0, "combined": 2.0}),
    (_result(1.0e6, 5.0e5, 7.0e5), _result(1.0e6, 1.0e6, 1.0e6), {"rules_batched": 1.0, "slo_batched": 0.5, "combined": 0.7}),
    (_result(1.0e6, 1.0e6, 1.0e6), _result(3.0e6, 3.0e6, 3.0e6), {"rules_batched": 0.333, "slo_batched": 0.333, "combined": 0.333}),
])
def test_ratios_between_two_measurements_per_kind(numerator, denominator, expected) -> None:
    """local[2] over local[1] of one tree, or this tree over REF on one master: rates divided
    kind by kind, to three decimals."""
    assert ratios_between(numerator, denominator) == expected


def test_against_a_ref_checks_it_out_beside_this_tree_and_removes_it(tmp_path) -> None:
    """``--against`` (bench-tune and bench-engine): this tree and the ref in a temporary git
    worktree, labelled with their commits; the worktree is gone afterwards."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "file.txt").write_text("one\n", encoding="utf-8")
    git("add", "file.txt")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "one")
    first = git("rev-parse", "--short", "HEAD")
    (tmp_path / "file.txt").write_text("two\n", encoding="utf-8")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-am", "two")
    with trees_to_compare(tmp_path, first, "test-") as trees:
        (this_label, this_tree), (ref_label, ref_tree) = trees
        assert this_tree == tmp_path and this_label.startswith("this tree (")
        assert ref_label == f"{first} ({first})"
        assert (ref_tree / "file.txt").read_text(encoding="utf-8") == "one\n"
    assert not ref_tree.exists()
    assert git("worktree", "list").count("\n") == 0  # only the main one left
    with trees_to_compare(tmp_path, None, "test-") as trees:
        assert [tree for _, tree in trees] == [tmp_path]


@pytest.mark.parametrize(("longer", "shorter"), [
    pytest.param((32, 6.0), (32, 1.0), id="same-partitions-the-busier-target-first"),
    pytest.param((16, 5.0), (32, 1.0), id="five-times-the-instances-outweighs-twice-the-partitions"),
    pytest.param((32, 1.0), (8, 1.0), id="same-instances-more-partitions-first"),
])
def test_batches_are_planned_longest_first_by_partitions_and_instances(longer, shorter) -> None:
    """The planner starts the batch that takes longest first, so that no core is left with a long
    batch at the end: a batch's minute costs more with more partitions and, more so, with more
    instances the target runs (bench-tune's batches measured 1.9 to 3.9 s for the same candidates
    and minutes, the three 32-partition targets among the cheapest and the dearest)."""
    works = {}
    for name, (partitions, instances) in (("shorter", shorter), ("longer", longer)):
        scenario = Scenario(partitions=partitions, events_per_instance_per_minute=600.0)
        candidates = tuple(bench_slo_candidates(simulated_target(scenario, name=name)))[:40]
        works[name] = TargetWork(name, np.full(600, instances * 600.0), scenario, 300, candidates)
    assert [name for name, _ in plan_tasks(works, 2, 3)] == ["longer", "shorter"]
    assert typical_instances(works["longer"]) == longer[1]
