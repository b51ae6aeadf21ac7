"""The benchmark's judges (docs/benchmark-contract.md, "Judges"): which violation minutes decide
whether a run meets the SLO.

Where partitions are uneven (``hot``, ``realistic``, any skew) some receive more in some minutes
than one instance serves, so no count meets the whole hub's SLO there: such a world is judged by
the **avoidable** violation minutes (a partition late although an instance of its own would have
kept it within the SLO). The servable partitions' judge alone rewarded leaving near-hot partitions
late for hours: it stays reported, not judged by. Elsewhere the whole hub's violation
minutes judge. The benchmark's tables, ``mark_best``, the gate and ``make stress`` all ask here.
"""

from __future__ import annotations

from collections.abc import Sequence

from scaling.simulation.world.scenario import NAMED_SCENARIOS, Scenario

AVOIDABLE, WHOLE_HUB = "avoidable", "whole hub"
#: The named scenarios with uneven partitions: how rows written before a row said its judge are read.
JUDGED_ON_AVOIDABLE = tuple(name for name, knobs in NAMED_SCENARIOS.items() if knobs.get("skew", 0) > 0)
#: How a table names each judge.
JUDGE_TEXT = {AVOIDABLE: "judged by the avoidable violation minutes; the whole hub's and the servable partitions' reported beside",
              WHOLE_HUB: "judged by the whole hub's violation minutes"}


def judge_of(scenario: Scenario) -> str:
    """Which violation minutes judge a world: the avoidable ones where partitions are uneven."""
    return AVOIDABLE if scenario.skew > 0 else WHOLE_HUB


def judged_numbers(numbers: dict, scenario: Scenario) -> dict:
    """A row's judge, the violation minutes it judges by and whether they meet the SLO (at most
    ``max_violation_fraction`` of the minutes). Without avoidable minutes (every partition
    servable in every minute) the avoidable judge is the whole hub's: no count could be late on a
    partition an instance of its own keeps within the SLO without being late on it."""
    judge = judge_of(scenario)
    minutes = (numbers.get("avoidable_violation_minutes", numbers["slo_violation_minutes"]) if judge == AVOIDABLE
               else numbers["slo_violation_minutes"])
    return {"judge": judge, "judged_violation_minutes": minutes,
            "judged_meets_slo": minutes <= scenario.max_violation_fraction * numbers["minutes"]}


def row_judge(row: dict) -> str:
    """A row's judge (rows written before rows said it: by their scenario's name)."""
    return row.get("judge") or (AVOIDABLE if row.get("scenario") in JUDGED_ON_AVOIDABLE else WHOLE_HUB)


def judged_violation_minutes(row: dict) -> int:
    """The violation minutes a row is judged by (``judged_numbers``)."""
    if "judged_violation_minutes" in row:
        return row["judged_violation_minutes"]
    if row_judge(row) == AVOIDABLE:
        return row.get("avoidable_violation_minutes", row["slo_violation_minutes"])
    return row["slo_violation_minutes"]


def judged_meets_slo(row: dict) -> bool:
    """Whether a row meets the SLO as docs/benchmark-contract.md judges its world (``judged_numbers``)."""
    if "judged_meets_slo" in row:
        return bool(row["judged_meets_slo"])
    if row_judge(row) == AVOIDABLE and "avoidable_violation_minutes" in row:
        return row["avoidable_violation_minutes"] <= Scenario().max_violation_fraction * row["minutes"]
    return bool(row["meets_slo"])


def table_judge(rows: Sequence[dict]) -> str:
    """The judge of a table's rows (one world): the avoidable minutes if any row is judged by them."""
    return AVOIDABLE if any(row_judge(row) == AVOIDABLE for row in rows) else WHOLE_HUB
