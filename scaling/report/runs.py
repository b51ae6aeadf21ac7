"""The report page of a simulation (``simulate --report``) and of the demo (``make demo``).

A simulation keeps no tables, so its decisions are recorded the way evaluate logs them (every
action, every change of reason while holding) from the same engine, and the series are the
simulated world's per-minute truth. The demo's decisions are the rows read back from its decision
table; its series come from ``minutes.csv``, because the demo's Azurite is gone when it ends
(``python -m scaling report`` reads a live account's tables).
"""

from __future__ import annotations

import csv
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from scaling.report.history import logged_decisions, report_from_run
from scaling.report.page import render


def write_page(path: str | Path, html_text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html_text, encoding="utf-8")
    return path


def write_simulation_report(path: str | Path, arrivals: Any, target: Any, scenario: Any, *, origin: str = "",
                            start: Any = None, replay: Any = None) -> Path:
    """Replay ``arrivals`` with the engine (deterministic: the run ``simulate`` just scored) and
    write its page, every logged decision as ``evaluate`` would have recorded it. ``replay``
    runs another world (a queue's): it takes the decision callback and returns the run."""
    from scaling.simulation.peers.lookahead import outlook_for
    from scaling.simulation.peers.looped import EPOCH, EngineAutoscaler
    from scaling.simulation.world.loop import simulate
    from scaling.storage.records import DecisionRecord, action_for

    records: list[DecisionRecord] = []

    def record(sample: Any, decision: Any) -> None:
        action = action_for(decision, target) if decision.acts else None
        records.append(DecisionRecord.from_decision(decision, sample.sample_id, action))

    start = start or EPOCH
    result = replay(record) if replay is not None else simulate(
        arrivals, EngineAutoscaler(target, on_decision=record, start=start, outlook=outlook_for(target)), scenario,
        algorithm=f"policy:{target.name}", knob=target.mode)
    data = report_from_run(target.name, result, logged_decisions(records), start=start,
                           events_per_instance_per_minute=scenario.events_per_instance_per_minute,
                           slo_seconds=_slo_seconds(target, scenario),
                           origin=origin or f"simulation of {len(arrivals)} minutes, target {target.name} ({target.mode} mode)")
    return write_page(path, render(data))


def _slo_seconds(target: Any, scenario: Any) -> float:
    if getattr(target, "mode", None) == "slo":
        return float(target.slo.max_event_age_seconds)
    return float(scenario.slo_minutes) * 60.0


def read_minutes_csv(path: str | Path) -> SimpleNamespace:
    """The demo's ``minutes.csv`` as the arrays of a simulation result."""
    import numpy as np

    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    column = lambda name: np.asarray([float(row[name]) for row in rows])  # noqa: E731
    return SimpleNamespace(minutes=len(rows), arrivals=column("arrivals"), serving=column("serving"),
                           backlog=column("backlog"), age=column("oldest_age_minutes"), capacity=column("capacity"))


def write_demo_report(result: Any, options: Any) -> Path:
    """``out/report.html`` after a demo run: its decision table's rows over its minute-by-minute series."""
    from scaling.simulation.peers.looped import EPOCH
    from scaling.simulation.world.loop import Scenario

    scenario = Scenario()
    out = Path(options.out)
    minutes = read_minutes_csv(result.files.get("minutes", out / "minutes.csv"))
    start: datetime = EPOCH + timedelta(minutes=options.start)
    target = result.decisions[0].target if result.decisions else "demo"
    data = report_from_run(target, minutes, sorted(result.decisions, key=lambda r: r.evaluated_at), start=start,
                           events_per_instance_per_minute=scenario.events_per_instance_per_minute,
                           slo_seconds=scenario.slo_minutes * 60.0,
                           origin=f"make demo: {minutes.minutes} simulated minutes of {options.trace} from minute "
                                  f"{options.start}; decisions read back from the decision table")
    return write_page(out / "report.html", render(data))
