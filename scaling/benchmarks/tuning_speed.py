"""``python -m scaling bench-tune``: how the tuning job scales with cores.

Generates (once, cached in ``--history``) a Parquet history of ``--days`` days for ``--targets``
targets with the simulator (real traces, different sizes and partition counts; capacity driven
by the KEDA-style peer, which is fast), then for ``local[1]`` and ``local[2]``:

- runs the DataFrame transforms over the whole history (seconds reported);
- simulates, through the Spark tasks of the job (``planning.simulate_all``), two sets of candidates
  for every target, one after the other, each in the job's batched simulators:
  - threshold-rule candidates (``--rule-grid``, by default 810 per target) on the last
    ``--rule-minutes`` minutes;
  - SLO-mode candidates, the project's default mode (``--grid``, by default the 810 of
    ``bench_slo_candidates``, and the current policy) on the last ``--sim-minutes`` minutes;
- reports candidate-policy-minutes per second for each set and combined (total minutes over
  total seconds), and the local[2]/local[1] ratios, with the load average.

With ``--against REF`` the same measurement also runs on REF, checked out into a temporary git
worktree: each tree in a process of its own (its own Spark session and package), the trees
taking turns master by master, and the rates of this tree over REF's are printed beside them
(before and after a change, in one run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from scaling.simulation.world.traces import PUBLIC_TRACES

TRACE_FILES = ("worldcup98/per_minute.csv", "nasa_jul95/per_minute.csv")
MASTERS = ("local[1]", "local[2]")


def target_specs(count: int) -> list[dict]:
    """Varied targets: traces, offsets, peak sizes and partition counts."""
    partitions = (32, 16, 8, 32, 24, 12, 32, 16)
    peaks = (24.0, 10.0, 6.0, 20.0, 16.0, 8.0, 12.0, 14.0)
    rates = (1000.0, 600.0, 400.0, 1500.0, 800.0, 500.0, 1200.0, 900.0)
    return [{"name": f"target-{index:02d}", "trace": TRACE_FILES[index % len(TRACE_FILES)], "offset": 1440 * (index // 2),
             "partitions": partitions[index % 8], "peak": peaks[index % 8], "mu": rates[index % 8]} for index in range(count)]


def generate_history(directory: Path, traces: Path, days: int, targets: int) -> dict:
    """Write the benchmark's history; returns what each target was made with."""
    import numpy as np

    from scaling.simulation.peers.looped import KedaHpa
    from scaling.simulation.world.loop import Scenario, load_trace, scale_trace, simulate
    from scaling.tuning.synthetic import observation_table, write_table

    minutes = days * 1440
    made = {}
    for spec in target_specs(targets):
        counts = load_trace(traces / spec["trace"])
        counts = np.tile(counts, int(np.ceil((minutes + spec["offset"]) / len(counts))))[spec["offset"]: spec["offset"] + minutes]
        scenario = Scenario(peak_instances=spec["peak"], partitions=spec["partitions"], events_per_instance_per_minute=spec["mu"])
        arrivals = scale_trace(counts, scenario)
        observations = []
        simulate(arrivals, KedaHpa(spec["mu"] / 2, spec["partitions"]), scenario,
                 on_minute=lambda minute, observation, wanted, keep=observations: keep.append(observation))
        write_table(observation_table(spec["name"], observations), str(directory))
        made[spec["name"]] = {**spec, "minutes": minutes}
    (directory / "_bench.json").write_text(json.dumps(made, indent=1))
    return made


