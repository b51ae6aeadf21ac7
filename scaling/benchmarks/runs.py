"""One work unit of the benchmark, as a worker process runs it: a lone job through the engine in
the loop, a sweep or several traces as one batch, each row the one the job gives alone."""

from __future__ import annotations

import time
from collections.abc import Sequence

from scaling.benchmarks.cold import COLD, COLD_MINUTES, cold_starts, merged, windows
from scaling.benchmarks.family import trace_label
from scaling.benchmarks.jobs import (
    FLINK_SWEEP,
    LOOK_AHEAD,
    PROJECT_PAIR,
    SWEPT_IN_BATCHES,
    TRAIN_FRACTION,
    Job,
    job_scenario,
    result_row,
)
from scaling.benchmarks.tuned import run_project_pair, tuned_choice, tuned_window


def run_job(job: Job) -> dict:
    """One simulation (or one tuning plus scoring), in a worker process."""
    from scaling.benchmarks.family import load_arrivals
    from scaling.simulation.peers import looped as peers
    from scaling.simulation.world.loop import scale_trace, simulate

    scenario = job_scenario(job)
    arrivals = scale_trace(load_arrivals(job.trace), scenario)
    started = time.perf_counter()
    split = int(len(arrivals) * TRAIN_FRACTION)  # project-tuned is tuned before it and scored from it
    trace = trace_label(job.trace)
    if job.scenario == COLD:
        starts = cold_starts(arrivals, scenario.seed)
        runs = [simulate_job(job, arrivals[start:start + COLD_MINUTES], scenario) for start in starts]
        row = {**result_row(trace, merged(runs, scenario), scenario, job.scenario), "windows": windows(starts, runs)}
        row["seconds"] = round(time.perf_counter() - started, 2)
        return row
    if job.algorithm == "project-tuned":
        candidate, selection = tuned_choice(arrivals[:split], scenario)
        result = simulate(arrivals, peers.EngineAutoscaler(candidate.target), scenario, algorithm=job.algorithm,
                          knob=candidate.label, score_from=split)
        tuning = {"kept_default": selection.kept_current, "reason": selection.reason}
    else:
        result = simulate_job(job, arrivals, scenario)
    row = result_row(trace, result, scenario, job.scenario)
    if job.algorithm == "project-tuned":
        row["tuning"] = tuning
    if job.algorithm == "project-default":
        row["tuned_window"] = tuned_window(result, scenario, split)
    row["seconds"] = round(time.perf_counter() - started, 2)
    return row



def simulate_job(job: Job, arrivals, scenario):
    """One algorithm and setting (not project-tuned) on ``arrivals``: its ``RunResult``
    (project-default through the batched SLO driver, which gives the engine's numbers and is faster
    than the engine in the loop: ``run_project_pair``)."""
    from scaling.simulation.drivers.batched_slo import simulate_slo_batch, supports
    from scaling.simulation.peers import looped as peers
    from scaling.simulation.world.loop import simulate

    partitions = scenario.partitions
    if job.algorithm == "project-default":
        target = peers.simulated_target(scenario, name="default")
        if supports(target):
            return simulate_slo_batch(arrivals, [target], scenario, algorithm=job.algorithm, knobs=[job.knob])[0]
        autoscaler = peers.EngineAutoscaler(target)
    elif job.algorithm in LOOK_AHEAD:  # (the batched driver with each outlook: drivers/outlook.py)
        from scaling.simulation.drivers.outlook import learned, perfect

        target = peers.simulated_target(scenario, name="default", forecast="on")
        outlook = learned if job.algorithm == "project-forecast" else perfect(30 if job.algorithm.endswith("-30") else 15)
        return simulate_slo_batch(arrivals, [target], scenario, algorithm=job.algorithm, knobs=[job.knob], outlook=outlook)[0]
    elif job.algorithm == "seed":
        autoscaler = peers.EngineAutoscaler(peers.seed_target(scenario, job.value, job.value / 10))
    elif job.algorithm == "keda-hpa":
        autoscaler = peers.KedaHpa(job.value, partitions)
    elif job.algorithm == "functions-target":
        autoscaler = peers.FunctionsTargetBased(job.value, partitions)
    elif job.algorithm == "azure-monitor":
        autoscaler = peers.AzureMonitorStyle(job.value, step=job.step, maximum=partitions)
    elif job.algorithm == "clairvoyant":
        autoscaler = peers.Clairvoyant(arrivals, scenario, int(job.value))
    elif job.algorithm == "flink":
        autoscaler = peers.Flink(FLINK_SWEEP[int(job.value)], partitions, interval_minutes=scenario.collection_interval_minutes)
    else:
        raise ValueError(f"unknown algorithm {job.algorithm}")
    return simulate(arrivals, autoscaler, scenario, algorithm=job.algorithm, knob=job.knob)



