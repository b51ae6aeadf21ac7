"""``python -m scaling benchmark``: every algorithm on every trace, side by side, in one run.

Implements the contract of docs/benchmark-contract.md: the standard scenario, each peer's main
knob swept over at least 8 values spanning a factor of 100 or more, the clairvoyant reference,
the project's default policy and the policy tuned on the first part of each trace (scored on
the rest). Writes JSON rows and prints (and optionally writes) a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from scaling.simulation.cold import COLD, COLD_MINUTES, cold_readme, cold_starts, cold_table, merged, windows
from scaling.simulation.flink import FLINK_DEFAULTS
from scaling.simulation.flink import sweep as flink_sweep
from scaling.simulation.judges import (
    AVOIDABLE,
    JUDGE_TEXT,
    judged_meets_slo,
    judged_numbers,
    judged_violation_minutes,
    table_judge,
)
from scaling.simulation.scenario import NAMED_SCENARIOS
from scaling.simulation.scenario_flags import add_scenario_arguments, scenario_from, scenario_overrides
from scaling.simulation.traces import existing_trace

#: Knob sweeps (each at least 8 values over a factor of 100 or more).
SEED_UPPER = (250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000)
KEDA_THRESHOLDS = (64, 100, 200, 400, 700, 1000, 1500, 2500, 4000, 10000)
FUNCTIONS_TARGETS = (64, 100, 200, 400, 700, 1000, 1500, 2500, 4000, 10000)
MONITOR_THRESHOLDS = (50, 100, 200, 400, 700, 1000, 2000, 5000)
MONITOR_STEPS = (1, 4)
CLAIRVOYANT_HORIZONS = (1, 3, 5)
#: The Flink peer's settings (flink.sweep: utilization target, metrics window, catch-up, scale-down
#: interval; the documented defaults among them); a job's ``value`` is its index here.
FLINK_SWEEP = tuple(flink_sweep())
#: Each peer's setting at its documented defaults (docs/peers.md), as its knob reads.
DOCUMENTED_DEFAULTS = {"project-default": "default", "keda-hpa": "unprocessedEventThreshold=64",
                       "functions-target": "target=100", "flink": FLINK_DEFAULTS.label}
TRAIN_FRACTION = 0.3
#: The candidates project-tuned searches: the tuning job's default grid (``tune --grid``).
TUNING_GRID = "large"


@dataclass(frozen=True, slots=True)
class Job:
    trace: str
    algorithm: str
    knob: str
    value: float = 0.0
    step: int = 1
    weight: float = 1.0  # rough cost, for scheduling the long jobs first
    scenario: str = "standard"
    #: Scenario fields set on top of the named scenario (as (field, value) pairs: jobs are pickled).
    overrides: tuple = ()


#: Opt-in rows (issue 52), run only when asked for by name (``--algorithm``): the default policy
#: with ``forecast: on`` and its learned look-ahead, and the same with a perfect 15-minute one
#: (the true future arrivals: the reference for the share of its saving the forecast captures).
#: ``perfect-lookahead-30``: the true arrivals over the learned outlook's own horizon (30 minutes:
#: the hold reads the dwell's minutes, which 15 do not cover).
LOOK_AHEAD = {"project-forecast": "forecast=on", "perfect-lookahead": "perfect h=15", "perfect-lookahead-30": "perfect h=30"}


def jobs_for(trace: str, scenario: str = "standard", overrides: tuple = ()) -> list[Job]:
    jobs = [Job(trace, "project-tuned", "tuned on first 30%", weight=6.0), Job(trace, "project-default", "default", weight=3.0)]
    jobs += [Job(trace, "seed", f"upper={value}", value, weight=2.0) for value in SEED_UPPER]
    jobs += [Job(trace, "keda-hpa", f"unprocessedEventThreshold={value}", value) for value in KEDA_THRESHOLDS]
    jobs += [Job(trace, "functions-target", f"target={value}", value) for value in FUNCTIONS_TARGETS]
    jobs += [Job(trace, "azure-monitor", f"per-instance>{value} step={step}", value, step)
             for value in MONITOR_THRESHOLDS for step in MONITOR_STEPS]
    jobs += [Job(trace, "clairvoyant", f"h={value}", value, weight=0.5) for value in CLAIRVOYANT_HORIZONS]
    jobs += [Job(trace, "flink", settings.label, index) for index, settings in enumerate(FLINK_SWEEP)]
    if scenario == COLD:  # nothing learned: no history to tune on
        jobs = [job for job in jobs if job.algorithm != "project-tuned"]
    return [replace(job, scenario=scenario, overrides=overrides) for job in jobs]


def _label(trace: str) -> str:
    """How rows name a trace: its folder and file (``family/NAME`` for a member)."""
    return Path(trace).parent.name + "/" + Path(trace).name


def _row(trace: str, result, scenario, name: str) -> dict:
    numbers = result.summary(scenario)
    del numbers["cost"], numbers["fluid_lower_bound"]
    return {"scenario": name, "trace": trace, "algorithm": result.algorithm, "knob": result.knob, **numbers,
            **judged_numbers(numbers, scenario), "best": False}


def tuned_choice(history, scenario):
    """What ``project-tuned`` runs: the tuning job's own selection (``robust.tune``: out-of-time
    folds, stress replays, the margin rule) over the job's default grid, the project's default
    policy being the current one; returns the chosen candidate (the default, labelled
    ``default (kept)``, when the selection keeps it) and the selection."""
    return tuned_choices([history], scenario)[0]


def tuned_choices(histories, scenario) -> list[tuple]:
    """``tuned_choice`` for several histories of one length, tuned together (``robust.tune_many``:
    each selection the one made alone, the runs columns of the same steps)."""
    from scaling.simulation import peers, robust
    from scaling.simulation.candidates import Candidate, all_candidates

    base = peers.simulated_target(scenario, name="tuned")
    candidates = [Candidate("default (kept)", base), *all_candidates(base, TUNING_GRID)]
    selections = robust.tune_many(histories, scenario, candidates, current_index=0)
    return [(candidates[selection.index], selection) for selection in selections]


def tuned_window(result, scenario, split: int) -> dict:
    """The default's numbers on the minutes ``project-tuned`` is scored on (from ``split``): the
    same run, scored from there, so that the two compare on the same traffic."""
    from scaling.simulation.scenario import scored_result

    tail = scored_result(scenario, algorithm=result.algorithm, knob=result.knob, score_from=split, arrivals=result.arrivals,
                         capacity=result.capacity, serving=result.serving, backlog=result.backlog, age=result.age,
                         scale_actions=result.scale_actions, final_backlog=result.final_backlog)
    return {"cost_ratio": round(tail.cost_ratio, 4), "slo_violation_minutes": tail.slo_violation_minutes,
            "max_age_minutes": round(tail.max_age_minutes, 3)}


def _default_on_tuned_minutes(algorithm: str, default: dict | None) -> dict | None:
    """For the ``project-tuned`` row: the default's numbers on the same minutes (``tuned_window``
    of the default's best row), if the run has them."""
    return (default or {}).get("tuned_window") if algorithm == "project-tuned" else None


