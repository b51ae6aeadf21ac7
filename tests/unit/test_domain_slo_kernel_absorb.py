"""Absorbing bursts (scaling/domain/slo_kernel/absorb.py): hand-computed tables at the rules'
boundaries, each case a batch of one candidate unless it says otherwise. The engine and the
batched driver that call it: test_domain_slo.py, test_simulation_batched_slo.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.domain import slo_kernel as kernel

TIMES = np.array([0.0, 60.0, 120.0])
#: 1,000 events a minute, then a burst of 10,000 in the last minute (last enqueued sequence numbers).
BURST = np.array([[999.0], [1999.0], [11999.0]])


@pytest.mark.parametrize(("noise", "full", "weight"), [
    (0.0, 1.0, 0.0),
    (0.5, 1.0, 0.0),  # half of the full noise: not yet
    (0.75, 1.0, 0.5),
    (1.0, 1.0, 1.0),
    (3.0, 1.0, 1.0),
    (0.9, 0.0, 0.0),  # full noise 0: off
])
def test_absorb_weight_ramps_between_half_and_full_noise(noise: float, full: float, weight: float) -> None:
    assert float(kernel.absorb_weight(noise, full)) == pytest.approx(weight)


def test_absorb_weight_reads_the_kernel_constant_by_default() -> None:
    assert float(kernel.absorb_weight(kernel.ABSORB_FULL_NOISE)) == 1.0
    assert float(kernel.absorb_weight(kernel.ABSORB_FULL_NOISE / 2)) == 0.0


@pytest.mark.parametrize(("weight", "expected"), [(0.0, 10.0), (0.25, 8.0), (1.0, 2.0)])
def test_blended_moves_from_the_plain_rule_to_the_absorbing_one(weight: float, expected: float) -> None:
    assert float(kernel.blended(np.array([10.0]), np.array([2.0]), np.array([weight]))[0]) == pytest.approx(expected)


@pytest.mark.parametrize(("seconds", "index"), [(0.0, 10), (60.0, 9), (300.0, 5), (330.0, 4), (600.0, 0), (1000.0, 0)])
def test_window_index_is_the_latest_sample_at_least_that_long_before_the_last(seconds: float, index: int) -> None:
    assert kernel.window_index(np.arange(11) * 60.0, seconds) == index


def test_later_window_peaks_hold_the_busiest_window_not_the_busiest_interval() -> None:
    # per-interval arrivals 60, 600 (a one-interval burst), 60, 60, 60 (events per minute)
    positions = np.cumsum([0.0, 60.0, 600.0, 60.0, 60.0, 60.0])[:, None]
    times = np.arange(6) * 60.0
    one_interval = kernel.later_window_peaks(times, positions, 1)[:, 0] * 60.0
    assert one_interval == pytest.approx([600.0, 600.0, 60.0, 60.0, 60.0])  # later_peaks
    np.testing.assert_allclose(kernel.later_window_peaks(times, positions, 1), kernel.later_peaks(times, positions))
    three = kernel.later_window_peaks(times, positions, 3)[:, 0] * 60.0
    # windows ending at intervals 0..4: (60), (60+600)/2, (60+600+60)/3, (600+60+60)/3, (60+60+60)/3
    assert three == pytest.approx([330.0, 330.0, 240.0, 240.0, 60.0])


def need(*, limit: float = 210.0, until: float = 120.0, served: float = 0.0, sustained: float = 0.0, oldest: float = 2000.0,
         shortest: float = 60.0, positions: np.ndarray = BURST) -> float:
    """One partition's ``absorbed_need`` (events/s) for one candidate."""
    return float(kernel.absorbed_need(TIMES, positions, np.array([[oldest]]), np.array([[sustained]]), np.array([[served]]),
                                      np.array([until]), np.array([limit]), np.array([shortest]))[0, 0])