def run_unit(unit: tuple[Job, ...]) -> list[dict]:
    """One work unit's rows, in the order of its jobs: a single job as ``run_job`` runs it, a
    seed sweep as one ``simulate_batch``, peers' sweeps as one ``simulate_peers``; a batch's
    seconds are shared out evenly over its rows. Every row is the one ``run_job`` gives alone."""
    if len(unit) == 1 and unit[0].algorithm not in SWEPT_IN_BATCHES:
        return [run_job(unit[0])]
    if {job.algorithm for job in unit} == set(PROJECT_PAIR):
        return run_project_pair(unit)
    from scaling.benchmarks.family import load_arrivals
    from scaling.simulation.world.loop import scale_trace

    first = unit[0]
    scenario = job_scenario(first)
    traces = list(dict.fromkeys(job.trace for job in unit))
    if len(traces) > 1:
        return run_traces_unit(unit, traces, scenario)
    arrivals = scale_trace(load_arrivals(first.trace), scenario)
    started = time.perf_counter()
    trace = trace_label(first.trace)
    if first.scenario == COLD:
        starts = cold_starts(arrivals, scenario.seed)
        runs = [simulate_unit(unit, arrivals[start:start + COLD_MINUTES], scenario) for start in starts]
        ordered = runs[0][1]
        seconds = round((time.perf_counter() - started) / len(unit), 2)
        columns = [[results[column] for results, _ in runs] for column in range(len(ordered))]
        return [{**result_row(trace, merged(column, scenario), scenario, job.scenario), "windows": windows(starts, column),
                 "seconds": seconds} for job, column in zip(ordered, columns, strict=True)]
    results, ordered = simulate_unit(unit, arrivals, scenario)
    seconds = round((time.perf_counter() - started) / len(unit), 2)
    return [{**result_row(trace, result, scenario, job.scenario), "seconds": seconds} for job, result in zip(ordered, results, strict=True)]


def run_traces_unit(unit: tuple[Job, ...], traces: Sequence[str], scenario) -> list[dict]:
    """A peers, seed or lone project-default unit over several traces of one length
    (``work_units``): each trace a column of the arrivals, each setting run on its own; every row
    the one ``run_job`` gives alone."""
    import numpy as np

    from scaling.benchmarks.family import load_arrivals
    from scaling.simulation.world.loop import scale_trace

    table = np.column_stack([scale_trace(load_arrivals(trace), scenario) for trace in traces])
    started = time.perf_counter()
    results, ordered = simulate_unit(unit, table, scenario, {trace: index for index, trace in enumerate(traces)})
    seconds = round((time.perf_counter() - started) / len(unit), 2)
    split = int(len(table) * TRAIN_FRACTION)
    return [{**result_row(trace_label(job.trace), result, scenario, job.scenario),
             **({"tuned_window": tuned_window(result, scenario, split)} if job.algorithm == "project-default" else {}),
             "seconds": seconds} for job, result in zip(ordered, results, strict=True)]


def simulate_unit(unit: tuple[Job, ...], arrivals, scenario, columns: dict[str, int] | None = None) -> tuple[list, list[Job]]:
    """A batched unit's ``RunResult``s on ``arrivals`` and the jobs in their order. ``columns``:
    ``arrivals`` holds several traces, each job's trace names its column."""
    from scaling.simulation.drivers.batched import simulate_batch
    from scaling.simulation.peers import batched as batched_peers
    from scaling.simulation.peers import looped as peers

    partitions = scenario.partitions
    by_algorithm: dict[str, list[Job]] = {}
    for job in unit:
        by_algorithm.setdefault(job.algorithm, []).append(job)

    def trace_of(group: Sequence[Job]) -> list[int] | None:
        return None if columns is None else [columns[job.trace] for job in group]

    if set(by_algorithm) == {"project-default"}:  # (several traces: each the default on its own)
        from scaling.simulation.drivers.batched_slo import simulate_slo_batch

        target = peers.simulated_target(scenario, name="default")
        results = simulate_slo_batch(arrivals, [target] * len(unit), scenario, algorithm="project-default",
                                     knobs=[job.knob for job in unit], trace_of=trace_of(unit))
        return results, list(unit)
    if set(by_algorithm) == {"seed"}:
        results = simulate_batch(arrivals, [peers.seed_target(scenario, job.value, job.value / 10) for job in unit], scenario,
                                 algorithm="seed", knobs=[job.knob for job in unit], trace_of=trace_of(unit))
        return results, list(unit)
    batches = []
    for algorithm, group in by_algorithm.items():
        values, knobs = [job.value for job in group], [job.knob for job in group]
        if algorithm == "keda-hpa":
            batches.append(batched_peers.KedaHpaBatch(values, partitions, knobs))
        elif algorithm == "functions-target":
            batches.append(batched_peers.FunctionsTargetBatch(values, partitions, knobs))
        elif algorithm == "azure-monitor":
            batches.append(batched_peers.AzureMonitorBatch(values, [job.step for job in group], knobs, maximum=partitions))
        elif algorithm == "clairvoyant":
            batches.append(batched_peers.ClairvoyantBatch(arrivals, scenario, [int(value) for value in values], knobs,
                                                          trace_of=trace_of(group)))
        elif algorithm == "flink":
            batches.append(batched_peers.FlinkBatch([FLINK_SWEEP[int(value)] for value in values], partitions, knobs,
                                                    interval_minutes=scenario.collection_interval_minutes))
        else:
            raise ValueError(f"{algorithm} does not run in a batch")
    ordered = [job for group in by_algorithm.values() for job in group]
    results = batched_peers.simulate_peers(arrivals, batches, scenario, trace_of=trace_of(ordered))
    return results, ordered



def timed_unit(unit: tuple[Job, ...]) -> list[dict]:
    """``run_unit``'s rows, each with its share of the unit's processor time (``cpu_seconds``):
    on a shared machine the wall time (``seconds``) says more about the neighbours than the work."""
    started = time.process_time()
    rows = run_unit(unit)
    share = round((time.process_time() - started) / max(len(rows), 1), 2)
    return [{**row, "cpu_seconds": share} for row in rows]
