"""The simulated world's knobs as command-line flags, shared by ``simulate``, ``benchmark`` and ``demo``.

``--scenario`` picks one of docs/benchmark-contract.md's named sets; every other flag overrides one
``Scenario`` field on top of it (unset flags keep the named set's value).
"""

from __future__ import annotations

import argparse

from scaling.simulation.world.scenario import ASSIGNMENTS, NAMED_SCENARIOS, Scenario


def _numbers(count: int, kind=float):
    def parse(text: str) -> tuple:
        parts = [part.strip() for part in text.split(",")]
        if len(parts) != count:
            raise argparse.ArgumentTypeError(f"expected {count} comma-separated numbers, got {text!r}")
        try:
            return tuple(kind(part) for part in parts)
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"not a number in {text!r}") from error
    return parse


#: (flag, Scenario field, argparse keyword arguments)
FLAGS: tuple[tuple[str, str, dict], ...] = (
    ("--peak-instances", "peak_instances", {"type": float, "help": "scale the trace so its peak needs this many instances"}),
    ("--partitions", "partitions", {"type": int}),
    ("--events-per-instance-per-minute", "events_per_instance_per_minute", {"type": float}),
    ("--provisioning-delay", "provisioning_delay_minutes", {"type": int, "help": "minutes before new instances serve"}),
    ("--slo-minutes", "slo_minutes", {"type": float}),
    ("--checkpoint-delay", "checkpoint_delay_seconds", {"type": float, "help": "seconds checkpoints trail what was processed"}),
    ("--checkpoint-interval", "checkpoint_interval_seconds",
     {"type": float, "help": "each partition checkpoints every N seconds, phases spread (0: at the processed position)"}),
    ("--skew", "skew", {"type": float, "help": "partition weights (1 + skew)^-p"}),
    ("--hot-spot-rotation", "hot_spot_rotation_minutes", {"type": int, "help": "the weights shift by one partition every N minutes"}),
    ("--throughput-wave", "throughput_wave",
     {"type": _numbers(2), "metavar": "AMPLITUDE,PERIOD_MINUTES", "help": "consumer speed x (1 + a sin(2 pi t / T))"}),
    ("--slowdown", "slowdowns",
     {"type": _numbers(4), "action": "append", "metavar": "START,DURATION,FACTOR,REPEAT",
      "help": "a window of slower consumers (minutes, minutes, speed factor, repeat every N minutes or 0); repeatable"}),
    ("--provisioning-delay-range", "provisioning_delay_range",
     {"type": _numbers(2, int), "metavar": "LO,HI", "help": "each scale-out's delay drawn from [lo, hi] minutes"}),
    ("--instance-failures-per-day", "instance_failures_per_day", {"type": float}),
    ("--ownership-expiry", "ownership_expiry_seconds", {"type": float, "help": "seconds a failed instance's partitions stall"}),
    ("--assignment", "assignment", {"choices": ASSIGNMENTS, "help": "which instance owns which partition"}),
    ("--rebalance-pause", "rebalance_pause_seconds", {"type": float, "help": "seconds a partition pauses when its owner changes"}),
    ("--seed", "seed", {"type": int, "help": "seed of the scenario's draws"}),
)


def add_scenario_arguments(parser: argparse.ArgumentParser, *, scenario_choice: bool = True) -> None:
    """The knobs of ``Scenario`` (and ``--scenario`` unless the command takes several)."""
    if scenario_choice:
        parser.add_argument("--scenario", choices=tuple(NAMED_SCENARIOS), default="standard",
                            help="a named set of docs/benchmark-contract.md; the flags below override its values")
    group = parser.add_argument_group("simulated world (Scenario fields; default: the named scenario's value)")
    for flag, _, options in FLAGS:
        group.add_argument(flag, dest=f"scenario_{flag[2:].replace('-', '_')}", default=None, **options)


def scenario_overrides(args: argparse.Namespace) -> dict:
    """The fields the flags set."""
    overrides = {}
    for flag, field_name, _ in FLAGS:
        value = getattr(args, f"scenario_{flag[2:].replace('-', '_')}", None)
        if value is not None:
            overrides[field_name] = tuple(value) if field_name == "slowdowns" else value
    return overrides


def scenario_from(args: argparse.Namespace, name: str | None = None) -> Scenario:
    """The named scenario (``--scenario`` unless ``name``) with the flags' overrides; a bad value
    is an argparse error naming the flag."""
    try:
        return Scenario.named(name or getattr(args, "scenario", "standard"), **scenario_overrides(args))
    except ValueError as error:
        raise SystemExit(f"error: {error}") from error
