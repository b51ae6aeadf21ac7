"""The offline tuning job: learn thresholds from metric history with PySpark.

The Spark session and file I/O are in ``spark_io.py``, the options in ``options.py``.

One entry file for both ways of running it:

- embedded: ``python -m scaling tune --history DIR --out FILE ...`` (``scaling.tuning.cli``),
  on ``local[*]`` by default;
- on a cluster: ``spark-submit scaling/tuning/job.py --history abfss://... --out FILE ...``
  (same options). The ``scaling`` package is zipped at run time and shipped to the executors
  with ``addPyFile``; when it was already shipped (``--py-files scaling.zip``), that is reused.

Steps (docs/tuning.md), one module each, this file running them in order:

0. (``validation.py``) Every target's history is validated first: samples from the future and
   conflicting copies dropped, misreads repaired, the minutes the job invents (gaps, repairs)
   marked so that no score counts them, a history too short or mostly invented refused, a
   learned throughput the data contradicts not used (docs/tuning.md, "Validating the history").
1. (``transforms.py``, ``recovery.py``) Spark DataFrame transforms over the Parquet history: per partition, the increase of the
   last-enqueued sequence number (arrivals) and of the checkpoint (processed) between
   consecutive samples (``lag`` over ``collected_at``); per sample, the sums, the capacity and
   whether every partition was saturated; per target, the per-instance throughput from
   saturated minutes at steady capacity, and the per-minute arrival series (gaps spread evenly).
2. (``planning.py``) Candidate policies (``scaling.simulation.drivers.candidates.all_candidates``) plus the current policy,
   each simulated by the executors on the whole reconstructed series (warm state) and scored on
   out-of-time folds (``scaling.tuning.folds.blocked_folds``: a first training block of
   ``--train-fraction``, then ``--folds`` validation blocks in time order). Tasks are (target, candidate
   chunk) pairs in an RDD, so the work spreads over cores and over many targets: a target's
   threshold-rule candidates run as one batched simulation (``scaling.simulation.drivers.batched``),
   its SLO-mode candidates as another (``scaling.simulation.drivers.batched_slo``), both exactly the
   engine's results; the few others through the engine in the loop.
3. (``choice.py``, ``scaling.tuning.robust``) The shortlist (the current policy and the candidates that
   hold on every fold and cost no more) is replayed under the stress sets, again as executor tasks;
   the cheapest candidate that meets the SLO with margin on every fold and stress replay is
   recommended, else the current policy stays with the reason. The result is written as a policy
   file; the evidence goes to a sibling ``.evidence.json``.
4. (``report.py``) A report: a Pareto plot per target (PNG) and a Markdown summary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scaling.tuning.choice import choose, next_stress_round, selection_evidence, stress_works
from scaling.tuning.options import GRIDS, TuneError, TuneOptions
from scaling.tuning.planning import default_target, plan_target, simulate_all
from scaling.tuning.recovery import recover_histories
from scaling.tuning.report import pareto_png, safe_name, summary_markdown
from scaling.tuning.spark_io import build_session, evidence_path, join_path, read_text, write_bytes
from scaling.tuning.transforms import read_history_df


def run_job(spark: Any, options: TuneOptions) -> dict:
    """Run the whole job on ``spark``; returns the evidence document (also written next to OUT).
    The steps of the module doc, in order: validate, recover, plan, simulate, stress, choose, write."""
    current_policy = _current_policy(spark, options)
    started = time.perf_counter()
    history_df = read_history_df(spark, options.history)
    delay_minutes = 2
    if current_policy is not None:
        delay_minutes = max(int(round(max(t.slo.provisioning_delay_seconds for t in current_policy.targets) / 60.0)), 0)
    steady = options.steady_minutes if options.steady_minutes is not None else delay_minutes + 2
    histories, messages = recover_histories(spark, history_df, steady_samples=steady, targets=options.targets, now=options.now)
    if not histories and not messages:
        raise TuneError(f"--history {options.history} holds no samples")
    transform_seconds = time.perf_counter() - started

    evidence_targets: dict[str, dict] = {}
    works: dict[str, Any] = {}
    currents: dict[str, Any] = {}
    for history in histories:
        _plan_history(history, current_policy, options, evidence_targets, works, currents, messages)

    # First pass: every candidate in the history's scenario; second: the shortlists under stress.
    rows, seconds = simulate_all(spark, works, options.tasks_per_core)
    stress_rows, stress_seconds = _stress_rounds(spark, works, rows, options)
    seconds += stress_seconds
    simulated = sum(row["simulated_minutes"] for row in (*rows, *stress_rows))
    recommended_targets = []
    report_files: dict[str, bytes] = {}
    for name, work in works.items():
        recommended_targets.append(_select(name, work, rows, stress_rows, evidence_targets[name], currents, options,
                                           report_files))
    # Targets of the current policy that could not be tuned stay as they are.
    if current_policy is not None:
        tuned = {target.name for target in recommended_targets}
        for target in current_policy.targets:
            if target.name not in tuned:
                recommended_targets.append(target)
                if target.name not in evidence_targets:
                    evidence_targets[target.name] = {"status": "unchanged", "messages": ["no usable history for this target"]}
                elif evidence_targets[target.name]["status"] == "skipped":
                    evidence_targets[target.name]["status"] = "unchanged"

    evidence = {
        "history": options.history,
        "grid": options.grid,
        "train_fraction": options.train_fraction,
        "folds": options.folds,
        "policy": options.policy,
        "messages": messages,
        "simulation": {"candidate_policy_minutes": simulated, "seconds": round(seconds, 3),
                       "minutes_per_second": round(simulated / seconds, 1) if seconds > 0 else 0.0,
                       "parallelism": spark.sparkContext.defaultParallelism,
                       "transform_seconds": round(transform_seconds, 3)},
        "targets": evidence_targets,
        "recommendations": options.out if recommended_targets else None,
    }
    _write(spark, options, evidence, recommended_targets, report_files)
    return evidence


def _current_policy(spark: Any, options: TuneOptions) -> Any:
    """The options checked and the current policy (``--policy``) read, or ``None``."""
    from scaling.domain.policy import PolicyError, load_policy_text

    if options.grid not in GRIDS:
        raise TuneError(f"--grid must be one of {', '.join(GRIDS)}")
    if not 0.05 <= options.train_fraction <= 0.95:
        raise TuneError("--train-fraction must be between 0.05 and 0.95")
    if not 1 <= options.folds <= 10:
        raise TuneError("--folds must be between 1 and 10")
    if not options.policy:
        return None
    try:
        return load_policy_text(read_text(spark, options.policy), origin=options.policy)
    except OSError as error:
        raise TuneError(f"--policy {options.policy} cannot be read: {error}") from error
    except PolicyError as error:
        raise TuneError(f"--policy: {error}") from error


def _plan_history(history: Any, current_policy: Any, options: TuneOptions, evidence_targets: dict[str, dict],
                  works: dict[str, Any], currents: dict[str, Any], messages: list[str]) -> None:
    """One recovered history's evidence item and, unless it is skipped or refused, its work (the
    candidates and the folds) and its current target."""
    from scaling.simulation.drivers.candidates import Candidate, all_candidates
    from scaling.tuning.folds import blocked_folds
    from scaling.tuning.tasks import CURRENT, TargetWork

    current = None
    if current_policy is not None:
        try:
            current = current_policy.target(history.target)
        except KeyError:
            current = None
    item: dict = {
        "status": "skipped",
        "messages": list(history.messages),
        "history": {"start": history.start, "end": history.end, "samples": history.samples,
                    "minutes": len(history.arrivals), "interval_minutes": history.interval_minutes,
                    "partitions": history.partitions, "partition_counts": history.partition_counts,
                    "gaps": history.gaps, "gap_minutes": history.gap_minutes, "resets": history.resets,
                    "validation": history.validation},
        "throughput": {"saturated_minutes": history.saturated_minutes,
                       "from_history_per_minute": _round(history.throughput_per_minute),
                       "median_per_minute": _round(history.throughput_median_per_minute),
                       "best_seen_per_minute": _round(history.throughput_floor_per_minute),
                       "contradicted": history.throughput_problem},
    }
    evidence_targets[history.target] = item
    planned = plan_target(history, current, options)
    if isinstance(planned, str):
        if planned.startswith("refused"):
            item["status"] = "refused"
        item["messages"].append(planned)
        messages.append(f"{history.target}: {planned}")
        return
    scenario, base, notes = planned
    item["messages"].extend(notes)
    current = current or default_target(history.target, history.partitions)
    currents[history.target] = current
    candidates = (Candidate(CURRENT, current), *all_candidates(base, options.grid))
    try:
        folds = blocked_folds(len(history.arrivals), options.folds, options.train_fraction)
    except ValueError as error:
        item["messages"].append(f"skipped: {error}")
        messages.append(f"{history.target}: skipped: {error}")
        return
    recorded = None if history.recorded is None or bool(history.recorded.all()) else history.recorded
    works[history.target] = TargetWork(history.target, history.arrivals, scenario, folds.train_ends[0], tuple(candidates),
                                       folds.train_ends, recorded=recorded)
    item["throughput"]["events_per_instance_per_minute"] = round(scenario.events_per_instance_per_minute, 3)
    item["scenario"] = {key: value for key, value in asdict(scenario).items() if key != "weights"}
    item["split"] = {"train_minutes": folds.train_ends[0], "validation_minutes": len(history.arrivals) - folds.train_ends[0],
                     "folds": [{"train": list(train), "validation": list(valid)}
                               for train, valid in zip(folds.training, folds.validation, strict=True)]}


def _stress_rounds(spark: Any, works: dict[str, Any], rows: list[dict], options: TuneOptions) -> tuple[list[dict], float]:
    """The shortlists replayed under stress, round after round (at most two: the cheapest, then the
    rest if none held) until each target has its choice; the rows and the seconds they took."""
    stress_rows: list[dict] = []
    seconds = 0.0
    while True:
        replays = {}
        for name, work in works.items():
            batch = next_stress_round(work, [row for row in rows if row["target"] == name],
                                      [row for row in stress_rows if row["target"] == name])
            if batch:
                replays.update(stress_works(work, batch))
        if not replays:
            return stress_rows, seconds
        more, more_seconds = simulate_all(spark, replays, options.tasks_per_core)
        stress_rows += more
        seconds += more_seconds


def _select(name: str, work: Any, rows: list[dict], stress_rows: list[dict], item: dict, currents: dict[str, Any],
            options: TuneOptions, report_files: dict[str, bytes]) -> Any:
    """One target's choice, its evidence written into ``item`` (and its plot into ``report_files``);
    returns the target to recommend (the current one when it is kept)."""
    target_rows = sorted((row for row in rows if row["target"] == name), key=lambda row: row["index"])
    replayed = [row for row in stress_rows if row["target"] == name]
    by_index = {row["index"]: row for row in target_rows}
    selection = choose(work, target_rows, replayed)
    index = selection.index
    item["current"] = _evidence_numbers(by_index.get(0))
    item["candidates"] = [{"label": row["label"], "train": row["train"], "validation": row["validation"],
                           "folds": row["folds"], "holds": row["index"] not in selection.failures,
                           "fails": selection.failures.get(row["index"])} for row in target_rows]
    stressed: dict[str, dict] = {}
    for row in replayed:
        stressed.setdefault(row["label"], {})[row["replay"]] = {
            "validation": row["validation"], "folds": [fold["validation"] for fold in row["folds"]]}
    item["stress"] = {"sets": sorted({row["replay"] for row in replayed}), "candidates": stressed}
    item["selection"] = selection_evidence(work, selection)
    item["recommended"] = _evidence_numbers(by_index[index])
    if selection.kept_current:
        item["status"] = "kept current"
        item["messages"].append(f"kept the current policy: {selection.reason}")
        recommended = currents[name]
    else:
        item["status"] = "tuned"
        item["messages"].append(f"recommended: {work.candidates[index].label} ({selection.reason})")
        current_numbers, chosen = by_index[0]["validation"], by_index[index]["validation"]
        if current_numbers["cost"] > 0:
            item["messages"].append(
                f"validation: cost {chosen['cost']:.0f} vs {current_numbers['cost']:.0f} instance-minutes "
                f"({chosen['cost'] / current_numbers['cost'] - 1:+.1%}), SLO-violation minutes "
                f"{chosen['slo_violation_minutes']} vs {current_numbers['slo_violation_minutes']}, "
                f"scale actions {chosen['scale_actions']} vs {current_numbers['scale_actions']}")
        recommended = work.candidates[index].target
    if options.report:
        plot = f"pareto-{safe_name(name)}.png"
        report_files[plot] = pareto_png(name, target_rows, 0, index, work.scenario)
        item["plot"] = plot
    return recommended


def _write(spark: Any, options: TuneOptions, evidence: dict, recommended_targets: list[Any],
           report_files: dict[str, bytes]) -> None:
    """The recommended policy (checked as the engine would load it), the evidence and the report."""
    from scaling.domain.policy import Policy, load_policy_text, policy_to_dict

    if recommended_targets:
        policy = Policy(targets=tuple(recommended_targets))
        text = json.dumps(policy_to_dict(policy), indent=2) + "\n"
        load_policy_text(text, origin="the recommendation")  # never write a file the engine would refuse
        write_bytes(spark, options.out, text.encode("utf-8"))
    write_bytes(spark, evidence_path(options.out), (json.dumps(evidence, indent=1, default=str) + "\n").encode("utf-8"))
    if options.report:
        for file_name, data in report_files.items():
            write_bytes(spark, join_path(options.report, file_name), data)
        write_bytes(spark, join_path(options.report, "summary.md"), summary_markdown(evidence).encode("utf-8"))


def _evidence_numbers(row: dict | None) -> dict | None:
    if row is None:
        return None
    return {"label": row["label"], "train": row["train"], "validation": row["validation"], "folds": row["folds"]}



def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


# --- command line (shared by spark-submit and ``python -m scaling tune``) ---------------------------


def grid_sizes(grid: str) -> str:
    """How many candidates ``grid`` gives a target on the built-in defaults, counted from the grid
    itself (a number written into the help went stale as the grid grew)."""
    from scaling.simulation.drivers.candidates import rule_candidates, slo_candidates

    base = default_target("target", 32)
    slo, rules = len(slo_candidates(base, grid)), len(rule_candidates(base, grid))
    return f"{grid}: {slo} SLO-mode (the rule knobs among them) and {rules} rule candidates per target, {slo + rules} in all"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--history", required=True, help="Parquet history (directory or abfss:// URI)")
    parser.add_argument("--out", required=True, help="recommendations policy file (evidence goes to OUT.evidence.json)")
    parser.add_argument("--report", help="directory for the Pareto plots and summary.md")
    parser.add_argument("--grid", choices=GRIDS, default="large", help=f"candidate grid size ({grid_sizes('large')})")
    parser.add_argument("--master", help="Spark master (default: local[*] when run embedded; spark-submit's otherwise)")
    parser.add_argument("--policy", help="the current policy file: candidates start from it and it is the baseline")
    parser.add_argument("--train-fraction", type=float, default=0.4,
                        help="the first training block: this part of the history (the rest is cut into --folds validation blocks)")
    parser.add_argument("--folds", type=int, default=3,
                        help="out-of-time validation blocks after the first training block (each fold trains on all before it)")
    parser.add_argument("--target", action="append", default=[], help="only this target (repeatable)")
    parser.add_argument("--steady-minutes", type=int, default=None,
                        help="samples of unchanged capacity before a saturated interval counts (default: provisioning delay + 2)")
    parser.add_argument("--min-saturated-minutes", type=int, default=3,
                        help="saturated minutes needed to trust the throughput learned from history")
    parser.add_argument("--tasks-per-core", type=int, default=3, help="Spark tasks per core for the simulations")
    parser.add_argument("--now", help="the job's clock, ISO-8601 (default: the machine's): samples dated more than the "
                                      "tolerated clock skew after it are from the future and dropped")


def options_from(args: argparse.Namespace) -> TuneOptions:
    return TuneOptions(history=args.history, out=args.out, report=args.report, grid=args.grid, master=args.master,
                       policy=args.policy, train_fraction=args.train_fraction, folds=args.folds, targets=tuple(args.target),
                       steady_minutes=args.steady_minutes, min_saturated_minutes=args.min_saturated_minutes,
                       tasks_per_core=args.tasks_per_core, now=_moment(getattr(args, "now", None)))


def _moment(text: str | None) -> Any:
    if text is None:
        return None
    from scaling.domain.samples import SampleError, parse_time

    try:
        return parse_time(text, "--now")
    except SampleError as error:  # the message names the option
        raise TuneError(str(error)) from error


def run(args: argparse.Namespace, spark: Any = None) -> int:
    try:
        options = options_from(args)
    except TuneError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    own = spark is None
    try:
        if own:
            spark = build_session(options.master, options.app_name)
        evidence = run_job(spark, options)
    except TuneError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        if own and spark is not None and not os.environ.get("SCALING_KEEP_SPARK"):
            spark.stop()
    for message in evidence["messages"]:
        print(f"warning: {message}", file=sys.stderr)
    for name, item in evidence["targets"].items():
        recommended = item.get("recommended")
        print(f"{name}: {item['status']}" + (f" -> {recommended['label']}" if recommended else ""))
    simulation = evidence["simulation"]
    print(f"simulated {simulation['candidate_policy_minutes']:,} candidate-policy-minutes in {simulation['seconds']:.1f}s "
          f"({simulation['minutes_per_second']:,.0f}/s on {simulation['parallelism']} cores)")
    if not evidence["recommendations"]:
        print(f"error: no target could be tuned; no recommendations written (see {evidence_path(options.out)})", file=sys.stderr)
        return 1
    print(f"recommendations: {options.out} (evidence: {evidence_path(options.out)})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark-submit scaling/tuning/job.py", description=__doc__.splitlines()[0])
    configure(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
