"""The one minute step of the simulated world (scaling/simulation/world/physics.py), in batches
of several candidates at once: every column must follow the hand-computed rules on its own.

(tests/unit/test_simulation_world.py checks the same rules through ``World``, a batch of one,
driven by scripted autoscalers.)
"""

from __future__ import annotations

import numpy as np
import pytest

from scaling.simulation.world.arrival_curves import Curves
from scaling.simulation.world.ownership import Ownership
from scaling.simulation.world.physics import Physics
from scaling.simulation.world.scenario import Scenario
from scaling.simulation.world.service import serve, water_fill
from tests.helpers import drive_plans

# --- serving: water-filling per owner, every candidate with its own instance count ---------------------------


SERVE_CASES = [
    # (demand per partition, instances, rate, served per partition)
    ([1000.0] * 32, 24, 1000, [500.0] * 8 + [1000.0] * 16 + [500.0] * 8),  # instances 0-7 own p and p + 24
    ([100.0, 5000.0], 1, 1000, [100.0, 900.0]),  # a quiet partition's unused share goes to its busy sibling
    ([0.0, 300.0, 2000.0, 2000.0], 2, 1000, [0.0, 300.0, 1000.0, 700.0]),
    ([100.0, 400.0, 1000.0], 1, 1000, [100.0, 400.0, 500.0]),  # 333 each, then the leftover shared again
    ([10.0, 20.0, 30.0], 1, 1000, [10.0, 20.0, 30.0]),
    ([5.0, 2000.0], 2, 1000, [5.0, 1000.0]),
    ([5.0, 2000.0], 5, 1000, [5.0, 1000.0]),  # more instances than partitions add nothing
    ([0.0] * 4, 3, 1000, [0.0] * 4),
    ([1000.0] * 32, 1, 1000, [1000.0 / 32] * 32),
]


@pytest.mark.parametrize(("demand", "instances", "rate", "expected"), SERVE_CASES)
def test_serve_one_candidate(demand, instances, rate, expected) -> None:
    served = serve(np.array(demand), instances, rate)
    assert served == pytest.approx(np.array(expected))
    assert (served <= np.array(demand) + 1e-9).all()


@pytest.mark.parametrize("partitions", [2, 3, 4, 32])
def test_serve_a_batch_gives_each_candidate_its_own_instances(partitions) -> None:
    """One batch of candidates with 1..P+1 instances on the same demand: each column is what
    its count gives alone, whatever its neighbours need (some take more rounds than others)."""
    demand = np.array([(index % 3) * 700.0 + 50.0 * index for index in range(partitions)])
    counts = np.arange(1, partitions + 2)
    batch = serve(np.repeat(demand[:, None], len(counts), axis=1), counts, 1000.0)
    for column, count in enumerate(counts):
        alone = serve(demand, int(count), 1000.0)
        np.testing.assert_array_equal(batch[:, column], alone)
        owners = np.arange(partitions) % count
        per_owner = np.bincount(owners, weights=alone, minlength=count)
        wanted = np.bincount(owners, weights=demand, minlength=count)
        # an owner serves all its partitions want, or is full
        assert np.all((np.abs(per_owner - wanted) < 1e-9) | (np.abs(per_owner - 1000.0) < 1e-9))


def test_a_slowed_candidate_gets_the_same_service_whatever_its_neighbours_demand() -> None:
    """At a speed factor the two first rounds of ``water_fill`` round ``rate * speed / k``
    differently; which one a candidate takes follows its own demand only: a busy candidate next
    to one with an idle partition gets, bit for bit, what it gets alone."""
    partitions, instances, rate, speed = 32, 5, 1000.0, 0.7  # owners of 6: 1000 / 6 * 0.7 != 700 / 6
    busy = np.full(partitions, 5000.0)  # every partition capped by its share
    idle = busy.copy()
    idle[5] = 0.0
    served = {}
    for name, columns in (("together", [idle, busy]), ("alone", [busy])):
        demand = np.stack(columns, axis=1)
        owners = Ownership(demand.shape[1], partitions, rate)
        owners.update(np.full(demand.shape[1], instances, dtype=np.int64))
        buffers = np.zeros_like(demand), np.zeros_like(demand), np.zeros(demand.shape, dtype=bool)
        served[name] = water_fill(demand, owners, rate * speed, *buffers, False, speed)[:, -1].copy()
    np.testing.assert_array_equal(served["together"], served["alone"])


# --- provisioning and billing, several plans in one batch --------------------------------------------------------


PLANS = [
    # (plan, requested per minute, serving per minute) with a 2-minute provisioning delay
    ({5: 4, 12: 2}, [1] * 5 + [4] * 7 + [2] * 8, [1] * 7 + [4] * 5 + [2] * 8),  # out after 2 minutes, in at once
    ({5: 8, 6: 3}, [1] * 5 + [8] + [3] * 14, [1] * 7 + [3] * 13),  # a scale-in trims a scale-out in flight
    ({5: 4, 6: 6}, [1] * 5 + [4] + [6] * 14, [1] * 7 + [4] + [6] * 12),  # each scale-out arrives at its own time
    ({5: 8, 12: 2, 14: 4}, [1] * 5 + [8] * 7 + [2] * 2 + [4] * 6, [1] * 7 + [8] * 5 + [2] * 4 + [4] * 4),
    ({}, [1] * 20, [1] * 20),
]


