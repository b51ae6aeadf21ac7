"""What the Spark executors run: candidate policies simulated on one target's reconstructed
arrival series. No Spark imports here (the functions are shipped by reference in the package
zip, so that they behave the same under ``spark-submit`` on a cluster and on ``local[*]``).

Candidates run together in batched simulations (candidates as an array dimension), which
reproduce the engine-driven run exactly: threshold-rule candidates that
``scaling.simulation.drivers.batched.supports`` accepts in one batch, SLO-mode candidates that
``scaling.simulation.drivers.batched_slo.supports`` accepts in one batch per window (tests/unit/
test_simulation_batched*.py). The others (``lag_seconds`` rules, fractional seconds) run the
real rule engine in the loop, one candidate at a time. All give the same rows.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scaling.simulation.drivers.candidates import Candidate, simulate_group
from scaling.simulation.drivers.candidates import batch_group as target_batch_group
from scaling.simulation.peers.looped import EngineAutoscaler
from scaling.simulation.world.loop import RunResult, Scenario, simulate
from scaling.tuning.folds import Folds, scores

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
    #: The out-of-time folds' training ends (``scaling.tuning.robust.Folds``); empty: one fold at ``split``.
    train_ends: tuple[int, ...] = ()
    #: The stress replay this work is (``stress_replays.STRESS_SETS`` name); empty: the history's own scenario.
    replay: str = ""
    #: Per minute of ``arrivals``: recorded (``True``) or invented by the job (gaps, repairs), which
    #: no score counts; ``None``: every minute recorded.
    recorded: np.ndarray | None = None

    @property
    def folds(self) -> Folds:
        return Folds(self.train_ends or (self.split,), len(self.arrivals))


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
    """A candidate's numbers: per out-of-time fold (``folds``), on the first training block
    (``train``) and on all validation blocks (``validation``), as ``folds.scores`` gives them."""
    candidate = work.candidates[index]
    scored = scores(result, work.scenario, work.folds, work.recorded)
    return {
        "target": work.target,
        "replay": work.replay,
        "index": index,
        "label": candidate.label,
        "train": scored["folds"][0]["train"],
        "validation": {**scored["validation"], "final_backlog": round(result.final_backlog, 1)},
        "folds": scored["folds"],
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
