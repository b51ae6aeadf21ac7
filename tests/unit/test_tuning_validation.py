"""The tuning job's validation rules that need no Spark (scaling/tuning/validation.py) and the
scores that count recorded minutes only (scaling/tuning/robust.py)."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.simulation.world.loop import simulate
from scaling.simulation.world.scenario import Scenario
from scaling.tuning.folds import Folds, scores, window_numbers
from scaling.tuning.validation import (
    MAX_GAP_MINUTES,
    history_problem,
    longest_stretch,
    minimum_minutes,
    minute_series,
    throughput_problem,
)


def row(minute: float, arrived: int | None, *, elapsed: float = 60.0, compared: int = 2, partitions: int = 2,
        expected: int = 2, bridged: int = 0) -> dict:
    return {"collected_at": minute * 60.0, "elapsed_seconds": elapsed, "arrived": arrived, "compared": compared,
            "partitions": partitions, "expected": expected, "bridged": bridged}


@pytest.mark.parametrize(("rows", "arrivals", "recorded"), [
    # one normal interval a minute: every minute recorded
    ([row(0, None, elapsed=None), row(1, 10), row(2, 20), row(3, 30)], [10, 20, 30], [True, True, True]),
    # a 3-minute gap: spread evenly, invented
    ([row(0, None, elapsed=None), row(1, 10), row(4, 30, elapsed=180.0), row(5, 5)], [10, 10, 10, 10, 5],
     [True, False, False, False, True]),
    # a sample that missed a partition the hub has, one with a partition unknown, one next to a misread
    ([row(0, None, elapsed=None), row(1, 10, partitions=1, compared=1), row(2, 20, compared=1), row(3, 30, bridged=1),
      row(4, 40)], [10, 20, 30, 40], [False, False, False, True]),
    # a reset interval (nothing known): the minute is invented, with no arrivals
    ([row(0, None, elapsed=None), row(1, 10), row(2, None), row(3, 30)], [10, 0, 30], [True, False, True]),
])
def test_minute_series_marks_what_was_recorded(rows, arrivals, recorded):
    series = minute_series(rows, 60.0)
    assert series.arrivals.tolist() == arrivals
    assert series.recorded.tolist() == recorded
    assert series.invented_minutes == recorded.count(False)


def test_minute_series_two_minute_collection_is_recorded():
    rows = [row(0, None, elapsed=None), row(2, 20, elapsed=120.0), row(4, 40, elapsed=120.0)]
    series = minute_series(rows, 120.0)
    assert series.arrivals.tolist() == [10, 10, 20, 20]
    assert series.recorded.all()


@pytest.mark.parametrize(("minutes", "expected"), [
    ([0, 1, 2, 3], (0, 4, 1)),
    ([0, 1, 2, 3 + MAX_GAP_MINUTES], (0, 3, 2)),  # one sample beyond a long gap: left out
    ([0, 1 + 2 * MAX_GAP_MINUTES, 2 + 2 * MAX_GAP_MINUTES, 3 + 2 * MAX_GAP_MINUTES], (1, 4, 2)),
    ([0, 1, 2 + MAX_GAP_MINUTES, 3 + MAX_GAP_MINUTES], (2, 4, 2)),  # ties: the latest
    ([0, 1, 1 + MAX_GAP_MINUTES], (0, 3, 1)),  # a gap of exactly the limit does not cut
])
def test_longest_stretch(minutes, expected):
    stretch = longest_stretch([minute * 60.0 for minute in minutes])
    assert (stretch.start, stretch.end, stretch.stretches) == expected


def test_minimum_history_holds_the_warm_up_and_the_blocks():
    assert minimum_minutes(0.4, 3) == 900  # 360-minute warm-up in the first 40%
    assert minimum_minutes(0.8, 3) == 1800  # three 120-minute blocks in the last 20%
    problem = history_problem(np.ones(120, dtype=bool), 0.4, 3)
    assert problem.startswith("refused: the history holds 120 minutes (120 recorded); at least 900 are needed")
    assert "360-minute warm-up" in problem
    assert history_problem(np.ones(900, dtype=bool), 0.4, 3) is None


@pytest.mark.parametrize(("hole", "problem"), [
    ((400, 450), None),  # 28% of the first validation block invented
    ((360, 540), "refused: validation block 1 (minutes 360 to 540) is 100% invented minutes"),
    ((0, 200), "refused: the first training block (minutes 0 to 360) is 56% invented minutes"),
    ((800, 900), "refused: validation block 3 (minutes 720 to 900) is 56% invented minutes"),
])
def test_a_block_mostly_invented_is_not_a_fold(hole, problem):
    recorded = np.ones(900, dtype=bool)
    recorded[hole[0]:hole[1]] = False
    found = history_problem(recorded, 0.4, 3)
    assert found == problem if problem is None else found.startswith(problem)


@pytest.mark.parametrize(("estimate", "median", "observed", "contradicted"), [
    (1000.0, 1000.0, [900.0] * 100, False),
    (1000.0, 1200.0, [900.0] * 100, False),  # within the tolerance
    (1000.0, 1300.0, [900.0] * 100, True),  # the median disagrees
    (1808.0, 1000.0, [900.0] * 100, True),
    (475.0, 480.0, [450.0] * 90 + [1000.0] * 10, True),  # steady minutes above what the estimate allows
    (475.0, 480.0, [450.0] * 96 + [1000.0] * 4, False),  # four: noise
    (1000.0, None, [], False),
])
def test_throughput_cross_check(estimate, median, observed, contradicted):
    assert (throughput_problem(estimate, median, observed) is not None) == contradicted


def test_scores_count_recorded_minutes_only_and_all_recorded_is_the_plain_score():
    scenario = Scenario(partitions=4, events_per_instance_per_minute=100.0)
    arrivals = np.concatenate([np.full(100, 150.0), np.full(10, 1000.0), np.full(190, 150.0)])

    class Fixed:
        def decide(self, observation):
            return 4

    result = simulate(arrivals, Fixed(), scenario)
    folds = Folds((100, 200), 300)
    assert scores(result, scenario, folds, np.ones(300, dtype=bool)) == scores(result, scenario, folds)
    recorded = np.ones(300, dtype=bool)
    recorded[100:135] = False  # an invented surge (and its drain): not scored
    plain, masked = window_numbers(result, scenario, 100, 200), window_numbers(result, scenario, 100, 200, recorded)
    assert plain["minutes"] == 100 and masked["minutes"] == 65
    assert masked["cost"] == float(result.capacity[135:200].sum())
    assert masked["slo_violation_minutes"] == int((result.age[135:200] > scenario.slo_minutes).sum())
    assert masked["max_age_minutes"] == round(float(result.age[135:200].max()), 3)
    assert plain["slo_violation_minutes"] > 0 and masked["slo_violation_minutes"] == 0