def _against_default(row: dict, best: dict) -> str:
    """For the ``project-tuned`` row: the default's cost and max age on the same minutes."""
    window = _default_on_tuned_minutes(row["algorithm"], best.get("project-default"))
    if not window:
        return ""
    return (f" (project-default on the same {100 - round(TRAIN_FRACTION * 100)}%: {window['cost_ratio']:.3f}, "
            f"max age {window['max_age_minutes']:.2f})")


def run_job(job: Job) -> dict:
    """One simulation (or one tuning plus scoring), in a worker process."""
    from scaling.simulation import peers
    from scaling.simulation.family import load_arrivals
    from scaling.simulation.world import scale_trace, simulate

    scenario = job_scenario(job)
    arrivals = scale_trace(load_arrivals(job.trace), scenario)
    started = time.perf_counter()
    split = int(len(arrivals) * TRAIN_FRACTION)  # project-tuned is tuned before it and scored from it
    trace = _label(job.trace)
    if job.scenario == COLD:
        starts = cold_starts(arrivals, scenario.seed)
        runs = [simulate_job(job, arrivals[start:start + COLD_MINUTES], scenario) for start in starts]
        row = {**_row(trace, merged(runs, scenario), scenario, job.scenario), "windows": windows(starts, runs)}
        row["seconds"] = round(time.perf_counter() - started, 2)
        return row
    if job.algorithm == "project-tuned":
        candidate, selection = tuned_choice(arrivals[:split], scenario)
        result = simulate(arrivals, peers.EngineAutoscaler(candidate.target), scenario, algorithm=job.algorithm,
                          knob=candidate.label, score_from=split)
        tuning = {"kept_default": selection.kept_current, "reason": selection.reason}
    else:
        result = simulate_job(job, arrivals, scenario)
    row = _row(trace, result, scenario, job.scenario)
    if job.algorithm == "project-tuned":
        row["tuning"] = tuning
    if job.algorithm == "project-default":
        row["tuned_window"] = tuned_window(result, scenario, split)
    row["seconds"] = round(time.perf_counter() - started, 2)
    return row


def job_scenario(job: Job):
    """The world a job runs in: its named scenario with its overrides (``cold``: the standard world)."""
    from scaling.simulation.world import Scenario

    return Scenario.named("standard" if job.scenario == COLD else job.scenario, **dict(job.overrides))