def bench_rule_candidates(base, count: str = "bench") -> list:
    """The rule candidates the benchmark batches: the job's ``large`` rule grid, or a finer grid
    of thresholds x windows x scale-in cooldowns x scale-out steps (810 per target)."""
    import itertools
    from dataclasses import replace

    import numpy as np

    from scaling.domain.policy import Rule, Step
    from scaling.simulation.drivers.candidates import Candidate, rule_candidates

    if count != "bench":
        return rule_candidates(base, count)
    candidates = []
    for up, window, cooldown, step in itertools.product(np.geomspace(60.0, 8000.0, 30).round(1), (120, 300, 600),
                                                        (300, 600, 1200), ("50%", "100%", "+1")):
        rule = Rule(name="per-instance", metric="backlog_per_instance", aggregate="average", window_seconds=window,
                    min_samples=max(window // 120, 1), scale_up_above=float(up), scale_down_below=float(up) / 4,
                    scale_up_aggregate="latest", scale_down_aggregate="maximum")
        scale_up = Step(step=1, cooldown_seconds=0) if step == "+1" else Step(step_percent=float(step[:-1]), cooldown_seconds=0)
        target = replace(base, mode="rules", rules=(rule,), preset=None, scale_up=scale_up,
                         scale_down=Step(step=1, cooldown_seconds=cooldown))
        candidates.append(Candidate(f"rules backlog_per_instance>{up:g} window={window}s down-cooldown={cooldown}s up={step}",
                                    target))
    return candidates


#: The finer SLO-mode grid the benchmark batches: safety margins x headrooms x dwell times x
#: action budgets (810 candidates).
BENCH_SLO_GRID = {"safety_seconds": (30.0, 45.0, 60.0, 75.0, 90.0, 105.0, 120.0, 135.0, 150.0),
                  "headroom": (0.0, 0.025, 0.05, 0.1, 0.2),
                  "min_dwell_seconds": (600.0, 900.0, 1200.0, 1800.0, 2400.0, 3600.0),
                  "max_actions_per_hour": (2.0, 4.0, 8.0)}


def bench_slo_candidates(base, count: str = "bench") -> list:
    """The SLO-mode candidates the benchmark batches: the job's grids, or ``BENCH_SLO_GRID``."""
    from scaling.simulation.drivers.candidates import slo_candidates

    return slo_candidates(base, BENCH_SLO_GRID if count == "bench" else count)


def measure(master: str, history: str, grid: str, rule_grid: str, sim_minutes: int, rule_minutes: int, specs: dict,
            repeat: int = 1) -> dict:
    import os

    from scaling.simulation.drivers.candidates import Candidate
    from scaling.simulation.peers.looped import simulated_target
    from scaling.simulation.world.loop import Scenario
    from scaling.tuning.planning import plan_tasks, simulate_all
    from scaling.tuning.recovery import recover_histories
    from scaling.tuning.spark_io import build_session
    from scaling.tuning.tasks import CURRENT, HistoryScenario, TargetWork, batched
    from scaling.tuning.transforms import read_history_df

    spark = build_session(master, f"bench-tune-{master}", {"spark.ui.enabled": "false", "spark.driver.memory": "3g"})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        load_before = os.getloadavg()
        started = time.perf_counter()
        print(f"{master}: transforms over the history...", file=sys.stderr, flush=True)
        histories, _ = recover_histories(spark, read_history_df(spark, history), steady_samples=4)
        transform_seconds = time.perf_counter() - started
        slo_works, rule_works = {}, {}
        recovered = {}
        for item in histories:
            spec = specs[item.target]
            mu = item.throughput_per_minute or spec["mu"]
            recovered[item.target] = {"true": spec["mu"], "recovered": item.throughput_per_minute,
                                      "saturated_minutes": item.saturated_minutes}
            scenario = HistoryScenario(partitions=item.partitions, events_per_instance_per_minute=mu,
                                       initial_capacity=item.initial_capacity, weights=tuple(item.weights))
            base = simulated_target(Scenario(partitions=item.partitions), name=item.target)
            # The SLO-mode candidates: the current policy and the SLO grid.
            series = item.arrivals[-sim_minutes:]
            candidates = (Candidate(CURRENT, base), *bench_slo_candidates(base, grid))
            slo_works[item.target] = TargetWork(item.target, series, scenario, int(len(series) * 0.6), candidates)
            # The batched rule candidates.
            series = item.arrivals[-rule_minutes:]
            candidates = tuple(bench_rule_candidates(base, rule_grid))
            rule_works[item.target] = TargetWork(item.target, series, scenario, int(len(series) * 0.6), candidates)
            for work in (rule_works[item.target], slo_works[item.target]):
                assert all(batched(work, index) for index in range(len(work.candidates)))
        print(f"{master}: transforms took {transform_seconds:.0f}s; simulating...", file=sys.stderr, flush=True)
        simulate_all(spark, {name: _first(work) for name, work in list(slo_works.items())[:1]})  # warm the workers up
        simulate_all(spark, {name: _first(work) for name, work in list(rule_works.items())[:1]})
        runs = {}
        for kind, works in (("rules_batched", rule_works), ("slo_batched", slo_works)):
            load = os.getloadavg()[0]
            # The fastest of ``repeat`` runs: other work on the machine only ever slows a run down.
            attempts = []
            for attempt in range(repeat):
                rows, seconds = simulate_all(spark, works)
                attempts.append((seconds, rows))
                print(f"{master}: {kind}: run {attempt + 1} of {repeat}: {seconds:.1f}s", file=sys.stderr, flush=True)
            seconds, rows = min(attempts, key=lambda attempt: attempt[0])
            minutes = sum(row["simulated_minutes"] for row in rows)
            task_seconds = sum(row["seconds"] for row in rows)
            runs[kind] = {"targets": len(works), "candidates": len(rows), "tasks": len(plan_tasks(
                              works, spark.sparkContext.defaultParallelism, 3)),
                          "minutes_per_candidate": len(next(iter(works.values())).arrivals),
                          "candidate_policy_minutes": minutes, "simulation_seconds": round(seconds, 2),
                          "candidate_policy_minutes_per_second": round(minutes / seconds, 1),
                          # Busy seconds of the simulating tasks over wall time: how many ran at once.
                          "task_seconds": round(task_seconds, 2), "concurrency": round(task_seconds / seconds, 2),
                          "per_task_minutes_per_second": round(minutes / task_seconds, 1), "load_average_before": load,
                          "all_runs_seconds": [round(attempt[0], 2) for attempt in attempts]}
            print(f"{master}: {kind}: {minutes:,} candidate-policy-minutes in {seconds:.1f}s", file=sys.stderr, flush=True)
        minutes = sum(run["candidate_policy_minutes"] for run in runs.values())
        seconds = sum(run["simulation_seconds"] for run in runs.values())
        runs["combined"] = {"candidate_policy_minutes": minutes, "simulation_seconds": round(seconds, 2),
                            "candidate_policy_minutes_per_second": round(minutes / seconds, 1)}
        return {"master": master, "cores": spark.sparkContext.defaultParallelism, "targets": len(rule_works),
                "history_minutes": int(sum(len(h.arrivals) for h in histories)),
                "transform_seconds": round(transform_seconds, 2), "runs": runs, "throughput": recovered,
                "load_average_before": [round(x, 2) for x in load_before],
                "load_average_after": [round(x, 2) for x in os.getloadavg()]}
    finally:
        spark.stop()


def _first(work):
    from dataclasses import replace

    return replace(work, arrivals=work.arrivals[:120], split=60, candidates=work.candidates[:2])


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--history", default="out/bench-tune/history", help="history dataset (generated if absent)")
    parser.add_argument("--traces", default=str(PUBLIC_TRACES), help="folder of the real traces (default: data/traces)")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--targets", type=int, default=8)
    parser.add_argument("--grid", default="bench", choices=("bench", "small", "medium", "large"),
                        help="SLO-mode candidates: the job's grids or the finer bench grid (810 per target)")
    parser.add_argument("--rule-grid", default="bench", choices=("bench", "small", "medium", "large"),
                        help="rule candidates (batched): the job's grids or the finer bench grid (810 per target)")
    parser.add_argument("--sim-minutes", type=int, default=2880,
                        help="minutes of each target's series simulated per SLO-mode candidate")
    parser.add_argument("--rule-minutes", type=int, default=2880,
                        help="minutes of each target's series simulated per batched rule candidate")
    parser.add_argument("--repeat", type=int, default=3,
                        help="simulate each set this many times per master and keep the fastest run (default 3)")
    parser.add_argument("--against", metavar="REF",
                        help="also measure this git ref (a temporary worktree), the trees taking turns, and print the ratios")
    parser.add_argument("--json", help="write the measurements here")


#: What a tree's process runs for ``--against``: that tree's own ``measure`` for one master,
#: its result as JSON on the last line of its output.
WORKER = r"""
import json, sys
try:
    from scaling.benchmarks.tuning_speed import measure
except ImportError:  # a tree from before the benchmarks package
    from scaling.tuning.bench import measure
print(json.dumps(measure(*json.loads(sys.argv[1]))))
"""

KINDS = ("rules_batched", "slo_batched", "combined")


def measure_in(tree: Path, arguments: list) -> dict:
    """``measure(*arguments)`` as the code in ``tree`` does it, in a process of its own."""
    completed = subprocess.run([sys.executable, "-c", WORKER, json.dumps(arguments)], cwd=tree, stdout=subprocess.PIPE,
                               text=True, env={**os.environ, "PYTHONPATH": str(tree)})
    lines = completed.stdout.strip().splitlines()
    if completed.returncode or not lines:
        raise SystemExit(f"error: bench-tune's measurement on {tree} failed (its error is above)")
    return json.loads(lines[-1])


def ratios_between(numerators: dict, denominators: dict) -> dict[str, float]:
    """Per kind, the rate in the first results over the rate in the second (``local[2]`` over
    ``local[1]`` of one tree, or this tree over REF on one master)."""
    return {kind: round(numerators["runs"][kind]["candidate_policy_minutes_per_second"]
                        / denominators["runs"][kind]["candidate_policy_minutes_per_second"], 3) for kind in KINDS}


def run(args: argparse.Namespace) -> int:
    from scaling.benchmarks.engine_speed import trees_to_compare

    history = Path(args.history).resolve()
    started = time.perf_counter()
    marker = history / "_bench.json"
    if marker.exists():
        specs = json.loads(marker.read_text())
        print(f"reusing the history in {history}", file=sys.stderr)
    else:
        traces = Path(args.traces)
        if not (traces / TRACE_FILES[0]).exists():
            print(f"error: traces not found under {traces} (--traces)", file=sys.stderr)
            return 2
        history.mkdir(parents=True, exist_ok=True)
        specs = generate_history(history, traces, args.days, args.targets)
        print(f"generated {args.days} days of history for {args.targets} targets in {time.perf_counter() - started:.0f}s",
              file=sys.stderr)

    def arguments(master: str) -> list:
        return [master, str(history), args.grid, args.rule_grid, args.sim_minutes, args.rule_minutes, specs, args.repeat]

    here = Path(__file__).resolve().parents[2]
    with trees_to_compare(here, args.against, "bench-tune-") as trees:
        if not args.against:
            by_tree = {trees[0][0]: [measure(*arguments(master)) for master in MASTERS]}
        else:  # every tree in its own process, taking turns master by master
            by_tree = {label: [] for label, _ in trees}
            for master in MASTERS:
                for label, tree in trees:
                    by_tree[label].append(measure_in(tree, arguments(master)))
    settings = {"days": args.days, "targets": args.targets, "grid": args.grid, "rule_grid": args.rule_grid, "repeat": args.repeat,
                "sim_minutes": args.sim_minutes, "rule_minutes": args.rule_minutes,
                "goals": {"ratio": 1.8, "candidate_policy_minutes_per_second": 1_000_000}}
    summaries = {label: {**settings, "runs": results, "ratio_local2_over_local1": ratios_between(results[1], results[0])}
                 for label, results in by_tree.items()}
    for label, each in summaries.items():
        if len(summaries) > 1:
            print(f"{label}:")
        _print_summary(each)
    summary = next(iter(summaries.values()))  # this tree's
    if len(summaries) > 1:
        (mine, theirs) = by_tree.values()
        versus = {master: ratios_between(one, other) for master, one, other in zip(MASTERS, mine, theirs, strict=True)}
        summary = {**summary, "against": {"ref": args.against, **summaries[list(summaries)[1]]}, "this_over_against": versus}
        for master, ratios in versus.items():
            print(f"this tree / {args.against} on {master}: " + ", ".join(f"{kind} {ratio:.3f}" for kind, ratio in ratios.items()))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0


def _print_summary(summary: dict) -> None:
    ratios = summary["ratio_local2_over_local1"]
    for result in summary["runs"]:
        print(f"{result['master']}: transforms {result['transform_seconds']}s over {result['history_minutes']:,} target-minutes "
              f"(load average before {result['load_average_before']}, after {result['load_average_after']})")
        for kind in KINDS:
            run_ = result["runs"][kind]
            extra = (f" (fastest of runs {run_['all_runs_seconds']}s; tasks busy {run_['task_seconds']}s: concurrency "
                     f"{run_['concurrency']}, {run_['per_task_minutes_per_second']:,.0f}/s per busy task)") if "task_seconds" in run_ else ""
            print(f"  {kind}: {run_['candidate_policy_minutes']:,} candidate-policy-minutes in {run_['simulation_seconds']}s = "
                  f"{run_['candidate_policy_minutes_per_second']:,.0f}/s{extra}")
    for kind in KINDS:
        best = max(r["runs"][kind]["candidate_policy_minutes_per_second"] for r in summary["runs"])
        print(f"{kind}: ratio local[2]/local[1] {ratios[kind]:.2f} (goal 1.8); best rate {best:,.0f}/s (goal 1,000,000/s)")
