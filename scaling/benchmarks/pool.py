"""The benchmark's jobs run by a pool of worker processes, one work unit each, longest first."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

from scaling.benchmarks.jobs import LOOK_AHEAD, Job, jobs_for, work_units
from scaling.benchmarks.runs import timed_unit
from scaling.benchmarks.tables import ORDER, mark_best


def run_jobs(jobs: Sequence[Job], workers: int | None = None, progress=None) -> list[tuple[Job, dict]]:
    """Every job's row, the jobs grouped into work units run by worker processes; each row with
    its unit's first job (which names the unit's trace, scenario and overrides)."""
    from scaling.benchmarks.family import load_arrivals

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
        from scaling.benchmarks.family import keeps

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



def print_progress(done: int, total: int, row: dict) -> None:
    """``run_jobs``'s progress on one line of stderr."""
    print(f"\r[{done}/{total}] {row['trace']} {row['algorithm']} {row['knob']}".ljust(100), end="", file=sys.stderr, flush=True)
