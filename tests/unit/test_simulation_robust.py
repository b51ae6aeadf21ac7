"""The robust selection (scaling/tuning/robust.py) that the tuning job and the benchmark's
project-tuned share: out-of-time folds, the margin rule, the regime-change flag, stress
replays, and when the current policy stays (with the reason)."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.simulation.drivers.candidates import Candidate, rule_candidates, run_candidates, slo_candidates
from scaling.simulation.peers.looped import simulated_target
from scaling.simulation.world.loop import Scenario, load_trace, scale_trace
from scaling.simulation.world.traces import PUBLIC_TRACES
from scaling.tuning import folds, regimes, robust, stress_replays
from scaling.tuning.folds import Folds, blocked_folds
from scaling.tuning.regimes import regime_change
from scaling.tuning.robust import Margin, select, shortlist
from tests.helpers import noisy_diurnal, step_surge

SLO = 5.0
TRACES = PUBLIC_TRACES


# --- out-of-time folds --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("minutes", "folds", "fraction", "train_ends"),
    [
        pytest.param(100, 3, 0.4, (40, 60, 80), id="three-equal-blocks"),
        pytest.param(101, 3, 0.4, (40, 60, 81), id="uneven-rest"),
        pytest.param(10, 3, 0.4, (4, 6, 8), id="tiny"),
        pytest.param(100, 1, 0.6, (60,), id="one-fold-is-the-old-split"),
        pytest.param(1440, 4, 0.2, (288, 576, 864, 1152), id="four-folds"),
    ],
)
def test_blocked_folds_train_on_all_before_each_validation_block(minutes, folds, fraction, train_ends) -> None:
    split = blocked_folds(minutes, folds, fraction)
    assert split.train_ends == train_ends
    # Validation blocks: in time order, back to back, up to the end of the history.
    assert split.validation[0][0] == train_ends[0] and split.validation[-1][1] == minutes
    for (_, end), (start, _) in zip(split.validation, split.validation[1:], strict=False):
        assert end == start
    # Each fold trains on everything before its validation block.
    assert split.training == tuple((0, start) for start, _ in split.validation)


@pytest.mark.parametrize(("minutes", "folds", "fraction"), [(3, 3, 0.4), (100, 0, 0.4), (100, 3, 0.0), (100, 3, 1.0), (1, 1, 0.5)])
def test_blocked_folds_refuse_what_cannot_be_split(minutes, folds, fraction) -> None:
    with pytest.raises(ValueError):
        blocked_folds(minutes, folds, fraction)


def test_scores_cut_one_run_into_its_fold_windows() -> None:
    scenario = Scenario(partitions=4, peak_instances=3)
    arrivals = scale_trace(np.concatenate([np.full(60, 100.0), np.full(60, 400.0)]), scenario)
    [result] = run_candidates([Candidate("c", simulated_target(scenario))], arrivals, scenario)
    scored = folds.scores(result, scenario, Folds((40, 80), 120))
    assert [fold["validation"]["minutes"] for fold in scored["folds"]] == [40, 40]
    assert [fold["train"]["minutes"] for fold in scored["folds"]] == [40, 80]
    assert scored["validation"]["minutes"] == 80
    assert scored["validation"]["cost"] == pytest.approx(float(result.capacity[40:].sum()))
    assert sum(fold["validation"]["cost"] for fold in scored["folds"]) == pytest.approx(scored["validation"]["cost"])
    assert scored["folds"][1]["validation"]["max_age_minutes"] == pytest.approx(float(result.age[80:].max()), abs=1e-3)


# --- the margin rule ---------------------------------------------------------------------------------------


def window(*, cost: float = 100.0, p99: float = 2.0, max_age: float = 3.0, violations: int = 0, minutes: int = 1000,
           actions: int = 5, meets: bool | None = None) -> dict:
    return {"minutes": minutes, "cost": cost, "cost_ratio": cost / 80.0, "slo_violation_minutes": violations,
            "meets_slo": violations <= 0.001 * minutes if meets is None else meets, "scale_actions": actions,
            "p99_age_minutes": p99, "max_age_minutes": max_age}


@pytest.mark.parametrize(
    ("margin", "p99", "max_age", "violations", "missed"),
    [
        pytest.param(Margin(), 4.5, 4.75, 0, None, id="exactly-at-both-limits-holds"),
        pytest.param(Margin(), 4.51, 4.75, 0, "p99 age 4.51", id="p99-just-above-0.9-slo"),
        pytest.param(Margin(), 4.5, 4.76, 0, "max age 4.76", id="max-just-above-0.95-slo"),
        pytest.param(Margin(), 1.0, 2.0, 2, "2 SLO-violation minutes", id="over-the-violation-budget"),
        pytest.param(Margin(0.8, 0.9), 4.0, 4.5, 0, None, id="stricter-margin-at-its-limits"),
        pytest.param(Margin(0.8, 0.9), 4.01, 4.5, 0, "p99 age", id="stricter-margin-p99"),
        pytest.param(Margin(0.8, 0.9), 4.0, 4.51, 0, "max age", id="stricter-margin-max"),
    ],
)
def test_margin_boundaries(margin: Margin, p99: float, max_age: float, violations: int, missed: str | None) -> None:
    why = margin.miss(window(p99=p99, max_age=max_age, violations=violations, minutes=1000), SLO)
    if missed is None:
        assert why is None
    else:
        assert why is not None and missed in why


@pytest.mark.parametrize(
    ("mine", "current", "missed"),
    [
        pytest.param(window(max_age=4.9), window(max_age=5.25), None, id="past-the-margin-where-the-current-is-further"),
        pytest.param(window(max_age=5.25), window(max_age=5.25), None, id="as-far-as-the-current"),
        # issue 53: past the margin where the current policy is too, the SLO is the test, not its maximum
        pytest.param(window(max_age=5.3), window(max_age=5.25), None, id="further-than-the-current-within-the-slo"),
        pytest.param(window(max_age=5.9, violations=2), window(max_age=5.25), "2 SLO-violation minutes",
                     id="further-than-the-current-past-the-slo"),
        pytest.param(window(max_age=4.9), window(max_age=4.7), "max age 4.90 min > 0.95 x SLO", id="the-current-keeps-the-margin"),
        pytest.param(window(p99=4.6), window(p99=4.7), None, id="p99-within-the-current-s"),
        pytest.param(window(p99=4.8, max_age=4.8), window(p99=4.7, max_age=5.0), None, id="p99-further-within-the-slo"),
        pytest.param(window(p99=4.6, max_age=4.8), window(p99=4.4, max_age=5.0), "p99 age 4.60 min > 0.9 x SLO",
                     id="p99-past-the-margin-the-current-keeps"),
        pytest.param(window(max_age=4.9, violations=3), window(max_age=5.0, violations=5), None, id="fewer-violations-than-the-current"),
        pytest.param(window(max_age=4.9, violations=6), window(max_age=5.0, violations=5),
                     "6 SLO-violation minutes (the current policy: 5)", id="more-violations-than-the-current"),
        pytest.param(window(max_age=4.7, violations=2), window(max_age=4.8), "2 SLO-violation minutes", id="the-current-meets-the-slo"),
    ],
)
def test_under_stress_the_margin_is_no_stricter_than_the_current_policy(mine: dict, current: dict, missed: str | None) -> None:
    """Where the current policy misses the margin on a figure in a stress replay's block, that figure
    is no test there: the SLO is (met, or no more violation minutes than the current policy's);
    where it keeps the margin, the margin (issue 53: two maxima of a world that rough differ by
    the minute they fall on, and holding a candidate to the current policy's kept the default on
    every `diurnal` member in `realistic`)."""
    assert Margin().miss(mine, SLO) is not None  # every row is past the margin alone: the current policy decides
    assert Margin().miss(mine, SLO, current) == missed


# --- selection ---------------------------------------------------------------------------------------------


def candidate(cost: float, folds: tuple = ((2.0, 3.0),) * 3, *, train_meets: bool = True, actions: int = 5,
              block_costs: tuple[float, ...] | None = None) -> dict:
    """A candidate's scores: ``folds`` as (p99, max age) per validation block, ``cost`` over all of
    them (shared equally, or as ``block_costs``)."""
    blocks = block_costs or (cost / len(folds),) * len(folds)
    return {"folds": [{"train": window(meets=train_meets), "validation": window(cost=block, p99=p99, max_age=top)}
                      for (p99, top), block in zip(folds, blocks, strict=True)],
            "validation": window(cost=cost, actions=actions)}


def holding(count: int) -> dict:
    """A stress replay in which every candidate holds and keeps a saving on the current policy (index 0)."""
    return {index: candidate(100.0 if index == 0 else 90.0) for index in range(count)}


def past_slo(scores: dict, violations: int = 3) -> dict:
    """``scores`` with ``violations`` SLO-violation minutes on every validation block (of 1000
    minutes: past the allowance of 1)."""
    for fold in scores["folds"]:
        fold["validation"] = {**fold["validation"], "slo_violation_minutes": violations, "meets_slo": violations <= 1}
    return scores


def test_recommends_the_cheapest_candidate_that_holds_everywhere() -> None:
    base = [candidate(300.0), candidate(250.0), candidate(270.0)]
    chosen = select(["current", "a", "b"], base, {"realistic": holding(3), "surge": holding(3)}, 0, SLO)
    assert (chosen.index, chosen.kept_current) == (1, False)
    assert chosen.failures == {}
    assert "cheapest candidate that meets the SLO with margin on all 3 splits and 2 stress replays" in chosen.reason
    assert "-16.7%" in chosen.reason
    assert chosen.risk["cost"] == {"min": pytest.approx(250 / 3, abs=1e-3), "median": pytest.approx(250 / 3, abs=1e-3),
                                   "max": pytest.approx(250 / 3, abs=1e-3)}
    assert set(chosen.risk["stress"]) == {"realistic", "surge"}


def test_a_cheaper_candidate_that_breaks_under_stress_is_not_chosen() -> None:
    base = [candidate(300.0), candidate(200.0), candidate(250.0)]
    stress = {"realistic": holding(3), "surge": {**holding(3), 1: candidate(100.0, ((2.0, 3.0), (2.0, 5.2), (2.0, 3.0)))}}
    chosen = select(["current", "cheap", "safe"], base, stress, 0, SLO)
    assert chosen.index == 2
    assert chosen.failures[1] == "fold 2 validation under surge: max age 5.20 min > 0.95 x SLO"
    assert chosen.risk["stress"]["surge"]["worst_max_age_minutes"] == 3.0


@pytest.mark.parametrize(
    ("riskier", "chosen"),
    [
        pytest.param(past_slo(candidate(1.0, ((2.0, 5.9),) * 3)), 2, id="past-the-slo-where-the-current-is-not-is-not"),
        # issue 53: past the margin as the current policy is, within the SLO: the SLO is the test there
        pytest.param(candidate(1.0, ((2.0, 5.4),) * 3), 1, id="further-than-the-current-s-maximum-within-the-slo-is"),
    ],
)
def test_a_cheaper_candidate_no_riskier_than_the_current_policy_under_stress_is_chosen(riskier: dict, chosen: int) -> None:
    """Under ``rough`` the current policy's maximum reaches 5.25 minutes (past 0.95 x SLO): there
    a cheaper candidate is held to the SLO, not to that maximum; one past the SLO is not chosen,
    and the current policy's own miss stays in its risk figures."""
    base = [candidate(300.0), candidate(240.0), candidate(260.0)]
    rough = {0: candidate(2.0, ((2.0, 5.25),) * 3), 1: riskier, 2: candidate(1.0, ((2.0, 4.9),) * 3)}
    selection = select(["current", "riskier", "safer"], base, {"surge": holding(3), "rough": rough}, 0, SLO)
    assert (selection.index, selection.kept_current) == (chosen, False)
    if chosen == 1:
        return
    chosen = selection
    assert chosen.failures[1] == "fold 1 validation under rough: 3 SLO-violation minutes"
    assert chosen.failures[0] == "fold 1 validation under rough: max age 5.25 min > 0.95 x SLO"
    assert chosen.current_risk["stress"]["rough"]["worst_max_age_minutes"] == 5.25
    assert robust.stress_round([0, 1, 2], {"rough": {0: rough[0], 1: rough[1]}}, 0, SLO, size=1) == [2]
    assert robust.stress_round([0, 1, 2], {"rough": {0: rough[0], 2: rough[2]}}, 0, SLO, size=1) == []


@pytest.mark.parametrize(
    ("rough_cost", "chosen", "failure"),
    [
        pytest.param(297.0, 1, None, id="1%-cheaper-under-rough-keeps-its-saving"),
        # with 2% of slack here, choices ended 3-4% dearer than the default in `realistic`; with none,
        # steps seed 1's (0.1% cheaper under rough) ended 4.2% dearer
        pytest.param(299.7, 2, "validation under rough: costs -0.1% against the current policy (a saving under 1% does "
                     "not hold there)", id="0.1%-cheaper-under-rough-does-not"),
        pytest.param(300.3, 2, "validation under rough: costs +0.1% against the current policy (a saving under 1% does "
                     "not hold there)", id="dearer-under-rough-does-not"),
        pytest.param(240.0, 1, None, id="cheaper-there-too"),
    ],
)
def test_a_saving_a_stress_replay_takes_back_is_not_recommended(rough_cost: float, chosen: int, failure: str | None) -> None:
    """The cheapest candidate in the history's world, within the margin everywhere, but under
    ``rough`` dearer than the current policy: the next one is chosen,
    and the stress rounds go on past it (the job replays in rounds)."""
    base = [candidate(300.0), candidate(240.0), candidate(260.0)]
    rough = {0: candidate(300.0), 1: candidate(rough_cost), 2: candidate(280.0)}
    chosen_now = select(["current", "cheapest", "next"], base, {"surge": holding(3), "rough": rough}, 0, SLO)
    assert chosen_now.index == chosen
    assert chosen_now.failures.get(1) == failure
    assert robust.stress_round([0, 1, 2], {"rough": {0: rough[0], 1: rough[1]}}, 0, SLO, size=1) == ([] if failure is None else [2])


def test_the_spread_across_folds_is_min_median_max() -> None:
    base = [candidate(300.0), candidate(240.0, ((1.0, 2.0), (4.0, 4.7), (2.0, 3.0)))]
    chosen = select(["current", "a"], base, {}, 0, SLO)
    assert chosen.index == 1
    assert chosen.risk["p99_age_minutes"] == {"min": 1.0, "median": 2.0, "max": 4.0}
    assert chosen.risk["max_age_minutes"] == {"min": 2.0, "median": 3.0, "max": 4.7}


@pytest.mark.parametrize(
    ("base", "stress", "reason", "safer"),
    [
        pytest.param([candidate(300.0, ((2.0, 3.0), (4.7, 4.7), (2.0, 3.0))), candidate(250.0, train_meets=False)], {},
                     "no candidate that saves at least 2% on validation, and on every block, meets the SLO with margin "
                     "(p99 <= 0.9 x SLO, max <= 0.95 x SLO) on every split and stress replay and keeps its saving there; the "
                     "current policy: fold 2 "
                     "validation: p99 age 4.70 min > 0.9 x SLO.", None,
                     id="nothing-holds"),
        pytest.param([candidate(300.0), candidate(320.0)], {"surge": {0: candidate(2.0, ((2.0, 6.0),) * 3), 1: candidate(1.0)}},
                     "the current policy misses the margin (fold 1 validation under surge: max age 6.00 min > 0.95 x SLO); the "
                     "cheapest candidate that holds, b, costs +6.7% on validation (per block +6.7%, +6.7%, +6.7%), and a "
                     "recommendation saves at least 2% and costs no more on any block: review it.", 1,
                     id="only-a-costlier-one-holds"),
        pytest.param([candidate(300.0), candidate(320.0)], {"surge": holding(2)},
                     "the current policy is the cheapest candidate that holds on every split and stress replay.", None,
                     id="current-is-cheapest"),
    ],
)
def test_the_current_policy_stays_with_the_reason(base, stress, reason, safer) -> None:
    chosen = select(["current", "b"], base, stress, 0, SLO)
    assert (chosen.index, chosen.kept_current, chosen.safer) == (0, True, safer)
    assert chosen.reason == reason
    assert chosen.risk == chosen.current_risk


@pytest.mark.parametrize(
    ("current", "other", "chosen", "reason"),
    [
        pytest.param(candidate(300.0), candidate(290.0), 1, "cheapest candidate that meets the SLO with margin",
                     id="3.3%-cheaper-on-every-block-replaces"),
        pytest.param(candidate(300.0), candidate(295.0), 0, "the current policy holds on every split and stress replay, "
                     "and no candidate that holds saves enough; the cheapest, other, costs -1.7% on validation",
                     id="1.7%-cheaper-is-within-the-noise"),
        pytest.param(candidate(300.0), candidate(294.0, block_costs=(90.0, 90.0, 114.0)), 0,
                     "the current policy holds", id="cheaper-overall-dearer-on-a-block"),
        # 2% overall, 0.5% on the first block: a saving one window shows as nothing is within the noise
        pytest.param(candidate(300.0), candidate(294.0, block_costs=(99.5, 97.25, 97.25)), 0,
                     "the current policy holds", id="cheaper-overall-under-1%-on-a-block"),
        pytest.param(candidate(300.0), candidate(294.0, block_costs=(99.0, 97.5, 97.5)), 1,
                     "cheapest candidate that meets the SLO", id="cheaper-overall-1%-on-every-block"),
        # issue 53: a saving within the noise buys no change, even from a current policy past the margin
        pytest.param(candidate(300.0, ((2.0, 5.5),) * 3), candidate(299.0), 0,
                     "the current policy misses the margin (fold 1 validation: max age 5.50 min > 0.95 x SLO); the cheapest "
                     "candidate that holds, other, costs -0.3% on validation", id="a-failing-current-policy-and-a-safer-one-no-dearer"),
        pytest.param(candidate(300.0, ((2.0, 5.5),) * 3), candidate(294.0, block_costs=(90.0, 90.0, 114.0)), 0,
                     "the current policy misses the margin (fold 1 validation: max age 5.50 min > 0.95 x SLO); the cheapest "
                     "candidate that holds, other, costs -2.0% on validation", id="a-failing-current-policy-and-a-safer-one-dearer-on-a-block"),
    ],
)
def test_a_candidate_is_recommended_only_for_a_clear_saving(current, other, chosen, reason) -> None:
    """``MIN_SAVING`` (2%) overall and no block dearer. A current policy that misses the margin is
    no exception (issue 53: one 1.1% cheaper on validation cost 0.4% more afterwards): the
    cheapest candidate that holds is named ``safer``, for review."""
    selection = select(["current", "other"], [current, other], {}, 0, SLO)
    assert selection.index == chosen
    assert selection.reason.startswith(reason)
    dearer_on_a_block = other["folds"][2]["validation"]["cost"] > current["folds"][2]["validation"]["cost"]
    assert shortlist([current, other], 0, SLO) == ([0] if dearer_on_a_block else [0, 1])
    assert selection.safer == (1 if not chosen and current["folds"][0]["validation"]["max_age_minutes"] > SLO else None)


@pytest.mark.parametrize(
    ("cost", "rough", "chosen"),
    [
        pytest.param(299.0, candidate(1.0, ((2.0, 4.5),) * 3), 0, id="within-the-margin-where-the-current-is-not-but-no-saving"),
        pytest.param(291.0, candidate(1.0, ((2.0, 5.3),) * 3), 1, id="a-saving-as-far-past-the-margin-within-the-slo"),
        pytest.param(291.0, past_slo(candidate(1.0, ((2.0, 5.9),) * 3)), 0, id="a-saving-past-the-slo"),
    ],
)
def test_a_candidate_replaces_a_current_policy_past_the_margin_only_for_a_saving_within_the_slo(cost, rough, chosen) -> None:
    """Under a stress replay where the current policy is past the margin, a candidate is held to
    the SLO there; it replaces the current policy only for a saving of ``MIN_SAVING`` (issue 53)."""
    base = [candidate(300.0), candidate(cost)]
    stress = {"rough": {0: candidate(2.0, ((2.0, 5.3),) * 3), 1: rough}}
    assert select(["current", "other"], base, stress, 0, SLO).index == chosen


def missed_on_validation(scores: dict, violations: int, minutes: int | None = None) -> dict:
    """``scores`` with ``violations`` SLO-violation minutes over all of validation (``minutes`` of
    it, else as they are: 1000 by default, an allowance of 1)."""
    minutes = minutes or scores["validation"]["minutes"]
    scores["validation"] = {**scores["validation"], "minutes": minutes, "slo_violation_minutes": violations,
                            "meets_slo": violations <= 0.001 * minutes}
    return scores


@pytest.mark.parametrize(
    ("violations", "train_meets", "chosen"),
    [
        pytest.param(4, True, 0, id="past-the-allowance-within-the-noise-keeps-the-default"),
        # bursts seed 3 in `realistic` (issue 53): 11 minutes in 3,629 of validation, the replacement
        # ended 4.8-5.3% dearer than the default, which met the SLO afterwards
        pytest.param(9, True, 0, id="three-allowances-keeps-it"),
        pytest.param(14, True, 0, id="just-under-five-allowances-keeps-it"),
        pytest.param(15, True, 2, id="five-allowances-buys-the-slo"),
        pytest.param(44, True, 2, id="bursts-seed-1-buys-the-slo"),
        # late on the first training block only: in the sample, not out of time
        pytest.param(0, False, 0, id="in-sample-only-keeps-the-default"),
    ],
)
def test_a_current_policy_is_replaced_for_the_slo_only_where_it_misses_out_of_time_past_the_noise(
        violations: int, train_meets: bool, chosen: int) -> None:
    """A replacement bought for the SLO costs more (issue 53: 3.5% and 5.3% more than the default
    afterwards on bursts seeds 2 and 3 in `realistic`, where the default met the SLO): only a miss
    of at least ``Margin.miss_factor`` allowances over all the validation blocks buys one."""
    current = missed_on_validation(candidate(300.0, train_meets=train_meets), violations, minutes=3000)
    current["folds"][0]["validation"] = window(cost=100.0, p99=4.0, max_age=10.0, violations=violations, meets=violations <= 1)
    base = [current, candidate(280.0, train_meets=False), candidate(330.0), candidate(360.0)]
    surge = {0: candidate(2.0, ((2.0, 6.0),) * 3), 1: candidate(1.0), 2: candidate(1.0), 3: candidate(1.0)}
    selection = select(["current", "cheap but missing", "safe", "safer"], base, {"surge": surge}, 0, SLO)
    assert (selection.index, selection.kept_current) == (chosen, chosen == 0)
    assert shortlist(base, 0, SLO) == ([0, 2, 3] if chosen else [0])
    assert (Margin().missed_out_of_time(current) is not None) == bool(chosen)


@pytest.mark.parametrize(
    ("current", "chosen", "reason"),
    [
        pytest.param(missed_on_validation(candidate(300.0), 5), 2,
                     "the current policy misses the SLO on the history itself (validation: 5 SLO-violation minutes in 1000); "
                     "safe, the cheapest candidate that meets it on every window of the history and is nowhere riskier than "
                     "the current policy (the history's world and 1 stress replays: surge), validation cost +10.0%",
                     id="bursts-the-current-policy-does-not-catch-on-its-history"),
        pytest.param(candidate(300.0), 0, "the current policy misses the margin (fold 1 validation under surge",
                     id="a-stress-replay-alone-buys-no-dearer-policy"),
    ],
)
def test_where_the_current_policy_misses_the_slo_on_its_own_history_the_cheapest_that_holds_is_recommended(
        current: dict, chosen: int, reason: str) -> None:
    """Traffic the target has had that the current policy does not catch (issue 53: bursts one
    default cannot catch) pays for the cheapest candidate that holds everywhere, dearer or not; a
    current policy past the margin only in a stress replay keeps its place (the dearer one is named)."""
    base = [current, candidate(280.0, train_meets=False), candidate(330.0), candidate(360.0)]
    surge = {0: candidate(2.0, ((2.0, 6.0),) * 3), 1: candidate(1.0), 2: candidate(1.0), 3: candidate(1.0)}
    selection = select(["current", "cheap but missing", "safe", "safer"], base, {"surge": surge}, 0, SLO)
    assert (selection.index, selection.kept_current) == (chosen, chosen == 0)
    assert selection.reason.startswith(reason)
    assert shortlist(base, 0, SLO) == ([0, 2, 3] if chosen else [0])


def test_a_current_policy_missing_the_slo_on_its_history_is_replaced_by_one_no_riskier_though_past_the_margin() -> None:
    """bursts seed 1 in `realistic` (issue 53): the default 10 minutes old on a burst of its history,
    no candidate within 0.95 x SLO there; the cheapest that meets the SLO on every window, no
    riskier than the default anywhere, is chosen though dearer, under a stress replay too."""
    current = candidate(300.0, ((4.0, 10.0), (2.0, 3.0), (2.0, 3.0)))
    current["folds"][0]["validation"] = window(cost=100.0, p99=4.0, max_age=10.0, violations=44, meets=False)
    current["validation"] = window(cost=300.0, max_age=10.0, violations=44, minutes=3000)
    base = [current, candidate(400.0, ((4.0, 5.0), (2.0, 3.0), (2.0, 3.0))), candidate(450.0)]
    surge = {0: candidate(100.0, ((2.0, 5.02),) * 3), 1: candidate(150.0), 2: candidate(160.0)}
    selection = select(["current", "more margin", "even more"], base, {"surge": surge}, 0, SLO)
    assert (selection.index, selection.kept_current) == (1, False)
    assert shortlist(base, 0, SLO) == [0, 1, 2]
    # a few minutes in one block, within the allowance over all of validation: no reason to pay
    current["validation"] = window(cost=300.0, max_age=10.0, violations=3, minutes=3000)
    assert select(["current", "more margin", "even more"], base, {"surge": surge}, 0, SLO).index == 0


def late_on_block(scores: dict, block: int, violations: int = 2) -> dict:
    """``scores`` with ``violations`` SLO-violation minutes on validation block ``block`` (of 1000
    minutes: past its allowance of 1) and over all of validation (3000: within its allowance of 3)."""
    fold = scores["folds"][block]
    fold["validation"] = {**fold["validation"], "slo_violation_minutes": violations, "meets_slo": violations <= 1}
    scores["validation"] = {**scores["validation"], "slo_violation_minutes": violations, "minutes": 3000,
                            "meets_slo": violations <= 3}
    return scores


@pytest.mark.parametrize(
    ("late_in", "chosen", "reason"),
    [
        pytest.param(None, 1, "the current policy misses the SLO on the history itself", id="vouched-everywhere"),
        pytest.param("history", 2, "the current policy misses the SLO on the history itself", id="late-on-a-block-of-the-history"),
        pytest.param("surge", 2, "the current policy misses the SLO on the history itself", id="late-on-a-block-under-stress"),
        pytest.param("both", 0, "the current policy misses the SLO on the history itself (validation: 44 SLO-violation "
                     "minutes in 3000), and no candidate meets it on every validation block", id="none-vouched-the-default-stays"),
    ],
)
def test_a_replacement_for_a_current_policy_missing_the_slo_is_bought_only_where_every_block_vouches_for_it(
        late_in: str | None, chosen: int, reason: str) -> None:
    """bursts seed 1 in `realistic` (issue 53): the default late on its history, the candidate
    chosen for being less late (2 minutes on a block of 1,209, 8 under `rough`, within the
    allowance over all of validation) cost 19.7% more and missed the SLO afterwards all the same.
    A candidate late past a validation block's allowance, in the history's world or under a
    stress replay, is no replacement; without one that every block vouches for, the default stays."""
    current = candidate(300.0, ((4.0, 10.0), (2.0, 3.0), (2.0, 3.0)))
    current["folds"][0]["validation"] = window(cost=100.0, p99=4.0, max_age=10.0, violations=44, meets=False)
    current["validation"] = window(cost=300.0, max_age=10.0, violations=44, minutes=3000)
    cheaper, dearer = candidate(400.0, ((4.0, 5.0), (2.0, 3.0), (2.0, 3.0))), candidate(450.0)
    surge_current = candidate(100.0, ((2.0, 6.0),) * 3)
    surge_current["folds"][0]["validation"] = window(cost=33.0, p99=4.0, max_age=9.0, violations=20, meets=False)
    surge = {0: surge_current, 1: candidate(150.0), 2: candidate(160.0)}
    if late_in in ("history", "both"):
        late_on_block(cheaper, 0)
    if late_in == "surge":
        late_on_block(surge[1], 0)
    if late_in == "both":
        late_on_block(surge[2], 2)
    selection = select(["current", "less late", "on time"], [current, cheaper, dearer], {"surge": surge}, 0, SLO)
    assert (selection.index, selection.kept_current) == (chosen, chosen == 0)
    assert selection.reason.startswith(reason)


def test_training_misses_and_missing_replays_are_failures_with_their_reason() -> None:
    base = [candidate(300.0), candidate(100.0, train_meets=False), candidate(200.0)]
    chosen = select(["current", "a", "b"], base, {"surge": {0: candidate(1.0)}}, 0, SLO)
    assert chosen.failures[1].startswith("fold 1 training")
    assert chosen.failures[2].startswith("not replayed under stress")  # (a cheaper one held, or it failed the splits)
    assert chosen.index == 0


def test_shortlist_is_the_current_policy_then_cheaper_candidates_that_hold_on_the_splits_cheapest_first() -> None:
    base = [candidate(300.0), candidate(250.0), candidate(350.0), candidate(200.0, ((2.0, 3.0), (4.6, 4.8), (2.0, 3.0))),
            candidate(280.0), candidate(280.0, actions=2)]
    assert shortlist(base, 0, SLO) == [0, 1, 5, 4]  # cheapest first; ties: fewer scale actions first
    # The current policy is always replayed, even when it fails the splits itself.
    assert shortlist([candidate(300.0, ((5.0, 6.0),) * 3), candidate(290.0)], 0, SLO) == [0, 1]


@pytest.mark.parametrize(
    ("replayed", "expected"),
    [
        pytest.param({}, [0, 4, 3], id="first-round-current-and-the-cheapest"),
        pytest.param({0: True, 4: False, 3: False}, [2, 1, 5], id="none-held-all-the-rest"),
        pytest.param({0: True, 4: False, 3: True}, [], id="a-candidate-held-stop"),
        pytest.param({0: False, 4: False, 3: False}, [2, 1, 5], id="current-fails-too-and-they-further"),
        pytest.param({0: False, 4: False, 3: "as the current"}, [], id="one-no-riskier-than-a-failing-current-stop"),
        pytest.param({0: True, 4: False, 3: False, 2: False, 1: False, 5: False}, [], id="shortlist-exhausted"),
    ],
)
def test_stress_rounds_replay_the_cheapest_first_then_the_rest_unless_one_held(replayed: dict, expected: list[int]) -> None:
    """``True``: within the margin; ``False``: past it (the current policy at 5.5 minutes, the
    others further, at 6.0 and past the SLO); "as the current": past it as far as the current
    policy, within the SLO, which holds."""
    listed = [0, 4, 3, 2, 1, 5]

    def scores(index: int, holds: bool | str) -> dict:
        if holds is True:  # (the current policy dearer there: the others keep a saving)
            return candidate(2.0 if index == 0 else 1.0)
        if index == 0 or holds:
            return candidate(2.0 if index == 0 else 1.0, ((2.0, 5.5),) * 3)
        return past_slo(candidate(1.0, ((2.0, 6.0),) * 3))

    stress = {name: {index: scores(index, holds) for index, holds in replayed.items()} for name in ("realistic", "surge")}
    assert robust.stress_round(listed, stress, 0, SLO, size=2) == expected
    assert robust.stress_round(listed, {}, 0, SLO, size=2) == []  # no stress sets: nothing to replay


# --- regime change ---------------------------------------------------------------------------------------------


def spiky(minutes: int, level: float, spike: float, every: int, seed: int = 3) -> np.ndarray:
    values = np.full(minutes, level) + np.random.default_rng(seed).normal(0, level * 0.01, minutes)
    values[::every] += spike
    return values


@pytest.mark.parametrize(
    ("validation", "flagged"),
    [
        pytest.param(np.full(500, 150.0), [], id="level-x1.5-is-the-limit"),
        pytest.param(np.full(500, 151.0), ["rate level"], id="level-above-x1.5"),
        pytest.param(np.full(500, 66.7), [], id="level-down-within-limit"),
        pytest.param(np.full(500, 66.0), ["rate level"], id="level-down-below-1/1.5"),
        pytest.param(np.full(500, 100.0), [], id="alike"),
    ],
)
def test_regime_change_on_the_rate_level(validation: np.ndarray, flagged: list[str]) -> None:
    reasons = regime_change(np.full(500, 100.0), validation)
    assert [reason.split(" x")[0] for reason in reasons] == flagged


def test_regime_change_on_peak_to_mean_and_burstiness() -> None:
    train = spiky(2000, 100.0, 50.0, 50)
    assert regime_change(train, spiky(2000, 100.0, 50.0, 50, seed=4)) == []
    peaks = regime_change(train, spiky(2000, 100.0, 300.0, 50))
    assert any(reason.startswith("peak-to-mean") for reason in peaks)
    assert not any(reason.startswith("rate level") for reason in peaks)
    bursty = spiky(2000, 100.0, 50.0, 50) + np.tile([0.0, 30.0], 1000) - 15.0
    reasons = regime_change(train, bursty)
    assert [reason.split(" x")[0] for reason in reasons] == ["burstiness"]


def test_regime_changes_are_reported_per_fold_and_named_in_the_reason() -> None:
    arrivals = np.concatenate([np.full(60, 100.0), np.full(20, 100.0), np.full(20, 400.0)])
    per_fold = regimes.regime_changes(arrivals, Folds((60, 80), 100))
    assert [fold["changes"] != [] for fold in per_fold] == [False, True]
    chosen = select(["current"], [candidate(300.0, ((2.0, 3.0),) * 2)], {}, 0, SLO, regime=per_fold)
    assert "Regime change between training and validation (fold 2: rate level x" in chosen.reason


# --- stress replays -----------------------------------------------------------------------------------------------


def test_stress_scenarios_keep_the_history_world_and_add_the_knobs() -> None:
    from scaling.tuning.tasks import HistoryScenario

    history = HistoryScenario(partitions=4, events_per_instance_per_minute=700.0, slo_minutes=4.0, weights=(0.4, 0.3, 0.2, 0.1))
    built = stress_replays.stress_scenarios(history)
    assert set(built) == set(stress_replays.STRESS_SETS)
    for name, stressed in built.items():
        assert (stressed.partitions, stressed.events_per_instance_per_minute, stressed.slo_minutes) == (4, 700.0, 4.0), name
    realistic = built["realistic"]
    assert realistic.instance_failures_per_day == 2.0 and realistic.assignment == "balanced"
    # The observed shares, made more skewed the same way (partition p times (1 + skew)^-p).
    expected = np.array([0.4, 0.3, 0.2, 0.1]) * 1.015 ** -np.arange(4)
    assert realistic.partition_weights() == pytest.approx(expected / expected.sum())
    assert built["surge"].partition_weights() == pytest.approx([0.4, 0.3, 0.2, 0.1])


@pytest.mark.parametrize(("peak", "factor"), [(4000.0, 1.5), (6000.0, 1.0), (9000.0, 1.0), (100.0, stress_replays.MAX_LOAD_FACTOR)])
def test_the_surge_replay_scales_the_history_toward_the_hub_capacity(peak: float, factor: float) -> None:
    scenario = Scenario(partitions=8, events_per_instance_per_minute=1000.0)
    history = np.array([peak / 2, peak, peak / 4])
    assert stress_replays.load_factor(history, scenario, 0.75) == pytest.approx(factor)


def test_stress_replays_start_a_warm_up_before_the_first_validation_block() -> None:
    folds = Folds((1000, 1500, 2000), 2500)
    arrivals = np.full(2500, 100.0)
    replays = stress_replays.stress_replays(Scenario(partitions=8), folds, arrivals)
    start = 1000 - stress_replays.STRESS_WARMUP_MINUTES
    for replay in replays:
        assert replay.start == start
        assert replay.folds.validation == tuple((a - start, b - start) for a, b in folds.validation)
        assert len(replay.arrivals(arrivals)) == 2500 - start
    assert [replay.name for replay in replays] == list(stress_replays.STRESS_SETS)
    surge = next(replay for replay in replays if replay.name == "surge")
    assert surge.load == stress_replays.MAX_LOAD_FACTOR  # 100 events a minute, 8,000 served: capped
    assert surge.arrivals(arrivals)[0] == pytest.approx(100.0 * surge.load)


def test_a_stress_set_that_is_the_history_s_own_world_is_not_replayed_again() -> None:
    folds = Folds((1000, 1500, 2000), 2500)
    replays = stress_replays.stress_replays(Scenario.named("realistic"), folds, np.full(2500, 100.0))
    assert [replay.name for replay in replays] == [name for name in stress_replays.STRESS_SETS if name != "realistic"]


def test_tune_keeps_the_current_policy_and_says_why_when_no_candidate_holds() -> None:
    scenario = Scenario(partitions=4, peak_instances=3)
    arrivals = scale_trace(np.concatenate([np.full(100, 100.0), np.linspace(100, 900, 100), np.full(100, 300.0)]), scenario)
    base = simulated_target(scenario)
    candidates = [Candidate("current", base), *slo_candidates(base, "small")]
    impossible = Margin(p99_fraction=0.0, max_fraction=0.0)  # no run keeps every age at zero
    chosen = robust.tune(arrivals, scenario, candidates, margin=impossible, sets={"realistic": stress_replays.STRESS_SETS["realistic"]})
    assert (chosen.index, chosen.kept_current) == (0, True)
    assert chosen.reason.startswith("no candidate that saves at least 2% on validation, and on every block, meets the SLO "
                                    "with margin (p99 <= 0 x SLO, max <= 0 x SLO)")
    assert set(chosen.failures) == set(range(len(candidates)))


def test_tuning_several_histories_at_once_selects_for_each_what_tuning_it_alone_does() -> None:
    """The benchmark tunes ten family members together (``tune_many``: their runs as columns of
    the same steps). Each selection must be the one ``tune`` makes alone: the same choice, reason,
    failures and scores. The third history already peaks past 75% of the hub, so its ``surge``
    replay is dropped while the others replay it."""
    scenario = Scenario(partitions=8, peak_instances=6)
    histories = [scale_trace(noisy_diurnal(600, seed=4), scenario) * 0.6, scale_trace(step_surge(600), scenario) * 0.7,
                 scale_trace(noisy_diurnal(600, seed=9), scenario) * 1.4]
    assert [len(stress_replays.stress_replays(scenario, blocked_folds(600, 3, 0.4), history)) for history in histories] == [3, 3, 2]
    base = simulated_target(scenario)
    candidates = [Candidate("current", base), *slo_candidates(base, "small")[::8], *rule_candidates(base, "small")[::9]]
    together = robust.tune_many(histories, scenario, candidates)
    alone = [robust.tune(history, scenario, candidates) for history in histories]
    assert together == alone
    assert len({selection.index for selection in alone}) > 1 or len({selection.reason for selection in alone}) == 3


# --- the long trace of issue 14: a quiet first 30%, then the tournament ------------------------------------------


def test_on_a_trace_whose_history_is_quiet_the_job_recommends_a_policy_that_holds_on_the_busy_rest() -> None:
    """WC98's first 4 days on 32 partitions, the first 30% at a fifth of its traffic (the history
    the job sees), then as it was. Among the candidates is a threshold rule that is the cheapest
    to meet the SLO on that quiet history (the old choice) and breaks on the busy rest; the robust
    selection either recommends a policy that meets the SLO there, its oldest event never older
    than the SLO, or keeps the current one and says why. (A few candidates keep it fast.)"""
    from scaling.tuning.synthetic import quiet_then_busy

    trace = TRACES / "worldcup98" / "per_minute.csv"
    scenario = Scenario(partitions=32, peak_instances=24)
    arrivals = scale_trace(quiet_then_busy(load_trace(trace)[: 4 * 1440], quiet_fraction=0.3, factor=0.2), scenario)
    split = int(len(arrivals) * 0.3)
    base = simulated_target(scenario, name="long")
    slo = [c for c in slo_candidates(base, "small") if c.label.endswith("min_dwell_seconds=1200") and "safety_seconds=60" not in c.label]
    trap = [c for c in rule_candidates(base, "medium") if c.label == "rules backlog_per_instance>4000 window=600s"]
    candidates = [Candidate("current", base), *slo, *trap]
    chosen = robust.tune(arrivals[:split], scenario, candidates)
    trained = run_candidates(candidates, arrivals[:split], scenario)
    naive = min((run.cost_ratio, index) for index, run in enumerate(trained) if run.meets_slo(scenario))[1]
    picked, old = run_candidates([candidates[chosen.index], candidates[naive]], arrivals, scenario, score_from=split)
    assert not old.meets_slo(scenario), "the trap: the old choice misses the SLO on the busy rest"
    assert chosen.failures.get(naive), "the robust selection rejects it"
    if chosen.kept_current:
        assert chosen.reason
    else:
        assert picked.meets_slo(scenario) and picked.max_age_minutes <= scenario.slo_minutes, picked


@pytest.mark.parametrize("count", [1, 2, 3, 99, 100, 101, 1000, 2881])
def test_percentile_99_is_numpy_s_percentile(count: int) -> None:
    values = np.random.default_rng(count).random(count) * 7
    values[::7] = np.round(values[::7], 1)  # ties
    assert folds.percentile_99(values) == np.percentile(values, 99)


@pytest.mark.parametrize(
    ("scenario", "violations", "max_age"),
    [
        pytest.param(Scenario(), 3, 9.0, id="equal-partitions-whole-hub"),
        pytest.param(Scenario.named("realistic"), 1, 6.0, id="uneven-partitions-avoidable-ages"),
        pytest.param(Scenario.named("hot"), 1, 6.0, id="hot-avoidable-ages"),
    ],
)
def test_windows_are_scored_by_the_benchmarks_judge(scenario: Scenario, violations: int, max_age: float) -> None:
    """Where partitions are uneven the tuner judges a run as the benchmark does: by the ages of the
    partitions an instance of their own would keep within the SLO (issue 53), so that minutes no
    count can avoid fail no candidate; elsewhere by the whole hub's ages."""
    from scaling.simulation.world.scenario import RunResult

    age = np.array([1.0, 7.0, 8.0, 9.0, 2.0])
    reachable = np.array([1.0, 2.0, 6.0, 3.0, 2.0])
    result = RunResult("x", "k", 5, 10.0, 5.0, 3, 9.0, 9.0, 1, 0.0, capacity=np.full(5, 2), arrivals=np.full(5, 1000.0),
                       age=age, reachable_age=reachable)
    numbers = folds.window_numbers(result, scenario, 0, 5)
    assert (numbers["slo_violation_minutes"], numbers["max_age_minutes"]) == (violations, max_age)