@pytest.mark.parametrize(("case", "arguments", "expected"), [
    # Nothing waits: the sustained rate.
    ("caught up", {"oldest": 12000.0, "sustained": 20.0}, 20.0),
    # The burst's 10,000 events came in over the last minute; the first of them must be served 30 s
    # after the instances serve (120 s on, limit 210), the last 90 s after: 10,000 / 90 s.
    ("burst within the limit", {}, 10000.0 / 90.0),
    # ... no less than the sustained arrivals after it.
    ("sustained above the drain", {"sustained": 200.0}, 200.0),
    # The instances serving now serve it all before the new ones do: only the sustained rate.
    ("served meanwhile", {"served": 10000.0, "sustained": 5.0}, 5.0),
    # ... half of it: the other 5,000 within the 90 s.
    ("half served meanwhile", {"served": 5000.0}, 5000.0 / 90.0),
    # A longer limit leaves more time: the last of them 270 s after the instances serve.
    ("a looser limit", {"limit": 390.0}, 10000.0 / 270.0),
    # The instances serve only after the burst's first events pass the limit (limit 60 s): they
    # are overdue, caught up within the shortest time (60 s).
    ("overdue", {"limit": 60.0}, 10000.0 / 60.0),
    # Overdue and arrivals go on until the moment the limit points at (60 s after the last sample).
    ("overdue with arrivals", {"limit": 60.0, "sustained": 10.0}, (10000.0 + 600.0) / 60.0),
    # An older backlog (1,000 events of the first minute still waiting): the last sample's 11,000
    # within 90 s ask more than the first minute's 1,000 within (at least) the shortest 60 s.
    ("an older backlog", {"oldest": 1000.0}, 11000.0 / 90.0),
    # ... with the limit 150 s the last sample's events have 30 s, taken as the shortest 60 s; the
    # 6,000 that are overdue (the moment 30 s before the last sample: halfway through the burst) ask less.
    ("an older backlog, a short limit", {"oldest": 1000.0, "limit": 150.0}, 11000.0 / 60.0),
])
def test_absorbed_need_at_its_boundaries(case: str, arguments: dict, expected: float) -> None:
    assert need(**arguments) == pytest.approx(expected), case


def test_absorbed_need_gives_each_candidate_what_it_gets_alone() -> None:
    limits, untils, served, sustained = np.array([210.0, 60.0, 390.0]), np.array([120.0, 120.0, 180.0]), \
        np.array([[0.0, 0.0, 3000.0]]), np.array([[0.0, 10.0, 50.0]])
    oldest = np.array([[2000.0, 2000.0, 1500.0]])
    together = kernel.absorbed_need(TIMES, BURST, oldest, sustained, served, untils, limits, 60.0)
    per_candidate = kernel.absorbed_need(TIMES, np.repeat(BURST[:, :, None], 3, axis=2), oldest, sustained, served, untils,
                                         limits, 60.0)
    for column in range(3):
        alone = need(limit=limits[column], until=untils[column], served=served[0, column], sustained=sustained[0, column],
                     oldest=oldest[0, column])
        assert together[0, column] == pytest.approx(alone)
        assert per_candidate[0, column] == pytest.approx(alone)


@pytest.mark.parametrize(("served", "carried"), [(111.0, False), (10000.0 / 90.0, True), (200.0, True)])
def test_carries_when_every_partition_is_served_its_need(served: float, carried: bool) -> None:
    needs = np.array([[10000.0 / 90.0], [5.0]])
    assert bool(kernel.carries(needs, np.array([[served], [5.0]]))[0]) is carried


@pytest.mark.parametrize(("sustained", "peak", "rise", "expected"), [
    (10.0, 30.0, 0.0, 31.5),  # the busiest window, with the headroom
    (40.0, 30.0, 0.0, 42.0),  # the last window when it is busier
    (10.0, 30.0, 0.001, 31.5 * (1 + 0.001 * 1200)),  # raised while the arrivals rise (halfway through a 2,400 s dwell)
])
def test_absorbed_calm_rates(sustained: float, peak: float, rise: float, expected: float) -> None:
    assert float(kernel.absorbed_calm_rates(np.array([sustained]), np.array([peak]), 1.05, rise, 2400.0)[0]) == \
        pytest.approx(expected)


def test_no_burst_and_no_backlog_needs_no_more_than_arrives() -> None:
    steady = np.array([[0.0], [999.0], [1999.0]]) - 1.0
    assert need(positions=steady, oldest=1999.0, sustained=1000.0 / 60.0) == pytest.approx(1000.0 / 60.0)
    assert math.isfinite(need(positions=steady, oldest=0.0, sustained=0.0))


@pytest.mark.parametrize(("case", "per_interval", "ended"), [
    ("a one-minute burst that ended", [10, 10, 40, 10, 10], True),
    ("a two-minute burst that ended", [10, 10, 40, 40, 10], True),
    ("a step that stays", [10, 10, 10, 40, 40], False),  # the gated family's on/off bursts
    ("a burst still going on", [10, 10, 10, 10, 40], False),
    ("just under twice the median", [10, 10, 19.9, 5, 10], False),
    ("the drop just short of half", [10, 10, 40, 20.1, 15], False),
    ("exactly twice, then exactly half", [10, 10, 20, 10, 10], True),
    ("no arrivals", [0, 0, 0, 0, 0], False),
    ("mostly idle, a burst that ended", [0, 5, 0, 0, 0], True),  # (the median 0: any burst above it)
    ("too short a history", [40, 10], False),
])
def test_bursts_ended_tells_a_short_burst_from_a_step(case: str, per_interval: list, ended: bool) -> None:
    totals = np.concatenate([[0.0], np.cumsum(per_interval)]) * 60.0
    assert kernel.bursts_ended(np.arange(len(totals)) * 60.0, totals) is ended, case
