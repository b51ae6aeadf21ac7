"""``python -m scaling simulate``: one trace, one policy, through the simulated hub and plan."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

from scaling.simulation.scenario_flags import add_scenario_arguments, scenario_from


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", required=True, help="per-minute (or --seconds-per-row 1) trace CSV")
    parser.add_argument("--policy", help="policy file; its first target (or --target) is simulated (default: built-in default)")
    parser.add_argument("--target", help="which target of the policy file to simulate")
    parser.add_argument("--json", required=True, help="where to write the run summary (JSON)")
    parser.add_argument("--minutes", type=int, help="only the first N minutes of the trace")
    parser.add_argument("--start", default="0", help="the wall-clock moment of the trace's minute 0, ISO 8601 with an offset "
                        "(schedule profiles read it; default 2026-01-01T00:00Z), or a whole number N: skip the first "
                        "N minutes (as before)")
    parser.add_argument("--skip", type=int, default=0, help="skip the first N minutes of the trace")
    parser.add_argument("--seconds-per-row", type=int, default=60, help="the trace's resolution (1 for per-second traces)")
    parser.add_argument("--series", action="store_true", help="include the minute-by-minute series in the JSON")
    parser.add_argument("--report", help="also write the run's report page (HTML, as `python -m scaling report`)")
    parser.add_argument("--history-out", help="also write the samples collect would have seen as Parquet history")
    add_scenario_arguments(parser)


def trace_start(text: str) -> tuple[int, datetime]:
    """``--start``: minutes to skip (a whole number, the old meaning) and the moment of minute 0."""
    from scaling.domain.samples import parse_time
    from scaling.simulation.peers import EPOCH

    if text.strip().lstrip("-").isdigit():
        minutes = int(text)
        if minutes < 0:
            raise ValueError(f"--start must not be negative, got {minutes}")
        return minutes, EPOCH
    return 0, parse_time(text, "--start")


def run(args: argparse.Namespace) -> int:
    from scaling.domain.policy import PolicyError, load_policy
    from scaling.simulation.peers import EngineAutoscaler, simulated_target
    from scaling.simulation.world import load_trace, per_minute, scale_trace, simulate

    scenario = scenario_from(args)
    if args.policy:
        try:
            policy = load_policy(args.policy)
        except (OSError, PolicyError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        try:
            target = policy.target(args.target) if args.target else policy.targets[0]
        except KeyError:
            print(f"error: --target {args.target!r} is not in {args.policy}", file=sys.stderr)
            return 2
    else:
        target = simulated_target(scenario, name="default")
    try:
        skip, start = trace_start(args.start)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    skip += args.skip
    counts = per_minute(load_trace(args.trace), args.seconds_per_row)[skip:]
    if args.minutes:
        counts = counts[: args.minutes]
    arrivals = scale_trace(counts, scenario)

    samples = []
    autoscaler = EngineAutoscaler(target, on_decision=(lambda sample, decision: samples.append(sample)) if args.history_out else None,
                                  start=start)
    result = simulate(arrivals, autoscaler, scenario, algorithm=f"policy:{target.name}", knob=target.mode)
    summary = {
        "trace": args.trace,
        "target": target.name,
        "mode": target.mode,
        **result.summary(scenario),
    }
    if args.series:
        summary["series"] = {
            "arrivals": result.arrivals.round(1).tolist(),
            "capacity": result.capacity.tolist(),
            "serving": result.serving.tolist(),
            "backlog": result.backlog.round(1).tolist(),
            "oldest_age_minutes": result.age.round(3).tolist(),
        }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(summary, indent=1), encoding="utf-8")
    if args.history_out:
        from scaling.tuning.history import write_history

        write_history(samples, args.history_out)
    if args.report:
        from scaling.report.runs import write_simulation_report

        write_simulation_report(args.report, arrivals, target, scenario, origin=f"simulate --trace {args.trace}", start=start)
    print(" ".join(f"{key}={value}" for key, value in summary.items() if key not in ("series",)))
    return 0