def simulate_job(job: Job, arrivals, scenario):
    """One algorithm and setting (not project-tuned) on ``arrivals``: its ``RunResult``
    (project-default through the batched SLO driver, which gives the engine's numbers and is faster
    than the engine in the loop: ``run_project_pair``)."""
    from scaling.simulation import peers
    from scaling.simulation.batched_slo import simulate_slo_batch, supports
    from scaling.simulation.world import simulate

    partitions = scenario.partitions
    if job.algorithm == "project-default":
        target = peers.simulated_target(scenario, name="default")
        if supports(target):
            return simulate_slo_batch(arrivals, [target], scenario, algorithm=job.algorithm, knobs=[job.knob])[0]
        autoscaler = peers.EngineAutoscaler(target)
    elif job.algorithm in LOOK_AHEAD:
        from scaling.simulation.lookahead import LearnedOutlook, PerfectOutlook

        target = peers.simulated_target(scenario, name="default", forecast="on")
        outlook = LearnedOutlook() if job.algorithm == "project-forecast" else \
            PerfectOutlook(arrivals, 30 if job.algorithm.endswith("-30") else 15)
        autoscaler = peers.EngineAutoscaler(target, outlook=outlook)
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


#: The project's two rows of one trace and scenario run as one work unit (``run_project_pair``).
PROJECT_PAIR = ("project-tuned", "project-default")


def run_project_pair(unit: tuple[Job, ...], choose=None) -> list[dict]:
    """``project-default`` and ``project-tuned`` of one trace and scenario (or of several traces of
    one length: ``work_units``), rows as ``run_job`` gives them alone. The tuning first, on the
    history before the split (several histories tuned together: ``tuned_choices``); then both
    policies of every trace over the whole trace as one batch of the SLO driver
    (``simulate_slo_batch``, which gives what the engine in the loop gives:
    test_simulation_batched_slo.py), the default scored from the first minute and the tuned
    candidate from the split. A batch of two costs about what one run costs (the world's step is
    the same), and the engine in the loop is slower than either. Targets the batched driver
    cannot reproduce run through the engine. ``choose``: what picks one history's tuned candidate
    (``tuned_choice``)."""
    import numpy as np

    from scaling.simulation import peers
    from scaling.simulation.batched_slo import batch_key, simulate_slo_batch, supports
    from scaling.simulation.family import load_arrivals
    from scaling.simulation.world import Scenario, scale_trace, simulate

    defaults = [job for job in unit if job.algorithm == "project-default"]
    tuned = {job.trace: job for job in unit if job.algorithm == "project-tuned"}
    scenario = Scenario.named(defaults[0].scenario, **dict(defaults[0].overrides))
    arrivals = [scale_trace(load_arrivals(job.trace), scenario) for job in defaults]
    split = int(len(arrivals[0]) * TRAIN_FRACTION)
    started = time.perf_counter()
    histories = [series[:split] for series in arrivals]
    chosen = [choose(history, scenario) for history in histories] if choose else tuned_choices(histories, scenario)
    tuning_seconds = (time.perf_counter() - started) / len(defaults)
    started = time.perf_counter()
    default_target = peers.simulated_target(scenario, name="default")
    targets = [target for candidate, _ in chosen for target in (default_target, candidate.target)]
    knobs = [knob for job, (candidate, _) in zip(defaults, chosen, strict=True) for knob in (job.knob, candidate.label)]
    if all(supports(target) for target in targets) and len({batch_key(target) for target in targets}) == 1:
        several = len(defaults) > 1
        results = simulate_slo_batch(np.column_stack(arrivals) if several else arrivals[0], targets, scenario,
                                     score_from=[0, split] * len(defaults), knobs=knobs,
                                     trace_of=np.repeat(np.arange(len(defaults)), 2) if several else None)
    else:
        results = [run for series, index in zip(arrivals, range(0, len(targets), 2), strict=True)
                   for run in (simulate(series, peers.EngineAutoscaler(targets[index]), scenario, knob=knobs[index]),
                               simulate(series, peers.EngineAutoscaler(targets[index + 1]), scenario, knob=knobs[index + 1],
                                        score_from=split))]
    run_seconds = (time.perf_counter() - started) / len(targets)
    rows = {}
    for number, job in enumerate(defaults):
        result, kept = results[2 * number], results[2 * number + 1]
        result.algorithm, kept.algorithm = "project-default", "project-tuned"
        label = _label(job.trace)
        selection = chosen[number][1]
        rows[job] = {**_row(label, result, scenario, job.scenario), "tuned_window": tuned_window(result, scenario, split),
                     "seconds": round(run_seconds, 2)}
        rows[tuned[job.trace]] = {**_row(label, kept, scenario, tuned[job.trace].scenario),
                                  "tuning": {"kept_default": selection.kept_current, "reason": selection.reason},
                                  "seconds": round(tuning_seconds + run_seconds, 2)}
    return [rows[job] for job in unit]


