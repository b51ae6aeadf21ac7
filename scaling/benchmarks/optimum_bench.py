"""``python -m scaling optimum``: the offline optimum on each trace, and how far the project's
default policy is from it.

Per trace (standard scenario) and per action budget (unlimited, one action per 15 minutes, one
per 30 minutes, and the number of actions ``project-default`` takes on the trace): the lower
bound and the best schedule of ``optimum.offline_optimum``, the schedule replayed through
``World`` (its cost and SLO are the world's), and ``project-default``'s cost divided by both.
Writes JSON rows in the benchmark's format (algorithm ``offline-optimum``) and a Markdown
table. Its own command because it takes longer than the benchmark's time budget allows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from scaling.simulation.world.traces import existing_trace

BUDGET_SPACINGS = (15, 30)  # one action per this many minutes


def trace_rows(trace: str, steps: int = 2) -> list[dict]:
    """Every row for one trace (a worker process's job)."""
    from scaling.benchmarks import optimum
    from scaling.benchmarks.jobs import Job
    from scaling.benchmarks.runs import run_job
    from scaling.simulation.world.loop import Scenario, load_trace, scale_trace, simulate

    scenario = Scenario()
    arrivals = scale_trace(load_trace(trace), scenario)
    name = Path(trace).parent.name + "/" + Path(trace).name
    default = run_job(Job(trace, "project-default", "default"))
    minutes = len(arrivals)
    budgets: list[tuple[int | None, str]] = [(None, "")]
    budgets += [(minutes // spacing, f"1 per {spacing} min") for spacing in BUDGET_SPACINGS]
    budgets.append((default["scale_actions"], "project-default's actions"))
    started = time.perf_counter()
    def progress(message: str) -> None:
        print(f"{name}: {message}", file=sys.stderr, flush=True)

    brackets = optimum.offline_optimum(arrivals, scenario, [budget for budget, _ in budgets], steps=steps,
                                       progress=progress)
    seconds = round(time.perf_counter() - started, 1)
    fluid = float(arrivals.sum()) / scenario.events_per_instance_per_minute
    default_cost = default["cost_ratio"] * fluid
    rows = []
    for (budget, label), bracket in zip(budgets, brackets, strict=True):
        replay = simulate(arrivals, optimum.ScheduledCapacity(bracket.schedule), scenario, algorithm="offline-optimum",
                          knob=f"budget={budget} ({label})" if budget is not None else "budget=unlimited")
        numbers = replay.summary(scenario)
        if replay.cost != bracket.cost:
            raise AssertionError(f"{name}: the schedule costs {bracket.cost} in its model but {replay.cost} in the world")
        del numbers["cost"], numbers["fluid_lower_bound"]
        rows.append({"trace": name, "algorithm": "offline-optimum", "knob": replay.knob, **numbers, "best": False,
                     "budget": budget, "lower_bound_ratio": round(bracket.lower_bound / fluid, 4),
                     "gap": round(bracket.gap, 4), "action_price": bracket.price,
                     "project_default_vs_schedule": round(default_cost / bracket.cost, 4),
                     "project_default_vs_lower_bound": round(default_cost / bracket.lower_bound, 4),
                     "seconds": seconds})
    default["trace"] = name
    return [default, *rows]


def table(rows: list[dict]) -> str:
    """Markdown: per trace, the bracket per budget and project-default's cost over it."""
    lines = []
    for trace in sorted({row["trace"] for row in rows}):
        default = next(row for row in rows if row["trace"] == trace and row["algorithm"] == "project-default")
        lines += [f"### {trace}", "",
                  "| action budget | lower bound / fluid | schedule / fluid | gap | scale actions | SLO-violation min | "
                  "max age (min) | project-default / offline optimum |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for row in rows:
            if row["trace"] != trace or row["algorithm"] != "offline-optimum":
                continue
            lines.append(f"| {row['knob'].removeprefix('budget=')} | {row['lower_bound_ratio']:.4f} | {row['cost_ratio']:.4f} | "
                         f"{100 * row['gap']:.2f}% | {row['scale_actions']} | {row['slo_violation_minutes']} | "
                         f"{row['max_age_minutes']:.2f} | {row['project_default_vs_schedule']:.3f} – "
                         f"{row['project_default_vs_lower_bound']:.3f} |")
        lines += ["", f"project-default: cost / fluid bound {default['cost_ratio']:.4f}, {default['scale_actions']} scale "
                      f"actions, {default['slo_violation_minutes']} SLO-violation minutes.", ""]
    return "\n".join(lines)


def markdown(rows: list[dict], command: str, elapsed: float, workers: int) -> str:
    """The results page: how to regenerate it, what the numbers mean, the table, the wall time."""
    traces = len({row["trace"] for row in rows})
    return ("# Offline optimum\n\n"
            "Generated by a command, not typed: regenerate with `make optimum`, i.e.\n\n"
            f"```\n{command}\n```\n\n"
            "Standard scenario of docs/benchmark-contract.md. The offline optimum is the cheapest schedule of partition-"
            "balanced instance counts that meets the SLO in the simulated world knowing every arrival, with the same "
            "provisioning delay, within an action budget. It lies between the two numbers shown: a provable lower bound "
            "and a schedule found (replayed through the simulated world: its cost, actions and ages are the world's). "
            "`gap` is schedule / lower bound - 1; `project-default / offline optimum` is the default policy's cost over "
            "the schedule's and over the lower bound, so the true ratio lies between them. How the bounds are made: "
            "[benchmark-optimum.md](benchmark-optimum.md).\n\n"
            f"{table(rows)}\nWall time: {elapsed:.0f}s for {traces} traces on {workers} worker processes (the "
            "project-default run of each trace included).\n")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", action="append", required=True, type=existing_trace, help="per-minute trace CSV (repeatable)")
    parser.add_argument("--json", required=True, help="where to write the JSON rows")
    parser.add_argument("--markdown", help="also write the table (with how to regenerate it) to this file")
    parser.add_argument("--workers", type=int, default=None, help="worker processes, one trace each (default: one per core)")
    parser.add_argument("--steps", type=int, default=2, help="bisection steps on the schedule's action price per budget (default 2)")


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    workers = args.workers or os.cpu_count() or 1
    with ProcessPoolExecutor(max_workers=min(workers, len(args.trace))) as pool:
        rows = [row for found in pool.map(trace_rows, args.trace, [args.steps] * len(args.trace)) for row in found]
    elapsed = time.perf_counter() - started
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    text = table(rows)
    print(text)
    print(f"optimum: {len(args.trace)} traces in {elapsed:.0f}s on {min(workers, len(args.trace))} workers", file=sys.stderr)
    if args.markdown:
        command = "python -m scaling optimum " + " ".join(f"--trace {t}" for t in args.trace) + f" --json {args.json} --markdown {args.markdown}"
        Path(args.markdown).write_text(markdown(rows, command, elapsed, min(workers, len(args.trace))), encoding="utf-8")
    return 0
