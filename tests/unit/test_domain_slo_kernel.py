"""The SLO mode's arithmetic (scaling/domain/slo_kernel.py): hand-computed tables, each scalar case
written as a batch of one candidate, and a batch of random candidates in which each column gets
what it gets alone.

(The engine's use of it, with its reasons, is tested in test_domain_slo.py and test_domain_sizing.py;
the batched simulator's in test_simulation_batched_slo.py.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaling.domain import slo_kernel as kernel

NAN = math.nan
MU = 1000 / 60  # events per second per instance
PARTITIONS = 32


def one(*values: float | None) -> np.ndarray:
    """A batch of one candidate (NaN for ``None``)."""
    return np.array([NAN if value is None else value for value in values], dtype=float)


def loads_of(forecast, owners, *, rate: float = 100.0, set_aside=None, by_draw: bool = False) -> kernel.OwnerLoads:
    """One candidate's owner loads of ``forecast`` (owners by name, as a sample names them)."""
    forecast = np.asarray(forecast, dtype=float)[:, None]
    return kernel.OwnerLoads(forecast, None if set_aside is None else set_aside[:, None], kernel.Owners.of(owners, len(forecast)),
                             one(rate), kernel.per_instance_table(len(forecast), 64), np.array([by_draw]))


# --- who serves ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capacity", "live_owners", "partitions", "expected"),
    [
        pytest.param(4, 4, 8, 4, id="as-many-owners-as-instances"),
        pytest.param(4, 3, 8, 3, id="one-not-serving-yet"),
        pytest.param(12, 8, 8, 12, id="every-partition-owned-counts-all"),
        pytest.param(4, 0, 8, 0, id="no-live-owner-none-serves"),
    ],
)
def test_serving_count(capacity, live_owners, partitions, expected) -> None:
    assert kernel.serving_count(np.array([capacity]), np.array([live_owners]), partitions)[0] == expected


@pytest.mark.parametrize(
    ("expected", "serving", "just_due", "ready"),
    [
        pytest.param(4, 6, False, 6, id="owners-confirm-new-instances-early"),
        pytest.param(6, 4, True, 6, id="claims-not-seen-yet"),
        pytest.param(6, 4, False, 4, id="late-or-lost"),
    ],
)
def test_ready_instances(expected, serving, just_due, ready) -> None:
    assert kernel.ready_instances(np.array([expected]), np.array([serving]), np.array([just_due]))[0] == ready


@pytest.mark.parametrize(
    ("ready", "capacity", "due", "expected"),
    [
        pytest.param(4, 4, None, 0.0, id="all-serving"),
        pytest.param(2, 4, 90.0, 90.0, id="due-later"),
        pytest.param(2, 4, -30.0, 60.0, id="late-the-next-collection"),
        pytest.param(2, 4, None, 60.0, id="lost-the-next-collection"),
        pytest.param(0, 1, None, 180.0, id="none-serving-a-restart"),
        pytest.param(0, 1, 240.0, 240.0, id="none-serving-due-later-still"),
    ],
)
def test_pending_seconds(ready, capacity, due, expected) -> None:
    assert kernel.pending_seconds(np.array([ready]), np.array([capacity]), one(due), 60.0, 180.0)[0] == expected


def test_forecasts_and_hot_partitions() -> None:
    arrival, recent = np.array([5.0, 30.0, 30.0]), np.array([6.0, 25.0, 10.0])
    np.testing.assert_allclose(kernel.forecast_rates(arrival, recent, np.array([1.0, 1.1])), [[6.0, 6.6], [30.0, 33.0],
                                                                                               [30.0, 33.0]])
    # over 20/s on both the window and the last interval: hot, unless the throughput is only a lower bound
    hot = kernel.hot_partitions(arrival, recent, np.array([20.0, 20.0]), np.array([True, False]))
    np.testing.assert_array_equal(hot, [[False, False], [True, False], [False, False]])


@pytest.mark.parametrize(
    ("arrival", "highest", "expected"),
    [
        # 20/s per instance; the highest count 4 on 4 partitions serves 80/s
        pytest.param([30.0, 10.0, 10.0, 10.0], 4, [True, False, False, False], id="one-hot-partition-in-a-servable-hub"),
        pytest.param([30.0, 20.0, 20.0, 10.0], 4, [True, False, False, False], id="hub-at-exactly-what-the-highest-serves"),
        pytest.param([30.0, 20.0, 20.0, 10.5], 4, [False] * 4, id="hub-just-beyond-the-highest"),
        pytest.param([25.0, 25.0, 25.0, 25.0], 4, [False] * 4, id="every-partition-hot-is-a-hub-wide-shortage"),
        # at 3 instances the busiest owns 2 partitions: 4 / 2 = 2 instances' worth, 40/s
        pytest.param([30.0, 5.0, 5.0, 0.0], 3, [True, False, False, False], id="three-serve-two-instances-worth"),
        pytest.param([30.0, 5.0, 5.0, 1.0], 3, [False] * 4, id="beyond-two-instances-worth"),
    ],
)
def test_a_partition_is_set_aside_only_while_the_hub_can_be_served(arrival, highest, expected) -> None:
    """Issue 48: a partition hotter than one instance is set aside only while the hub as a whole
    is within what the highest count serves; beyond it (slow instances, traffic beyond the
    maximum) every partition stays in view, so the hub is sized for all of them."""
    rates = np.array(arrival)
    most = kernel.most_instances(len(rates), np.array([highest]), kernel.per_instance_table(len(rates), 8))
    hot = kernel.hot_partitions(rates, rates, one(20.0), np.array([True]), most)
    np.testing.assert_array_equal(hot[:, 0], expected)


def test_the_hub_sums_count_each_partition_of_a_shared_row() -> None:
    """Rows that stand for several partitions (the batched simulator's share rows) count once
    per partition, in partition order, as the engine's one row per partition does, bit for bit."""
    rows = np.array([[0.1, 3.0], [0.2, 1.0]])
    row_of = np.array([0, 0, 1, 0, 1])
    assert kernel.column_sums(rows, row_of).tolist() == kernel.column_sums(rows[row_of][:, :1]).tolist() + [11.0]
    assert kernel.column_sums(rows[row_of][:, :1])[0] == ((0.1 + 0.1) + 0.2 + 0.1) + 0.2


@pytest.mark.parametrize(
    ("now", "earlier", "expected"),
    [
        # 2 partitions at 1/s, a tolerance of 60 s: 120 events
        pytest.param([100.0, 100.0], [40.0, 40.0], False, id="grew-by-exactly-the-tolerance"),
        pytest.param([100.0, 101.0], [40.0, 40.0], True, id="grew-beyond-the-tolerance"),
        pytest.param([400.0, 100.0], [100.0, 200.0], True, id="one-partition-grows-more-than-the-other-drains"),
        pytest.param([0.0, 0.0], [500.0, 500.0], False, id="draining"),
    ],
)
def test_backlog_growing(now, earlier, expected) -> None:
    grows = kernel.backlog_growing(np.array(now)[:, None], np.array(earlier)[:, None], np.ones((2, 1)), 60.0)
    assert grows.tolist() == [expected]


# --- the action budget ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "elapsed", "expected"),
    [
        pytest.param(None, None, 4.0, id="nothing-spent-yet"),
        pytest.param(0.0, 0.0, 0.0, id="just-spent"),
        pytest.param(0.0, 900.0, 1.0, id="a-quarter-hour-refills-one"),
        pytest.param(1.5, 1800.0, 3.5, id="refilling"),
        pytest.param(3.0, 7200.0, 4.0, id="never-past-the-budget"),
        pytest.param(1.0, -600.0, 1.0, id="a-clock-step-back-refills-nothing"),
    ],
)
def test_action_tokens(tokens, elapsed, expected) -> None:
    assert kernel.action_tokens(4.0, one(tokens), one(elapsed))[0] == pytest.approx(expected)


# --- the engine's gates: bounds, cooldowns, the action budget ------------------------------------------------------

#: (capacity, wanted, upward, downward) -> (wanted now, raised, lowered), with bounds 2..8.
BOUNDS_CASES = [
    pytest.param(5, 0, False, False, 0, False, False, id="inside-holding"),
    pytest.param(5, 7, True, False, 7, False, False, id="inside-up"),
    pytest.param(5, 3, False, True, 3, False, False, id="inside-down"),
    pytest.param(1, 0, False, False, 2, True, False, id="below-holding-is-raised"),
    pytest.param(1, 2, True, False, 2, False, False, id="below-going-up-far-enough"),
    pytest.param(1, 5, True, False, 5, False, False, id="below-going-up-further"),
    pytest.param(0, 1, True, False, 2, True, False, id="below-going-up-short-of-the-bound"),
    pytest.param(1, 0, False, True, 2, True, False, id="below-going-down-is-raised"),
    pytest.param(9, 0, False, False, 8, False, True, id="above-holding-is-lowered"),
    pytest.param(9, 6, False, True, 6, False, False, id="above-going-down-far-enough"),
    pytest.param(12, 10, False, True, 8, False, True, id="above-going-down-short-of-the-bound"),
    pytest.param(9, 12, True, False, 8, False, True, id="above-going-up-is-lowered"),
]


@pytest.mark.parametrize(("capacity", "wanted", "upward", "downward", "now", "raised", "lowered"), BOUNDS_CASES)
def test_bounds_correction(capacity, wanted, upward, downward, now, raised, lowered) -> None:
    """A batch of one as the engine passes it: plain numbers in, plain numbers out."""
    assert kernel.bounds_correction(capacity, wanted, upward, downward, 2, 8) == (now, raised, lowered)


