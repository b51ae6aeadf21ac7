"""``python -m scaling benchmark``: every algorithm on every trace, side by side, in one run.

Implements the contract of ../shared/BENCHMARK.md: the standard scenario, each peer's main
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

#: Knob sweeps (each at least 8 values over a factor of 100 or more).
SEED_UPPER = (250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000)
KEDA_THRESHOLDS = (64, 100, 200, 400, 700, 1000, 1500, 2500, 4000, 10000)
FUNCTIONS_TARGETS = (64, 100, 200, 400, 700, 1000, 1500, 2500, 4000, 10000)
MONITOR_THRESHOLDS = (50, 100, 200, 400, 700, 1000, 2000, 5000)
MONITOR_STEPS = (1, 4)
CLAIRVOYANT_HORIZONS = (1, 3, 5)
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
    checkpoint_delay_seconds: float = 0.0


def jobs_for(trace: str, checkpoint_delay_seconds: float = 0.0) -> list[Job]:
    jobs = [Job(trace, "project-tuned", "tuned on first 30%", weight=6.0), Job(trace, "project-default", "default", weight=3.0)]
    jobs += [Job(trace, "seed", f"upper={value}", value, weight=2.0) for value in SEED_UPPER]
    jobs += [Job(trace, "keda-hpa", f"unprocessedEventThreshold={value}", value) for value in KEDA_THRESHOLDS]
    jobs += [Job(trace, "functions-target", f"target={value}", value) for value in FUNCTIONS_TARGETS]
    jobs += [Job(trace, "azure-monitor", f"per-instance>{value} step={step}", value, step)
             for value in MONITOR_THRESHOLDS for step in MONITOR_STEPS]
    jobs += [Job(trace, "clairvoyant", f"h={value}", value, weight=0.5) for value in CLAIRVOYANT_HORIZONS]
    return [replace(job, checkpoint_delay_seconds=checkpoint_delay_seconds) for job in jobs]


def _row(trace: str, result, scenario) -> dict:
    numbers = result.summary(scenario)
    del numbers["cost"], numbers["fluid_lower_bound"]
    return {"trace": trace, "algorithm": result.algorithm, "knob": result.knob, **numbers, "best": False}


def run_job(job: Job) -> dict:
    """One simulation (or one tuning plus scoring), in a worker process."""
    from scaling.simulation import peers
    from scaling.simulation.candidates import all_candidates, pick_cheapest, run_candidates
    from scaling.simulation.world import Scenario, load_trace, scale_trace, simulate

    scenario = Scenario(checkpoint_delay_seconds=job.checkpoint_delay_seconds)
    arrivals = scale_trace(load_trace(job.trace), scenario)
    partitions = scenario.partitions
    started = time.perf_counter()
    if job.algorithm == "project-tuned":
        split = int(len(arrivals) * TRAIN_FRACTION)
        base = peers.simulated_target(scenario, name="tuned")
        # The tuning job's default grid, batched as the job batches it.
        grid = all_candidates(base, TUNING_GRID)
        trained = list(zip(grid, run_candidates(grid, arrivals[:split], scenario), strict=True))
        picked = pick_cheapest(trained, scenario) or min(trained, key=lambda pair: pair[1].slo_violation_minutes)
        candidate = picked[0]
        result = simulate(arrivals, peers.EngineAutoscaler(candidate.target), scenario, algorithm=job.algorithm,
                          knob=candidate.label, score_from=split)
    else:
        if job.algorithm == "project-default":
            autoscaler = peers.EngineAutoscaler(peers.simulated_target(scenario, name="default"))
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
        else:
            raise ValueError(f"unknown algorithm {job.algorithm}")
        result = simulate(arrivals, autoscaler, scenario, algorithm=job.algorithm, knob=job.knob)
    row = _row(Path(job.trace).parent.name + "/" + Path(job.trace).name, result, scenario)
    row["seconds"] = round(time.perf_counter() - started, 2)
    return row


def mark_best(rows: list[dict]) -> None:
    """Per trace and algorithm, flag the cheapest setting that meets the SLO."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["trace"], row["algorithm"]), []).append(row)
    for group in groups.values():
        meeting = [row for row in group if row["meets_slo"]]
        if meeting:
            min(meeting, key=lambda row: (row["cost_ratio"], row["scale_actions"]))["best"] = True


ORDER = ("project-default", "project-tuned", "clairvoyant", "offline-optimum", "keda-hpa", "functions-target", "azure-monitor",
         "seed")


def optimum_column(rows: Sequence[dict], trace: str) -> tuple[float, float] | None:
    """The offline optimum's unlimited-budget bracket on ``trace`` (schedule, lower bound), as
    ratios to the fluid bound, from ``offline-optimum`` rows (``python -m scaling optimum``)."""
    found = [row for row in rows if row["trace"] == trace and row["algorithm"] == "offline-optimum" and row.get("budget") is None]
    return (found[0]["cost_ratio"], found[0]["lower_bound_ratio"]) if found else None


