"""Step 2 of the tuning job: from a recovered history to simulation work, and its scheduling.

For each target, the scenario and the base of the candidates (``plan_target``); the candidates
of all targets are cut into (target, candidate chunk) tasks sized by their estimated cost
(``plan_tasks``: batched rule and SLO-mode groups, the rest through the engine) and run by the
executors (``simulate_all``).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from scaling.tuning.options import TuneOptions
from scaling.tuning.recovery import TargetHistory
from scaling.tuning.spark_io import ship_package
from scaling.tuning.validation import history_problem


def default_target(name: str, partitions: int) -> Any:
    """Built-in defaults shaped like the observed hub (placeholder plan and source settings). The
    placeholder plan is the target's own (a policy holds one target per plan), named after a
    digest of the target's name so that any name makes a valid resource id."""
    import hashlib
    from dataclasses import replace

    from scaling.domain.policy import PlanSettings
    from scaling.simulation.peers.looped import SIMULATED_PLAN, simulated_target
    from scaling.simulation.world.loop import Scenario

    target = simulated_target(Scenario(partitions=max(partitions, 1)), name=name)
    return replace(target, plan=PlanSettings(f"{SIMULATED_PLAN}-{hashlib.sha256(name.encode('utf-8', 'backslashreplace')).hexdigest()[:12]}"))


def plan_target(history: TargetHistory, current: Any | None, options: TuneOptions) -> tuple[Any, Any, list[str]] | str:
    """The scenario, the current policy and the base of the candidates for one target, or why the
    target cannot be tuned."""
    from scaling.domain.policy import with_slo
    from scaling.tuning.tasks import HistoryScenario

    notes: list[str] = []
    if current is None:
        current = default_target(history.target, history.partitions)
        notes.append("not in --policy (or no --policy): compared with the built-in defaults; "
                     "the recommendation carries placeholder plan and source settings to fill in")
    problem = history_problem(history.recorded if history.recorded is not None else np.ones(len(history.arrivals), dtype=bool),
                              options.train_fraction, options.folds)
    if problem:
        return problem
    prior = current.slo.events_per_instance_per_second
    threshold = options.min_saturated_minutes
    learned = history.throughput_per_minute is not None and history.saturated_minutes >= threshold
    contradicted = learned and bool(history.throughput_problem)
    if contradicted:
        contradiction = (f"the per-instance throughput learned from history, {history.throughput_per_minute:.1f} events/min, "
                         f"is contradicted by the history: {history.throughput_problem}")
        if not prior:
            return (f"refused: {contradiction}. Candidates are not built on an estimate the data contradicts: fix the "
                    "history, or configure slo.events_per_instance_per_second as a prior.")
        notes.append(f"{contradiction}: not used; using the configured prior {prior:g}/s")
        learned = False
    if learned:
        mu = history.throughput_per_minute
        source = "history"
    elif prior:
        mu = prior * 60.0
        source = "configured prior"
        if not contradicted:
            notes.append(f"per-instance throughput not identifiable from history ({history.saturated_minutes} saturated minutes at "
                         f"steady capacity, {threshold} needed): using the configured prior {prior:g}/s")
    else:
        floor = history.throughput_floor_per_minute
        seen = f"; the best rate seen is {floor:.1f} events/min per instance, a lower bound only" if floor else ""
        return (f"skipped: per-instance throughput is not identifiable: consumers were never saturated at a steady "
                f"capacity ({history.saturated_minutes} saturated minutes, {threshold} needed){seen}, and the policy "
                "configures no slo.events_per_instance_per_second prior. Record history that includes a busy period, "
                "or set the prior.")
    if float(history.arrivals.sum()) <= 0:
        return "skipped: no events arrived in the history; nothing to tune"
    scenario = HistoryScenario(
        peak_instances=float(history.partitions),
        events_per_instance_per_minute=mu,
        partitions=history.partitions,
        provisioning_delay_minutes=int(round(current.slo.provisioning_delay_seconds / 60.0)),
        collection_interval_minutes=history.interval_minutes,
        checkpoint_delay_seconds=history.checkpoint_delay_seconds,
        slo_minutes=current.slo.max_event_age_seconds / 60.0,
        initial_capacity=max(history.initial_capacity, 1),
        weights=tuple(history.weights),
    )
    base = current
    if source == "history":
        base = with_slo(current, events_per_instance_per_second=round(mu / 60.0, 3))
    return scenario, base, [*notes, f"per-instance throughput {mu:.1f} events/min ({source})"]


