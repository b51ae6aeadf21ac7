"""What the tuning job vouches for before it tunes (docs/tuning.md, "Validating the history").

Real exports go wrong: a clock reading years ahead, a sample exported twice with other values,
a checkpoint read low, a partition missed, hours missing. Each problem has one rule here:
refuse the target (with the reason), repair it the way the live engine reads it, or keep it and
flag it; and the minutes the job had to invent (gaps, repairs) are marked, so that no score
counts them.

``screen_history`` is the Spark pass over the raw rows (samples from the future, conflicting
copies); the rest is plain Python over what ``recovery`` brings to the driver, one row per
sample: the stretch of history to tune on (``longest_stretch``), the per-minute series and which
of its minutes were recorded (``minute_series``), the history's length and folds
(``history_problem``), and the cross-check of the learned throughput (``throughput_problem``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

#: Two samples of a target closer than this are two readings of one collection (collect runs
#: once a minute): conflicting copies, whatever their ids.
MIN_SPACING_SECONDS = 30.0
#: A gap longer than this cuts the history in stretches; the job tunes on the longest one (a
#: clock reading years off would otherwise make a series of a million invented minutes).
MAX_GAP_MINUTES = 1440
#: A fold (its training block or its validation block) with fewer recorded minutes than this
#: share is not a fold: mostly invented, it cannot vouch for anything.
MIN_RECORDED_SHARE = 0.5
#: The shortest validation block worth scoring, in minutes.
MIN_VALIDATION_BLOCK_MINUTES = 120
#: The learned throughput is contradicted when the saturated minutes' median is more than
#: ``TOLERANCE`` times off it (either way); when more than ``DISAGREEING_SHARE`` of the saturated
#: minutes are (a part of the history that tells another story: a capacity read wrong for a
#: while); or when steady minutes processed more than ``TOLERANCE`` x it per serving instance on
#: more than ``CONTRADICTING_SHARE`` of them (and at least ``CONTRADICTING_MINUTES``).
TOLERANCE = 1.25
DISAGREEING_SHARE = 0.1
CONTRADICTING_SHARE = 0.02
CONTRADICTING_MINUTES = 5


def screen_history(history: Any, now: datetime, clock_skew: timedelta) -> tuple[Any, dict[str, dict]]:
    """The raw rows without samples from the future (beyond ``now`` + ``clock_skew``, the
    engine's rule) and without conflicting copies (same id, or two samples closer than
    ``MIN_SPACING_SECONDS``, with different values: none of the copies is used), and per target
    what was dropped (``future``, ``conflicting``: sample counts; ``first_future``: its time)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    limit = (now + clock_skew).timestamp()
    seconds = F.col("collected_at").cast("double")
    future = history.where(seconds > F.lit(limit)).groupBy("target").agg(
        F.countDistinct("sample_id").alias("future"),
        F.date_format(F.min("collected_at"), "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("first_future"))
    rows = history.where(seconds <= F.lit(limit))
    values = [column for column in rows.columns if column != "date"]
    same_id = (rows.dropDuplicates(values)
               .groupBy("target", "sample_id", "source", "partition_id").count()
               .where(F.col("count") > 1).select("target", "sample_id"))
    times = rows.select("target", "sample_id", "collected_at").dropDuplicates()
    by_time = Window.partitionBy("target").orderBy("collected_at", "sample_id")
    close = (times
             .withColumn("previous_id", F.lag("sample_id").over(by_time))
             .withColumn("apart", seconds - F.lag("collected_at").over(by_time).cast("double"))
             .where((F.col("apart") < MIN_SPACING_SECONDS) & (F.col("previous_id") != F.col("sample_id"))))
    conflicting = (same_id
                   .unionByName(close.select("target", "sample_id"))
                   .unionByName(close.select("target", F.col("previous_id").alias("sample_id")))
                   .distinct().cache())
    findings: dict[str, dict] = {}
    for row in future.collect():
        findings.setdefault(row["target"], {}).update(future=int(row["future"]), first_future=row["first_future"])
    for row in conflicting.groupBy("target").count().collect():
        findings.setdefault(row["target"], {})["conflicting"] = int(row["count"])
    if not any("conflicting" in item for item in findings.values()):
        conflicting.unpersist()
        return rows, findings
    return rows.join(F.broadcast(conflicting), ["target", "sample_id"], "left_anti"), findings


def screening_notes(found: Mapping[str, Any], clock_skew: timedelta) -> list[str]:
    """What ``screen_history`` dropped for one target, in words."""
    notes = []
    if found.get("future"):
        notes.append(f"{found['future']} samples from the future dropped (the first dated {found['first_future']}, more than "
                     f"{clock_skew.total_seconds():.0f} s ahead of the job's clock: the engine ignores them too)")
    if found.get("conflicting"):
        notes.append(f"{found['conflicting']} samples with conflicting copies dropped (the same sample id, or two samples less "
                     f"than {MIN_SPACING_SECONDS:.0f} s apart, with different values): no copy was used, since nothing says "
                     "which is true and keeping either moves events in time; the minutes they covered are a gap (spread, "
                     "not scored)")
    return notes


@dataclass(frozen=True, slots=True)
class Stretch:
    """The samples the job tunes on (``rows[start:end]``) and what the cut left out."""

    start: int
    end: int
    stretches: int

    def describe(self, total: int, times: Sequence[str]) -> str | None:
        if self.stretches <= 1:
            return None
        return (f"the history falls in {self.stretches} stretches separated by gaps of more than {MAX_GAP_MINUTES} minutes: "
                f"tuned on the longest, {times[self.start]} to {times[self.end - 1]} ({self.end - self.start} samples); "
                f"{total - (self.end - self.start)} samples outside it left out")


def longest_stretch(times: Sequence[float]) -> Stretch:
    """The longest run of samples (``times`` in seconds, ascending) without a gap above
    ``MAX_GAP_MINUTES`` (by samples; ties: the latest)."""
    cuts = [0, *(index for index in range(1, len(times)) if times[index] - times[index - 1] > MAX_GAP_MINUTES * 60.0),
            len(times)]
    pieces = list(zip(cuts, cuts[1:], strict=False))
    start, end = max(pieces, key=lambda piece: (piece[1] - piece[0], piece[0]))
    return Stretch(start, end, len(pieces))


@dataclass(frozen=True, slots=True)
class MinuteSeries:
    """Arrivals per minute and which minutes were recorded (``recorded[m]``: minute ``m`` comes
    from one normal interval of complete, unrepaired readings; the others were invented)."""

    arrivals: np.ndarray
    recorded: np.ndarray

    @property
    def invented_minutes(self) -> int:
        return int(len(self.recorded) - self.recorded.sum())


def minute_series(rows: Sequence[Mapping[str, Any]], interval_seconds: float) -> MinuteSeries | None:
    """The per-minute arrivals of one stretch of per-sample rows (time order; keys
    ``collected_at`` (seconds), ``elapsed_seconds``, ``arrived``, ``compared``, ``partitions``,
    ``expected`` (partitions the hub has then), ``bridged``): an interval of ``g`` minutes is
    spread evenly over them, as ``transforms.minute_arrivals`` does; ``None`` when no interval
    is known. The first row only starts the series."""
    if len(rows) < 2:
        return None
    start = rows[0]["collected_at"]
    pieces: list[tuple[int, int, float, bool]] = []
    for row in rows[1:]:
        if row["arrived"] is None or row["elapsed_seconds"] is None:
            continue
        minute = int(round((row["collected_at"] - start) / 60.0))
        span = max(int(round(row["elapsed_seconds"] / 60.0)), 1)
        normal = (row["elapsed_seconds"] <= 1.5 * interval_seconds and row["compared"] == row["partitions"]
                  and row["partitions"] >= row["expected"] and not row["bridged"])
        pieces.append((minute, span, float(row["arrived"]), normal))
    if not pieces:
        return None
    first = min(minute - span + 1 for minute, span, _, _ in pieces)
    last = max(minute for minute, _, _, _ in pieces)
    totals: dict[int, float] = {}
    touched = np.zeros(last - first + 1, dtype=bool)
    spoiled = np.zeros(last - first + 1, dtype=bool)
    for minute, span, arrived, normal in pieces:
        share = arrived / span
        for covered in range(minute - span + 1, minute + 1):
            totals[covered] = totals.get(covered, 0.0) + share
            touched[covered - first] = True
            if not normal:
                spoiled[covered - first] = True
    arrivals = np.zeros(last - first + 1)
    for minute, value in totals.items():
        arrivals[minute - first] = max(float(value or 0.0), 0.0)
    recorded = touched & ~spoiled
    return MinuteSeries(arrivals, recorded)


def minimum_minutes(train_fraction: float, folds: int) -> int:
    """The shortest history the job tunes: a first training block that holds the stress
    replays' warm-up, and validation blocks of at least ``MIN_VALIDATION_BLOCK_MINUTES``."""
    from scaling.tuning.stress_replays import STRESS_WARMUP_MINUTES

    return max(math.ceil(STRESS_WARMUP_MINUTES / train_fraction - 1e-9),
               math.ceil(MIN_VALIDATION_BLOCK_MINUTES * folds / (1.0 - train_fraction) - 1e-9))


def history_problem(recorded: np.ndarray, train_fraction: float, folds: int) -> str | None:
    """Why a series cannot be tuned (too short, or a fold mostly invented), else ``None``."""
    from scaling.tuning.folds import blocked_folds
    from scaling.tuning.stress_replays import STRESS_WARMUP_MINUTES

    needed = minimum_minutes(train_fraction, folds)
    if len(recorded) < needed:
        return (f"refused: the history holds {len(recorded)} minutes ({int(recorded.sum())} recorded); at least {needed} are "
                f"needed: the first training block ({train_fraction:g} of the history) must hold the stress replays' "
                f"{STRESS_WARMUP_MINUTES}-minute warm-up and each of the {folds} validation blocks at least "
                f"{MIN_VALIDATION_BLOCK_MINUTES} minutes. Export a longer history.")
    split = blocked_folds(len(recorded), folds, train_fraction)
    blocks = [("the first training block", 0, split.train_ends[0])]
    blocks += [(f"validation block {number}", start, end) for number, (start, end) in enumerate(split.validation, start=1)]
    for name, start, end in blocks:
        share = float(recorded[start:end].mean()) if end > start else 0.0
        if share < MIN_RECORDED_SHARE:
            return (f"refused: {name} (minutes {start} to {end}) is {1 - share:.0%} invented minutes (gaps or repaired readings): "
                    f"a block less than {MIN_RECORDED_SHARE:.0%} recorded is not a fold. Export the missing history or "
                    "tune on a stretch without the hole (--train-fraction, --folds).")
    return None


def throughput_problem(estimate: float, median: float | None, observed: Sequence[float],
                       saturated: Sequence[float] = ()) -> str | None:
    """Whether the history contradicts the learned per-instance throughput ``estimate``: the
    saturated minutes' ``median`` far from it, many saturated minutes (``saturated``: each one's
    processed rate per serving instance at its recorded capacity) far from it, or steady minutes
    that processed well above it per serving instance at their recorded capacity (``observed``),
    which no instance can."""
    if median is not None and median > 0 and not 1 / TOLERANCE <= estimate / median <= TOLERANCE:
        return (f"the saturated minutes disagree: their median shows {median:.1f} events/min per instance, the estimate "
                f"{estimate:.1f} (a reading that moved the sum: checkpoints, capacity)")
    off = sum(1 for value in saturated if not estimate / TOLERANCE <= value <= estimate * TOLERANCE)
    if saturated and off > DISAGREEING_SHARE * len(saturated):
        return (f"{off} of {len(saturated)} saturated minutes show a per-instance rate more than {TOLERANCE:g} times off the "
                f"estimate {estimate:.1f} at their recorded capacity (a capacity recorded wrong for a while, or checkpoints "
                "read wrong)")
    above = sum(1 for value in observed if value > TOLERANCE * estimate)
    if observed and above >= max(CONTRADICTING_MINUTES, CONTRADICTING_SHARE * len(observed)):
        return (f"{above} of {len(observed)} steady minutes processed more than {TOLERANCE:g} x {estimate:.1f} events/min per "
                "serving instance at their recorded capacity, which the estimate says no instance can (a capacity "
                "recorded too high, or checkpoints read wrong)")
    return None