def test_bounds_correction_of_a_batch_is_each_candidates_alone() -> None:
    cases = [case.values for case in BOUNDS_CASES]
    capacity, wanted, upward, downward, now, raised, lowered = (np.array(column) for column in zip(*cases, strict=True))
    got = kernel.bounds_correction(capacity, wanted, upward, downward, np.full(len(cases), 2), np.full(len(cases), 8))
    for array, expected in zip(got, (now, raised, lowered), strict=True):
        np.testing.assert_array_equal(array, expected)


#: (seconds since the last action (None: no action yet), cooldown) -> over
COOLDOWN_CASES = [
    pytest.param(None, 300, True, id="no-action-yet"),
    pytest.param(299.999999, 300, False, id="a-microsecond-short"),
    pytest.param(300.0, 300, True, id="exactly-over"),
    pytest.param(0.0, 0, True, id="no-cooldown"),
    pytest.param(-1.0, 0, False, id="an-action-in-the-future-clock-skew"),
]


@pytest.mark.parametrize(("elapsed", "cooldown", "over"), COOLDOWN_CASES)
def test_cooldown_over(elapsed, cooldown, over) -> None:
    assert kernel.cooldown_over(NAN if elapsed is None else elapsed, float(cooldown)) is over
    assert kernel.cooldown_over(one(elapsed), np.array([float(cooldown)]))[0] == over


@pytest.mark.parametrize(("tokens", "allowed", "left"), [
    pytest.param(4.0, True, 3.0, id="a-full-budget"),
    pytest.param(2.0, True, 1.0, id="just-enough-for-a-scale-in-and-the-scale-out-after"),
    pytest.param(1.99, False, 0.99, id="short-of-a-scale-in"),
    pytest.param(0.5, False, 0.0, id="never-below-empty"),
])
def test_budget_of_a_scale_in_and_of_an_action(tokens, allowed, left) -> None:
    assert kernel.budget_allows_scale_in(tokens) is allowed
    assert kernel.tokens_after_action(tokens) == pytest.approx(left)
    assert kernel.budget_allows_scale_in(one(tokens))[0] == allowed
    assert kernel.tokens_after_action(one(tokens))[0] == pytest.approx(left)


# --- learning the throughput and the checkpoint delay ------------------------------------------------------------


@pytest.mark.parametrize(
    ("throughput", "floor", "held_back", "observed", "saturated", "expected"),
    [
        # expected: (throughput, floor, waiting, learned)
        pytest.param(None, None, None, 10.0, True, (10.0, None, None, True), id="first-saturated-reading-sets-it"),
        pytest.param(10.0, None, None, 12.0, True, (0.7 * 10 + 0.3 * 12, None, None, True), id="blended"),
        pytest.param(10.0, None, None, 8.5, True, (0.7 * 10 + 0.3 * 8.5, None, None, True), id="a-small-drop-blends"),
        pytest.param(10.0, None, None, 7.0, True, (10.0, None, 7.0, False), id="a-big-drop-waits"),
        pytest.param(10.0, None, 7.5, 7.0, True, (0.7 * 10 + 0.3 * 7.0, None, None, True), id="a-confirmed-drop-blends"),
        pytest.param(None, None, None, 5.0, False, (None, 5.0, None, False), id="unsaturated-raises-the-floor"),
        pytest.param(None, 6.0, None, 5.0, False, (None, 6.0, None, False), id="unsaturated-below-the-floor"),
        pytest.param(10.0, 0.0, None, 5.0, False, (10.0, 5.0, None, False), id="a-floor-of-zero-is-raised"),
        # issue 48: a confirmed saturated reading below the floor shows what the instances do now
        pytest.param(10.0, 9.0, 7.5, 7.0, True, (0.7 * 10 + 0.3 * 7.0, 7.0, None, True), id="a-confirmed-drop-lowers-the-floor"),
        pytest.param(10.0, 9.0, None, 7.0, True, (10.0, 9.0, 7.0, False), id="an-unconfirmed-drop-leaves-the-floor"),
        pytest.param(10.0, 9.0, None, 9.0, True, (0.7 * 10 + 0.3 * 9.0, 9.0, None, True), id="a-reading-at-the-floor-leaves-it"),
    ],
)
def test_learned_throughput(throughput, floor, held_back, observed, saturated, expected) -> None:
    learned = kernel.learned_throughput(one(throughput), one(floor), one(held_back), one(observed), np.array([saturated]),
                                        np.array([True]))
    *numbers, learned_now = expected
    np.testing.assert_allclose([values[0] for values in learned[:3]], one(*numbers), rtol=1e-12)  # (NaN for None)
    assert bool(learned[3][0]) is learned_now


def test_nothing_is_learned_where_not_learning() -> None:
    learned = kernel.learned_throughput(one(10.0), one(2.0), one(None), one(20.0), np.array([True]), np.array([False]))
    assert (learned[0][0], learned[1][0], math.isnan(learned[2][0]), bool(learned[3][0])) == (10.0, 2.0, True, False)


@pytest.mark.parametrize(
    ("worst", "previous", "expected"),
    [
        pytest.param(20.0, None, 20.0, id="first-is-the-worst-age"),
        pytest.param(20.0, 30.0, 20.0, id="lower-ages-lower-it"),
        pytest.param(80.0, 30.0, 30.5, id="within-an-interval-creeps"),
        pytest.param(95.0, 30.0, 30.0, id="a-backlog-is-no-delay"),
        pytest.param(500.0, None, 75.0, id="never-past-the-ceiling"),
    ],
)
def test_learned_checkpoint_delay(worst, previous, expected) -> None:
    assert kernel.learned_checkpoint_delay(one(worst), one(previous), 60.0, 75.0)[0] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("worst", "previous", "dense", "steady", "expected"),
    [
        pytest.param(0.5, 180.0, False, False, 180.0, id="a-quiet-spell-lowers-nothing"),
        pytest.param(0.5, 180.0, True, False, 0.5, id="a-dense-reading-lowers-it"),
        pytest.param(180.0, 75.0, True, False, 75.0, id="old-ages-are-no-delay-unless-steady"),
        pytest.param(180.0, 75.0, True, True, 75.0 + 0.1 * 105.0, id="steady-follows-a-tenth-of-the-gap"),
        pytest.param(180.0, 75.0, False, True, 75.0, id="steady-but-quiet-keeps-it"),
        pytest.param(400.0, 200.0, True, True, 210.0, id="steady-never-past-its-ceiling"),
        pytest.param(150.0, 120.0, True, False, 120.0, id="above-the-ceiling-it-creeps-no-further"),
        pytest.param(100.0, 120.0, True, True, 100.0, id="steady-lower-ages-lower-it"),
        pytest.param(500.0, None, True, True, 75.0, id="first-reading-at-most-the-ceiling"),
    ],
)
def test_learned_checkpoint_delay_dense_and_steady(worst, previous, dense, steady, expected) -> None:
    learned = kernel.learned_checkpoint_delay(one(worst), one(previous), 60.0, 75.0, np.array([dense]), np.array([steady]),
                                              210.0)
    assert learned[0] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("quiet_minute", "delay", "dense"),
    [
        pytest.param(None, 180.0, True, id="busy-throughout"),
        pytest.param(9, 180.0, False, id="a-pause-in-the-last-interval"),
        pytest.param(6, 180.0, False, id="a-pause-within-the-delay-and-an-interval"),
        pytest.param(5, 180.0, True, id="a-pause-before-it"),
        pytest.param(8, None, False, id="without-a-delay-within-two-intervals"),
        pytest.param(7, None, True, id="without-a-delay-before-them"),
    ],
)
def test_dense_arrivals_over_the_history(quiet_minute, delay, dense) -> None:
    """With the arrivals' history, a pause inside the delay (and an interval) leaves the oldest
    event younger than the delay though the rate window and the last interval are busy."""
    times = 60.0 * np.arange(11)
    per_minute = np.full((10, 4), 60.0)  # (1/s each of 4 partitions)
    if quiet_minute is not None:
        per_minute[quiet_minute] = 0.0
    positions = np.vstack([np.zeros((1, 4)), per_minute.cumsum(axis=0)])
    rates = np.ones(4)
    assert bool(kernel.dense_arrivals(rates, rates, one(delay), 60.0, history=(times, positions))[0]) is dense
    assert bool(kernel.dense_arrivals(rates, rates, one(delay), 60.0)[0])  # (without it: the rates alone)


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        pytest.param([60.0, 120.0, 240.0], [3.0, 2.0, 1.0], id="the-intervals-ending-within-the-seconds"),
        pytest.param([0.0], [math.inf], id="none-within"),
    ],
)
def test_quietest_rate(seconds, expected) -> None:
    times = 60.0 * np.arange(5)
    positions = np.array([0.0, 60.0, 180.0, 300.0, 480.0])[:, None] * np.array([[0.5, 0.5]])  # (1, 2, 2, 3 /s)
    assert kernel.quietest_rate(times, positions, np.array(seconds)).tolist() == pytest.approx(expected)