def task_chunks(sizes: dict[str, int], parallelism: int, tasks_per_core: int) -> list[tuple[str, list[int]]]:
    """(target, candidate indices) tasks: about ``tasks_per_core`` per core, never empty."""
    total = sum(sizes.values())
    if not total:
        return []
    chunk = max(1, math.ceil(total / max(parallelism * tasks_per_core, 1)))
    tasks = []
    for target, size in sizes.items():
        for start in range(0, size, chunk):
            tasks.append((target, list(range(start, min(start + chunk, size)))))
    return tasks


#: Rough cost of one candidate-minute, in seconds: the engine in the loop, and the batched
#: simulators per minute (whatever the batch), per candidate and partition, and per candidate and
#: instance the target typically runs (owners' loads, ownership changes and the counts a
#: scale-in tries grow with it). For ordering tasks longest first only: the partitions alone
#: rank targets of one partition count as equals when their instances make them differ
#: (the calibration: docs/policy-experiments.md, "Notes moved out of the code").
ENGINE_MINUTE_SECONDS = 3e-4
BATCHED_PARTITION_MINUTE_SECONDS = 1e-8
BATCHED_INSTANCE_MINUTE_SECONDS = 2e-7
BATCH_MINUTE_SECONDS = 4e-4
#: At most this many candidate-minutes in one batch (its per-minute series take ~50 bytes each).
MAX_BATCH_CANDIDATE_MINUTES = 4_000_000


def typical_instances(work: Any) -> float:
    """How many instances the target's arrivals need on average (at least one): its mean rate
    over the per-instance throughput."""
    rate = float(work.scenario.events_per_instance_per_minute)
    return max(float(work.arrivals.mean()) / rate, 1.0) if rate > 0 and len(work.arrivals) else 1.0


def plan_tasks(works: dict[str, Any], parallelism: int, tasks_per_core: int) -> list[tuple[str, list[int]]]:
    """Spark tasks, longest first: per target and batch group (threshold rules; SLO mode per
    window), its candidates in one task (one batched simulation; split in a few when there are
    fewer batches than cores, so that every core has work, and so that no batch holds more than
    ``MAX_BATCH_CANDIDATE_MINUTES``), and its other candidates (the engine in the loop) in chunks
    of about ``tasks_per_core`` tasks per core."""
    from scaling.tuning.tasks import batch_group

    together: dict[tuple, list[int]] = {}
    alone: dict[str, list[int]] = {name: [] for name in works}
    for name, work in works.items():
        for index in range(len(work.candidates)):
            group = batch_group(work, index)
            if group is None:
                alone[name].append(index)
            else:
                together.setdefault((name, group), []).append(index)
    tasks: list[tuple[str, list[int]]] = []
    costs: list[float] = []
    pieces = max(1, math.ceil(parallelism / max(len(together), 1)))
    for (name, _), indices in together.items():
        size = max(math.ceil(len(indices) / pieces), 32)
        size = max(min(size, MAX_BATCH_CANDIDATE_MINUTES // max(len(works[name].arrivals), 1)), 1)
        for start in range(0, len(indices), size):
            part = indices[start:start + size]
            tasks.append((name, part))
            scenario = works[name].scenario
            costs.append(len(works[name].arrivals) * (BATCH_MINUTE_SECONDS + len(part) * (
                BATCHED_PARTITION_MINUTE_SECONDS * scenario.partitions
                + BATCHED_INSTANCE_MINUTE_SECONDS * typical_instances(works[name]))))
    for name, chunk in task_chunks({name: len(indices) for name, indices in alone.items()}, parallelism, tasks_per_core):
        tasks.append((name, [alone[name][i] for i in chunk]))
        costs.append(len(works[name].arrivals) * ENGINE_MINUTE_SECONDS * len(chunk))
    order = sorted(range(len(tasks)), key=lambda number: -costs[number])
    return [tasks[number] for number in order]


def simulate_all(spark: Any, works: dict[str, Any], tasks_per_core: int = 3) -> tuple[list[dict], float]:
    """Distribute (target, candidate chunk) tasks over the executors; returns rows and seconds."""
    from scaling.tuning.tasks import run_chunk

    context = spark.sparkContext
    ship_package(spark)
    tasks = plan_tasks(works, context.defaultParallelism, tasks_per_core)
    if not tasks:
        return [], 0.0
    shared = context.broadcast(works)
    started = time.perf_counter()
    rows = (context.parallelize(tasks, numSlices=len(tasks))
            .flatMap(lambda task: run_chunk(task, shared.value))
            .collect())
    seconds = time.perf_counter() - started
    shared.unpersist()
    return rows, seconds
