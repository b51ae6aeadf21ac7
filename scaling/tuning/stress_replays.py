"""Stress replays: a history replayed in rougher worlds built on its own scenario (the
``realistic`` set of docs/benchmark-contract.md, a second set of other values of the same knobs and
another seed, and the history's traffic grown toward what the hub can serve)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from scaling.simulation.world.scenario import NAMED_SCENARIOS, Scenario
from scaling.tuning.folds import Folds

#: A stress set's knob that is not a scenario field: scale the history's arrivals so that its
#: busiest minute needs this fraction of the hub's capacity (at most ``MAX_LOAD_FACTOR`` times,
#: never down).
LOAD_KNOB = "peak_load_fraction"
MAX_LOAD_FACTOR = 5.0

#: The stress sets every candidate is replayed under: docs/benchmark-contract.md's public ``realistic`` values,
#: and other values of the same knobs (longer checkpoint interval, more skew rotating faster, a
#: slower and deeper throughput wave, a slow-down every three days, longer delays, more failures,
#: another seed), so that a policy fitted to the public values alone does not pass.
STRESS_SETS: dict[str, dict] = {
    "realistic": NAMED_SCENARIOS["realistic"],
    # Traffic grown to 75% of what the hub can serve (partitions x throughput; the standard
    # scenario's peak of 24 instances on 32 partitions), in the history's own world: a policy
    # tuned on a quiet period must hold when the busy one comes.
    "surge": {LOAD_KNOB: 0.75},
    "rough": {"checkpoint_interval_seconds": 45.0, "skew": 0.03, "hot_spot_rotation_minutes": 240,
              "throughput_wave": (0.12, 720.0), "slowdowns": ((1500.0, 120.0, 0.75, 4320.0),),
              "provisioning_delay_range": (2, 4), "instance_failures_per_day": 3.0, "assignment": "balanced",
              "rebalance_pause_seconds": 30.0, "seed": 2},
}


def stress_scenarios(scenario: Scenario, sets: Mapping[str, Mapping] = STRESS_SETS) -> dict[str, Scenario]:
    """The stress worlds built on ``scenario`` (the history's own world: partitions, throughput,
    SLO, observed partition shares): each set's knobs on top of it."""
    built = {}
    for name, knobs in sets.items():
        changes = {key: value for key, value in knobs.items() if key != LOAD_KNOB}
        weights = getattr(scenario, "weights", ())
        if weights and changes.get("skew", 0) > 0:
            # Observed shares: make them more skewed the same way (partition p times (1 + skew)^-p).
            raw = np.asarray(weights, dtype=float) * np.power(1.0 + changes["skew"], -np.arange(len(weights), dtype=float))
            changes["weights"] = tuple(float(value) for value in raw / raw.sum())
        built[name] = replace(scenario, **changes)
    return built


#: Stress replays start this many minutes before the first validation block (only validation
#: blocks are scored under stress): long enough for capacity and learned throughput to settle
#: from the cold start, and it saves replaying most of the first training block.
STRESS_WARMUP_MINUTES = 360


@dataclass(frozen=True, slots=True)
class StressReplay:
    """One stress replay to run: its set's name, its world, and the part of the history it
    replays (``arrivals[start:] * load``, scored on ``folds``, which count from ``start``)."""

    name: str
    scenario: Scenario
    start: int
    folds: Folds
    load: float = 1.0

    def arrivals(self, history: np.ndarray) -> np.ndarray:
        return history[self.start:] * self.load if self.load != 1.0 else history[self.start:]


def load_factor(history: np.ndarray, scenario: Scenario, peak_fraction: float) -> float:
    """How much to scale ``history`` so that its busiest minute needs ``peak_fraction`` of the
    hub's capacity (``partitions x events_per_instance_per_minute``); between 1 and ``MAX_LOAD_FACTOR``."""
    peak = float(np.max(history)) if len(history) else 0.0
    if peak <= 0:
        return 1.0
    wanted = peak_fraction * scenario.partitions * scenario.events_per_instance_per_minute / peak
    return float(min(max(wanted, 1.0), MAX_LOAD_FACTOR))


def stress_replays(scenario: Scenario, folds: Folds, history: np.ndarray,
                   sets: Mapping[str, Mapping] = STRESS_SETS) -> list[StressReplay]:
    """The stress replays of one history (``stress_scenarios``; a set with ``LOAD_KNOB`` also
    scales the arrivals), each from ``STRESS_WARMUP_MINUTES`` before the first validation block."""
    start = max(folds.train_ends[0] - STRESS_WARMUP_MINUTES, 0)
    shifted = Folds(tuple(end - start for end in folds.train_ends), folds.minutes - start)
    worlds = stress_scenarios(scenario, sets)
    replays = [StressReplay(name, worlds[name], start, shifted,
                            load_factor(history, scenario, knobs[LOAD_KNOB]) if LOAD_KNOB in knobs else 1.0)
               for name, knobs in sets.items()]
    # A set that is the history's own world (the benchmark's realistic scenario under the realistic
    # set) adds nothing: the first pass has already scored every validation block in it.
    return [replay for replay in replays if replay.load != 1.0 or replay.scenario != scenario]