#: Peers whose whole sweep runs as columns of one ``Kernel`` (batched_peers.py): one work unit per
#: trace and scenario, since a step of the world costs nearly as much for one column as for many
#: (on a 14-day member: 22 s for the 18 settings together, 26 s as three units; 40 s and 56 s in
#: ``realistic``, whose load balancer redraws per setting).
PEER_UNITS = (("keda-hpa", "functions-target", "azure-monitor", "clairvoyant", "flink"),)
#: Rough relative cost per minute of trace of each kind of work unit (for scheduling the longest first).
UNIT_WEIGHTS = {"project-tuned": 10.0, "project-default": 3.0, "seed": 1.0, "keda-hpa": 8.0}
#: How much dearer the stressed scenarios' worlds are (the load balancer's draws on every change).
SCENARIO_WEIGHTS = {"standard": 1.0, COLD: 0.05}


#: Traces of one length whose ``PEER_UNITS`` or seed sweeps, project pairs (tuned together:
#: ``run_project_pair``) or lone project-default runs (a run limited to it: ``--algorithm``)
#: run as columns of one step (the family's members): a step costs about the same for a few
#: columns as for a few hundred, so ten members' peers (180 settings) take about what two or three
#: take one by one (``Kernel``'s ``trace_of``).
TRACES_PER_UNIT = 10


def work_units(jobs: Sequence[Job], minutes: dict[str, int] | None = None) -> list[tuple[Job, ...]]:
    """The jobs grouped as they run: project-tuned and project-default of a trace together
    (``PROJECT_PAIR``; either alone when the other is not asked for), each seed sweep as one rules
    batch, the other peers' sweeps as ``PEER_UNITS`` batches; the sweeps, pairs and lone
    project-default runs of up to ``TRACES_PER_UNIT`` traces of one length (``minutes``) in one
    scenario together (not ``cold``, whose windows start at each trace's own minutes); longest
    (estimated) first."""
    groups: dict[tuple, list[Job]] = {}
    for job in jobs:
        unit = next((units[0] for units in (*PEER_UNITS, PROJECT_PAIR) if job.algorithm in units), job.algorithm)
        key = (job.scenario, job.overrides, job.trace, unit)
        groups.setdefault(key, []).append(job)
    if minutes:
        together: dict[tuple, list[tuple]] = {}
        for key, group in groups.items():
            kinds = tuple(sorted({job.algorithm for job in group}))  # (a pair apart from a lone default)
            if key[0] != COLD and (key[3] in (PEER_UNITS[0][0], "seed") or kinds in (("project-default",), tuple(sorted(PROJECT_PAIR)))):
                together.setdefault((key[0], key[1], minutes.get(key[2]), key[3], kinds), []).append(key)
        for keys in together.values():
            for start in range(0, len(keys), TRACES_PER_UNIT):
                chunk = keys[start:start + TRACES_PER_UNIT]
                groups[chunk[0]] = [job for key in chunk for job in groups.pop(key)]

    def cost(unit: tuple[Job, ...]) -> float:
        first = unit[0]
        kind = next((units[0] for units in (*PEER_UNITS, PROJECT_PAIR) if first.algorithm in units), first.algorithm)
        length = (minutes or {}).get(first.trace, 1)
        traces = len({job.trace for job in unit})
        return UNIT_WEIGHTS.get(kind, first.weight) * length * SCENARIO_WEIGHTS.get(first.scenario, 2.5) * (1 + traces) / 2

    return sorted((tuple(group) for group in groups.values()), key=lambda unit: -cost(unit))


def run_unit(unit: tuple[Job, ...]) -> list[dict]:
    """One work unit's rows, in the order of its jobs: a single job as ``run_job`` runs it, a
    seed sweep as one ``simulate_batch``, peers' sweeps as one ``simulate_peers``; a batch's
    seconds are shared out evenly over its rows. Every row is the one ``run_job`` gives alone."""
    if len(unit) == 1 and unit[0].algorithm not in SWEPT_IN_BATCHES:
        return [run_job(unit[0])]
    if {job.algorithm for job in unit} == set(PROJECT_PAIR):
        return run_project_pair(unit)
    from scaling.simulation.family import load_arrivals
    from scaling.simulation.world import scale_trace

    first = unit[0]
    scenario = job_scenario(first)
    traces = list(dict.fromkeys(job.trace for job in unit))
    if len(traces) > 1:
        return run_traces_unit(unit, traces, scenario)
    arrivals = scale_trace(load_arrivals(first.trace), scenario)
    started = time.perf_counter()
    trace = _label(first.trace)
    if first.scenario == COLD:
        starts = cold_starts(arrivals, scenario.seed)
        runs = [simulate_unit(unit, arrivals[start:start + COLD_MINUTES], scenario) for start in starts]
        ordered = runs[0][1]
        seconds = round((time.perf_counter() - started) / len(unit), 2)
        columns = [[results[column] for results, _ in runs] for column in range(len(ordered))]
        return [{**_row(trace, merged(column, scenario), scenario, job.scenario), "windows": windows(starts, column),
                 "seconds": seconds} for job, column in zip(ordered, columns, strict=True)]
    results, ordered = simulate_unit(unit, arrivals, scenario)
    seconds = round((time.perf_counter() - started) / len(unit), 2)
    return [{**_row(trace, result, scenario, job.scenario), "seconds": seconds} for job, result in zip(ordered, results, strict=True)]


