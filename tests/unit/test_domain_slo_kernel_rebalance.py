"""The rebalance pause's rules (slo_kernel.rebalance) at their boundaries: what a move's stand-still
measures, how it is learned, and what a decision allows for it (nothing where none is known)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.domain import slo_kernel

MOVING = (0, 10, 20, 30, 40, 50, 60, 70)  # a checkpoint that moves every interval


def readings(moved: tuple, control: tuple = MOVING, *, owners: tuple = (1, 2, 2, 2, 2, 2, 2, 2),
             backlog: float = 50.0, control_backlog: float = 50.0):
    """Two partitions over ``len(moved)`` samples a minute apart: the first changes owner from 1 to
    ``owners``' next (its checkpoints ``moved``), the second keeps owner 9 (``control``)."""
    samples = len(moved)
    times = 60.0 * np.arange(samples)
    owner = np.array([[owners[k], 9] for k in range(samples)])[:, :, None]
    checkpoint = np.array([[moved[k], control[k]] for k in range(samples)], dtype=float)[:, :, None]
    backlogs = np.array([[backlog, control_backlog]] * samples)[:, :, None]
    return times, owner, checkpoint, backlogs


@pytest.mark.parametrize(("case", "expected"), [
    pytest.param(readings((0, 5, 5, 5, 15)), 120.0, id="still-in-the-move-interval-and-the-next-then-moved: 2 intervals"),
    pytest.param(readings((0, 5, 5, 15)), 60.0, id="moved-partly-in-the-move-interval-then-one-still"),
    pytest.param(readings((0, 5, 10)), 0.0, id="moved-in-the-move-interval-and-the-next: no pause"),
    pytest.param(readings((0, 5)), math.nan, id="fewer-than-three-samples"),
    pytest.param(readings((0, 5, 5, 5, 5)), math.nan, id="still-standing: not ended yet"),
    pytest.param(readings((0, 10, 20), owners=(1, 1, 2)), math.nan, id="moved-in-the-last-interval: wait for the next"),
    pytest.param(readings((5, 5, 5, 15), owners=(1, 2, 2, 2)), math.nan, id="the-run-reaches-the-window-start"),
    pytest.param(readings((0, 5, 5, 5, 15), backlog=0.0), math.nan, id="no-backlog-waited: no evidence"),
    pytest.param(readings((0, 5, 5, 5, 15), control=(0, 0, 0, 0, 70)), math.nan,
                 id="the-partitions-that-kept-their-owner-stood-still-too: rare-or-late-checkpoints"),
    pytest.param(readings((0, 5, 5, 5, 15), control_backlog=0.0), math.nan, id="no-backlogged-partition-to-compare"),
    pytest.param(readings((0, 5, 5, 5, 15), owners=(1, -1, -1, 2, 2)), math.nan,
                 id="to-no-owner-and-back: a failed instance's stall, not a rebalance"),
    pytest.param(readings((0, 5, 5, 5, 15, 25)), math.nan, id="ended-an-interval-ago: measured then, not twice"),
    pytest.param(readings((0, 5, 5, 5, 15), control=(0, 10, 20, 30, 40)), 120.0, id="(the control below, moving)"),
])
def test_a_moves_stand_still(case, expected) -> None:
    measured = float(slo_kernel.moved_stand_still(*case)[0])
    assert (math.isnan(measured) and math.isnan(expected)) or measured == pytest.approx(expected)


def test_the_stand_still_is_per_candidate_and_the_mean_of_the_episodes() -> None:
    """Candidates are columns (here: a pause of two intervals, one of one, none); the moved
    partitions whose episodes end together give their mean."""
    cases = [readings((0, 5, 5, 5, 15)), readings((0, 5, 10, 10, 20), owners=(1, 1, 2, 2, 2)), readings((0, 5, 10, 20, 30))]
    times = cases[0][0]
    owners, checkpoints, backlogs = (np.concatenate([case[part] for case in cases], axis=2) for part in (1, 2, 3))
    measured = slo_kernel.moved_stand_still(times, owners, checkpoints, backlogs)
    assert measured[:2] == pytest.approx([120.0, 60.0]) and math.isnan(measured[2])
    # both moved partitions in one candidate: 120 s and 60 s end in the same interval
    second = readings((0, 5, 10, 10, 20), owners=(3, 3, 4, 4, 4))  # (3 -> 4: not owner 1's, whose going would be a loss)
    both = (np.concatenate([cases[0][part], second[part][:, :1]], axis=1) for part in (1, 2, 3))
    assert float(slo_kernel.moved_stand_still(times, *both)[0]) == pytest.approx(90.0)


