"""The ``trouble`` stress set: consumers that misbehave, beside the lag peers.

Operators meet these every month: a slow downstream or a stall, traffic above what the maximum
count serves, checkpoints written late or rarely, long rebalance pauses. Each case is a cut of a
public trace (the trace, the start and the magnitude drawn from a seed, within the ranges of
docs/benchmark-contract.md, "trouble"), run with ``project-default`` and with the lag peers'
sweeps (KEDA, the Functions target) in the same world. A case is judged as docs/benchmark-contract.md says:
where a peer setting meets the SLO, the default meets it too and costs less than every peer
setting that meets it; where none does, it has no more violation minutes than the lag peers'
least. Besides, from the default's minute-by-minute series (the world's truth, not what the
engine read): the minutes in which it scaled in while the backlog grew (over the three minutes
before, by more than a minute's arrivals), whether it went from the maximum to the minimum within
an hour, and, for a slow-down, the recovery time (end of the trouble to the oldest event back
under the SLO).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scaling.benchmarks.jobs import FUNCTIONS_TARGETS, KEDA_THRESHOLDS, Job
from scaling.simulation.world.judges import judged_meets_slo
from scaling.simulation.world.scenario import RunResult, Scenario

#: The lag peers the default is judged against (``benchmark.py``'s algorithm names).
LAG_PEERS = ("keda-hpa", "functions-target")
#: How many cases of each kind a seed draws.
CASES_PER_KIND = 2
#: docs/benchmark-contract.md's ranges: slow-down factors (0.01 is a stall) and durations (minutes); the
#: overload's peak in instances (the maximum is the partition count, 32); checkpoints late by
#: (seconds) and written every (seconds); rebalance pauses (seconds).
SLOW_FACTORS = (0.01, 0.5)
SLOW_MINUTES = (15, 180)
OVERLOAD_PEAK = (34.0, 48.0)
CHECKPOINT_DELAY = (120.0, 300.0)
CHECKPOINT_INTERVAL = (180.0, 900.0)
REBALANCE_PAUSE = (60.0, 120.0)
#: Length of each cut (minutes), and where in it a slow-down may start.
CUT_MINUTES = 1500
SLOW_START = (300, 900)


@dataclass(frozen=True, slots=True)
class Case:
    """One trouble world: a kind, a cut of a trace, the scenario fields set, and when the
    trouble ends (minute of the cut; ``None``: it lasts the whole run)."""

    kind: str
    trace: str
    start: int
    minutes: int
    overrides: tuple
    trouble_ends: int | None = None

    @property
    def label(self) -> str:
        fields = " ".join(f"{name}={value}" for name, value in self.overrides)
        return f"{self.kind} {Path(self.trace).parent.name}@{self.start}+{self.minutes} {fields}"

    @property
    def file_name(self) -> str:
        return f"{Path(self.trace).parent.name}-{self.start}-{self.minutes}"


def cases(traces: Sequence[str], lengths: dict[str, int], seed: int = 1, per_kind: int = CASES_PER_KIND) -> list[Case]:
    """``per_kind`` cases of each kind, drawn from ``seed``: a trace, a cut of it, a magnitude."""
    draw = np.random.default_rng(seed)
    found: list[Case] = []

    def cut() -> tuple[str, int]:
        trace = traces[int(draw.integers(len(traces)))]
        return trace, int(draw.integers(0, max(lengths[trace] - CUT_MINUTES, 1)))

    for index in range(per_kind):
        trace, start = cut()
        factor = round(float(np.exp(draw.uniform(np.log(SLOW_FACTORS[0]), np.log(SLOW_FACTORS[1])))), 3)
        if index == 0:  # a stall in every seed
            factor = SLOW_FACTORS[0]
        duration = int(draw.integers(SLOW_MINUTES[0], SLOW_MINUTES[1] + 1))
        begins = int(draw.integers(*SLOW_START))
        found.append(Case("slow", trace, start, CUT_MINUTES, (("slowdowns", ((float(begins), float(duration), factor, 0.0),)),),
                          begins + duration))
    for _ in range(per_kind):
        trace, start = cut()
        found.append(Case("overload", trace, start, CUT_MINUTES,
                          (("peak_instances", round(float(draw.uniform(*OVERLOAD_PEAK)), 1)),)))
    for _ in range(per_kind):
        trace, start = cut()
        found.append(Case("late-checkpoints", trace, start, CUT_MINUTES,
                          (("checkpoint_delay_seconds", float(round(draw.uniform(*CHECKPOINT_DELAY)))),)))
        trace, start = cut()
        found.append(Case("rare-checkpoints", trace, start, CUT_MINUTES,
                          (("checkpoint_interval_seconds", float(round(draw.uniform(*CHECKPOINT_INTERVAL)))),)))
    for _ in range(per_kind):
        trace, start = cut()
        found.append(Case("long-rebalances", trace, start, CUT_MINUTES,
                          (("rebalance_pause_seconds", float(round(draw.uniform(*REBALANCE_PAUSE)))), ("assignment", "balanced"))))
    return found


def write_cut(case: Case, counts: np.ndarray, folder: Path) -> str:
    """The case's cut of its trace as a per-minute CSV in ``folder`` (the benchmark reads files)."""
    path = folder / case.file_name / "per_minute.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["minute", "count"])
        writer.writerows((minute, float(value)) for minute, value in enumerate(counts[case.start: case.start + case.minutes]))
    return str(path)