@pytest.mark.parametrize(
    ("recent", "delay", "dense"),
    [
        pytest.param(10 / 60, None, True, id="ten-events-an-interval-without-a-delay"),
        pytest.param(9.9 / 60, None, False, id="fewer-over-an-interval"),
        pytest.param(10 / 180, 180.0, True, id="ten-events-over-the-delay"),
        pytest.param(9.9 / 180, 180.0, False, id="fewer-over-the-delay"),
        pytest.param(10 / 60, 30.0, True, id="a-short-delay-counts-an-interval"),
    ],
)
def test_dense_arrivals(recent, delay, dense) -> None:
    """Per partition on average, at the lower of the rate window's and the last interval's rates."""
    rates = np.full(4, recent)
    assert bool(kernel.dense_arrivals(rates, rates, one(delay), 60.0)[0]) is dense
    assert bool(kernel.dense_arrivals(rates * 2, rates, one(delay), 60.0)[0]) is dense  # (the lower of the two)
    assert bool(kernel.dense_arrivals(rates, rates * 2, one(delay), 60.0)[0]) is dense


@pytest.mark.parametrize(
    ("backlog", "lag", "busy"),
    [
        pytest.param(201.0, 0.0, True, id="over-two-intervals"),
        pytest.param(200.0, 0.0, False, id="at-two-intervals"),
        pytest.param(201.0, 60.0, True, id="a-lag-of-an-interval-is-allowed-for-already"),
        pytest.param(201.0, 61.0, False, id="a-longer-lag-counts-whole"),
        pytest.param(301.7, 61.0, True, id="over-two-intervals-and-the-lag"),
        pytest.param(500.0, 180.0, False, id="checkpoints-180-s-late-at-five-intervals"),
        pytest.param(501.0, 180.0, True, id="beyond-the-lag"),
    ],
)
def test_busy_partitions(backlog, lag, busy) -> None:
    """100 events arrived over a 60 s interval; the backlog at both ends."""
    assert bool(kernel.busy_partitions(backlog, backlog + 50.0, 100.0, lag, 60.0)) is busy


@pytest.mark.parametrize(
    ("start", "end", "lag", "busy"),
    [
        pytest.param(2201.0, 2201.0, 180.0, True, id="beyond-what-arrived-over-the-lag"),
        pytest.param(2200.0, 2201.0, 180.0, False, id="the-start-at-its-lag-s-arrivals"),
        pytest.param(2201.0, 1700.0, 180.0, False, id="the-end-at-its-lag-s-arrivals"),
        pytest.param(1800.0, 1600.0, 180.0, False, id="a-quiet-interval-after-busy-ones-holds-the-lag-s-backlog"),
        pytest.param(201.0, 201.0, 60.0, True, id="a-lag-of-an-interval-counts-none"),
    ],
)
def test_busy_partitions_over_what_arrived_over_the_lag(start, end, lag, busy) -> None:
    """100 events arrived over the 60 s interval, 2,000 over the lag before its start and 1,500
    before its end (the arrivals fell): the backlog a checkpoint trailing by the lag shows is what
    arrived then, not the interval's rate over the lag (300 events: every partition busy)."""
    arrived = (np.array([2000.0]), np.array([1500.0]))
    assert bool(kernel.busy_partitions(np.array([start]), np.array([end]), np.array([100.0]), lag, 60.0, arrived)[0]) is busy


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        pytest.param(60.0, 180.0, id="the-last-interval"),
        pytest.param(90.0, 240.0, id="read-between-samples"),
        pytest.param(240.0, 480.0, id="the-whole-history"),
        pytest.param(300.0, 540.0, id="before-it-at-the-first-interval-s-rate"),
    ],
)
def test_arrived_before(seconds, expected) -> None:
    times = 60.0 * np.arange(5)
    positions = np.array([0.0, 60.0, 180.0, 300.0, 480.0])[:, None] * np.array([[1.0, 2.0]])
    assert kernel.arrived_before(times, positions, seconds)[:, 0].tolist() == pytest.approx([expected, 2 * expected])
    per_candidate = np.stack([positions, 3 * positions], axis=2)  # (samples, partitions, candidates)
    assert kernel.arrived_before(times, per_candidate, np.array([seconds, seconds]))[0].tolist() == pytest.approx(
        [expected, 3 * expected])


@pytest.mark.parametrize(
    ("clipped", "previous", "delay", "expected"),
    [
        pytest.param(False, None, 75.0, True, id="first-at-the-ceiling-a-bound"),
        pytest.param(False, None, 74.0, False, id="first-below-it-seen"),
        pytest.param(True, 75.0, 85.0, True, id="following-up-still-a-bound"),
        pytest.param(True, 75.0, 75.0, True, id="unchanged-still-a-bound"),
        pytest.param(True, 75.0, 60.0, False, id="lowered-by-an-age-seen"),
        pytest.param(False, 74.5, 75.0, False, id="crept-to-the-ceiling-no-bound"),
    ],
)
def test_delay_clipped(clipped, previous, delay, expected) -> None:
    assert bool(kernel.delay_clipped(np.array([clipped]), one(previous), one(delay), 75.0)[0]) is expected


@pytest.mark.parametrize(
    ("delay", "clipped", "lag"),
    [
        pytest.param(75.0, False, 75.0, id="seen-the-delay"),
        pytest.param(75.0, True, 210.0, id="a-bound-the-longest-it-may-follow-to"),
        pytest.param(250.0, True, 250.0, id="past-it-the-delay"),
    ],
)
def test_saturation_lag(delay, clipped, lag) -> None:
    assert kernel.saturation_lag(one(delay), np.array([clipped]), 210.0)[0] == pytest.approx(lag)


@pytest.mark.parametrize(
    ("delay", "trail"),
    [
        pytest.param(None, 60.0, id="none-learned-an-interval"),
        pytest.param(30.0, 30.0, id="below-the-ceiling-the-delay"),
        pytest.param(74.9, 74.9, id="just-below-the-ceiling"),
        pytest.param(75.0, 210.0, id="at-the-ceiling-the-longest-it-may-follow-to"),
        pytest.param(111.0, 210.0, id="following-past-the-ceiling"),
        pytest.param(250.0, 250.0, id="past-the-steady-ceiling-the-delay"),
    ],
)
def test_learning_trail(delay, trail) -> None:
    """A delay at its ceiling is a lower bound: the first ages were older still."""
    assert kernel.learning_trail(one(delay), 75.0, 210.0, 60.0)[0] == pytest.approx(trail)


@pytest.mark.parametrize(
    ("delay", "interval", "trail"),
    [
        pytest.param(None, 30.0, 30.0, id="none-learned-collect-every-30-s"),
        pytest.param(None, 120.0, 120.0, id="none-learned-collect-every-2-min"),
        pytest.param(20.0, 30.0, 20.0, id="learned-the-delay-whatever-the-interval"),
    ],
)
def test_learning_trail_without_a_delay_is_the_collection_interval(delay, interval, trail) -> None:
    """It said "an interval" and returned 60 s: collect every 2 minutes, and the interval after an
    action was learned from though the checkpoints could still show the count before it."""
    assert kernel.learning_trail(one(delay), 75.0, 210.0, interval)[0] == pytest.approx(trail)


@pytest.mark.parametrize(
    ("worst", "previous", "youngest", "steady", "dense", "expected"),
    [
        pytest.param(180.0, 75.0, None, False, True, 75.0, id="no-steady-lag-old-ages-are-no-delay"),
        pytest.param(180.0, 75.0, 180.0, False, True, 75.0 + 0.1 * 105.0, id="follows-a-tenth-of-the-gap-below-the-maximum"),
        pytest.param(180.0, 75.0, 60.0, False, True, 75.0, id="a-younger-lag-raises-nothing"),
        pytest.param(400.0, 200.0, 400.0, False, True, 210.0, id="never-past-the-steady-ceiling"),
        pytest.param(180.0, 75.0, 180.0, False, False, 75.0, id="a-quiet-spell-keeps-it"),
        pytest.param(180.0, 75.0, 120.0, True, True, 75.0 + 0.1 * 105.0, id="at-the-maximum-the-further-of-the-two"),
        pytest.param(100.0, 120.0, 130.0, False, True, 100.0, id="lower-worst-ages-still-lower-it"),
        pytest.param(500.0, None, 180.0, False, True, 75.0, id="first-reading-at-most-the-ceiling"),
    ],
)
def test_learned_checkpoint_delay_follows_the_youngest_steady_lag(worst, previous, youngest, steady, dense, expected) -> None:
    """Below the maximum the delay followed no age (NASA's first day at 125 s for a 180 s delay, every
    age read 55 s too old): it follows the youngest steady lag of an owner that kept up."""
    learned = kernel.learned_checkpoint_delay(one(worst), one(previous), 60.0, 75.0, np.array([dense]), np.array([steady]),
                                              210.0, one(youngest))
    assert learned[0] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("moved", "rate", "kept_up"),
    [
        pytest.param((200.0, 200.0, 500.0, 10.0), 10.0, (True, True, False, False), id="under-and-over-the-spare-share"),
        pytest.param((240.0, 240.0, 480.0, 0.0), 10.0, (True, True, True, False), id="at-the-share-kept-up"),
        pytest.param((241.0, 240.0, 0.0, 0.0), 10.0, (False, False, True, False), id="the-owners-sum-counts"),
        pytest.param((200.0, None, 100.0, 0.0), 10.0, (False, False, True, False), id="no-checkpoint-unknown"),
        pytest.param((10.0, 10.0, 10.0, 10.0), math.nan, (False, False, False, False), id="no-rate-none"),
    ],
)
def test_keeping_up(moved, rate, kept_up) -> None:
    """Partitions 0 and 1 share owner 0, partition 2 is owner 1's, partition 3 has no live owner;
    an instance does ``rate``/s, so over 60 s an owner kept up at 0.8 x 600 = 480 events or fewer."""
    before = np.array([[1000.0]] * 4)
    now = np.array([[0.0] if value is None else [1000.0 + value] for value in moved])
    owners = kernel.Owners(np.array([[0], [0], [1], [-1]]))
    assert kernel.keeping_up((now, before), owners, np.array([rate]), 60.0)[:, 0].tolist() == list(kept_up)


