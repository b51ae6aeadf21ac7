"""Step 3 of the tuning job: which simulated candidate to recommend for a target.

The selection itself is ``scaling.simulation.robust`` (the benchmark's ``project-tuned`` uses
the same one): out-of-time folds, the margin rule, stress replays of the shortlist, the regime
check. This module is the job's side of it: which stress replays to run as Spark work after the
first pass (``stress_works``), and the choice from the rows the executors returned
(``choose``).
"""

from __future__ import annotations

from collections.abc import Sequence

from scaling.simulation.robust import MARGIN, Selection, regime_changes, select, shortlist, stress_replays
from scaling.tuning.tasks import TargetWork


def stress_works(work: TargetWork, base_rows: Sequence[dict]) -> tuple[dict[tuple[str, str], TargetWork], list[int]]:
    """The stress replays of ``work``'s shortlist (candidate 0, the current policy, always in it):
    one work per stress set, keyed by (target, set), and the shortlisted candidate indices (a
    stress work's candidate ``i`` is ``work.candidates[listed[i]]``)."""
    base = [row for row in sorted(base_rows, key=lambda row: row["index"])]
    listed = shortlist(base, 0, work.scenario.slo_minutes, MARGIN)
    works = {}
    for replay in stress_replays(work.scenario, work.folds, work.arrivals):
        works[(work.target, replay.name)] = TargetWork(
            work.target, replay.arrivals(work.arrivals), replay.scenario, replay.folds.train_ends[0],
            tuple(work.candidates[index] for index in listed), replay.folds.train_ends, replay.name)
    return works, listed


def choose(work: TargetWork, base_rows: Sequence[dict], stress_rows: Sequence[dict], listed: Sequence[int]) -> Selection:
    """``robust.select`` over the executors' rows: the history's scenario (``base_rows``, one per
    candidate) and the stress replays (``stress_rows``, shortlist indices)."""
    base = [row for row in sorted(base_rows, key=lambda row: row["index"])]
    stress: dict[str, dict[int, dict]] = {}
    for row in stress_rows:
        stress.setdefault(row["replay"], {})[listed[row["index"]]] = row
    return select([candidate.label for candidate in work.candidates], base, stress, 0, work.scenario.slo_minutes, MARGIN,
                  regime_changes(work.arrivals, work.folds))


def selection_evidence(work: TargetWork, selection: Selection) -> dict:
    """The evidence file's ``selection`` of a target (the report's risk table reads it)."""
    return {"kept_current": selection.kept_current, "reason": selection.reason,
            "recommended": work.candidates[selection.index].label,
            "margin": {"p99_fraction": MARGIN.p99_fraction, "max_fraction": MARGIN.max_fraction},
            "risk": selection.risk, "current_risk": selection.current_risk, "regime": selection.regime,
            "regime_change": any(fold["changes"] for fold in selection.regime),
            "safer": work.candidates[selection.safer].label if selection.safer is not None else None}
