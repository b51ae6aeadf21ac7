"""Small helpers shared by the tests: a clock to drive, a function of ``function_app.app``, arrival
series for the simulators, and the check that a batched run equals the engine-driven one."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from scaling.simulation.world.loop import Scenario


class Clock:
    """A clock the test sets (``clock.now = ...``) and the code under test calls."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def app_function(name: str) -> Any:
    """The function called ``name`` as the host indexes it from ``function_app.app``.

    ``get_functions()`` remembers the names it returned and raises on a second call (azure-functions
    1.26); the host calls it once per process, tests many times, so index afresh and leave the app
    as found.
    """
    from function_app import app

    seen, app.functions_bindings = app.functions_bindings, None
    try:
        [function] = [f for f in app.get_functions() if f.get_function_name() == name]
    finally:
        app.functions_bindings = seen
    return function


def drive_plans(physics, plans: list[dict[int, int]]) -> None:
    """Drive ``physics`` to the end: candidate ``c`` requests ``plans[c][m]`` after minute ``m``
    (counted from 1, as observations are)."""
    while not physics.done:
        physics.advance()
        wanted = np.array([plan.get(physics.minute, physics.requested[column]) for column, plan in enumerate(plans)])
        rows = np.flatnonzero(wanted != physics.requested)
        if rows.size:
            physics.request(rows, wanted[rows])


def flat(minutes: int = 1440) -> np.ndarray:
    return np.full(minutes, 9000.0)


def step_surge(minutes: int = 1440) -> np.ndarray:
    arrivals = np.full(minutes, 3000.0)
    arrivals[minutes // 3: minutes // 3 + 240] = 22000.0  # four hours near the peak
    arrivals[2 * minutes // 3: 2 * minutes // 3 + 30] = 30000.0  # a short burst above what 32 partitions serve
    return arrivals


def noisy_diurnal(minutes: int = 1440, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(minutes)
    base = 12000.0 * (0.55 + 0.45 * np.sin(2 * np.pi * (t - 360) / 1440))
    arrivals = base * rng.lognormal(0.0, 0.25, minutes)
    arrivals[rng.random(minutes) < 0.01] *= 3.0  # spikes
    arrivals[200:215] = 0.0  # a quiet spell: minutes without arrivals
    return arrivals


def ramps(seed: int = 3) -> np.ndarray:
    """A plateau, a slow rise to near the peak and a fall, with Poisson noise: the rise is where
    a scale-in must hold at the arrivals it leads to (slo_kernel.trend)."""
    mu = 1000.0
    shape = np.concatenate((np.full(90, 5.0 * mu), np.linspace(5.0 * mu, 22.0 * mu, 150), np.linspace(22.0 * mu, 6.0 * mu, 120)))
    return np.random.default_rng(seed).poisson(shape).astype(float)


#: Scenarios shaped like the tuning job's (by checkpoint delay): hot partitions, a 2-minute
#: collection, checkpoints 1.25 minutes behind, a 3-minute provisioning delay and a first capacity
#: of 5; and a small hub without provisioning delay whose first capacity is above the bounds.
#: Each gives (scenario, arrivals, first scored minute).
JOB_SHAPED_CASES = {
    "skewed": lambda delay: (Scenario(checkpoint_delay_seconds=delay + 75.0, partitions=12, skew=0.15,
                                      collection_interval_minutes=2, provisioning_delay_minutes=3, initial_capacity=5,
                                      events_per_instance_per_minute=1500.0),
                             noisy_diurnal(1080, seed=3) * 0.6, 600),
    "instant": lambda delay: (Scenario(checkpoint_delay_seconds=delay, partitions=8, provisioning_delay_minutes=0,
                                       initial_capacity=40), step_surge(600) * 0.3, 0),
}


def assert_same_run(engine, batched, label: str) -> None:
    """Every number of a batched simulator's run equals the engine-driven run's, bit for bit
    (both run the one ``Physics``)."""
    assert batched.cost == engine.cost, label
    assert batched.slo_violation_minutes == engine.slo_violation_minutes, label
    assert batched.scale_actions == engine.scale_actions, label
    assert batched.minutes == engine.minutes, label
    np.testing.assert_array_equal(batched.capacity, engine.capacity, err_msg=label)
    np.testing.assert_array_equal(batched.serving, engine.serving, err_msg=label)
    np.testing.assert_array_equal(batched.age, engine.age, err_msg=label)
    np.testing.assert_array_equal(batched.backlog, engine.backlog, err_msg=label)
    assert batched.max_age_minutes == engine.max_age_minutes, label
    assert batched.p99_age_minutes == engine.p99_age_minutes, label
    assert batched.final_backlog == engine.final_backlog, label
    assert batched.fluid_lower_bound == engine.fluid_lower_bound, label


def assert_batch_gives_each_what_it_gets_alone(simulate_batch, arrivals, targets, scenario) -> None:
    """A candidate's run does not depend on the others in its batch."""
    together = simulate_batch(arrivals, targets, scenario)
    for target, result in zip(targets, together, strict=True):
        alone = simulate_batch(arrivals, [target], scenario)[0]
        np.testing.assert_array_equal(alone.capacity, result.capacity)
        np.testing.assert_array_equal(alone.age, result.age)
        np.testing.assert_array_equal(alone.backlog, result.backlog)  # summed in one order whatever the batch


def assert_batch_matches_engine(simulate_batch, arrivals, targets, scenario, score_from: int, label) -> int:
    """Every target's batched run equals its engine-driven run (``label(target)`` names it in a
    failure); returns how many acted, so that a test can insist the trace exercised them."""
    from scaling.simulation.peers.looped import EngineAutoscaler
    from scaling.simulation.world.loop import simulate

    batched = simulate_batch(arrivals, targets, scenario, score_from=score_from, knobs=[target.name for target in targets])
    acted = 0
    for target, result in zip(targets, batched, strict=True):
        assert_same_run(simulate(arrivals, EngineAutoscaler(target), scenario, score_from=score_from), result, label(target))
        assert result.knob == target.name
        acted += result.scale_actions > 0
    return acted
