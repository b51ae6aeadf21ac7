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
from pathlib import Path

from scaling.benchmarks.cold import COLD
from scaling.benchmarks.pool import print_progress, run_benchmark, run_gated
from scaling.benchmarks.tables import mark_best, readme_table, replace_block, results_page, summary_table
from scaling.simulation.world.scenario import NAMED_SCENARIOS
from scaling.simulation.world.scenario_flags import add_scenario_arguments, scenario_from, scenario_overrides
from scaling.simulation.world.traces import existing_trace


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
    from scaling.benchmarks.family_cli import add_family_arguments

    add_family_arguments(parser)



def run(args: argparse.Namespace) -> int:
    from scaling.benchmarks import family_cli

    if family_cli.gate_alone(args):
        return family_cli.run_gate_alone(args, run_gated)
    if args.scenario == ["namespace"]:  # its own world and rows: scaling/simulation/namespace/bench.py
        from scaling.simulation.namespace.bench import run_namespace_benchmark
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
            results_page(command, overrides, runs < len(rows))
            + f"{table}\n\n" + family_cli.markdown_text(family_rows, kept)
            + f"Wall time: {elapsed:.0f}s for {runs} runs on {args.workers or os.cpu_count()} worker processes.\n",
            encoding="utf-8",
        )
    return family_cli.after_run(args, rows)