@pytest.mark.parametrize(
    ("moved", "kept_up"),
    [
        pytest.param((300.0, 300.0, 600.0, 200.0), (False, False, False, True), id="a-hub-with-spare-the-light-owner-kept-up"),
        pytest.param((300.0, 300.0, 600.0, 240.0), (False, False, False, True), id="at-the-hubs-share-kept-up"),
        pytest.param((300.0, 300.0, 600.0, 241.0), (False, False, False, False), id="a-hub-at-its-capacity-a-wait-not-a-delay"),
        pytest.param((300.0, None, 600.0, 240.0), (False, False, False, True), id="an-unknown-checkpoint-adds-nothing"),
    ],
)
def test_keeping_up_on_a_hub_at_its_capacity(moved, kept_up) -> None:
    """Three owners (partitions 0 and 1, 2, 3) at 10/s: over 60 s the hub kept up at 0.8 x 600 x 3
    = 1,440 events or fewer. An owner under its rate on a hub that processes more than that may be
    held back with the rest (a namespace serving every partition at its busiest owner's pace):
    its steady lag was read as the delay (210 s, 30 violation minutes on WC98's busiest half-day)."""
    before = np.array([[1000.0]] * 4)
    now = np.array([[0.0] if value is None else [1000.0 + value] for value in moved])
    owners = kernel.Owners(np.array([[0], [0], [1], [2]]))
    assert kernel.keeping_up((now, before), owners, np.array([10.0]), 60.0)[:, 0].tolist() == list(kept_up)


@pytest.mark.parametrize(
    ("checkpoint_before", "checkpoint_now", "samples", "hot", "lag"),
    [
        pytest.param(60.0, 120.0, 6, False, 180.0, id="trails-by-as-much-a-delay"),
        pytest.param(64.0, 120.0, 6, False, 180.0, id="within-a-tenth-of-an-interval"),
        pytest.param(30.0, 120.0, 6, False, math.inf, id="a-drain-changes-it"),
        pytest.param(90.0, 120.0, 6, False, math.inf, id="a-growing-backlog-changes-it"),
        pytest.param(0.0, 120.0, 6, False, math.inf, id="no-checkpoint-before"),
        pytest.param(240.0, 301.0, 6, False, math.inf, id="nothing-waits"),
        pytest.param(60.0, 120.0, 6, True, math.inf, id="hot-set-aside"),
        pytest.param(60.0, 120.0, 2, False, math.inf, id="too-short-a-history"),
    ],
)
def test_steady_lags(checkpoint_before, checkpoint_now, samples, hot, lag) -> None:
    """One partition receiving 1 event/s (sequence number N at N s), sampled every minute: S events
    checkpointed (its oldest unprocessed event S, arrived at S s) read at t trail by t - S seconds."""
    times = 60.0 * np.arange(6)[-samples:]
    positions = times[:, None].copy()  # (last-enqueued: one event a second since 0)
    read = (np.array([[checkpoint_now]]), np.array([[checkpoint_before]]))
    got = kernel.steady_lags(read, (times, positions), np.array([[1.0]]), 60.0, hot=np.array([[hot]]) if hot else None)
    assert got.min() == pytest.approx(lag)


@pytest.mark.parametrize(
    ("throughput", "floor", "expected"),
    [
        pytest.param(None, 10.0, None, id="nothing-learned-stays-nothing"),
        pytest.param(5.0, None, 5.0, id="no-floor"),
        pytest.param(5.0, 10.0, 9.5, id="a-rate-far-below-the-floor-rises-to-its-95-percent"),
        pytest.param(8.0, 10.0, 9.5, id="a-rate-20-percent-below-the-floor-rises-to-its-95-percent"),
        pytest.param(9.5, 10.0, 9.5, id="at-95-percent-of-the-floor-stands"),
        pytest.param(9.7, 10.0, 9.7, id="within-5-percent-stands"),
        pytest.param(16.0, 10.0, 16.0, id="above-the-floor-stands"),
    ],
)
def test_serving_throughput(throughput, floor, expected) -> None:
    np.testing.assert_allclose(kernel.serving_throughput(one(throughput), one(floor)), one(expected))
    plain = kernel.serving_throughput(NAN if throughput is None else throughput, NAN if floor is None else floor)
    assert (math.isnan(plain) if expected is None else plain == pytest.approx(expected))  # the engine's batch of one


@pytest.mark.parametrize(
    ("now", "earlier", "flat"),
    [
        pytest.param([106.0, 100.0], [100.0, 100.0], True, id="grew-by-the-tolerance"),
        pytest.param([106.1, 100.0], [100.0, 100.0], False, id="grew-beyond-it"),
        pytest.param([94.0, 100.0], [100.0, 100.0], True, id="shrank-by-the-tolerance"),
        pytest.param([93.9, 100.0], [100.0, 100.0], False, id="drains-beyond-it"),
    ],
)
def test_backlog_flat(now, earlier, flat) -> None:
    """Arrivals 1/s on each of two partitions, a tolerance of 3 s of them: 6 events."""
    column = np.array(now)[:, None], np.array(earlier)[:, None], np.ones((2, 1))
    assert bool(kernel.backlog_flat(*column, 3.0)[0]) is flat


@pytest.mark.parametrize(
    ("checkpoint", "before", "backlog", "keep_pace"),
    [
        pytest.param([5.0, 7.0], [4.0, 6.0], [10.0, 10.0], True, id="every-checkpoint-moved"),
        pytest.param([5.0, 6.0], [4.0, 6.0], [10.0, 10.0], False, id="one-waits-with-a-backlog"),
        pytest.param([5.0, 6.0], [4.0, 6.0], [10.0, 0.0], True, id="one-waits-caught-up"),
        pytest.param([5.0, 0.0], [4.0, 0.0], [10.0, 3.0], False, id="none-yet-with-a-backlog"),
    ],
)
def test_checkpoints_keep_pace(checkpoint, before, backlog, keep_pace) -> None:
    arrays = (np.array(values)[:, None] for values in (checkpoint, before, backlog))
    assert bool(kernel.checkpoints_keep_pace(*arrays)[0]) is keep_pace


@pytest.mark.parametrize(
    ("serving", "processed", "growing", "continuing", "most", "stalled"),
    [
        pytest.param((4, 8), (66.0, 1.0), True, False, 32.0, True, id="more-instances-processed-less"),
        pytest.param((4, 8), (66.0, 16.4), True, False, 32.0, True, id="within-the-tolerance-no-count-serves"),
        pytest.param((4, 8), (66.0, 16.6), True, False, 32.0, False, id="at-the-arrivals-the-maximum-would-serve"),
        pytest.param((4, 8), (10.0, 11.1), True, False, 32.0, False, id="more-instances-raised-it"),
        pytest.param((4, 8), (66.0, 1.0), True, False, 600.0, False, id="a-slow-down-more-instances-serve-is-no-stall"),
        pytest.param((4, 4), (66.0, 1.0), True, False, 32.0, False, id="no-more-instances-no-test"),
        pytest.param((4, 8), (66.0, 1.0), False, False, 32.0, False, id="a-backlog-that-does-not-grow"),
        pytest.param((16, 32), (1.0, 2.0), True, True, 32.0, True, id="a-recognised-stall-goes-on-while-it-grows"),
        pytest.param((16, 32), (1.0, 2.0), False, True, 32.0, False, id="and-ends-when-it-stops-growing"),
    ],
)
def test_stalled(serving, processed, growing, continuing, most, stalled) -> None:
    """Arrivals 66/s; ``most``: the highest count's worth of instances."""
    assert bool(kernel.stalled(*serving, *processed, np.array([growing]), np.array([continuing]), 66.0, most)[0]) is stalled


@pytest.mark.parametrize(
    ("arrivals", "backlog", "highest", "expected"),
    [
        pytest.param(66.0, 0.0, 32, 4, id="nothing-waiting-the-arrivals-alone"),
        pytest.param(66.0, 4950.0, 32, 5, id="an-instance-more-drains-the-backlog-within-the-slo"),
        pytest.param(66.0, 4950.1, 32, 6, id="a-hair-more-takes-the-next"),
        pytest.param(66.0, 179_000.0, 32, 32, id="never-above-the-highest"),
    ],
)
def test_recovery_counts(arrivals, backlog, highest, expected) -> None:
    """At 16.5/s per instance and an SLO of 300 s: what serves the arrivals and drains the backlog
    once stalled consumers recover (``recovery_counts``)."""
    got = kernel.recovery_counts(one(arrivals), one(backlog), one(16.5), one(300.0), np.array([highest]))
    assert int(got[0]) == expected


# --- oldest-event ages ------------------------------------------------------------------------------------------
# History: last-enqueued 99, 199, 299 at t = 0, 60, 120 s (100 events a minute).


def oldest_event_age(times, last_enqueued, checkpoint: int | None, beginning: int, rate: float) -> float:
    """One partition's oldest-event age, as a batch of one."""
    oldest = (checkpoint + 1) if checkpoint is not None and checkpoint >= 0 else max(beginning, 0)
    return float(kernel.oldest_event_ages(np.asarray(times, dtype=float), np.asarray(last_enqueued, dtype=float)[:, None],
                                          np.array([[float(oldest)]]), np.array([rate]))[0, 0])