def run_traces_unit(unit: tuple[Job, ...], traces: Sequence[str], scenario) -> list[dict]:
    """A peers, seed or lone project-default unit over several traces of one length
    (``work_units``): each trace a column of the arrivals, each setting run on its own; every row
    the one ``run_job`` gives alone."""
    import numpy as np

    from scaling.simulation.family import load_arrivals
    from scaling.simulation.world import scale_trace

    table = np.column_stack([scale_trace(load_arrivals(trace), scenario) for trace in traces])
    started = time.perf_counter()
    results, ordered = simulate_unit(unit, table, scenario, {trace: index for index, trace in enumerate(traces)})
    seconds = round((time.perf_counter() - started) / len(unit), 2)
    split = int(len(table) * TRAIN_FRACTION)
    return [{**_row(_label(job.trace), result, scenario, job.scenario),
             **({"tuned_window": tuned_window(result, scenario, split)} if job.algorithm == "project-default" else {}),
             "seconds": seconds} for job, result in zip(ordered, results, strict=True)]


def simulate_unit(unit: tuple[Job, ...], arrivals, scenario, columns: dict[str, int] | None = None) -> tuple[list, list[Job]]:
    """A batched unit's ``RunResult``s on ``arrivals`` and the jobs in their order. ``columns``:
    ``arrivals`` holds several traces, each job's trace names its column."""
    from scaling.simulation import batched_peers, peers
    from scaling.simulation.batched import simulate_batch

    partitions = scenario.partitions
    by_algorithm: dict[str, list[Job]] = {}
    for job in unit:
        by_algorithm.setdefault(job.algorithm, []).append(job)

    def trace_of(group: Sequence[Job]) -> list[int] | None:
        return None if columns is None else [columns[job.trace] for job in group]

    if set(by_algorithm) == {"project-default"}:  # (several traces: each the default on its own)
        from scaling.simulation.batched_slo import simulate_slo_batch

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


#: The algorithms ``run_unit`` runs as batches (even a sweep of one setting).
SWEPT_IN_BATCHES = ("seed", "keda-hpa", "functions-target", "azure-monitor", "clairvoyant", "flink")


def mark_best(rows: list[dict]) -> None:
    """Per scenario, trace and algorithm, flag the cheapest setting that meets the SLO as its
    world is judged (``judged_meets_slo``: by the avoidable minutes where partitions are uneven)."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row.get("scenario", "standard"), row["trace"], row["algorithm"]), []).append(row)
    for group in groups.values():
        meeting = [row for row in group if judged_meets_slo(row)]
        if meeting:
            min(meeting, key=lambda row: (row["cost_ratio"], row["scale_actions"]))["best"] = True


ORDER = ("project-default", "project-forecast", "perfect-lookahead", "perfect-lookahead-30", "project-tuned", "clairvoyant", "offline-optimum",
         "keda-hpa", "functions-target", "azure-monitor", "flink", "seed")


def optimum_column(rows: Sequence[dict], trace: str) -> tuple[float, float] | None:
    """The offline optimum's unlimited-budget bracket on ``trace`` (schedule, lower bound), as
    ratios to the fluid bound, from ``offline-optimum`` rows (``python -m scaling optimum``)."""
    found = [row for row in rows if row["trace"] == trace and row["algorithm"] == "offline-optimum" and row.get("budget") is None]
    return (found[0]["cost_ratio"], found[0]["lower_bound_ratio"]) if found else None


def summary_table(rows: Sequence[dict]) -> str:
    """Markdown: per scenario and trace, each algorithm's best SLO-meeting setting, as ratios side by side."""
    lines = []
    scenarios = sorted({row.get("scenario", "standard") for row in rows}, key=lambda name: (name != "standard", name))
    for scenario in scenarios:
        for trace in sorted({row["trace"] for row in rows if row.get("scenario", "standard") == scenario}):
            if scenario == COLD:
                lines += cold_table(trace, [row for row in rows if row["trace"] == trace and row.get("scenario") == COLD],
                                    ORDER, DOCUMENTED_DEFAULTS)
                continue
            lines += _trace_table(scenario, trace, [row for row in rows if row["trace"] == trace
                                                    and row.get("scenario", "standard") == scenario])
    return "\n".join(lines)


