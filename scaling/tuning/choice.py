"""Step 3 of the tuning job: which simulated candidate to recommend for a target.

The selection itself is ``scaling.tuning.robust`` (the benchmark's ``project-tuned`` uses
the same one): out-of-time folds, the margin rule, stress replays of the shortlist, the regime
check. This module is the job's side of it: which stress replays to run as Spark work after the
first pass, round by round (``next_stress_round``, ``stress_works``), and the choice from the
rows the executors returned (``choose``).
"""

from __future__ import annotations

from collections.abc import Sequence

from scaling.tuning.regimes import regime_changes
from scaling.tuning.robust import MARGIN, Selection, select, shortlist, stress_round
from scaling.tuning.stress_replays import stress_replays
from scaling.tuning.tasks import TargetWork


def stress_works(work: TargetWork, indices: Sequence[int]) -> dict[tuple[str, str], TargetWork]:
    """Candidates ``indices`` of ``work`` under every stress replay: one work per stress set,
    keyed by (target, set); rows come back with the candidates' labels."""
    works = {}
    for replay in stress_replays(work.scenario, work.folds, work.arrivals):
        works[(work.target, replay.name)] = TargetWork(
            work.target, replay.arrivals(work.arrivals), replay.scenario, replay.folds.train_ends[0],
            tuple(work.candidates[index] for index in indices), replay.folds.train_ends, replay.name,
            None if work.recorded is None else work.recorded[replay.start:])
    return works


def _base(base_rows: Sequence[dict]) -> list[dict]:
    return sorted(base_rows, key=lambda row: row["index"])


def _stress(work: TargetWork, stress_rows: Sequence[dict]) -> dict[str, dict[int, dict]]:
    """Stress rows by set and candidate index (every set, replayed or not yet)."""
    index_of = {candidate.label: index for index, candidate in enumerate(work.candidates)}
    stress: dict[str, dict[int, dict]] = {replay.name: {} for replay in stress_replays(work.scenario, work.folds, work.arrivals)}
    for row in stress_rows:
        stress[row["replay"]][index_of[row["label"]]] = row
    return stress


def next_stress_round(work: TargetWork, base_rows: Sequence[dict], stress_rows: Sequence[dict]) -> list[int]:
    """``robust.stress_round`` for a target of the job: the candidates its next round replays."""
    listed = shortlist(_base(base_rows), 0, work.scenario.slo_minutes, MARGIN)
    return stress_round(listed, _stress(work, stress_rows), 0, work.scenario.slo_minutes, MARGIN)


def choose(work: TargetWork, base_rows: Sequence[dict], stress_rows: Sequence[dict]) -> Selection:
    """``robust.select`` over the executors' rows: the history's scenario (``base_rows``, one per
    candidate) and the stress replays (``stress_rows``)."""
    return select([candidate.label for candidate in work.candidates], _base(base_rows), _stress(work, stress_rows), 0,
                  work.scenario.slo_minutes, MARGIN, regime_changes(work.arrivals, work.folds))


def selection_evidence(work: TargetWork, selection: Selection) -> dict:
    """The evidence file's ``selection`` of a target (the report's risk table reads it)."""
    return {"kept_current": selection.kept_current, "reason": selection.reason,
            "recommended": work.candidates[selection.index].label,
            "margin": {"p99_fraction": MARGIN.p99_fraction, "max_fraction": MARGIN.max_fraction},
            "risk": selection.risk, "current_risk": selection.current_risk, "regime": selection.regime,
            "regime_change": any(fold["changes"] for fold in selection.regime),
            "safer": work.candidates[selection.safer].label if selection.safer is not None else None}
