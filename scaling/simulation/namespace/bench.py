"""The ``namespace`` benchmark scenario: ``python -m scaling benchmark --scenario
namespace --trace ... --json OUT`` runs every pairing of ``namespace/peers.py`` on each trace and
writes its rows (money, rejected events, the consumers' SLO), and a Markdown table with
``--markdown``. Its own rows and table: the other scenarios' columns (cost ratio to the fluid
bound) do not apply to a bill in dollars. docs/benchmark-namespace.md states the world and prices.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scaling.simulation.namespace.peers import run_all
from scaling.simulation.namespace.world import NamespaceScenario
from scaling.simulation.world.loop import load_trace, scale_trace
from scaling.simulation.world.scenario import Scenario

NAMESPACE = "namespace"


def namespace_arrivals(trace: str, scenario: NamespaceScenario) -> object:
    """The trace scaled as in the standard scenario: its busiest minute needs ``peak_instances``."""
    return scale_trace(load_trace(trace), Scenario(peak_instances=scenario.peak_instances,
                                                   events_per_instance_per_minute=scenario.events_per_instance_per_minute))


def best_rows(rows: list[dict]) -> list[dict]:
    """Per trace and algorithm, the cheapest knob that meets the SLO and rejects no event (else the cheapest)."""
    chosen: dict[tuple[str, str], dict] = {}

    def rank(candidate: dict) -> tuple:
        return (not (candidate["meets_slo"] and candidate["rejected_events"] == 0), candidate["cost_usd"])

    for row in rows:
        key = (row["trace"], row["algorithm"])
        if key not in chosen or rank(row) < rank(chosen[key]):
            chosen[key] = row
    return list(chosen.values())


def table(rows: list[dict]) -> str:
    lines = ["| trace | algorithm | knob | cost (USD) | TU-hours | instance-hours | rejected events | egress-capped min "
             "| SLO violation min | max age (min) | meets SLO |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in best_rows(rows):
        lines.append(f"| {Path(row['trace']).parent.name} | {row['algorithm']} | {row['knob'] or '-'} | {row['cost_usd']:.2f} "
                     f"| {row['tu_hours']:.0f} | {row['instance_hours']:.0f} | {row['rejected_events']:.0f} "
                     f"| {row['egress_capped_minutes']} | {row['slo_violation_minutes']} | {row['max_age_minutes']:.1f} "
                     f"| {'yes' if row['meets_slo'] else 'no'} |")
    return "\n".join(lines)


def run_namespace_benchmark(args: argparse.Namespace) -> int:
    scenario = NamespaceScenario()
    rows = []
    for trace in args.trace:
        rows += run_all(namespace_arrivals(trace, scenario), scenario, trace)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    text = table(rows)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(f"{text}\n", encoding="utf-8")
    return 0