@pytest.mark.parametrize(
    ("checkpoint", "beginning", "rate", "expected"),
    [
        pytest.param(299, 0, 0.0, 0.0, id="caught-up"),
        pytest.param(400, 0, 0.0, 0.0, id="checkpoint-ahead"),
        pytest.param(298, 0, 0.0, 0.0, id="only-the-newest-waiting"),
        pytest.param(249, 0, 0.0, 120 - (60 + 51 / 100 * 60), id="interpolated-in-second-interval"),
        pytest.param(199, 0, 0.0, 120 - (60 + 1 / 100 * 60), id="just-after-second-sample"),
        pytest.param(149, 0, 0.0, 120 - 51 / 100 * 60, id="interpolated-in-first-interval"),
        pytest.param(98, 0, 100 / 60, 120.0, id="exactly-at-first-sample"),
        pytest.param(49, 0, 100 / 60, 120 + 49 * 60 / 100, id="extrapolated-at-rate"),
        pytest.param(49, 0, 50 / 60, 120 + 49 * 60 / 50, id="extrapolated-slower-rate-older"),
        pytest.param(None, 0, 100 / 60, 120 + 99 * 60 / 100, id="no-checkpoint-from-beginning"),
        pytest.param(None, 60, 100 / 60, 120 + 39 * 60 / 100, id="no-checkpoint-beginning-60"),
        pytest.param(-1, 0, 100 / 60, 120 + 99 * 60 / 100, id="checkpoint-minus-one"),
    ],
)
def test_oldest_event_age(checkpoint, beginning, rate, expected) -> None:
    assert oldest_event_age([0.0, 60.0, 120.0], [99, 199, 299], checkpoint, beginning, rate) == pytest.approx(expected)


@pytest.mark.parametrize(("times", "positions"), [([0.0, 60.0], [99, 99]), ([60.0], [99])])
def test_oldest_event_age_without_rate_is_the_history_span(times, positions) -> None:
    # no arrivals measured (nothing enqueued, or a single sample) and an event older than the
    # history: it is at least as old as the history; extrapolating at no rate would say ~1e12 s
    assert oldest_event_age(times, positions, 49, 0, 0.0) == times[-1] - times[0]


@pytest.mark.parametrize(
    ("times", "positions", "expected"),
    [
        ([0.0], [99], 0.0),  # caught up: oldest (100) not enqueued yet
        ([0.0, 60.0], [-1, 149], 60 - (0 + 101 / 150 * 60)),  # partition was empty at the first sample
    ],
)
def test_oldest_event_age_edges(times, positions, expected) -> None:
    assert oldest_event_age(times, positions, 99, 0, 1.0) == pytest.approx(expected)


def test_rates_and_peaks_from_the_history() -> None:
    times = np.array([0.0, 60.0, 120.0, 180.0])
    positions = np.array([[0.0, 0.0], [600.0, 60.0], [1800.0, 60.0], [2400.0, 120.0]])
    np.testing.assert_allclose(kernel.rate_since(times, positions, 0), [2400 / 180, 120 / 180])
    np.testing.assert_allclose(kernel.rate_since(times, positions, 2), [10.0, 1.0])
    assert (kernel.rate_since(times, positions, 3) == 0).all()  # over no time
    np.testing.assert_allclose(kernel.later_peaks(times, positions), [[20.0, 1.0], [20.0, 1.0], [10.0, 1.0]])


# --- the fluid model ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "backlog", "arrivals", "service", "seconds", "expected"),
    [
        pytest.param(100, 500, 10, 20, 30, 70, id="draining"),
        pytest.param(100, 500, 10, 20, 200, 0, id="drained-floor-zero"),
        pytest.param(100, 500, 10, 5, 30, 115, id="filling"),
        pytest.param(100, 500, 10, 10, 30, 100, id="balanced"),
        pytest.param(0, 0, 10, 20, 30, 0, id="idle-keeps-up"),
        pytest.param(0, 0, 10, 10, 30, 0, id="idle-exactly-keeps-up"),
        pytest.param(0, 0, 10, 5, 30, 15, id="idle-falls-behind"),
        pytest.param(100, 500, 0, 20, 30, 0, id="no-arrivals-drains-in-time"),
        pytest.param(100, 500, 0, 10, 30, 130, id="no-arrivals-too-slow"),
        pytest.param(100, 500, 0, 0, 30, 130, id="no-arrivals-no-service"),
        pytest.param(100, 500, 10, 5, 0, 100, id="zero-seconds"),
        pytest.param(100, 500, 10, 5, -5, 100, id="negative-seconds"),
    ],
)
def test_predicted_age(age, backlog, arrivals, service, seconds, expected) -> None:
    got = kernel.predicted_age(one(age)[:, None], one(backlog)[:, None], one(arrivals)[:, None], one(service)[:, None], one(seconds))
    assert got[0, 0] == pytest.approx(expected)


def test_rising_factor_is_the_rate_halfway_through_the_dwell() -> None:
    assert kernel.rising_factor(0.0, 2400.0) == 1.0
    assert kernel.rising_factor(1 / 1200, 2400.0) == pytest.approx(2.0)
    assert np.allclose(kernel.rising_factor(1 / 1200, np.array([0.0, 1200.0])), [1.0, 1.5])


@pytest.mark.parametrize(
    ("measured", "predicted", "expected"),
    [
        (True, 900.0, 600.0),  # the rate is measured: the dwell's drain, however old the backlog
        (False, 250.0, 600.0),  # a lower bound, past the safety margin (210 s) but within the SLO
        (False, 300.0, 600.0),  # exactly at the SLO: still within it
        (False, 301.0, 300.0),  # a lower bound and the SLO itself at stake: drain within the SLO
    ],
)
def test_drain_seconds(measured, predicted, expected) -> None:
    # a 1,200 s dwell drains over 600 s; a 300 s dwell over the SLO, never less
    assert kernel.drain_seconds(1200.0, 300.0, measured, predicted) == expected
    batch = kernel.drain_seconds(np.array([1200.0, 300.0]), np.array([300.0, 300.0]), np.array([measured, measured]),
                                 np.array([predicted, predicted]))
    assert batch.tolist() == [expected, 300.0]


def test_scale_out_need_and_calm_rates() -> None:
    # 10/s forecast, 1,200 waiting: by the time new instances serve (60 s + 30 s) 2,100 piled up,
    # less 60 s of safety margin: 1,500 to drain over 300 s on top of the forecast.
    assert kernel.scale_out_need(one(10.0), one(1200.0), 60.0, 30.0, 60.0, 300.0)[0] == pytest.approx(15.0)
    assert kernel.scale_out_need(one(10.0), one(0.0), 60.0, 0.0, 120.0, 300.0)[0] == pytest.approx(10.0)  # nothing to drain
    assert kernel.calm_rates(one(10.0), one(12.0), 1.1, 0.0, 1200.0)[0] == pytest.approx(13.2)  # the peak with headroom
    assert kernel.calm_rates(one(10.0), one(5.0), 1.1, 1 / 1200, 1200.0)[0] == pytest.approx(15.0)  # rising: halfway


@pytest.mark.parametrize(
    ("rates", "expected"),
    [
        pytest.param([10.0, 10.0, 10.0, 10.0], 0.0, id="steady"),
        pytest.param([10.0, 12.0, 14.0, 16.0], 0.0, id="a clean ramp is trend, not noise"),
        # residuals +-1 about a flat 10/s: sqrt(4 / (4 - 2)) / 10
        pytest.param([9.0, 11.0, 11.0, 9.0], math.sqrt(2.0) / 10.0, id="noisy about a flat rate"),
        pytest.param([10.0, 10.0], 0.0, id="too few intervals"),
        pytest.param([0.0, 0.0, 0.0, 0.0], 0.0, id="no rate"),
    ],
)
def test_trend_noise(rates, expected) -> None:
    """The spread of the intervals' rates about their trend line, over their mean rate."""
    times = 60.0 * np.arange(len(rates) + 1)
    totals = np.concatenate(([0.0], np.cumsum(np.asarray(rates) * 60.0)))
    assert kernel.trend(times, totals)[1] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("peak", "noise", "full_noise", "expected"),
    [
        pytest.param(20.0, 0.30, 0.25, 22.0, id="noisy: the busiest interval with headroom"),
        pytest.param(20.0, 0.25, 0.25, 22.0, id="at full noise: wholly"),
        pytest.param(20.0, 0.1875, 0.25, 16.0, id="halfway up the ramp: halfway between forecast and peak"),
        pytest.param(20.0, 0.125, 0.25, 10.0, id="at half the full noise: the forecast alone"),
        pytest.param(20.0, 0.05, 0.25, 10.0, id="quiet: the forecast alone"),
        pytest.param(20.0, 0.0, 0.0, 22.0, id="full noise 0: always wholly"),
        pytest.param(5.0, 0.30, 0.25, 10.0, id="a busiest interval under the forecast changes nothing"),
    ],
)
def test_calm_rates_hold_at_the_busiest_interval_only_on_noisy_traffic(peak, noise, full_noise, expected) -> None:
    """On quiet traffic a busier interval a few minutes ago is a trend that has passed: holding a
    scale-in at it cost the family's 10%-noise diurnal member 1.355 of the fluid bound against
    1.122 without. On noisy traffic it is the next burst: without it, the 35% member cost 1.373
    against 1.235 and acted every 15 minutes instead of 89. Between, in proportion, so that a
    noise estimate that wanders does not switch the hold on and off."""
    calm = kernel.calm_rates(one(10.0), one(peak), 1.1, 0.0, 1200.0, noise, np.array([full_noise]))
    assert calm[0] == pytest.approx(expected)


