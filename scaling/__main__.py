"""The ``python -m scaling`` command line: one subcommand per task, ``--help`` on each.

Each subcommand lives in the module that owns the work and exposes ``configure(parser)`` and
``run(args) -> int``; heavy imports (Spark, Azure SDKs) happen inside ``run`` so that ``--help``
stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "simulate": ("scaling.commands.simulate", "replay one trace through the simulated hub and plan with one policy"),
    "benchmark": ("scaling.benchmarks.benchmark", "compare every algorithm on traces in the standard scenario"),
    "queue-benchmark": ("scaling.simulation.queue.bench", "the SLO mode on one Service Bus queue against KEDA, Functions, "
                        "Azure Monitor, the seed rule and the clairvoyant, Azure Monitor 1-3 minutes late"),
    "stress": ("scaling.benchmarks.stress", "the default policy under skew, both load balancers and realistic seeds, beside the clairvoyant"),
    "optimum": ("scaling.benchmarks.optimum_bench", "bracket the offline optimum on traces and compare the default policy with it"),
    "validate-policy": ("scaling.domain.cli", "check a policy file and say what is wrong, naming the field"),
    "policy-schema": ("scaling.domain.cli:schema", "print the policy file's JSON Schema (policy.schema.json)"),
    "bench-collect": ("scaling.commands.bench_collect", "time concurrent vs serial collection (stand-in hubs, Azurite checkpoints)"),
    "decisions": ("scaling.storage.cli", "print a target's decision log as a table"),
    "dead-letters": ("scaling.commands.dead_letters", "list the dead-letter table and replay a letter after a fix"),
    "pause": ("scaling.commands.pause", "pause a target (or pin it with --at N) until a time; it keeps evaluating"),
    "resume": ("scaling.commands.pause:resume", "end a target's pause or pin now"),
    "report": ("scaling.report.cli", "write a target's history and decisions as one self-contained HTML page"),
    "bench-storage": ("scaling.commands.bench_storage", "storage round trips per sample and samples per second on Azurite"),
    "export-history": ("scaling.tuning.export", "export the history table to Parquet"),
    "tune": ("scaling.tuning.cli", "run the Spark tuning job over exported history"),
    "bench-tune": ("scaling.benchmarks.tuning_speed", "candidate-policy-minutes per second on local[1] vs local[2] (--against REF: beside a git ref)"),
    "bench-engine": ("scaling.benchmarks.engine_speed", "the engine in the loop: simulated minutes per CPU-second (--against REF: beside a git ref)"),
    "demo": ("scaling.local.demo", "run the whole autoscaler locally on Azurite against a simulated hub (or queue) and plan"),
}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the chosen subcommand's module is imported (the others stay unloaded)."""
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((word for word in argv if not word.startswith("-")), None)
    parser = argparse.ArgumentParser(prog="python -m scaling", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            # "module:suffix" names a module's second command: configure_suffix / run_suffix.
            module_path, _, suffix = module_name.partition(":")
            module = importlib.import_module(module_path)
            getattr(module, f"configure_{suffix}" if suffix else "configure")(sub)
            sub.set_defaults(handler=getattr(module, f"run_{suffix}" if suffix else "run"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser(argv).parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