def summary_table(rows: Sequence[dict]) -> str:
    """Markdown: per trace, each algorithm's best SLO-meeting setting, as ratios side by side."""
    lines = []
    for trace in sorted({row["trace"] for row in rows}):
        trace_rows = [row for row in rows if row["trace"] == trace]
        best = {row["algorithm"]: row for row in trace_rows if row["best"]}
        reference = best.get("clairvoyant")
        optimum = optimum_column(trace_rows, trace)
        extra = " cost / offline optimum |" if optimum else ""
        lines += [f"### {trace}", "",
                  "| algorithm | best setting | cost / fluid bound | cost / clairvoyant | SLO-violation min | "
                  "scale actions | min per action | p99 age (min) | max age (min) | settings meeting SLO |" + extra,
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if optimum else "")]
        for algorithm in ORDER:
            group = [row for row in trace_rows if row["algorithm"] == algorithm]
            if not group:
                continue
            meeting = sum(row["meets_slo"] for row in group)
            row = best.get(algorithm)
            if row is None:
                closest = min(group, key=lambda r: r["slo_violation_minutes"])
                lines.append(f"| {algorithm} | none meets the SLO (closest: {closest['knob']}, "
                             f"{closest['slo_violation_minutes']} min) | – | – | – | – | – | – | – | 0/{len(group)} |"
                             + (" – |" if optimum else ""))
                continue
            versus = f"{row['cost_ratio'] / reference['cost_ratio']:.3f}" if reference else "–"
            per_action = f"{row['minutes'] / row['scale_actions']:.1f}" if row["scale_actions"] else "∞"
            lines.append(f"| {algorithm} | {row['knob']} | {row['cost_ratio']:.3f} | {versus} | {row['slo_violation_minutes']} | "
                         f"{row['scale_actions']} | {per_action} | {row['p99_age_minutes']:.2f} | {row['max_age_minutes']:.2f} | "
                         f"{meeting}/{len(group)} |"
                         + (f" {row['cost_ratio'] / optimum[0]:.3f} – {row['cost_ratio'] / optimum[1]:.3f} |" if optimum else ""))
        lines.append("")
    return "\n".join(lines)


def run_benchmark(traces: Sequence[str], workers: int | None = None, progress=None,
                  checkpoint_delay_seconds: float = 0.0) -> list[dict]:
    jobs = sorted((job for trace in traces for job in jobs_for(trace, checkpoint_delay_seconds)), key=lambda job: -job.weight)
    rows: list[dict] = []
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        for row in pool.map(run_job, jobs):
            rows.append(row)
            if progress:
                progress(len(rows), len(jobs), row)
    order = {name: index for index, name in enumerate(ORDER)}
    rows.sort(key=lambda row: (row["trace"], order.get(row["algorithm"], 99), row["knob"]))
    mark_best(rows)
    return rows


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", action="append", required=True, help="per-minute trace CSV (repeatable)")
    parser.add_argument("--json", required=True, help="where to write the JSON rows")
    parser.add_argument("--markdown", help="also write the summary table (with how to regenerate it) to this file")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("--optimum", help="rows of `python -m scaling optimum` (JSON) to add, with a cost / offline "
                        "optimum column (skipped when the file does not exist)")
    parser.add_argument("--checkpoint-delay", type=float, default=0.0,
                        help="seconds the consumers' checkpoints trail what they processed (standard scenario: 0)")


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()

    def progress(done: int, total: int, row: dict) -> None:
        print(f"\r[{done}/{total}] {row['trace']} {row['algorithm']} {row['knob']}".ljust(100), end="", file=sys.stderr, flush=True)

    rows = run_benchmark(args.trace, args.workers, progress, args.checkpoint_delay)
    runs = len(rows)  # the offline optimum's rows below are read, not run
    print(file=sys.stderr)
    if getattr(args, "optimum", None) and Path(args.optimum).exists():
        traces = {row["trace"] for row in rows}
        rows += [row for row in json.loads(Path(args.optimum).read_text(encoding="utf-8"))
                 if row["algorithm"] == "offline-optimum" and row["trace"] in traces]
        mark_best(rows)
    elapsed = time.perf_counter() - started
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    table = summary_table(rows)
    print(table)
    print(f"benchmark: {runs} runs in {elapsed:.0f}s on {args.workers or os.cpu_count()} workers")
    if args.markdown:
        command = "python -m scaling benchmark " + " ".join(f"--trace {t}" for t in args.trace) + f" --json {args.json} --markdown {args.markdown}"
        if getattr(args, "optimum", None):
            command += f" --optimum {args.optimum}"
        Path(args.markdown).write_text(
            "# Benchmark results\n\n"
            "Generated by a command, not typed: regenerate with `make benchmark`, i.e.\n\n"
            f"```\n{command}\n```\n\n"
            "Standard scenario of ../shared/BENCHMARK.md (peak needs 24 instances, mu = 1,000 events/min, 32 partitions, "
            "2-minute provisioning, 1-minute collection, SLO 5 minutes, at most 0.1% of minutes in violation; consumers "
            f"checkpoint {args.checkpoint_delay:g} s behind what they processed). Each row is the algorithm's cheapest setting "
            "that meets the SLO; `cost / clairvoyant` divides by the clairvoyant reference's best cost; `project-tuned` is "
            "tuned on the first 30% of the trace and scored on the rest. All rows, every knob value included, are in the "
            "JSON file.\n\n"
            + ("`offline-optimum` rows are read from the `python -m scaling optimum` output (`make optimum`, "
               "docs/optimum.md); `cost / offline optimum` divides by its unlimited-budget bracket: its schedule's cost "
               "(first number) and its lower bound (second).\n\n" if runs < len(rows) else "")
            +
            f"{table}\n\nWall time: {elapsed:.0f}s for {runs} runs on {args.workers or os.cpu_count()} worker processes.\n",
            encoding="utf-8",
        )
    return 0