def _trace_table(scenario: str, trace: str, trace_rows: list[dict]) -> list[str]:
    best = {row["algorithm"]: row for row in trace_rows if row["best"]}
    reference = best.get("clairvoyant")
    uneven = table_judge(trace_rows) == AVOIDABLE
    optimum = optimum_column(trace_rows, trace)
    other = " servable-partitions violation min | avoidable violation min (judged) |" if uneven else ""
    lines = [f"### {trace} ({scenario})", "", f"Best settings {JUDGE_TEXT[table_judge(trace_rows)]}.", "",
             "| algorithm | best setting | cost / fluid bound | cost / clairvoyant | "
             + ("whole-hub violation min |" if uneven else "SLO-violation min |") + other +
             " scale actions | min per action | p99 age (min) | max age (min) | settings meeting SLO |"
             + (" cost / offline optimum |" if optimum else ""),
             "|---|---|---:|---:|---:|" + ("---:|---:|" if uneven else "") + "---:|---:|---:|---:|---:|" + ("---:|" if optimum else "")]
    for algorithm in ORDER:
        group = [row for row in trace_rows if row["algorithm"] == algorithm]
        if not group:
            continue
        meeting = sum(judged_meets_slo(row) for row in group)
        row = best.get(algorithm)
        if row is None:
            closest = min(group, key=judged_violation_minutes)
            dashes = " – |" * (9 if uneven else 7)
            lines.append(f"| {algorithm} | none meets the SLO (closest: {closest['knob']}, "
                         f"{judged_violation_minutes(closest)} min) |{dashes[:-1]}| 0/{len(group)} |"
                         .replace("|| 0/", "| 0/") + (" – |" if optimum else ""))
            continue
        versus = f"{row['cost_ratio'] / reference['cost_ratio']:.3f}" if reference else "–"
        per_action = f"{row['minutes'] / row['scale_actions']:.1f}" if row["scale_actions"] else "∞"
        others = (f" {row.get('servable_partitions_violation_minutes', '–')} | {row.get('avoidable_violation_minutes', '–')} |"
                  if uneven else "")
        lines.append(f"| {algorithm} | {row['knob']}{_against_default(row, best)} | {row['cost_ratio']:.3f} | {versus} | {row['slo_violation_minutes']} |"
                     f"{others} {row['scale_actions']} | {per_action} | {row['p99_age_minutes']:.2f} | "
                     f"{row['max_age_minutes']:.2f} | {meeting}/{len(group)} |"
                     + (f" {row['cost_ratio'] / optimum[0]:.3f} – {row['cost_ratio'] / optimum[1]:.3f} |" if optimum else ""))
    lines.append("")
    return lines


README_START, README_END = "<!-- benchmark:start -->", "<!-- benchmark:end -->"


def readme_table(rows: Sequence[dict]) -> str:
    """The README's summary: per scenario, each algorithm's best cost (x the fluid bound, and x
    the clairvoyant's best) on every trace, and its minutes per scale action."""
    traces = sorted({row["trace"] for row in rows})
    lines = []
    for scenario in sorted({row.get("scenario", "standard") for row in rows}, key=lambda name: (name != "standard", name)):
        mine = [row for row in rows if row.get("scenario", "standard") == scenario]
        if scenario == COLD:
            lines += cold_readme(mine, traces, ORDER)
            continue
        best = {(row["trace"], row["algorithm"]): row for row in mine if row["best"]}
        lines += [f"**{scenario}** ({JUDGE_TEXT[table_judge(mine)]})", "",
                  "| algorithm | " + " | ".join(traces) + " | minutes per action (" + " / ".join(traces) + ") |",
                  "|---|" + "---:|" * len(traces) + "---:|"]
        for algorithm in ORDER:
            if not any(row["algorithm"] == algorithm for row in mine):
                continue
            cells, per_action = [], []
            for trace in traces:
                row, reference = best.get((trace, algorithm)), best.get((trace, "clairvoyant"))
                if row is None:
                    cells.append("no setting meets the SLO")
                    per_action.append("–")
                    continue
                versus = f" ({row['cost_ratio'] / reference['cost_ratio']:.2f}x clairvoyant)" if reference else ""
                window = _default_on_tuned_minutes(algorithm, best.get((trace, "project-default")))
                against = f" (project-default on the same minutes: {window['cost_ratio']:.3f})" if window else ""
                cells.append(f"{row['cost_ratio']:.3f}{versus}{against}")
                per_action.append(f"{row['minutes'] / row['scale_actions']:.1f}" if row["scale_actions"] else "∞")
            lines.append(f"| {algorithm} | " + " | ".join(cells) + " | " + " / ".join(per_action) + " |")
        lines.append("")
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    """``text`` with what stands between the README's benchmark markers replaced by ``block``."""
    if README_START not in text or README_END not in text:
        raise ValueError(f"no {README_START} ... {README_END} block to replace")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    return f"{head}{README_START}\n{block}\n{README_END}{tail}"


def timed_unit(unit: tuple[Job, ...]) -> list[dict]:
    """``run_unit``'s rows, each with its share of the unit's processor time (``cpu_seconds``):
    on a shared machine the wall time (``seconds``) says more about the neighbours than the work."""
    started = time.process_time()
    rows = run_unit(unit)
    share = round((time.process_time() - started) / max(len(rows), 1), 2)
    return [{**row, "cpu_seconds": share} for row in rows]


