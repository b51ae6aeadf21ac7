"""A drop learned at once is let go (issue 48, after the slow-consumer rows): a 30% slow-down at
minute 300, over at minute 420, left the plan at 11 instances sized at the 5/s learned during it
for the rest of the run (1.806 of the fluid bound, where main before the drop learned at once
paid 1.547 / 15): 11 instances never read saturated again, so the rate never learned back up.

The rate before the drop is remembered with the moment a saturated reading last showed the drop
(``slo_kernel.remembered_drop``); ``slo_kernel.DROP_MEMORY_SECONDS`` later the rate returns to it
(``slo_kernel.let_go``). Each rule at its boundary (kernel), through the engine, and on the
probe's run: the engine in the loop, and the batched simulator, which must decide the same.
"""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pytest

from scaling.domain import slo_kernel as kernel
from scaling.domain.decisions import ScalerState
from scaling.domain.engine import learn_throughput, let_go_of_drop
from scaling.simulation.drivers.batched_slo import simulate_slo_batch
from scaling.simulation.peers.looped import EngineAutoscaler, simulated_target
from scaling.simulation.world.loop import Scenario, load_trace, per_minute, scale_trace, simulate
from scaling.simulation.world.traces import WORLDCUP98
from tests.helpers import assert_same_run
from tests.unit.test_domain_throughput_ownership import A, sample

NAN = math.nan
MEMORY = kernel.DROP_MEMORY_SECONDS


def one(value: float) -> np.ndarray:
    return np.array([value], dtype=float)


def same(actual: float, expected: float) -> bool:
    return (math.isnan(actual) and math.isnan(expected)) or actual == pytest.approx(expected)


@pytest.mark.parametrize(("before", "shown_at", "observed", "saturated", "corroborated", "expected"), [
    # previous (learned before the interval) 10/s; now = 1000; expected: (before, shown_at)
    pytest.param(NAN, NAN, 5.0, True, True, (10.0, 1000.0), id="a-drop-learned-at-once-is-remembered"),
    pytest.param(NAN, NAN, 5.0, True, False, (NAN, NAN), id="a-drop-that-waits-is-not"),
    pytest.param(NAN, NAN, 8.5, True, True, (NAN, NAN), id="within-the-doubt-nothing-dropped"),
    pytest.param(16.0, 400.0, 5.0, True, True, (16.0, 1000.0), id="a-second-drop-keeps-the-first-rate"),
    pytest.param(16.0, 400.0, 12.0, True, False, (16.0, 1000.0), id="a-saturated-reading-below-the-rate-renews"),
    pytest.param(16.0, 400.0, 13.0, True, False, (16.0, 400.0), id="one-within-the-doubt-does-not"),
    pytest.param(16.0, 400.0, 5.0, False, False, (16.0, 400.0), id="an-unsaturated-reading-does-not"),
])
def test_remembered_drop(before, shown_at, observed, saturated, corroborated, expected) -> None:
    arrays = kernel.remembered_drop(one(before), one(shown_at), one(10.0), one(observed), np.array([saturated]),
                                    np.array([True]), np.array([corroborated]), 1000.0)
    plain = kernel.remembered_drop(before, shown_at, 10.0, observed, saturated, True, corroborated, 1000.0)
    for values in (tuple(float(value[0]) for value in arrays), tuple(float(value) for value in plain)):
        assert all(same(value, wanted) for value, wanted in zip(values, expected, strict=True)), values


@pytest.mark.parametrize(("throughput", "before", "elapsed", "expected"), [
    # shown at 0; expected: (throughput, before, shown_at)
    pytest.param(5.0, 16.0, MEMORY - 60.0, (5.0, 16.0, 0.0), id="remembered-within-the-memory"),
    pytest.param(5.0, 16.0, MEMORY, (16.0, NAN, NAN), id="let-go-at-the-memory"),
    pytest.param(5.0, NAN, MEMORY, (5.0, NAN, NAN), id="nothing-remembered-nothing-let-go"),
    pytest.param(13.0, 16.0, 60.0, (13.0, NAN, NAN), id="a-rate-learned-back-forgets-the-drop"),
])
def test_let_go(throughput, before, elapsed, expected) -> None:
    shown_at = NAN if math.isnan(before) else 0.0
    arrays = kernel.let_go(one(throughput), one(before), one(shown_at), elapsed)
    plain = kernel.let_go(throughput, before, shown_at, elapsed)
    for values in (tuple(float(value[0]) for value in arrays), tuple(float(value) for value in plain)):
        assert all(same(value, wanted) for value, wanted in zip(values, expected, strict=True)), values


def test_the_engine_remembers_a_drop_learned_at_once_and_lets_it_go() -> None:
    # each owner's two partitions: 150 processed of 600 arriving a minute: 5/s against 10/s learned
    state = ScalerState(target="t", throughput_per_instance=10.0, throughput_floor=10.0, throughput_observations=5)
    samples = [sample(0, A, 150), sample(1, A, 150)]
    state = learn_throughput(state, samples, 4, True)
    shown = samples[-1].collected_at
    assert (state.throughput_per_instance, state.throughput_before_drop, state.throughput_drop_shown_at) == (
        pytest.approx(5.0), 10.0, shown)
    held = let_go_of_drop(state, shown + timedelta(seconds=MEMORY - 60))
    assert held == state
    released = let_go_of_drop(state, shown + timedelta(seconds=MEMORY))
    assert (released.throughput_per_instance, released.throughput_before_drop, released.throughput_drop_shown_at) == (
        10.0, None, None)


def test_the_rate_comes_back_after_the_slow_down() -> None:
    """WC98 minutes 0-999, consumers at 30% from minute 300 for 2 hours: 1.806 of the fluid bound
    with the drop held for good (11 instances at 5/s to the end), 1.547 / 15 violation minutes
    before the drop was learned at once; let go, 1.420 / 0."""
    scenario = Scenario(slowdowns=((300.0, 120.0, 0.3, 0.0),))
    arrivals = scale_trace(per_minute(load_trace(WORLDCUP98), 60)[:1000], scenario)
    target = simulated_target(scenario, name="default")
    result = simulate(arrivals, EngineAutoscaler(target), scenario)
    assert result.slo_violation_minutes == 0
    assert result.cost_ratio < 1.5
    assert_same_run(result, simulate_slo_batch(arrivals, [target], scenario)[0], "slow-down at minute 300")