# --- sizing by owner load (sizing.py's tables) ---------------------------------------------------------------------

# The worked example of sizing.py's docstring, and a variant where the exact load beats the bound.
EXAMPLE = np.array([60.0, 20, 20, 20, 20, 20, 20, 20])
EXAMPLE_OWNERS = ("a", "a", "b", "b", "c", "c", "d", "d")
UNEVEN = np.array([60.0, 40, 20, 20, 20, 20, 20, 20])
UNEVEN_OWNERS = ("a", "b", "a", "b", "c", "c", "d", "d")
TWO_OWNERS = ("a", "a", "b", "b", "a", "a", "b", "b")  # a: 60, 40, 20, 20 (140); b: 20 x 4 (80)


def busiest(loads: kernel.OwnerLoads, instances: int) -> float:
    return float(loads.busiest(np.array([instances]))[0])


@pytest.mark.parametrize(
    ("forecast", "owners", "instances", "expected"),
    [
        pytest.param(EXAMPLE, None, 4, 120.0, id="no-ownership-k-times-heaviest"),
        pytest.param(EXAMPLE, EXAMPLE_OWNERS, 4, 80.0, id="current-count-exact"),
        pytest.param(EXAMPLE, EXAMPLE_OWNERS, 3, 100.0, id="fewer-k-heaviest"),
        pytest.param(EXAMPLE, EXAMPLE_OWNERS, 2, 120.0, id="half-k-heaviest"),
        pytest.param(EXAMPLE, EXAMPLE_OWNERS, 8, 60.0, id="one-each-heaviest"),
        pytest.param(UNEVEN, UNEVEN_OWNERS, 4, 80.0, id="exact-below-bound"),
        pytest.param(UNEVEN, (*UNEVEN_OWNERS[:7], None), 4, 100.0, id="an-unowned-partition-bound"),
        pytest.param(UNEVEN, (None,) * 8, 4, 120.0, id="nothing-owned-is-no-ownership"),
    ],
)
def test_busiest_load(forecast, owners, instances, expected) -> None:
    assert busiest(loads_of(forecast, owners), instances) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("forecast", "instances", "by_draw", "expected"),
    [
        # k = 2: the bound is 60 + 40 = 100; a keeps 2 of its 4 (140 / 2 = 70); a newcomer takes 2
        # of the moved ones: 2 x 27.5 = 55 at the mean, 0.75 of the way to 100 = 88.75.
        pytest.param(UNEVEN, 4, True, 88.75, id="newcomers-by-the-draw"),
        pytest.param(UNEVEN, 4, False, 100.0, id="newcomers-by-the-bound"),
        # k = 1: the bound is 60; a keeps 1 of 4 (35); a newcomer 27.5 + 0.75 x 32.5.
        pytest.param(UNEVEN, 8, True, 51.875, id="one-each-by-the-draw"),
        pytest.param(np.full(8, 20.0), 4, True, 40.0, id="equal-loads-keep-the-bound"),
        # k = 3: the bound is 60 + 40 + 20 = 120; a keeps 3 of its 4 (0.75 x 110); a newcomer 60 + 0.75 x 60.
        pytest.param(np.array([60.0, 40, 20, 20, 5, 5, 5, 5]), 3, True, 105.0, id="three-each"),
        # a owns the four heavy ones: keeping 2 of them (200 / 2) is the bound, above any newcomer (87.75).
        pytest.param(np.array([50.0, 50, 1, 1, 50, 50, 1, 1]), 4, True, 100.0, id="an-owner-keeps-the-most"),
    ],
)
def test_busiest_load_after_a_scale_out(forecast, instances, by_draw, expected) -> None:
    """More instances than the current owners (``NEWCOMER_MARGIN``): the owners keep ``k / c`` of
    their load, a newcomer is sized from ``k`` at the mean three quarters of the way to the ``k``
    heaviest, the busier of the two, never above the bound."""
    assert busiest(loads_of(forecast, TWO_OWNERS, by_draw=by_draw), instances) == pytest.approx(expected)
    assert busiest(loads_of(forecast, TWO_OWNERS, by_draw=by_draw), instances) <= busiest(loads_of(forecast, TWO_OWNERS),
                                                                                          instances)


@pytest.mark.parametrize(("forecast", "distinct"), [
    pytest.param(np.arange(8.0), True, id="all-distinct"),
    pytest.param(np.array([1.0, 1, 1, 1, 2, 2, 3, 4]), True, id="half-distinct"),
    pytest.param(np.array([1.0, 1, 1, 1, 2, 2, 2, 2]), False, id="two-shares"),
    pytest.param(np.zeros(8), False, id="all-equal"),
])
def test_distinct_shares(forecast, distinct) -> None:
    assert bool(kernel.distinct_shares(forecast[:, None])[0]) is distinct


@pytest.mark.parametrize(
    ("owners", "instances", "expected"),
    [
        pytest.param(None, 4, [50.0] * 8, id="no-ownership-equal-share"),
        pytest.param(EXAMPLE_OWNERS, 4, [75.0] + [50.0] * 7, id="busiest-ratio-or-equal-share"),
        pytest.param(EXAMPLE_OWNERS, 3, [60.0] + [100 / 3] * 7, id="bound-ratio-one"),
        pytest.param(EXAMPLE_OWNERS, 2, [50.0] + [25.0] * 7, id="overloaded-bound"),
        pytest.param(EXAMPLE_OWNERS, 0, [0.0] * 8, id="no-instance-serves-nothing"),
    ],
)
def test_service_rates(owners, instances, expected) -> None:
    assert loads_of(EXAMPLE, owners).service(EXAMPLE[:, None], np.array([instances]))[:, 0] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("instances", "expected"),
    [(1, MU / 32), (8, MU / 4), (11, MU / 3), (16, MU / 2), (24, MU / 2), (32, MU), (64, MU)],
)
def test_without_ownership_each_partition_gets_the_busiest_owner_share(instances: int, expected: float) -> None:
    forecast = np.linspace(1.0, 5.0, PARTITIONS)
    served = loads_of(forecast, None, rate=MU).service(forecast[:, None], np.array([instances]))[:, 0]
    assert served == pytest.approx(np.full(PARTITIONS, expected))


def test_a_set_aside_partition_weighs_as_the_heaviest_other() -> None:
    """Partition 0 is hotter than one instance: set aside (forecast 0), it still takes its share
    of its owner, counted as partition 1's 40/s: a's load is 40 + 20."""
    forecast = np.where(np.arange(8) == 0, 0.0, UNEVEN)
    loads = loads_of(forecast, UNEVEN_OWNERS, set_aside=np.arange(8) == 0)
    assert busiest(loads, 4) == pytest.approx(60.0)  # b: 40 + 20, a: 40 (as heavy as b's) + 20
    # At 2 the survivors keep their 60/s and take two moved partitions at the others' mean, 140/6 each.
    assert busiest(loads, 2) == pytest.approx(60 + 2 * 140 / 6)


# --- the counts -----------------------------------------------------------------------------------------------------
# The worked example at 100/s per instance, owners a-d at 4 instances (a carries 80/s).

LEVELS = np.array([[1, 2, 3, 4, 5, 6, 8]])


@pytest.mark.parametrize(
    ("scale", "capacity", "expected"),
    [
        pytest.param(1.0, 4, 5, id="the-next-count-serves"),
        pytest.param(1.0, 2, 3, id="from-below"),
        pytest.param(1.5, 4, 8, id="needs-one-partition-each"),
        pytest.param(3.0, 4, 8, id="nothing-serves-the-highest"),
    ],
)
def test_scale_out_counts(scale, capacity, expected) -> None:
    need = EXAMPLE[:, None] * scale
    loads = loads_of(need[:, 0], EXAMPLE_OWNERS)
    got = kernel.scale_out_counts(LEVELS, np.ones(LEVELS.shape, dtype=bool), np.array([capacity]), np.array([8]), 8,
                                  [(loads, need)])
    assert got[0] == expected


@pytest.mark.parametrize(
    ("scale", "capacity", "age", "dwell", "expected"),
    [
        # at 3 the k heaviest (and the busiest survivor) carry 100/s: every partition is served its
        # forecast, holding indefinitely; at 2 the 60/s partition gets 50/s: 160 s over 1/6 = 960 s
        pytest.param(1.0, 4, 0.0, 1200.0, 3, id="the-bound-holds"),
        pytest.param(1.0, 4, 0.0, 900.0, 2, id="a-shorter-dwell-takes-two"),
        pytest.param(1.0, 4, 100.0, 900.0, 3, id="older-events-hold-less"),
        pytest.param(1.0, 5, 0.0, 1200.0, 3, id="exact-loads-below-the-capacity"),
        # at 1.25 the 75/s partition gets 60/s at 3: 156 s over 0.2 = 780 s; at 4 the owners are exact (100/s)
        pytest.param(1.25, 5, 0.0, 1200.0, 4, id="filling-too-fast-at-three"),
        pytest.param(1.25, 5, 0.0, 300.0, 2, id="a-short-dwell-takes-two"),
        pytest.param(3.0, 5, 0.0, 1200.0, -1, id="none-below-holds"),
        # every partition served its forecast at 3 (none fills), but the oldest events are 200 s
        # old against a 180 s limit and do not drain: no count below holds, however much it serves
        pytest.param(1.0, 4, 200.0, 900.0, -1, id="past-the-limit-nothing-holds"),
    ],
)
def test_scale_in_counts(scale, capacity, age, dwell, expected) -> None:
    calm = EXAMPLE[:, None] * scale
    loads = loads_of(calm[:, 0], EXAMPLE_OWNERS)
    ages = np.full((8, 1), age)
    below = int((capacity > LEVELS).sum())
    got, held = kernel.scale_in_counts(LEVELS, np.array([below]), np.array([capacity]), 8, one(180.0), one(dwell), one(120.0),
                                       [(loads, calm, ages)])
    assert got[0] == expected

    def hold(count: int) -> float:
        return float(kernel.hold_seconds(loads, calm, ages, np.array([count]), one(180.0), one(120.0))[0])

    if expected > 0:  # it holds for the dwell (as long as it says), and the count below does not
        assert hold(expected) == held[0] and held[0] >= dwell > (hold(expected - 1) if expected > 1 else -1.0)
    else:
        assert math.isnan(held[0])