def run_jobs(jobs: Sequence[Job], workers: int | None = None, progress=None) -> list[tuple[Job, dict]]:
    """Every job's row, the jobs grouped into work units run by worker processes; each row with
    its unit's first job (which names the unit's trace, scenario and overrides)."""
    from scaling.simulation.family import load_arrivals

    units = work_units(jobs, {trace: len(load_arrivals(trace)) for trace in sorted({job.trace for job in jobs})})
    rows: list[tuple[Job, dict]] = []
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        for unit, unit_rows in zip(units, pool.map(timed_unit, units), strict=True):
            for row in unit_rows:
                rows.append((unit[0], row))
                if progress:
                    progress(len(rows), len(jobs), row)
    return rows


def run_benchmark(traces: Sequence[str], workers: int | None = None, progress=None,
                  scenarios: Sequence[str] = ("standard",), overrides: tuple = (), family: Sequence[str] = (),
                  algorithms: Sequence[str] = ()) -> list[dict]:
    """Every algorithm (or only ``algorithms``) on ``traces`` (files) and ``family`` (members,
    ``family.py``'s sweeps) in every scenario."""
    jobs = [job for scenario in scenarios for trace in traces for job in jobs_for(trace, scenario, overrides)]
    if family:
        from scaling.simulation.family import keeps

        jobs += [job for scenario in scenarios for trace in family for job in jobs_for(trace, scenario, overrides) if keeps(job)]
    jobs = [job for job in jobs if not algorithms or job.algorithm in algorithms]
    jobs += [Job(trace, algorithm, knob, weight=4.0, scenario=scenario, overrides=overrides)
             for algorithm, knob in LOOK_AHEAD.items() if algorithm in algorithms
             for scenario in scenarios for trace in (*traces, *family)]
    rows = [row for _, row in run_jobs(jobs, workers, progress)]
    order = {name: index for index, name in enumerate(ORDER)}
    rows.sort(key=lambda row: (list(scenarios).index(row["scenario"]), row["trace"], order.get(row["algorithm"], 99), row["knob"]))
    mark_best(rows)
    return rows


def run_gated(runs: Sequence[tuple[str, str]], algorithm: str = "project-default", workers: int | None = None) -> list[dict]:
    """One algorithm's rows (its one setting) on each (trace, scenario): what ``--gate`` alone runs."""
    rows = [row for _, row in run_jobs([Job(trace, algorithm, "default", weight=3.0, scenario=scenario)
                                        for trace, scenario in runs], workers, print_progress)]
    print(file=sys.stderr)
    mark_best(rows)
    return rows


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", action="append", default=[], type=existing_trace, help="per-minute trace CSV (repeatable; needed unless "
                        "--family or --gate alone)")
    parser.add_argument("--json", help="where to write the JSON rows (needed unless --gate alone)")
    parser.add_argument("--markdown", help="also write the summary table (with how to regenerate it) to this file")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("--readme", help="also replace the summary between the benchmark markers of this README")
    parser.add_argument("--optimum", help="rows of `python -m scaling optimum` (JSON, standard scenario) to add, with a "
                        "cost / offline optimum column (skipped when the file does not exist)")
    parser.add_argument("--scenario", action="append", choices=(*NAMED_SCENARIOS, COLD, "namespace"),
                        help="named scenario of docs/benchmark-contract.md, or cold (every trace started at 1 instance with "
                        "nothing learned at busy minutes, scored on 2 hours) (repeatable; default: standard)")
    add_scenario_arguments(parser, scenario_choice=False)
    from scaling.simulation.family_cli import add_family_arguments

    add_family_arguments(parser)


