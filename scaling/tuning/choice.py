"""Step 3 of the tuning job: which simulated candidate to recommend for a target.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def choose(rows: list[dict], candidates: Sequence[Any], scenario: Any) -> tuple[int | None, str]:
    """The index of the cheapest candidate meeting the SLO on validation (and, when any does, on
    training too), via ``pick_cheapest``; ``None`` when none meets it."""
    from scaling.simulation.candidates import pick_cheapest
    from scaling.simulation.world import RunResult

    def as_result(row: dict) -> RunResult:
        validation = row["validation"]
        cost_ratio = validation["cost_ratio"]
        return RunResult(algorithm="candidate", knob=row["label"], minutes=validation["minutes"], cost=validation["cost"],
                         fluid_lower_bound=validation["cost"] / cost_ratio if cost_ratio else 0.0,
                         slo_violation_minutes=validation["slo_violation_minutes"], p99_age_minutes=validation["p99_age_minutes"],
                         max_age_minutes=validation["max_age_minutes"], scale_actions=validation["scale_actions"],
                         final_backlog=validation.get("final_backlog", 0.0))

    both = [row for row in rows if row["train"]["meets_slo"]]
    pool, how = (both, "meets the SLO on training and validation") if any(
        row["validation"]["meets_slo"] for row in both) else (rows, "meets the SLO on validation (none met it on training too)")
    picked = pick_cheapest([(candidates[row["index"]], as_result(row)) for row in pool], scenario)
    if picked is None:
        return None, "no candidate meets the SLO on the validation window"
    label = picked[0].label
    index = next(row["index"] for row in pool if row["label"] == label)
    return index, f"cheapest candidate that {how}"