@pytest.mark.parametrize(("previous", "measured", "learned"), [
    pytest.param(math.nan, math.nan, math.nan, id="nothing-yet"),
    pytest.param(math.nan, 120.0, 120.0, id="the-first-sets-it"),
    pytest.param(120.0, math.nan, 120.0, id="no-episode-keeps-it"),
    pytest.param(120.0, 0.0, 84.0, id="a-move-without-pause-lowers-it"),
    pytest.param(0.0, 120.0, 36.0, id="a-pause-raises-it-by-the-learning-rate"),
])
def test_the_learned_pause(previous, measured, learned) -> None:
    value = float(slo_kernel.learned_rebalance_pause(np.array([previous]), np.array([measured]))[0])
    assert (math.isnan(value) and math.isnan(learned)) or value == pytest.approx(learned)
    plain = slo_kernel.learned_rebalance_pause(previous, measured)  # (a batch of one as plain numbers: the same)
    assert (math.isnan(plain) and math.isnan(learned)) or plain == pytest.approx(learned)


@pytest.mark.parametrize(("pause", "allowance", "drain", "ages"), [
    pytest.param(math.nan, 0.0, 1200.0, 100.0, id="none-learned: as before"),
    pytest.param(0.0, 0.0, 1200.0, 100.0, id="learned-zero: as before"),
    pytest.param(29.9, 0.0, 1200.0, 100.0, id="under-half-an-interval: a stray stand-still, as before"),
    pytest.param(30.0, 30.0, 300.0, 130.0, id="half-an-interval: allowed for"),
    pytest.param(120.0, 120.0, 300.0, 220.0, id="learned-long"),
])
def test_what_a_decision_allows_for_a_pause(pause, allowance, drain, ages) -> None:
    """With collections a minute apart: the allowance, the scale-out's drain (half the 2400 s
    dwell, within the 300 s SLO where a pause is allowed for) and the ages a scale-in holds from
    (100 s now)."""
    assert float(slo_kernel.pause_allowance(np.array([pause]), 60.0)[0]) == allowance
    assert slo_kernel.pause_allowance(pause, 60.0) == allowance
    assert float(slo_kernel.paused_drain_seconds(np.array([1200.0]), np.array([300.0]), np.array([allowance]))[0]) == drain
    assert slo_kernel.paused_drain_seconds(1200.0, 300.0, allowance) == drain
    assert float(slo_kernel.paused_drain_seconds(200.0, 300.0, allowance)) == 200.0  # (a shorter drain stays)
    assert float(slo_kernel.scale_in_ages(np.array([[100.0]]), np.array([allowance]))[0, 0]) == ages


def test_a_failed_instances_partitions_are_no_rebalance() -> None:
    """A third partition's owner (5) is gone at the move: the live owners became fewer (an
    instance failed or was removed, its partitions stand still until its ownership expires),
    so the move measures nothing; with owner 5 still live elsewhere it is a rebalance."""
    times, owners, checkpoints, backlogs = readings((0, 5, 5, 5, 15))
    gone = np.concatenate([owners, np.array([5, 2, 2, 2, 2])[:, None, None]], axis=1)  # 1 -> 2 and 5 -> 2: owners 1, 5, 9 -> 2, 9
    kept = np.concatenate([owners, np.array([5, 5, 5, 5, 5])[:, None, None]], axis=1)
    checkpoints = np.concatenate([checkpoints, checkpoints[:, 1:2]], axis=1)
    backlogs = np.concatenate([backlogs, backlogs[:, 1:2]], axis=1)
    assert math.isnan(float(slo_kernel.moved_stand_still(times, gone, checkpoints, backlogs)[0]))
    assert float(slo_kernel.moved_stand_still(times, kept, checkpoints, backlogs)[0]) == pytest.approx(120.0)