def print_progress(done: int, total: int, row: dict) -> None:
    """``run_jobs``'s progress on one line of stderr."""
    print(f"\r[{done}/{total}] {row['trace']} {row['algorithm']} {row['knob']}".ljust(100), end="", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from scaling.simulation import family_cli

    if family_cli.gate_alone(args):
        return family_cli.run_gate_alone(args, run_gated)
    if args.scenario == ["namespace"]:  # its own world and rows (issue 34): scaling/simulation/namespace_bench.py
        from scaling.simulation.namespace_bench import run_namespace_benchmark
        return run_namespace_benchmark(args)
    family_cli.check_arguments(args)
    started = time.perf_counter()
    scenarios = args.scenario or ["standard"]
    overrides = tuple(sorted(scenario_overrides(args).items()))
    for name in scenarios:
        scenario_from(args, "standard" if name == COLD else name)  # a bad value fails here, naming it, before any worker starts
    rows = run_benchmark(args.trace, args.workers, print_progress, scenarios, overrides, family_cli.members(args),
                         args.algorithm or ())
    runs = len(rows)  # the offline optimum's rows below are read, not run
    print(file=sys.stderr)
    if args.optimum and Path(args.optimum).exists() and "standard" in scenarios and not overrides:
        traces = {row["trace"] for row in rows}
        rows += [{**row, "scenario": "standard"} for row in json.loads(Path(args.optimum).read_text(encoding="utf-8"))
                 if row["algorithm"] == "offline-optimum" and row["trace"] in traces]
        mark_best(rows)
    elapsed = time.perf_counter() - started
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    public, family_rows = family_cli.split_rows(rows)
    table = summary_table(public)
    print(table)
    print(family_cli.family_text(family_rows))
    processor = sum(row.get("cpu_seconds", 0.0) for row in rows)
    print(f"benchmark: {runs} runs in {elapsed:.0f}s on {args.workers or os.cpu_count()} workers ({processor:.0f} s of "
          "processor time in the workers)")
    if args.readme:
        readme = Path(args.readme)
        readme.write_text(replace_block(readme.read_text(encoding="utf-8"), readme_table(public)
                                        + family_cli.readme_text(family_rows)
                                        + f"\nMeasured in one run of `make benchmark`: {runs} runs in {elapsed:.0f}s on "
                                        f"{args.workers or os.cpu_count()} worker processes.\n"), encoding="utf-8")
    if args.markdown:
        kept = family_cli.kept_sections(args.markdown)  # the hand-written baseline log survives regeneration
        command = ("python -m scaling benchmark " + " ".join(f"--trace {t}" for t in args.trace)
                   + (" --family" if args.family else "")
                   + "".join(f" --scenario {name}" for name in scenarios) + f" --json {args.json} --markdown {args.markdown}"
                   + (f" --readme {args.readme}" if args.readme else "") + (f" --optimum {args.optimum}" if args.optimum else ""))
        Path(args.markdown).write_text(
            "# Benchmark results\n\n"
            "Generated by a command, not typed: regenerate with `make benchmark`, i.e.\n\n"
            f"```\n{command}\n```\n\n"
            "Scenarios of docs/benchmark-contract.md: `standard` (peak needs 24 instances, mu = 1,000 events/min, 32 "
            "partitions, 2-minute provisioning, 1-minute collection, SLO 5 minutes, at most 0.1% of minutes in violation; "
            "checkpoints at the processed position) and its stress sets (`realistic`: checkpoints every 30 s, skew 0.015 "
            "with a hot spot moving every 6 h, a 10% throughput wave, a weekly slow-down, 1-4 min provisioning, 2 instance "
            "failures a day, the balanced load balancer with 20 s rebalance pauses; `hot`: skew 0.10, whose nine "
            "hottest partitions no count can serve at peak; `cold`: the "
            "standard world, every trace "
            "started at 1 instance with nothing learned at its busiest hour and at 3 other seeded busy minutes, each "
            "start scored on its first 2 hours, a row summing the starts: cost and violation minutes added, the worst "
            "age; its table gives each algorithm's cheapest setting meeting the SLO, else the closest, the busiest "
            "hour's start alone, and the documented default's numbers). `flink` is the Flink Kubernetes Operator's "
            "job autoscaler (DS2) on the consumer group, as docs/peers.md documents it, its utilization target, "
            "metrics window, catch-up duration and scale-down interval swept (60 settings, the defaults among them). "
            + (f"Overrides: {', '.join(f'{key}={value}' for key, value in overrides)}. " if overrides else "")
            + "**Judges** (docs/benchmark-contract.md, \"Judges\"; each table names its own): `standard` and `cold` by the "
            "whole hub's violation minutes; where partitions are uneven (`hot`, `realistic`, any skew) by the **avoidable** "
            "violation minutes, those in which some partition is late although an instance of its own would have kept it "
            "within the SLO, \"meets the SLO\" meaning at most 0.1% of the minutes; their tables also report the whole "
            "hub's minutes and the servable partitions' (those whose arrivals stay within one instance's throughput in "
            "every minute). "
            + "Each row is the algorithm's cheapest setting that meets the SLO; `cost / clairvoyant` divides by the "
            "clairvoyant reference's best cost; `project-tuned` is tuned on the first 30% of the trace and scored on the "
            "rest (its setting cell also gives project-default's cost and max age on those same minutes: the default's "
            "run scored from the split). All rows, every knob value included, are in the JSON file.\n\n"
            + ("`offline-optimum` rows (standard scenario) are read from the `python -m scaling optimum` output "
               "(`make optimum`, docs/optimum.md); `cost / offline optimum` divides by its unlimited-budget bracket: its "
               "schedule's cost (first number) and its lower bound (second).\n\n" if runs < len(rows) else "")
            +
            f"{table}\n\n" + family_cli.markdown_text(family_rows, kept)
            + f"Wall time: {elapsed:.0f}s for {runs} runs on {args.workers or os.cpu_count()} worker processes.\n",
            encoding="utf-8",
        )
    return family_cli.after_run(args, rows)
