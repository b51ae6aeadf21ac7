"""``python -m scaling simulate``: one trace, one policy, through the simulated hub and plan."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

from scaling.simulation.world.scenario_flags import add_scenario_arguments, scenario_from
from scaling.simulation.world.traces import existing_trace


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", required=True, type=existing_trace, help="per-minute (or --seconds-per-row 1) trace CSV")
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
    parser.add_argument("--source", choices=("eventhub", "servicebus"), default="eventhub",
                        help="eventhub (default: a partitioned hub) or servicebus: one queue with competing consumers, "
                             "the SLO mode beside the seed rule's thresholds")
    parser.add_argument("--max-instances", type=int, default=32, help="servicebus: the plan's upper bound")
    parser.add_argument("--metrics-lag", type=int, default=1,
                        help="servicebus: minutes Azure Monitor's per-minute rates trail the queue")
    add_scenario_arguments(parser)


def trace_start(text: str) -> tuple[int, datetime]:
    """``--start``: minutes to skip (a whole number, the old meaning) and the moment of minute 0."""
    from scaling.domain.samples import parse_time
    from scaling.simulation.peers.looped import EPOCH

    if text.strip().lstrip("-").isdigit():
        minutes = int(text)
        if minutes < 0:
            raise ValueError(f"--start must not be negative, got {minutes}")
        return minutes, EPOCH
    return 0, parse_time(text, "--start")


def run(args: argparse.Namespace) -> int:
    from scaling.domain.policy import PolicyError, load_policy
    from scaling.simulation.peers.lookahead import outlook_for
    from scaling.simulation.peers.looped import EngineAutoscaler, simulated_target
    from scaling.simulation.world.loop import load_trace, per_minute, scale_trace, simulate

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
    trace = per_minute(load_trace(args.trace), args.seconds_per_row)
    counts = trace[skip:]
    if args.minutes:
        counts = counts[: args.minutes]
    if not len(counts):
        print(f"error: nothing left to simulate: the trace has {len(trace)} minutes and the first {skip} are skipped "
              "(--skip, and --start when it is a number of minutes)", file=sys.stderr)
        return 2
    arrivals = scale_trace(counts, scenario)
    if args.source == "servicebus":
        return _run_queue(args, scenario, arrivals, target if args.policy else None, start)

    samples = []
    autoscaler = EngineAutoscaler(target, on_decision=(lambda sample, decision: samples.append(sample)) if args.history_out else None,
                                  start=start, outlook=outlook_for(target))
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


def _run_queue(args: argparse.Namespace, scenario, arrivals, target, start: datetime) -> int:
    """One queue: the SLO mode (the policy's target, or the default) beside the seed rule, in the
    queue world with every scenario knob a queue has; the outputs are the hub's (``--series``,
    ``--report``, ``--history-out``: the SLO mode's run)."""
    from scaling.simulation.queue.world import (
        QUEUE_IGNORES,
        QueueEngineAutoscaler,
        compare_on_queue,
        queue_target,
        simulate_queue,
    )
    from scaling.simulation.world.scenario_flags import FLAGS, scenario_overrides

    if args.max_instances < 1 or args.metrics_lag < 0:
        print("error: --max-instances must be at least 1 and --metrics-lag not negative", file=sys.stderr)
        return 2
    refused = sorted(flag for flag, field_name, _ in FLAGS if field_name in QUEUE_IGNORES and field_name in scenario_overrides(args))
    if refused:
        print(f"error: --source servicebus: a queue has no partitions, checkpoints or owners; {', '.join(refused)} "
              "cannot apply (drop the flag)", file=sys.stderr)
        return 2
    if target is not None and not all(source.kind == "servicebus" for source in target.sources):
        print(f"error: --source servicebus needs a target whose sources are Service Bus queues; {target.name!r} has "
              f"{', '.join(sorted({source.kind for source in target.sources}))}", file=sys.stderr)
        return 2
    lag = args.metrics_lag
    chosen = target or queue_target(scenario, max_instances=args.max_instances)
    samples = []

    def replay(on_decision=None):
        autoscaler = QueueEngineAutoscaler(chosen, on_decision=on_decision, start=start)
        return simulate_queue(arrivals, autoscaler, scenario, algorithm=f"policy:{chosen.name}", knob=chosen.mode,
                              metrics_lag_minutes=lag)

    runs = compare_on_queue(arrivals, scenario, max_instances=args.max_instances, metrics_lag_minutes=lag, start=start)
    runs["slo"] = replay((lambda sample, decision: samples.append(sample)) if args.history_out else None)
    summary = {"trace": args.trace, "source": "servicebus", "target": chosen.name, "mode": chosen.mode,
               "scenario": getattr(args, "scenario", "standard"), "metrics_lag_minutes": lag,
               "runs": {name: result.summary(scenario) for name, result in runs.items()}}
    if args.series:
        summary["series"] = {name: {"arrivals": result.arrivals.round(1).tolist(), "capacity": result.capacity.tolist(),
                                    "serving": result.serving.tolist(), "backlog": result.backlog.round(1).tolist(),
                                    "oldest_age_minutes": result.age.round(3).tolist()} for name, result in runs.items()}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(summary, indent=1), encoding="utf-8")
    if args.history_out:
        from scaling.tuning.history import write_history

        write_history(samples, args.history_out)
    if args.report:
        from scaling.report.runs import write_simulation_report

        write_simulation_report(args.report, arrivals, chosen, scenario, start=start, replay=replay,
                                origin=f"simulate --source servicebus --trace {args.trace}")
    print(f"one Service Bus queue, competing consumers; {len(arrivals)} minutes, SLO {scenario.slo_minutes:g} min, "
          f"Azure Monitor rates {lag} min behind")
    print(f"{'run':<22}{'cost ratio':>11}{'SLO-violation min':>19}{'p99 age min':>13}{'max age min':>13}{'actions':>9}")
    for name, result in runs.items():
        row = result.summary(scenario)
        print(f"{name:<22}{row['cost_ratio']:>11.3f}{row['slo_violation_minutes']:>19}{row['p99_age_minutes']:>13.2f}"
              f"{row['max_age_minutes']:>13.2f}{row['scale_actions']:>9}")
    return 0