@pytest.mark.parametrize(
    ("age", "count", "holds"),
    [
        # each 5/s partition: two instances serve it 25/s (the owner's 100/s over four), 240 s
        # younger a minute; three 33.3/s, 340 s. The SLO 300 s, the limit 180 s, a scale-out 120 s
        # away: the limit alone lets two hold up to 660 s
        pytest.param(540.0, 2, True, id="back-at-the-slo-after-an-interval"),
        pytest.param(540.1, 2, False, id="still-past-the-slo-after-an-interval"),
        pytest.param(540.1, 3, True, id="a-count-that-drains-it-within-the-interval"),
        pytest.param(300.0, 2, True, id="at-the-slo-not-past-it"),
    ],
)
def test_hold_seconds_past_the_slo(age, count, holds) -> None:
    """A scale-in while the oldest event is past the SLO must bring it back within an interval
    (``hold_seconds``'s ``breach``); without it only the limit after a reaction counts."""
    calm = np.full((8, 1), 5.0)
    loads = loads_of(calm[:, 0], ("a",) * 8)
    ages = np.full((8, 1), age)
    seconds = kernel.hold_seconds(loads, calm, ages, np.array([count]), one(180.0), one(120.0), breach=(one(300.0), 60.0))
    assert (float(seconds[0]) > 0) is holds
    assert float(kernel.hold_seconds(loads, calm, ages, np.array([count]), one(180.0), one(120.0))[0]) > 0


# --- a candidate in a batch gets what it gets alone ----------------------------------------------------------------


@settings(max_examples=60, deadline=None, derandomize=True)
@given(partitions=st.integers(2, 16), candidates=st.integers(2, 12), seed=st.integers(0, 10_000))
def test_a_candidate_in_a_batch_gets_what_it_gets_alone(partitions: int, candidates: int, seed: int) -> None:
    """Random hubs and candidates (owners, forecasts, ages, throughputs, counts): every function of
    the kernel gives each column of a batch exactly what the candidate gets as a batch of one (a
    big batch searches its scale-in counts from the fluid model's estimate, one alone tries them all)."""
    rng = np.random.default_rng(seed)
    levels = np.array([list(range(1, partitions + 1))] * candidates)
    top = partitions + 1
    table = kernel.per_instance_table(partitions, top)
    owners = rng.integers(-1 if rng.random() < 0.3 else 0, max(partitions // 2, 1), (partitions, candidates))
    live = np.array([len(set(column[column >= 0])) for column in owners.T])
    forecast = rng.gamma(2.0, 10.0, (partitions, candidates)) * (rng.random((partitions, candidates)) < 0.9)
    ages = rng.uniform(0.0, 200.0, (partitions, candidates))
    backlog = rng.uniform(0.0, 5000.0, (partitions, candidates))
    rate = rng.uniform(5.0, 80.0, candidates)
    hot = rng.random((partitions, candidates)) < 0.1
    capacity = rng.integers(1, partitions + 1, candidates)
    by_draw = kernel.distinct_shares(forecast)
    limit, dwell, reaction = rng.uniform(60, 300, candidates), rng.uniform(60, 1800, candidates), rng.uniform(60, 240, candidates)
    below = (levels < capacity[:, None]).sum(axis=1)

    def run(columns: np.ndarray) -> tuple:
        owned = kernel.Owners(owners[:, columns])
        np.testing.assert_array_equal(owned.live, live[columns])
        loads = kernel.OwnerLoads(forecast[:, columns], hot[:, columns], owned, rate[columns], table, by_draw[columns])
        served = loads.service(forecast[:, columns], capacity[columns])
        then = kernel.predicted_age(ages[:, columns], backlog[:, columns], forecast[:, columns], served, reaction[columns])
        out = kernel.scale_out_counts(levels[columns], np.ones(levels[columns].shape, dtype=bool), capacity[columns],
                                      levels[columns, -1], top, [(loads, forecast[:, columns] * 1.5)])
        down, _ = kernel.scale_in_counts(levels[columns], below[columns], capacity[columns], top, limit[columns], dwell[columns],
                                      reaction[columns], [(loads, forecast[:, columns], ages[:, columns])])
        return loads.busiest(capacity[columns]), served, then, out, down

    together = run(np.arange(candidates))
    for column in range(candidates):
        alone = run(np.array([column]))
        for batched, single in zip(together, alone, strict=True):
            np.testing.assert_array_equal(batched[..., column], single[..., 0])


@pytest.mark.parametrize(
    ("served", "age", "expected"),
    [
        # one partition, 10/s arriving, limit 180 s, a scale-out 120 s away
        pytest.param(10.0, 100.0, math.inf, id="keeping-up-under-the-limit"),
        pytest.param(10.0, 200.0, 0.0, id="keeping-up-past-the-limit"),
        # served 20/s: the oldest event gets younger by 1 s a second: 300 - 120 = 180, not under
        pytest.param(20.0, 300.0, 0.0, id="draining-not-under-the-limit-in-time"),
        pytest.param(20.0, 290.0, math.inf, id="draining-under-the-limit-in-time"),
        # served 5/s: 0.5 s a second older; (180 - 60 - 100) / 0.5 = 40 s
        pytest.param(5.0, 100.0, 40.0, id="filling"),
    ],
)
def test_hold_seconds_of_a_backlog_past_the_limit(served, age, expected) -> None:
    """An old backlog that a count only keeps from growing is no surplus: the count holds for 0 s."""

    class Served:
        def service(self, calm, counts, columns):
            return np.full_like(calm, served)

    got = kernel.hold_seconds(Served(), np.array([[10.0]]), np.array([[age]]), np.array([1]), one(180.0), one(120.0))
    assert got[0] == pytest.approx(expected)


def _added_row_after_row(rows: np.ndarray) -> np.ndarray:
    sums = rows.astype(float)
    for index in range(1, len(rows)):
        sums[index] = sums[index - 1] + rows[index]
    return sums


@pytest.mark.parametrize("rows", [1, 2, 8, 32])
@pytest.mark.parametrize("columns", [1, 7, kernel.NARROW_COLUMNS + 1, 300])
def test_running_sums_add_row_after_row(rows: int, columns: int) -> None:
    """The owner loads' running sums (numpy's accumulation on the engine's few columns, a loop on
    a sweep's many, where it is faster) add row after row, bit for bit, whichever way they run:
    rows of mixed magnitudes, and one row repeated; laid out in rows (``OwnerLoads`` reads them
    at flat positions)."""
    rng = np.random.default_rng(rows * 1000 + columns)
    values = rng.uniform(0.0, 1.0, (rows, columns)) * 10.0 ** rng.integers(-6, 6, (rows, columns))
    repeated = np.repeat(values[:1], rows, axis=0)
    for got, expected in ((kernel._running_sums(values), _added_row_after_row(values)),
                          (kernel._running_sums(values[::-1]), _added_row_after_row(values[::-1])),
                          (kernel._running_sums(values[0], rows), _added_row_after_row(repeated))):
        np.testing.assert_array_equal(got, expected)
        assert got.flags.c_contiguous


@pytest.mark.parametrize(
    ("age", "backlog", "arrivals", "service", "seconds", "event_hub", "queue"),
    [
        pytest.param(50, 0, 10, 10, 60, 50, 0, id="issue-50-nothing-waits-keeping-up"),
        pytest.param(1000, 10, 1, 2, 60, 940, 0, id="issue-50-a-short-old-backlog-is-gone-in-seconds"),
        pytest.param(100, 5000, 10, 20, 60, 40, 136, id="a-burst-drains-at-the-rate-it-came-in"),
        pytest.param(100, 1000, 10, 5, 60, 130, 130, id="came-in-at-the-forecast-both-agree-falling-behind"),
        pytest.param(100, 1000, 10, 20, 60, 40, 40, id="came-in-at-the-forecast-both-agree-catching-up"),
        pytest.param(100, 500, 0, 0, 60, 160, 160, id="nobody-serving-both-age-by-the-clock"),
        pytest.param(100, 500, 0, 10, 60, 0, 0, id="no-arrivals-drained"),
        pytest.param(100, 1000, 10, 20, 0, 100, 100, id="no-time-no-change"),
    ],
)
def test_one_fluid_model_for_both_source_kinds(age, backlog, arrivals, service, seconds, event_hub, queue) -> None:
    """One function, ``predicted_age``, for both kinds: an Event Hubs partition passes no
    ``came_in`` (its backlog counts events behind the checkpoint: taken as come in at the
    forecast), a queue the rate its backlog came in (``backlog_came_in``); the queue mode's path
    over a changing service (``age_path``, one service here) says the same as the queue's row."""
    numbers = tuple(map(np.float64, (age, backlog, arrivals, service, seconds)))  # (as arrays: the engine's are)
    assert float(kernel.predicted_age(*numbers)) == pytest.approx(event_hub)
    came_in = kernel.backlog_came_in(float(backlog), float(age))
    assert float(kernel.predicted_age(*numbers, came_in)) == pytest.approx(queue)
    if seconds > 0:
        path = kernel.age_path(float(age), float(backlog), float(arrivals), [(0.0, float(service))], [float(seconds)])
        assert path[-1][1] == pytest.approx(queue)


NAN = math.nan


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        pytest.param({}, (6, True, kernel.ACTS), id="a-scale-out-acts"),
        pytest.param({"proposed": 3, "upward": False, "downward": True}, (3, False, kernel.ACTS), id="a-scale-in-acts"),
        pytest.param({"upward": False}, (5, False, kernel.NO_CHANGE), id="no-proposal"),
        pytest.param({"upward": False, "capacity": 1}, (2, True, kernel.ACTS), id="below-the-bounds-raised"),
        pytest.param({"capacity": 12, "proposed": 13, "snapped_up": 10}, (10, False, kernel.ACTS),
                     id="above-the-bounds-lowered-even-when-going-up"),
        pytest.param({"upward": False, "downward": True, "proposed": 3, "failed": True}, (3, False, kernel.SOURCE_FAILED),
                     id="no-scale-in-while-a-source-failed"),
        pytest.param({"failed": True}, (6, True, kernel.ACTS), id="a-failed-source-does-not-hold-a-scale-out"),
        pytest.param({"capacity": 10, "proposed": 11, "snapped_up": 10}, (10, True, kernel.AT_BOUND), id="at-the-max"),
        pytest.param({"failed": True, "upward": False, "downward": True, "proposed": 3, "since_action": 10.0},
                     (3, False, kernel.SOURCE_FAILED), id="a-failed-source-before-the-cooldown"),
        pytest.param({"paused": True, "since_action": 10.0}, (6, True, kernel.PAUSED), id="paused-before-the-cooldown"),
        pytest.param({"since_action": 10.0}, (6, True, kernel.COOLDOWN), id="up-cooldown"),
        pytest.param({"since_action": 60.0}, (6, True, kernel.ACTS), id="up-cooldown-over"),
        pytest.param({"upward": False, "downward": True, "proposed": 3, "since_action": 60.0}, (3, False, kernel.COOLDOWN),
                     id="down-cooldown"),
        pytest.param({"upward": False, "downward": True, "proposed": 3, "since_action": 200.0, "tokens": 1.5},
                     (3, False, kernel.ACTION_BUDGET), id="a-scale-in-needs-two-tokens"),
        pytest.param({"upward": False, "downward": True, "proposed": 3, "tokens": 1.5, "budgets_scale_in": False},
                     (3, False, kernel.ACTS), id="rules-mode-spends-no-budget-check"),
        pytest.param({"tokens": 0.5}, (6, True, kernel.ACTS), id="a-scale-out-needs-no-tokens"),
    ],
)
def test_the_gates_apply_in_one_order(case, expected) -> None:
    """``gates``: the engine's and the batched simulators' one order, the first gate that holds
    a candidate its verdict; a batch of one as plain numbers and a batch of arrays agree."""
    values = {"capacity": 5, "proposed": 6, "upward": True, "downward": False, "snapped_up": 6, "snapped_down": 3,
              "lowest": 2, "highest": 10, "since_action": NAN, "cooldown_up": 30.0, "cooldown_down": 120.0,
              "tokens": 5.0, "budgets_scale_in": True, "failed": False, "paused": False, **case}
    wanted, upward, _, _, verdict = kernel.gates(**values)
    assert (int(wanted), bool(upward), int(verdict)) == expected
    batch = {name: np.array([value, value]) for name, value in values.items()}
    wanted, upward, _, _, verdict = kernel.gates(**batch)
    assert [(int(w), bool(u), int(v)) for w, u, v in zip(wanted, upward, verdict, strict=True)] == [expected] * 2


