"""What the Spark executors run: candidate policies simulated on one target's reconstructed
arrival series. No Spark imports here (the functions are shipped by reference in the package
zip, so that they behave the same under ``spark-submit`` on a cluster and on ``local[*]``).

Candidates run together in batched simulations (candidates as an array dimension), which
reproduce the engine-driven run exactly: threshold-rule candidates that
``scaling.simulation.batched.supports`` accepts in one batch, SLO-mode candidates that
``scaling.simulation.batched_slo.supports`` accepts in one batch per window (tests/unit/
test_simulation_batched*.py). The others (``lag_seconds`` rules, fractional seconds) run the
real rule engine in the loop, one candidate at a time. All give the same rows.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scaling.simulation.candidates import Candidate, simulate_group
from scaling.simulation.candidates import batch_group as target_batch_group
from scaling.simulation.peers import EngineAutoscaler
from scaling.simulation.world import RunResult, Scenario, simulate

CURRENT = "current"


@dataclass(frozen=True, slots=True)
class HistoryScenario(Scenario):
    """A scenario recovered from history: the observed share of arrivals per partition."""

    weights: tuple[float, ...] = ()

    def partition_weights(self) -> np.ndarray:
        if len(self.weights) == self.partitions and sum(self.weights) > 0:
            raw = np.asarray(self.weights, dtype=float)
            return raw / raw.sum()
        return Scenario.partition_weights(self)


@dataclass(frozen=True, slots=True)
class TargetWork:
    """Everything an executor needs for one target (broadcast once)."""

    target: str
    arrivals: np.ndarray
    scenario: Scenario
    split: int
    candidates: tuple[Candidate, ...]


def window_metrics(result: RunResult, scenario: Scenario, start: int, end: int) -> dict:
    """Cost, SLO and action numbers of a run over minutes ``[start, end)``."""
    mu = scenario.events_per_instance_per_minute
    capacity = result.capacity[start:end]
    ages = result.age[start:end]
    arrivals = result.arrivals[start:end]
    fluid = float(arrivals.sum()) / mu
    cost = float(capacity.sum())
    changes = int(np.count_nonzero(np.diff(result.capacity[max(start - 1, 0):end]))) if end > start else 0
    minutes = end - start
    violations = int((ages > scenario.slo_minutes).sum())
    return {
        "minutes": minutes,
        "cost": cost,
        "cost_ratio": round(cost / fluid, 4) if fluid > 0 else None,
        "slo_violation_minutes": violations,
        "meets_slo": violations <= scenario.max_violation_fraction * minutes,
        "scale_actions": changes,
        "p99_age_minutes": round(float(np.percentile(ages, 99)), 3) if minutes else 0.0,
        "max_age_minutes": round(float(ages.max()), 3) if minutes else 0.0,
    }


def batch_group(work: TargetWork, index: int) -> tuple | None:
    """Which batched simulation this candidate runs in (candidates of one group run together),
    or ``None`` when it runs through the engine."""
    return target_batch_group(work.candidates[index].target)


def batched(work: TargetWork, index: int) -> bool:
    """Whether this candidate runs in a batched simulator (else through the engine)."""
    return batch_group(work, index) is not None


def simulate_candidate(work: TargetWork, index: int) -> dict:
    """One candidate on the whole series (warm state) through the engine, scored on the validation window."""
    candidate = work.candidates[index]
    started = time.perf_counter()
    result = simulate(work.arrivals, EngineAutoscaler(candidate.target), work.scenario,
                      algorithm="candidate", knob=candidate.label, score_from=work.split)
    return candidate_row(work, index, result, time.perf_counter() - started)


def simulate_candidates_batched(work: TargetWork, indices: Sequence[int]) -> list[dict]:
    """Batchable candidates, one batched run per group; each row's ``seconds`` is its share of its run."""
    groups: dict[tuple, list[int]] = {}
    for index in indices:
        groups.setdefault(batch_group(work, index), []).append(index)
    rows = []
    for group, members in groups.items():
        started = time.perf_counter()
        results = simulate_group(group, work.arrivals, [work.candidates[index] for index in members], work.scenario,
                                 score_from=work.split)
        seconds = (time.perf_counter() - started) / len(members)
        rows += [candidate_row(work, index, result, seconds) for index, result in zip(members, results, strict=True)]
    return rows


def candidate_row(work: TargetWork, index: int, result: RunResult, seconds: float) -> dict:
    candidate = work.candidates[index]
    validation = {
        "minutes": result.minutes,
        "cost": result.cost,
        "cost_ratio": round(result.cost_ratio, 4) if np.isfinite(result.cost_ratio) else None,
        "slo_violation_minutes": result.slo_violation_minutes,
        "meets_slo": result.meets_slo(work.scenario),
        "scale_actions": result.scale_actions,
        "p99_age_minutes": round(result.p99_age_minutes, 3),
        "max_age_minutes": round(result.max_age_minutes, 3),
        "final_backlog": round(result.final_backlog, 1),
    }
    return {
        "target": work.target,
        "index": index,
        "label": candidate.label,
        "train": window_metrics(result, work.scenario, 0, work.split),
        "validation": validation,
        "simulated_minutes": len(work.arrivals),
        "seconds": round(seconds, 6),
    }


def run_chunk(task: tuple[str, Sequence[int]], works: dict[str, TargetWork]) -> list[dict]:
    """A Spark task: a chunk of one target's candidates (the batchable ones in one batch), rows in
    the chunk's order."""
    target, indices = task
    work = works[target]
    together = [index for index in indices if batched(work, index)]
    rows = {row["index"]: row for row in simulate_candidates_batched(work, together)}
    for index in indices:
        if index not in rows:
            rows[index] = simulate_candidate(work, index)
    return [rows[index] for index in indices]