def test_provisioning_delay_and_billing_per_candidate() -> None:
    physics = Physics(np.full(20, 500.0), Scenario(provisioning_delay_minutes=2), len(PLANS))
    drive_plans(physics, [plan for plan, _, _ in PLANS])
    for (plan, capacity, serving), result in zip(PLANS, physics.results(algorithm="a", knobs=["k"] * len(PLANS), score_from=0),
                                                 strict=True):
        assert result.capacity.tolist() == capacity
        assert result.serving.tolist() == serving
        assert result.cost == sum(capacity)  # billed per requested instance-minute
        assert result.scale_actions == len(plan)


@pytest.mark.parametrize(("score_from", "actions"), [(0, [2, 3]), (5, [2, 2]), (11, [1, 2]), (12, [0, 1]), (14, [0, 0])])
def test_actions_are_counted_from_the_first_scored_minute(score_from, actions) -> None:
    physics = Physics(np.full(20, 500.0), Scenario(), 2)
    # acting after minutes 6 and 12 (index 5, 11), and 5, 12 and 14 (index 4, 11, 13)
    drive_plans(physics, [{6: 3, 12: 2}, {5: 8, 12: 2, 14: 4}])
    results = physics.results(algorithm="a", knobs=["x", "y"], score_from=score_from)
    assert [result.scale_actions for result in results] == actions
    assert [result.minutes for result in results] == [20 - score_from] * 2


# --- ages: the oldest unprocessed event, per candidate -----------------------------------------------------------


def test_oldest_event_age_per_candidate() -> None:
    # 2,000 events a minute on 4 partitions: one instance (1,000/min) falls behind, its oldest
    # waiting event arriving at (m + 1) / 2 at the end of minute m; two instances just keep up.
    physics = Physics(np.full(12, 2000.0), Scenario(partitions=4, initial_capacity=1, provisioning_delay_minutes=0), 3)
    physics.request(np.array([1, 2]), np.array([2, 4]))  # before the first minute: serving at once, no action counted
    drive_plans(physics, [{}, {}, {}])
    one, two, four = physics.results(algorithm="a", knobs=["1", "2", "4"], score_from=0)
    np.testing.assert_allclose(one.age, np.arange(1, 13) / 2)
    assert one.slo_violation_minutes == 2  # ages 5.5 and 6
    assert one.max_age_minutes == pytest.approx(6.0)
    assert one.final_backlog == pytest.approx(12 * 1000.0)
    for kept_up in (two, four):
        assert (kept_up.age == 0).all() and (kept_up.backlog == 0).all() and kept_up.slo_violation_minutes == 0
        assert kept_up.scale_actions == 0
    assert [one.cost, two.cost, four.cost] == [12, 24, 48]


def test_a_hot_partition_is_the_bottleneck_in_every_candidate() -> None:
    scenario = Scenario(partitions=4, skew=1.0, initial_capacity=4)  # weights 8:4:2:1 of 15
    physics = Physics(np.full(5, 3000.0), scenario, 2)
    physics.request(np.array([1]), np.array([8]))
    drive_plans(physics, [{}, {}])
    for result in physics.results(algorithm="a", knobs=["4", "8"], score_from=0):
        assert result.final_backlog == pytest.approx(5 * (3000.0 * 8 / 15 - 1000.0))


# --- what collect reads: sequence numbers and checkpoints ----------------------------------------------------


def test_last_enqueued_follows_each_partitions_share_of_the_arrivals() -> None:
    physics = Physics(np.array([10.0, 20.0, 0.0]), Scenario(partitions=4), 1)
    assert physics.enqueued[:, :, 0].tolist() == [[0] * 4, [2] * 4, [7] * 4, [7] * 4]  # floor(share of the cumulative)


@pytest.mark.parametrize(("delay_seconds", "expected"), [
    (0.0, [[250, 500], [500, 1000], [750, 1500]]),
    (30.0, [[125, 250], [375, 750], [625, 1250]]),  # half a minute behind: halfway between minutes
    (60.0, [[0, 0], [250, 500], [500, 1000]]),
    (90.0, [[0, 0], [125, 250], [375, 750]]),
])
def test_checkpoints_trail_what_was_processed(delay_seconds, expected) -> None:
    # 4 partitions, 4,000 events a minute: one instance processes 250 per partition a minute, two 500
    physics = Physics(np.full(3, 4000.0), Scenario(partitions=4, checkpoint_delay_seconds=delay_seconds,
                                                provisioning_delay_minutes=0), 2)
    physics.request(np.array([1]), np.array([2]))
    out = np.zeros((4, 2))
    seen = []
    while not physics.done:
        physics.advance()
        seen.append(physics.checkpoint_positions(out)[0].tolist())  # partition 0, both candidates
    assert seen == expected


