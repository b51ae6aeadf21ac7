"""Bursts the backlog absorbs (slo_kernel/absorb.py), in the simulated world: the engine in the
loop and the batched driver alike carry a short burst without a scale-out where the SLO allows,
and leave steady traffic as it was."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scaling.domain.slo_kernel import absorb
from scaling.simulation.drivers.batched_slo import simulate_slo_batch
from scaling.simulation.peers.looped import EngineAutoscaler, simulated_target
from scaling.simulation.world.loop import Scenario, simulate
from tests.helpers import assert_same_run

WARM_UP = 20  # minutes: the throughput learned, the first scale-out made


def two_minute_bursts(minutes: int = 90) -> np.ndarray:
    """1,000 events a minute and, every ten minutes, two minutes at 6,000: the mean (2,000 a minute)
    is two instances' worth, the bursts six."""
    pattern = [1000.0] * 10
    pattern[2] = pattern[3] = 6000.0
    return np.array(pattern * (minutes // 10))


def test_a_short_burst_is_carried_without_a_scale_out_where_the_slo_allows() -> None:
    """Three instances serve the bursts' backlog within the limit (the oldest event at most about
    two minutes old); sized for the burst's rate, the default scaled out to 8 after each burst and
    back (3.3x the fluid bound instead of 1.5x)."""
    scenario = replace(Scenario.named("standard"), initial_capacity=3)
    target = simulated_target(scenario, name="default")
    arrivals = two_minute_bursts()
    result = simulate(arrivals, EngineAutoscaler(target), scenario)
    assert max(result.capacity[WARM_UP:]) == 3
    assert result.slo_violation_minutes == 0
    assert result.max_age_minutes < 2.5
    assert_same_run(result, simulate_slo_batch(arrivals, [target], scenario)[0], "batched")


@pytest.mark.parametrize("seed", [3, 11])
def test_steady_noisy_traffic_is_left_as_it_was(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Diurnal traffic with 25% per-minute noise measures under half of ``ABSORB_FULL_NOISE``:
    the absorbing rules weigh nothing, and every decision is the plain rule's (the same run with
    them switched off)."""
    scenario = Scenario.named("standard")
    target = simulated_target(scenario, name="default")
    rng = np.random.default_rng(seed)
    minutes = np.arange(600)
    arrivals = 12000.0 * (0.55 + 0.45 * np.sin(2 * np.pi * (minutes - 360) / 1440)) * rng.lognormal(0.0, 0.25, 600)
    with_absorb = simulate_slo_batch(arrivals, [target], scenario)[0]
    monkeypatch.setattr(absorb, "ABSORB_FULL_NOISE", 0.0)
    assert_same_run(simulate_slo_batch(arrivals, [target], scenario)[0], with_absorb, "absorb off")
