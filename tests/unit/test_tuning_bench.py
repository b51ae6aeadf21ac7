"""bench-tune's candidate sets: what it measures must be what the job's batched tasks run."""

from __future__ import annotations

from scaling.simulation.peers import simulated_target
from scaling.simulation.world import Scenario
from scaling.tuning.bench import bench_rule_candidates, bench_slo_candidates, target_specs
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
