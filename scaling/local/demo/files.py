"""The files a demo run leaves in ``--out``: the decision log (CSV, read back from the decision
table), the run's series and the plot.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

DECISION_COLUMNS = ("evaluated_at", "minute", "trace_minute", "direction", "acts", "capacity_before", "capacity_after",
                    "reason_code", "arrival_rate_per_second", "backlog", "oldest_age_seconds", "predicted_age_seconds",
                    "throughput_per_instance", "outcome", "outcome_detail", "reasons", "decision_id")


def decision_rows(records: list[Any], clock: Any, start: int) -> list[dict[str, Any]]:
    rows = []
    for record in records:
        metrics = record.metrics or {}
        minute = math.floor(clock.minute_of(record.evaluated_at) + 1e-9)
        rows.append({
            "evaluated_at": record.evaluated_at.isoformat(),
            "minute": minute,
            "trace_minute": start + minute,
            "direction": record.direction if record.acts else "hold",
            "acts": record.acts,
            "capacity_before": record.capacity_before,
            "capacity_after": record.capacity_after,
            "reason_code": record.reason_code,
            "arrival_rate_per_second": metrics.get("arrival_rate"),
            "backlog": metrics.get("backlog"),
            "oldest_age_seconds": metrics.get("oldest_age_seconds"),
            "predicted_age_seconds": metrics.get("predicted_age_seconds"),
            "throughput_per_instance": metrics.get("throughput_per_instance"),
            "outcome": record.outcome,
            "outcome_detail": record.outcome_detail,
            "reasons": " | ".join(record.reasons),
            "decision_id": record.decision_id,
        })
    return rows


def write_outputs(out: Path, result: Any, records: list[Any], clock: Any, scenario: Any, target: Any, *,
                  trace: Path, start: int) -> dict[str, Path]:
    from scaling.local.plot import plot_run

    out.mkdir(parents=True, exist_ok=True)
    rows = decision_rows(records, clock, start)
    decisions_path = out / "decisions.csv"
    with decisions_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=DECISION_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    minutes_path = out / "minutes.csv"
    with minutes_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(("minute", "trace_minute", "arrivals", "backlog", "oldest_age_minutes", "capacity", "serving"))
        for minute in range(result.minutes):
            writer.writerow((minute, start + minute, round(float(result.arrivals[minute]), 1),
                             round(float(result.backlog[minute]), 1), round(float(result.age[minute]), 3),
                             int(result.capacity[minute]), int(result.serving[minute])))
    actions = [(row["minute"], row["direction"]) for row in rows if row["acts"]]
    title = (f"{Path(trace).parent.name}/{Path(trace).name} from minute {start}, {result.minutes} min, target {target.name} "
             f"({target.mode}): cost {result.cost_ratio:.3f}x fluid bound, {result.slo_violation_minutes} SLO-violation min, "
             f"{result.scale_actions} scale actions")
    plot_path = plot_run(out / "demo.png", arrivals=result.arrivals, backlog=result.backlog, capacity=result.capacity,
                         serving=result.serving, age_minutes=result.age,
                         events_per_instance_per_minute=scenario.events_per_instance_per_minute,
                         slo_minutes=scenario.slo_minutes, actions=actions, title=title, first_minute=start)
    return {"plot": plot_path, "decisions": decisions_path, "minutes": minutes_path}