@pytest.mark.parametrize(("allowance", "limit"), [
    pytest.param(0.0, 210.0, id="no-pause: the SLO less its safety margin"),
    pytest.param(60.0, 210.0, id="a-pause-within-the-safety-margin: the same"),
    pytest.param(90.0, 210.0, id="a-pause-as-long-as-the-margin: the same"),
    pytest.param(120.0, 180.0, id="a-longer-pause: the SLO less the pause"),
])
def test_the_age_a_scale_out_waits_for(allowance, limit) -> None:
    """SLO 300 s, safety 90 s."""
    assert slo_kernel.paused_age_limit(210.0, 300.0, allowance) == limit
    assert float(slo_kernel.paused_age_limit(np.array([210.0]), np.array([300.0]), np.array([allowance]))[0]) == limit


@pytest.mark.parametrize(("ages", "allowance", "blocked"), [
    pytest.param((100.0, 150.0), 0.0, False, id="no-pause: never"),
    pytest.param((100.0, 250.0), 0.0, False, id="no-pause: not even past the limit (the fluid model's rule stands)"),
    pytest.param((10.0, 90.0), 120.0, False, id="within-the-limit-after-the-pause"),
    pytest.param((10.0, 90.0001), 120.0, True, id="one-partition-past-the-limit-after-the-pause"),
])
def test_a_scale_in_waits_while_its_own_pause_would_pass_the_limit(ages, allowance, blocked) -> None:
    """Limit 210 s; two partitions' ages (net of the checkpoint delay), one candidate, and a second
    candidate without a pause beside it (never blocked)."""
    age = np.array([[ages[0], ages[0]], [ages[1], ages[1]]])
    result = slo_kernel.pause_blocks_scale_in(age, np.array([allowance, 0.0]), np.array([210.0, 210.0]))
    assert result.tolist() == [blocked, False]


@pytest.mark.parametrize("seed", range(4))
def test_the_intervals_read_one_at_a_time_measure_as_the_whole_window(seed) -> None:
    """The batched sweep keeps ``interval_readings`` interval by interval in rings as its window
    slides (each interval read once), and each partition's last owner change, and measures with
    ``stand_still_over`` reading the rings in window order: the same numbers, bit for bit, as
    ``moved_stand_still`` reading each window whole, owners lost, moved and regained included."""
    generator = np.random.default_rng(seed)
    samples, window, partitions, candidates = 14, 8, 6, 40
    times = 1e9 + 60.0 * np.arange(samples)
    # each partition's owner from a random sample on (or never): another live one, or none
    switch = generator.integers(1, 2 * samples, (partitions, candidates))
    after = generator.integers(-1, 4, (partitions, candidates))
    owners = np.where(np.arange(samples)[:, None, None] >= switch, after, generator.integers(0, 4, (partitions, candidates)))
    checkpoints = np.cumsum(generator.random((samples, partitions, candidates)) < 0.8, axis=0).astype(float)
    checkpoints[:, 0] = np.arange(samples)[:, None]  # (a partition that moves every interval)
    backlogs = (generator.random((samples, partitions, candidates)) < 0.9).astype(float)
    rings = np.zeros((3, window, partitions, candidates), dtype=bool)
    changed_at = np.full((partitions, candidates), -window - 1)
    measured = []
    for seen in range(1, samples + 1):  # (sample numbers from 1, as the sweep counts them)
        if seen > 1:
            *readings, differ = slo_kernel.interval_readings(owners[seen - 2], owners[seen - 1], checkpoints[seen - 2],
                                                             checkpoints[seen - 1], backlogs[seen - 2])
            rings[:, seen % window] = readings
            changed_at[differ] = seen
        count = min(seen, window)
        span = slice(seen - count, seen)
        whole = slo_kernel.moved_stand_still(times[span], owners[span], checkpoints[span], backlogs[span])
        order = (seen - (count - 2) + np.arange(count - 1)) % window
        by_ring = slo_kernel.stand_still_over(times[span], *(ring[order] for ring in rings), changed_at <= seen - (count - 1))
        np.testing.assert_array_equal(by_ring, whole)
        measured.append(whole)
    assert (~np.isnan(measured)).sum() > 0  # (some candidates measure)
