"""``python -m scaling demo``: options in, the run, the summary out (exit 1 when the demo and
simulate disagree or a message was poisoned).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scaling.local.demo.config import DEFAULT_MINUTES, DEFAULT_START, DEFAULT_TRACE, DemoError, DemoOptions
from scaling.local.demo.display import print_summary
from scaling.local.demo.run import run_demo
from scaling.report.runs import write_demo_report
from scaling.simulation.world.scenario_flags import add_scenario_arguments, scenario_from


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE,
                        help="per-minute trace CSV (default: data/traces/worldcup98/per_minute.csv in the repository)")
    parser.add_argument("--minutes", type=int, default=DEFAULT_MINUTES,
                        help=f"simulated minutes to run (default {DEFAULT_MINUTES}: to midnight, through the day's surge)")
    parser.add_argument("--start", type=int, default=DEFAULT_START,
                        help=f"minute offset into the trace (default {DEFAULT_START}: WC98 1998-06-10 10:00 UTC)")
    parser.add_argument("--speed", type=float, default=0.0,
                        help="simulated minutes per real second (default 0: as fast as possible)")
    parser.add_argument("--policy", type=Path,
                        help="a policy file whose first target's settings (mode, slo, rules, bounds, steps) replace "
                             "the default policy's; plan and source stay the demo's local ones")
    parser.add_argument("--out", type=Path, default=Path("out"), help="where the plot and CSV files go (default out/)")
    parser.add_argument("--source", choices=("eventhub", "servicebus", "namespace"), default="eventhub",
                        help="eventhub (default: a simulated partitioned hub, checkpoints in Azurite), servicebus "
                             "(a simulated queue behind the Service Bus source's interfaces: the SLO mode on a queue) or "
                             "namespace (an Event Hubs namespace's throughput units and two consumer groups scaled together)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or live table, only the summary")
    add_scenario_arguments(parser)


def run(args: argparse.Namespace) -> int:
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.minutes is not None and args.minutes < 1:
        print("error: --minutes must be at least 1", file=sys.stderr)
        return 2
    if args.speed < 0:
        print("error: --speed must not be negative", file=sys.stderr)
        return 2
    if args.source == "namespace":
        return run_namespace(args)
    options = DemoOptions(trace=args.trace, minutes=args.minutes, start=args.start, speed=args.speed,
                          policy=args.policy, out=args.out, live=not args.quiet, scenario=scenario_from(args),
                          source=args.source)
    try:
        result = run_demo(options)
    except DemoError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: Azurite and the local ARM endpoint were stopped", file=sys.stderr)
        return 130
    print_summary(result, options, sys.stdout)
    print(f"  report page: {write_demo_report(result, options)}")
    problems = result.differences or [f"{name}: {count} poison message(s)" for name, count in result.poison.items() if count]
    return 1 if problems else 0


def run_namespace(args: argparse.Namespace) -> int:
    """``--source namespace`` (scaling/local/demo/namespace.py): its own world and summary."""
    from scaling.local.demo.namespace import run_namespace_demo

    options = DemoOptions(trace=args.trace, minutes=args.minutes, start=args.start, out=args.out, live=not args.quiet,
                          source="namespace")
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        summary = run_namespace_demo(options)
    except DemoError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"namespace demo: {summary['minutes']} minutes, ${summary['cost_usd']:.2f} ({summary['tu_hours']:.0f} TU-hours, "
          f"{summary['instance_hours']:.0f} instance-hours), {summary['rejected_events']:.0f} events rejected, "
          f"{summary['slo_violation_minutes']} SLO violation minutes, {summary['plan_writes']} plan writes, "
          f"{summary['tu_writes']} TU writes")
    print(f"  report page: {summary['report']}")
    return 0 if summary["rejected_events"] == 0 and summary["meets_slo"] else 1
