"""The ``trouble`` stress set (scaling/benchmarks/trouble.py, issue 48): how cases are drawn, how
the default's series are audited and how a case is judged against the lag peers."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.benchmarks import trouble
from scaling.simulation.world.scenario import RunResult, Scenario


def test_cases_are_seeded_and_within_the_ranges() -> None:
    lengths = {"a/per_minute.csv": 10_000, "b/per_minute.csv": 40_000}
    drawn = trouble.cases(list(lengths), lengths, seed=3, per_kind=3)
    assert drawn == trouble.cases(list(lengths), lengths, seed=3, per_kind=3)
    assert drawn != trouble.cases(list(lengths), lengths, seed=4, per_kind=3)
    kinds = [case.kind for case in drawn]
    assert {kind: kinds.count(kind) for kind in kinds} == {"slow": 3, "overload": 3, "late-checkpoints": 3,
                                                             "rare-checkpoints": 3, "long-rebalances": 3}
    for case in drawn:
        assert 0 <= case.start <= lengths[case.trace] - trouble.CUT_MINUTES
        Scenario.named("standard", **dict(case.overrides))  # every case is a valid world
        fields = dict(case.overrides)
        if case.kind == "slow":
            [(begins, duration, factor, _)] = fields["slowdowns"]
            assert trouble.SLOW_FACTORS[0] <= factor <= trouble.SLOW_FACTORS[1]
            assert trouble.SLOW_MINUTES[0] <= duration <= trouble.SLOW_MINUTES[1]
            assert case.trouble_ends == begins + duration
        elif case.kind == "overload":
            assert trouble.OVERLOAD_PEAK[0] <= fields["peak_instances"] <= trouble.OVERLOAD_PEAK[1]
        elif case.kind == "late-checkpoints":
            assert trouble.CHECKPOINT_DELAY[0] <= fields["checkpoint_delay_seconds"] <= trouble.CHECKPOINT_DELAY[1]
        elif case.kind == "rare-checkpoints":
            assert trouble.CHECKPOINT_INTERVAL[0] <= fields["checkpoint_interval_seconds"] <= trouble.CHECKPOINT_INTERVAL[1]
        else:
            assert trouble.REBALANCE_PAUSE[0] <= fields["rebalance_pause_seconds"] <= trouble.REBALANCE_PAUSE[1]
    assert [dict(case.overrides)["slowdowns"][0][2] for case in drawn if case.kind == "slow"][0] == 0.01  # a stall


def run(capacity: list[int], backlog: list[float], age: list[float], arrivals: float = 10.0) -> RunResult:
    minutes = len(capacity)
    return RunResult("project-default", "default", minutes, float(sum(capacity)), 1.0, 0, 0.0, max(age), 0, backlog[-1],
                     capacity=np.array(capacity, dtype=float), backlog=np.array(backlog), age=np.array(age),
                     arrivals=np.full(minutes, arrivals))


@pytest.mark.parametrize(
    ("capacity", "backlog", "growing", "trips"),
    [
        pytest.param([8] * 6 + [4] * 4, [0.0, 0, 0, 0, 0, 10, 10, 10, 10, 10], 0, 0, id="grew-by-a-minute-of-arrivals-only"),
        pytest.param([8] * 6 + [4] * 4, [0.0, 0, 0, 0, 0, 11, 11, 11, 11, 11], 1, 0, id="grew-by-more"),
        pytest.param([8] * 6 + [16] * 4, [0.0, 100, 200, 300, 400, 500, 600, 700, 800, 900], 0, 0, id="scaling-out-is-fine"),
        pytest.param([32] * 5 + [1] * 5, [0.0] * 10, 0, 1, id="maximum-to-minimum"),
        pytest.param([32] + [16] * 70 + [1] * 5, [0.0] * 76, 0, 0, id="maximum-to-minimum-after-an-hour"),
    ],
)
def test_audit(capacity, backlog, growing, trips) -> None:
    found = trouble.audit(run(capacity, backlog, [0.0] * len(capacity)), Scenario(), 32, 1, None)
    assert (found.scale_ins_while_growing, found.max_to_min_within_hour, found.recovery_minutes) == (growing, trips, None)


def test_recovery_is_from_the_end_of_the_trouble_to_the_age_back_under_the_slo() -> None:
    age = [0.0, 2.0, 6.0, 9.0, 7.0, 5.5, 4.0, 1.0]
    assert trouble.audit(run([4] * 8, [0.0] * 8, age), Scenario(), 32, 1, 3).recovery_minutes == 3
    assert trouble.audit(run([4] * 8, [0.0] * 8, [9.0] * 8), Scenario(), 32, 1, 3).recovery_minutes is None


def _row(algorithm: str, cost: float, violations: int = 0) -> dict:
    return {"algorithm": algorithm, "knob": f"c={cost}", "cost_ratio": cost, "slo_violation_minutes": violations,
            "scale_actions": 10, "minutes": 1500, "meets_slo": violations <= 1, "max_age_minutes": 4.0}


@pytest.mark.parametrize(
    ("default", "peers", "holds"),
    [
        pytest.param(_row("project-default", 1.2), [_row("keda-hpa", 1.3), _row("functions-target", 1.1, 9)], True,
                     id="cheaper-than-every-peer-that-meets"),
        pytest.param(_row("project-default", 1.3), [_row("keda-hpa", 1.3)], False, id="as-dear-as-a-peer-that-meets"),
        pytest.param(_row("project-default", 1.0, 5), [_row("keda-hpa", 3.0)], False, id="misses-where-a-peer-meets"),
        pytest.param(_row("project-default", 1.0, 45), [_row("keda-hpa", 3.0, 45), _row("functions-target", 3.0, 50)], True,
                     id="none-meets-no-more-violations-than-the-least"),
        pytest.param(_row("project-default", 1.0, 46), [_row("keda-hpa", 3.0, 45)], False, id="none-meets-more-violations"),
    ],
)
def test_judge(default, peers, holds) -> None:
    case = trouble.Case("slow", "a/per_minute.csv", 0, 1500, ())
    assert trouble.judge(case, default, trouble.Audit(0, 0, None), peers).holds is holds
    assert not trouble.judge(case, default, trouble.Audit(1, 0, None), peers).holds  # a scale-in while growing never holds