@pytest.mark.parametrize(
    ("age", "calm", "service", "expected"),
    [
        pytest.param(30.0, 10.0, 9.5, (210.0 - 30.0) / 0.05 - 120.0, id="filling-slowly"),
        pytest.param(30.0, 10.0, 12.0, math.inf, id="draining-holds-indefinitely"),
        pytest.param(200.0, 10.0, 5.0, 0.0, id="past-the-limit-within-a-reaction"),
    ],
)
def test_a_queue_holds_as_the_kernel_says_where_its_backlog_came_in_at_the_calm_rate(age, calm, service, expected) -> None:
    """``fifo_hold_seconds`` is ``hold_seconds``' rule: where the backlog came in at the calm
    rate, how long a count holds is ``(limit - age) / growth - reaction``."""
    held = kernel.fifo_hold_seconds(age, age * calm, calm, service, 210.0, 120.0, 600.0)
    assert held == pytest.approx(expected)


def test_an_old_backlog_that_drains_slowly_is_no_surplus_on_a_queue() -> None:
    """A burst's 30,000 messages, the oldest 150 s old, 10/s arriving now and 120/s served: at the
    arrivals now the count holds for ever, but the head moves through the burst at the 200/s it
    came in, so it passes the 210 s limit before the burst is served (250 s): no surplus."""
    assert kernel.fifo_hold_seconds(150.0, 30_000.0, 10.0, 120.0, 210.0, 120.0, 600.0) == 0.0
    assert kernel.fifo_hold_seconds(150.0, 1_500.0, 10.0, 120.0, 210.0, 120.0, 600.0) == math.inf


# --- the age a partition may carry into a scale-out (issue 53) ---------------------------------------------------------


def carried(forecasts, *, row_of=None) -> float:
    """The first partition's carried-age limit on a hub of ``forecasts`` (limit 210 s, 100/s an
    instance, a 1200 s drain horizon)."""
    limits = kernel.carried_age_limits(one(210.0), np.array(forecasts, dtype=float)[:, None], one(100.0), one(1200.0),
                                       None if row_of is None else np.array(row_of))
    return float(limits[0, 0])


@pytest.mark.parametrize(
    ("forecasts", "expected"),
    [
        pytest.param([50.0, 10.0, 10.0, 10.0], 210.0, id="half-an-instance-the-limit"),
        pytest.param([80.0, 10.0, 10.0, 10.0], 210.0, id="its-own-instance-drains-300s-in-1200s-the-limit"),
        # what its own instance drains in 1200 s crosses the 210 s limit at 100 x 1200 / 1410 = 85.1/s
        pytest.param([85.0, 10.0, 10.0, 10.0], 210.0, id="just-below-the-crossing-the-limit"),
        pytest.param([86.0, 10.0, 10.0, 10.0], 1200.0 * (100.0 / 86.0 - 1.0), id="just-past-the-crossing-what-its-own-drains"),
        pytest.param([90.0, 10.0, 10.0, 10.0], 1200.0 * (100.0 / 90.0 - 1.0), id="near-an-instance-what-its-own-drains"),
        pytest.param([100.0, 10.0, 10.0, 10.0], 0.0, id="at-an-instance-none"),
        pytest.param([130.0, 10.0, 10.0, 10.0], 0.0, id="past-an-instance-none"),
        pytest.param([0.0, 90.0, 10.0, 10.0], 210.0, id="no-arrivals-the-limit"),
        pytest.param([0.0, 0.0, 0.0, 0.0], 210.0, id="an-idle-hub-the-limit"),
        # the spread: 90 against a mean of 45 (exactly SKEWED_SPREAD) is skewed, against 45.75 not
        pytest.param([90.0, 30.0, 30.0, 30.0], 1200.0 * (100.0 / 90.0 - 1.0), id="spread-at-the-threshold-skewed"),
        pytest.param([90.0, 31.0, 31.0, 31.0], 210.0, id="spread-just-below-the-threshold-the-limit"),
        pytest.param([90.0, 90.0, 90.0, 90.0], 210.0, id="an-even-hub-near-an-instance-the-limit"),
    ],
)
def test_carried_age_limits(forecasts, expected: float) -> None:
    """A partition on a skewed hub may carry into a scale-out only the age an instance of its own
    drains within the horizon; on an even hub (busiest below SKEWED_SPREAD x the mean) the limit."""
    assert kernel.SKEWED_SPREAD == 2.0
    assert carried(forecasts) == pytest.approx(expected)


def test_carried_age_limits_count_rows_standing_for_several_partitions_once_each() -> None:
    """Rows standing for several partitions (the batched driver's equal-share rows) weigh the mean as the partitions."""
    assert carried([90.0, 30.0], row_of=[0, 1, 1, 1]) == carried([90.0, 30.0, 30.0, 30.0])
    assert carried([90.0, 30.0], row_of=[0, 1, 1, 1]) != carried([90.0, 30.0])


def test_carried_age_limits_of_a_batch_are_each_candidates_alone() -> None:
    rng = np.random.default_rng(7)
    forecast = rng.uniform(0.0, 150.0, (6, 5)) * np.array([[3.0]] + [[1.0]] * 5)
    limit, rate, horizon = rng.uniform(60, 300, 5), rng.uniform(50, 150, 5), rng.uniform(300, 1800, 5)
    together = kernel.carried_age_limits(limit, forecast, rate, horizon)
    for column in range(5):
        alone = kernel.carried_age_limits(limit[column:column + 1], forecast[:, column:column + 1], rate[column:column + 1],
                                          horizon[column:column + 1])
        assert np.array_equal(together[:, column:column + 1], alone)
