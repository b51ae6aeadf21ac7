"""The benchmark's regression gate (``python -m scaling benchmark --gate BASELINE.json``).

A rule that pays on one trace can cost on others (a rule chosen on two traces can cost on a
third). The gate compares ``project-default`` with a committed baseline on every
trace and scenario the baseline holds (the family and the public traces) and fails, naming
each row, when

- the family's median cost (``cost_ratio``, cost over the fluid bound, per scenario) is more than
  ``MEDIAN_TOLERANCE`` (1%) dearer than the baseline's,
- any member (any trace of the baseline) is more than ``MEMBER_TOLERANCE`` (3%) dearer,
- any member that met the SLO in the baseline misses it now (as its world is judged: the whole hub's
  violation minutes, or the avoidable ones where partitions are uneven, ``judges.py``),
- a baseline row is missing from the run (a gate that ran less would pass by not looking).

Cheaper is never a failure. The baseline is written by ``--write-baseline`` from a run and
changes only in a commit that says why in docs/benchmark.md.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scaling.simulation.world.judges import WHOLE_HUB, judged_meets_slo, judged_violation_minutes, row_judge
from scaling.simulation.world.trace_family import is_member

GATED_ALGORITHM = "project-default"
MEDIAN_TOLERANCE = 0.01
MEMBER_TOLERANCE = 0.03
#: 2: rows say their judge and the violation minutes it judges by, ``meets_slo`` as judged.
#: A version 1 row's ``meets_slo`` is the whole hub's, and it is read as judged so.
BASELINE_VERSION = 2


@dataclass(frozen=True, slots=True)
class GatedRow:
    """What the gate keeps of one benchmark row."""

    scenario: str
    trace: str
    cost_ratio: float
    slo_violation_minutes: int
    #: Whether it meets the SLO as its world is judged (``judge``).
    meets_slo: bool
    judge: str = WHOLE_HUB
    #: The violation minutes ``judge`` counts (``None``: the whole hub's, ``slo_violation_minutes``).
    judged_violation_minutes: int | None = None

    @property
    def judged_minutes(self) -> int:
        return self.slo_violation_minutes if self.judged_violation_minutes is None else self.judged_violation_minutes

    @property
    def key(self) -> tuple[str, str]:
        return self.scenario, self.trace


def gated_rows(rows: Iterable[Mapping], algorithm: str = GATED_ALGORITHM) -> list[GatedRow]:
    """The gated algorithm's rows of a run (benchmark JSON rows)."""
    return [GatedRow(row.get("scenario", "standard"), row["trace"], float(row["cost_ratio"]), int(row["slo_violation_minutes"]),
                     judged_meets_slo(row), row_judge(row), int(judged_violation_minutes(row)))
            for row in rows if row["algorithm"] == algorithm]


def baseline_document(rows: Iterable[Mapping], algorithm: str = GATED_ALGORITHM) -> dict:
    """The baseline file's content: the gated algorithm's figures on every trace and scenario."""
    kept = sorted(gated_rows(rows, algorithm), key=lambda row: row.key)
    return {"version": BASELINE_VERSION, "algorithm": algorithm,
            "rows": [{"scenario": row.scenario, "trace": row.trace, "cost_ratio": row.cost_ratio,
                      "slo_violation_minutes": row.slo_violation_minutes, "judge": row.judge,
                      "judged_violation_minutes": row.judged_minutes, "meets_slo": row.meets_slo} for row in kept]}


def read_baseline(path: str | Path) -> tuple[str, list[GatedRow]]:
    """(algorithm, rows) of a baseline file; a ``ValueError`` naming the file when it is not one."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        rows = [GatedRow(row["scenario"], row["trace"], float(row["cost_ratio"]), int(row["slo_violation_minutes"]),
                         bool(row["meets_slo"]), row.get("judge", WHOLE_HUB),
                         None if row.get("judged_violation_minutes") is None else int(row["judged_violation_minutes"]))
                for row in document["rows"]]
        return document.get("algorithm", GATED_ALGORITHM), rows
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"--gate {path}: not a benchmark baseline ({error})") from error


def family_medians(rows: Sequence[GatedRow]) -> dict[str, float]:
    """Per scenario, the median cost ratio over the family's members."""
    by_scenario: dict[str, list[float]] = {}
    for row in rows:
        if is_member(row.trace):
            by_scenario.setdefault(row.scenario, []).append(row.cost_ratio)
    return {scenario: statistics.median(values) for scenario, values in by_scenario.items()}


def _dearer(now: float, before: float) -> float:
    return now / before - 1 if before > 0 else 0.0


def failures(baseline: Sequence[GatedRow], current: Sequence[GatedRow], *, median_tolerance: float = MEDIAN_TOLERANCE,
             member_tolerance: float = MEMBER_TOLERANCE) -> list[str]:
    """Every way ``current`` is worse than ``baseline``, one line each naming the row; empty: it passes."""
    found = []
    now = {row.key: row for row in current}
    missing = [row for row in baseline if row.key not in now]
    for row in missing:
        found.append(f"{row.scenario} {row.trace}: not in this run")
    before_medians = family_medians(baseline)
    # The median compares like with like: the baseline's members that this run has.
    present = [now[row.key] for row in baseline if row.key in now]
    now_medians = family_medians(present)
    for scenario, before in sorted(before_medians.items()):
        if scenario in now_medians and _dearer(now_medians[scenario], before) > median_tolerance:
            found.append(f"{scenario} family median: cost {before:.4f} -> {now_medians[scenario]:.4f} "
                         f"(+{_dearer(now_medians[scenario], before):.1%}, more than {median_tolerance:.0%} dearer)")
    for row in baseline:
        if row.key not in now:
            continue
        after = now[row.key]
        if _dearer(after.cost_ratio, row.cost_ratio) > member_tolerance:
            found.append(f"{row.scenario} {row.trace}: cost {row.cost_ratio:.4f} -> {after.cost_ratio:.4f} "
                         f"(+{_dearer(after.cost_ratio, row.cost_ratio):.1%}, more than {member_tolerance:.0%} dearer)")
        if row.meets_slo and not after.meets_slo:
            found.append(f"{row.scenario} {row.trace}: misses the SLO ({after.judged_minutes} {after.judge} violation minutes; "
                         f"baseline {row.judged_minutes} {row.judge})")
    return found


def gate_report(baseline: Sequence[GatedRow], current: Sequence[GatedRow], path: str) -> tuple[int, str]:
    """(exit code, text) of the gate: 0 and a one-line pass, or 1 and every failure."""
    found = failures(baseline, current)
    medians = family_medians(current)
    summary = ", ".join(f"{scenario} family median {value:.4f}" for scenario, value in sorted(medians.items()))
    if not found:
        return 0, f"gate {path}: passed ({len(baseline)} rows{'; ' + summary if summary else ''})"
    return 1, "\n".join([f"gate {path}: FAILED, {len(found)} row(s):", *(f"  {line}" for line in found)])