def test_events_are_conserved_in_every_candidate() -> None:
    arrivals = np.array([2000.0, 9000.0, 20000.0, 500.0, 0.0, 15000.0, 3000.0] * 3)
    physics = Physics(arrivals, Scenario(skew=0.3, provisioning_delay_minutes=1), 4)
    drive_plans(physics, [{2: 8, 9: 2}, {1: 32}, {}, {3: 16, 4: 3, 12: 40}])
    for result in physics.results(algorithm="a", knobs=[""] * 4, score_from=0):
        served = np.concatenate([[0.0], result.backlog[:-1]]) + arrivals - result.backlog
        assert (served >= -1e-6).all()
        assert (served <= result.serving * 1000 + 1e-6).all()
        assert arrivals.sum() == pytest.approx(served.sum() + result.final_backlog)


@pytest.mark.parametrize("assignment", ["balanced", "modulo"])
def test_owner_names_are_what_each_candidate_reads_alone(assignment) -> None:
    """``owner_names`` gives every candidate at once what ``owners`` gives it: with frequent
    failures a lone instance is replaced within a minute, keeping its index in
    ``ownership_snapshot`` but not its name (balanced: names are never reused)."""
    scenario = Scenario(partitions=4, assignment=assignment, instance_failures_per_day=150.0, seed=4,
                        provisioning_delay_range=(1, 4), rebalance_pause_seconds=20.0)
    physics = Physics(np.full(720, 2000.0), scenario, 3)
    plans = [{}, {60 * k: 1 + k % 3 for k in range(1, 12)}, {30 * k: 1 + k % 4 for k in range(1, 24)}]
    replaced_in_place = 0
    before = None
    while not physics.done:
        physics.advance()
        snapshot, names = physics.ownership_snapshot(), physics.owner_names()
        for column in range(3):
            np.testing.assert_array_equal(names[:, column], physics.owners(column))
        if before is not None:
            replaced_in_place += int(((snapshot == before[0]) & (names != before[1])).any())
        before = snapshot, names
        wanted = np.array([plan.get(physics.minute, physics.requested[column]) for column, plan in enumerate(plans)])
        rows = np.flatnonzero(wanted != physics.requested)
        if rows.size:
            physics.request(rows, wanted[rows])
    assert replaced_in_place if assignment == "balanced" else not replaced_in_place


# --- searching many arrival curves at once ------------------------------------------------------------------

LIFTED = 2.0**52  # row 0's last point: row 1 is lifted by 2**52 + 1, where the spacing of floats is 1

CURVE_CASES = [
    # (curves, row, value, np.searchsorted(curves[row], value, side="right"))
    ([[0.0, 1.0, 3.0], [0.0, 2.0, 2.0]], 0, 1.0, 2),
    ([[0.0, 1.0, 3.0], [0.0, 2.0, 2.0]], 1, 1.9, 1),
    ([[0.0, 1.0, 3.0], [0.0, 2.0, 2.0]], 1, 2.0, 3),  # equal points: after the last of them
    ([[0.0, 1.0, 3.0], [0.0, 2.0, 2.0]], 0, 5.0, 3),
    # lifted, 0.75 rounds onto 1.0's point (both 2**52 + 2): the row's own curve decides
    ([[0.0, 1.0, LIFTED, LIFTED], [0.0, 0.5, 1.0, 3.0]], 1, 0.75, 2),
    ([[0.0, 1.0, LIFTED, LIFTED], [0.0, 0.5, 1.0, 3.0]], 1, 1.0, 3),
    ([[0.0, 1.0, LIFTED, LIFTED], [0.0, 0.5, 1.0, 3.0]], 1, 0.25, 1),
]


@pytest.mark.parametrize(("curves", "row", "value", "expected"), CURVE_CASES)
def test_curves_search_is_each_rows_own_searchsorted(curves: list, row: int, value: float, expected: int) -> None:
    found = Curves(np.asarray(curves)).search(np.array([row]), np.array([value]))
    assert found.tolist() == [expected] == [int(np.searchsorted(curves[row], value, side="right"))]


def test_curves_search_agrees_with_searchsorted_on_random_curves() -> None:
    draws = np.random.default_rng(5)
    curves = np.concatenate((np.zeros((6, 1)), np.cumsum(np.round(draws.exponential(3e6, (6, 400)), 1), axis=1)), axis=1)
    rows = draws.integers(0, 6, 5000)
    values = np.where(draws.random(5000) < 0.3, curves[rows, draws.integers(0, 401, 5000)],  # on a point
                      draws.uniform(0, curves[:, -1].max(), 5000))
    expected = [np.searchsorted(curves[row], value, side="right") for row, value in zip(rows, values, strict=True)]
    assert Curves(curves).search(rows, values).tolist() == expected
