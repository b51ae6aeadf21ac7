"""Out-of-time splits: the history cut in time order into a first training block and equal
validation blocks (expanding window), and a run's scores per window, judged as the benchmark
judges its world. Each candidate runs once over the whole history; a run is causal, so its
numbers on ``[a, b)`` are those of a run stopped at ``b``."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scaling.simulation.world.judges import AVOIDABLE, judge_of
from scaling.simulation.world.scenario import RunResult, Scenario


@dataclass(frozen=True, slots=True)
class Folds:
    """Blocked out-of-time splits of ``minutes``: fold ``k`` trains on ``[0, train_ends[k])`` and
    validates on ``[train_ends[k], train_ends[k + 1])`` (the last one up to ``minutes``)."""

    train_ends: tuple[int, ...]
    minutes: int

    @property
    def validation(self) -> tuple[tuple[int, int], ...]:
        ends = (*self.train_ends[1:], self.minutes)
        return tuple(zip(self.train_ends, ends, strict=True))

    @property
    def training(self) -> tuple[tuple[int, int], ...]:
        return tuple((0, end) for end in self.train_ends)


def blocked_folds(minutes: int, folds: int = 3, first_train_fraction: float = 0.4) -> Folds:
    """``folds`` equal validation blocks after a first training block of ``first_train_fraction``."""
    if folds < 1:
        raise ValueError(f"folds must be at least 1, got {folds}")
    if not 0 < first_train_fraction < 1:
        raise ValueError(f"first_train_fraction must be between 0 and 1, got {first_train_fraction}")
    first = int(minutes * first_train_fraction)
    if first < 1 or minutes - first < folds:
        raise ValueError(f"{minutes} minutes cannot hold a training block and {folds} validation blocks")
    block = (minutes - first) / folds
    return Folds(tuple(first + int(round(block * k)) for k in range(folds)), minutes)


def percentile_99(values: np.ndarray) -> float:
    """``np.percentile(values, 99)`` (its default linear method, the same floating-point steps),
    by a partial sort: about ten times as fast, and every candidate's every window needs one."""
    count = len(values)
    position = 0.99 * (count - 1)
    low = math.floor(position)
    high = min(low + 1, count - 1)
    ordered = np.partition(values, (low, high))
    below, above = float(ordered[low]), float(ordered[high])
    fraction = position - low
    step = above - below
    return above - step * (1 - fraction) if fraction >= 0.5 else below + step * fraction


def judged_ages(result: RunResult, scenario: Scenario) -> np.ndarray:
    """The oldest-event ages a run is judged by, as the benchmark judges its world (judges.py):
    where partitions are uneven, over the partitions an instance of their own would keep within
    the SLO (``reachable_age``), so that minutes no count can avoid fail no candidate; elsewhere
    the whole hub's."""
    if judge_of(scenario) == AVOIDABLE and result.reachable_age is not None:
        return result.reachable_age
    return result.age


def window_numbers(result: RunResult, scenario: Scenario, start: int, end: int, recorded: np.ndarray | None = None) -> dict:
    """Cost, SLO and action numbers of a run over minutes ``[start, end)``, its ages as judged
    (``judged_ages``); with ``recorded`` (per minute of the run), over those of its minutes that
    were recorded only (the tuning job invents the others: gaps, repaired readings), scale actions
    included."""
    keep = np.ones(max(end - start, 0), dtype=bool) if recorded is None else recorded[start:end]
    mu = scenario.events_per_instance_per_minute
    capacity = result.capacity[start:end][keep]
    ages = judged_ages(result, scenario)[start:end][keep]
    fluid = float(result.arrivals[start:end][keep].sum()) / mu
    cost = float(capacity.sum())
    changed = np.diff(result.capacity[max(start - 1, 0):end]) != 0
    changes = int(np.count_nonzero(changed[-len(keep):][keep[len(keep) - len(changed):]])) if end > start else 0
    minutes = int(keep.sum())
    violations = int((ages > scenario.slo_minutes).sum())
    return {
        "minutes": minutes,
        "cost": cost,
        "cost_ratio": round(cost / fluid, 4) if fluid > 0 else None,
        "slo_violation_minutes": violations,
        "meets_slo": violations <= scenario.max_violation_fraction * minutes,
        "scale_actions": changes,
        "p99_age_minutes": round(percentile_99(ages), 3) if minutes else 0.0,
        "max_age_minutes": round(float(ages.max()), 3) if minutes else 0.0,
    }


def scores(result: RunResult, scenario: Scenario, folds: Folds, recorded: np.ndarray | None = None) -> dict:
    """A run's numbers per fold (``train``, ``validation``) and over all validation blocks (with
    ``recorded``, over the recorded minutes only: ``window_numbers``)."""
    windows: dict[tuple[int, int], dict] = {}  # one fold: its validation block is all of validation

    def numbers(start: int, end: int) -> dict:
        if (start, end) not in windows:
            windows[(start, end)] = window_numbers(result, scenario, start, end, recorded)
        return windows[(start, end)]

    return {
        "folds": [{"train": numbers(*train), "validation": numbers(*valid)}
                  for train, valid in zip(folds.training, folds.validation, strict=True)],
        "validation": numbers(folds.train_ends[0], folds.minutes),
    }