def peer_jobs(trace: str, case: Case) -> list[Job]:
    """The lag peers' sweeps in the case's world."""
    jobs = [Job(trace, "keda-hpa", f"unprocessedEventThreshold={value}", value) for value in KEDA_THRESHOLDS]
    jobs += [Job(trace, "functions-target", f"target={value}", value) for value in FUNCTIONS_TARGETS]
    return [Job(job.trace, job.algorithm, job.knob, job.value, scenario="standard", overrides=case.overrides) for job in jobs]


@dataclass(frozen=True, slots=True)
class Audit:
    """What the default's series show: scale-ins while the backlog grew, trips from the maximum
    to the minimum within an hour, and the recovery time (minutes; ``None``: not a slow-down, or
    not recovered by the end)."""

    scale_ins_while_growing: int
    max_to_min_within_hour: int
    recovery_minutes: int | None


def audit(result: RunResult, scenario: Scenario, highest: int, lowest: int, trouble_ends: int | None) -> Audit:
    capacity, backlog, arrivals, age = result.capacity, result.backlog, result.arrivals, result.age
    growing_scale_ins = 0
    for minute in range(4, len(capacity)):
        if capacity[minute] < capacity[minute - 1] and backlog[minute - 1] - backlog[minute - 4] > arrivals[minute - 1]:
            growing_scale_ins += 1
    trips = 0
    at_max = [minute for minute in range(len(capacity)) if capacity[minute] >= highest]
    for minute in range(1, len(capacity)):
        if capacity[minute] <= lowest < capacity[minute - 1] and any(0 <= minute - top <= 60 for top in at_max):
            trips += 1
    recovery = None
    if trouble_ends is not None:
        late = np.flatnonzero(age[trouble_ends:] <= scenario.slo_minutes)
        recovery = int(late[0]) if late.size else None
    return Audit(growing_scale_ins, trips, recovery)


@dataclass(frozen=True, slots=True)
class Judged:
    """A case's default row and audit, the lag peers' cheapest setting that meets the SLO (``None``:
    none does) and their least violation minutes; and whether the case's goals hold."""

    case: Case
    default: dict
    audit: Audit
    best_peer: dict | None
    least_peer_violations: int

    @property
    def holds(self) -> bool:
        if self.audit.scale_ins_while_growing or self.audit.max_to_min_within_hour:
            return False
        if self.best_peer is not None:
            return judged_meets_slo(self.default) and self.default["cost_ratio"] < self.best_peer["cost_ratio"]
        return self.default["slo_violation_minutes"] <= self.least_peer_violations


def judge(case: Case, default: dict, found: Audit, peer_rows: Sequence[dict]) -> Judged:
    meeting = [row for row in peer_rows if judged_meets_slo(row)]
    best = min(meeting, key=lambda row: (row["cost_ratio"], row["scale_actions"])) if meeting else None
    least = min((row["slo_violation_minutes"] for row in peer_rows), default=0)
    return Judged(case, default, found, best, least)


def table(judged: Sequence[Judged]) -> str:
    lines = ["| case | project-default cost / viol / max age | lag peers' best (cost, setting) or least viol | "
             "scale-ins while growing | max -> min < 1 h | recovery (min) | holds |",
             "|---|---|---|---:|---:|---:|:-:|"]
    for item in judged:
        row, peer = item.default, item.best_peer
        versus = (f"{peer['cost_ratio']:.3f} ({peer['algorithm']} {peer['knob']})" if peer
                  else f"none meets; least {item.least_peer_violations} viol")
        recovery = "–" if item.case.trouble_ends is None else ("not by the end" if item.audit.recovery_minutes is None
                                                              else str(item.audit.recovery_minutes))
        lines.append(f"| {item.case.label} | {row['cost_ratio']:.3f} / {row['slo_violation_minutes']} / "
                     f"{row['max_age_minutes']:.1f} | {versus} | {item.audit.scale_ins_while_growing} | "
                     f"{item.audit.max_to_min_within_hour} | {recovery} | {'yes' if item.holds else '**no**'} |")
    return "\n".join(lines)
