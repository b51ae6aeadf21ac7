"""``python -m scaling stress``: the project's default policy in the stress cells of docs/stress.md, beside
the clairvoyant reference, in one run.

The benchmark (``benchmark.py``) runs every peer in the named scenarios; this command asks a narrower
question over more worlds: does ``project-default`` meet the SLO, cost no more than the clairvoyant's
best, and act at most once per ``MIN_MINUTES_PER_ACTION`` minutes, with uneven partitions (each
``skew`` under each ``assignment``) and in ``realistic`` for several seeds (one seed's draws of
failures and delays are too few to judge a tail by). The standard scenario is the first cell, the
baseline the others are read against. Every simulation is the benchmark's own job (``run_unit``),
so a cell's numbers are the ones ``benchmark`` gives with the same scenario flags.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scaling.benchmarks.jobs import CLAIRVOYANT_HORIZONS, Job
from scaling.benchmarks.pool import print_progress, run_jobs
from scaling.simulation.world.judges import judged_meets_slo
from scaling.simulation.world.scenario import ASSIGNMENTS, Scenario
from scaling.simulation.world.traces import existing_trace

#: The stress cells (docs/stress.md): skews under both load balancers, and realistic seeds.
SKEWS = (0.02, 0.03, 0.05)
SEEDS = (1, 2, 3)
#: The action goal (docs/stress.md): at least this many minutes per scale action on average.
MIN_MINUTES_PER_ACTION = 30.0


@dataclass(frozen=True, slots=True)
class Cell:
    """One simulated world: a named scenario of docs/benchmark-contract.md and the fields set on it."""

    scenario: str
    overrides: tuple = ()

    @property
    def label(self) -> str:
        return " ".join([self.scenario, *(f"{name}={value}" for name, value in self.overrides)])


def cells(skews: Sequence[float] = SKEWS, assignments: Sequence[str] = ASSIGNMENTS,
          seeds: Sequence[int] = SEEDS) -> list[Cell]:
    """The standard scenario, then each skew under each assignment, then realistic per seed (a
    value given twice is one cell)."""
    return list(dict.fromkeys(
        [Cell("standard")]
        + [Cell("standard", (("skew", skew), ("assignment", assignment))) for skew in skews for assignment in assignments]
        + [Cell("realistic", (("seed", seed),)) for seed in seeds]))


def jobs_for(trace: str, cell: Cell) -> list[Job]:
    """The default policy and every clairvoyant horizon in one cell."""
    jobs = [Job(trace, "project-default", "default", weight=3.0)]
    jobs += [Job(trace, "clairvoyant", f"h={value}", value, weight=0.5) for value in CLAIRVOYANT_HORIZONS]
    return [Job(job.trace, job.algorithm, job.knob, job.value, weight=job.weight, scenario=cell.scenario,
                overrides=cell.overrides) for job in jobs]


@dataclass(frozen=True, slots=True)
class Outcome:
    """The default's numbers in one cell and trace, against the clairvoyant's best there (``None``:
    no horizon meets the SLO), and which of the goals of docs/stress.md hold."""

    cell: str
    trace: str
    default: dict
    clairvoyant: dict | None

    @property
    def meets_slo(self) -> bool:
        return judged_meets_slo(self.default)

    @property
    def versus_clairvoyant(self) -> float | None:
        return None if self.clairvoyant is None else self.default["cost_ratio"] / self.clairvoyant["cost_ratio"]

    @property
    def minutes_per_action(self) -> float:
        actions = self.default["scale_actions"]
        return self.default["minutes"] / actions if actions else float("inf")

    @property
    def goals(self) -> dict[str, bool | None]:
        """SLO met; at most the clairvoyant's best (``None`` when no horizon meets the SLO); enough
        minutes per action."""
        versus = self.versus_clairvoyant
        return {"slo": self.meets_slo, "clairvoyant": None if versus is None else versus <= 1.0,
                "actions": self.minutes_per_action >= MIN_MINUTES_PER_ACTION}


def outcomes(rows: Sequence[dict]) -> list[Outcome]:
    """Per cell and trace (in the rows' order), the default's row and the clairvoyant's cheapest
    horizon that meets the SLO (ties: fewer actions)."""
    keys = list(dict.fromkeys((row["cell"], row["trace"]) for row in rows))
    found = []
    for cell, trace in keys:
        mine = [row for row in rows if (row["cell"], row["trace"]) == (cell, trace)]
        default = next((row for row in mine if row["algorithm"] == "project-default"), None)
        if default is None:
            continue
        meeting = [row for row in mine if row["algorithm"] == "clairvoyant" and judged_meets_slo(row)]
        best = min(meeting, key=lambda row: (row["cost_ratio"], row["scale_actions"])) if meeting else None
        found.append(Outcome(cell, trace, default, best))
    return found


def _mark(goal: bool | None) -> str:
    return "–" if goal is None else ("yes" if goal else "**no**")


def table(found: Sequence[Outcome]) -> str:
    """Markdown: per trace, one line per cell, and a line over the realistic seeds."""
    lines = []
    for trace in dict.fromkeys(outcome.trace for outcome in found):
        mine = [outcome for outcome in found if outcome.trace == trace]
        lines += [f"### {trace}", "",
                  "| cell | cost / fluid bound | clairvoyant's best | cost / clairvoyant | SLO-violation min | max age (min) "
                  "| min per action | meets SLO | <= clairvoyant | >= 30 min/action |",
                  "|---|---:|---:|---:|---:|---:|---:|:-:|:-:|:-:|"]
        for outcome in mine:
            row, reference, goals = outcome.default, outcome.clairvoyant, outcome.goals
            versus = (f"{reference['cost_ratio']:.3f} ({reference['knob']}) | {outcome.versus_clairvoyant:.3f}" if reference
                      else "none meets the SLO | –")
            lines.append(f"| {outcome.cell} | {row['cost_ratio']:.3f} | {versus} | {row['slo_violation_minutes']} | "
                         f"{row['max_age_minutes']:.2f} | {outcome.minutes_per_action:.1f} | {_mark(goals['slo'])} | "
                         f"{_mark(goals['clairvoyant'])} | {_mark(goals['actions'])} |")
        seeded = [outcome for outcome in mine if outcome.cell.startswith("realistic")]
        if len(seeded) > 1:
            mean = sum(outcome.default["cost_ratio"] for outcome in seeded) / len(seeded)
            lines += ["", f"realistic over {len(seeded)} seeds: mean cost / fluid bound {mean:.3f}, "
                      f"{sum(outcome.default['slo_violation_minutes'] for outcome in seeded)} SLO-violation minutes in all, "
                      f"worst max age {max(outcome.default['max_age_minutes'] for outcome in seeded):.2f} min, "
                      f"fewest minutes per action {min(outcome.minutes_per_action for outcome in seeded):.1f}."]
        lines.append("")
    return "\n".join(lines)


def _numbers(kind, choices: Sequence | None = None):
    def parse(text: str) -> tuple:
        try:
            values = tuple(kind(part.strip()) for part in text.split(",") if part.strip())
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"not a list of {kind.__name__} values: {text!r}") from error
        if not values:
            raise argparse.ArgumentTypeError("expected at least one value")
        wrong = [value for value in values if choices is not None and value not in choices]
        if wrong:
            raise argparse.ArgumentTypeError(f"{', '.join(map(str, wrong))} not among {', '.join(choices)}")
        return values
    return parse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", action="append", required=True, type=existing_trace, help="per-minute trace CSV (repeatable)")
    parser.add_argument("--json", required=True, help="where to write the JSON rows (every run, with its cell)")
    parser.add_argument("--markdown", help="also write the table (with how to regenerate it) to this file")
    parser.add_argument("--skews", type=_numbers(float), default=SKEWS, help="comma-separated skews (default: 0.02,0.03,0.05)")
    parser.add_argument("--assignments", type=_numbers(str, ASSIGNMENTS), default=ASSIGNMENTS,
                        help="comma-separated load balancers for the skew cells (default: modulo,balanced)")
    parser.add_argument("--seeds", type=_numbers(int), default=SEEDS, help="comma-separated realistic seeds (default: 1,2,3)")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("--set", choices=("cells", "trouble"), default="cells", dest="stress_set",
                        help="cells: the skews and realistic seeds beside the clairvoyant (default); trouble: "
                             "consumers that misbehave, beside the lag peers (trouble.py)")
    parser.add_argument("--trouble-seed", type=int, default=1, help="trouble: the seed that draws the cases (default 1)")
    parser.add_argument("--per-kind", type=int, default=2, help="trouble: cases of each kind (default 2)")


def run_trouble(args: argparse.Namespace) -> int:
    """The ``trouble`` set: each case's cut written next to the JSON, the lag peers' sweeps run
    as benchmark jobs, the default through the batched SLO simulator (the engine's decisions)
    for its series; the table, and a non-zero status when a case's goals do not hold."""
    from scaling.benchmarks import trouble
    from scaling.benchmarks.family import load_arrivals
    from scaling.simulation.drivers.batched_slo import simulate_slo_batch
    from scaling.simulation.peers.looped import simulated_target
    from scaling.simulation.world.loop import scale_trace

    started = time.perf_counter()
    counts = {trace: load_arrivals(trace) for trace in args.trace}
    chosen = trouble.cases(args.trace, {trace: len(values) for trace, values in counts.items()}, args.trouble_seed,
                           args.per_kind)
    folder = Path(args.json).parent / "trouble-traces"
    paths = [trouble.write_cut(case, counts[case.trace], folder) for case in chosen]
    jobs = [job for case, path in zip(chosen, paths, strict=True) for job in trouble.peer_jobs(path, case)]
    peer_rows = run_jobs(jobs, args.workers, print_progress)
    print(file=sys.stderr)
    judged, rows = [], []
    for case, path in zip(chosen, paths, strict=True):
        scenario = Scenario.named("standard", **dict(case.overrides))
        arrivals = scale_trace(load_arrivals(path), scenario)
        target = simulated_target(scenario, name="default")
        result = simulate_slo_batch(arrivals, [target], scenario, algorithm="project-default", knobs=["default"])[0]
        default = {"trace": path, "cell": case.label, "algorithm": "project-default", "knob": "default",
                   "cost_ratio": round(result.cost_ratio, 4), "slo_violation_minutes": result.slo_violation_minutes,
                   "max_age_minutes": round(result.max_age_minutes, 3), "scale_actions": result.scale_actions,
                   "minutes": result.minutes, "meets_slo": result.meets_slo(scenario)}
        found = trouble.audit(result, scenario, target.bounds.max_instances, target.bounds.min_instances, case.trouble_ends)
        mine = [row for job, row in peer_rows if job.trace == path]
        judged.append(trouble.judge(case, default, found, mine))
        rows += [default, *({**row, "cell": case.label} for row in mine)]
    elapsed = time.perf_counter() - started
    Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    text = trouble.table(judged)
    print(text)
    print(f"trouble: {len(judged)} cases, {len(rows)} runs in {elapsed:.0f}s; {sum(item.holds for item in judged)} hold")
    if args.markdown:
        named = " ".join(f"--trace $(TRACES)/{Path(trace).parent.name}/{Path(trace).name}" for trace in args.trace)
        command = (f"python -m scaling stress --set trouble {named} "
                   f"--json {args.json} --markdown {args.markdown} --trouble-seed {args.trouble_seed} --per-kind {args.per_kind}")
        Path(args.markdown).write_text(
            "# Trouble: consumers that misbehave\n\n"
            "Generated by a command, not typed: regenerate with `make stress`, i.e.\n\n"
            f"```\n{command}\n```\n\n"
            "project-default beside the lag peers' sweeps (KEDA, the Functions target) in each case's world "
            "(scaling/benchmarks/trouble.py says how a case is drawn and judged). Costs are ratios to the fluid lower "
            "bound; viol is SLO-violation minutes; max age in minutes (SLO 5).\n\n"
            f"{text}\n\nWall time: {elapsed:.0f}s.\n", encoding="utf-8")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.stress_set == "trouble":
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        return run_trouble(args)
    started = time.perf_counter()
    chosen = cells(args.skews, args.assignments, args.seeds)
    for cell in chosen:
        try:
            Scenario.named(cell.scenario, **dict(cell.overrides))  # a bad value fails here, before any worker starts
        except ValueError as error:
            raise SystemExit(f"error: {cell.label}: {error}") from error
    jobs = [job for cell in chosen for trace in args.trace for job in jobs_for(trace, cell)]
    rows = [{**row, "cell": Cell(job.scenario, job.overrides).label} for job, row in run_jobs(jobs, args.workers, print_progress)]
    print(file=sys.stderr)
    order = {cell.label: index for index, cell in enumerate(chosen)}
    rows.sort(key=lambda row: (row["trace"], order[row["cell"]], row["algorithm"] != "project-default", row["knob"]))
    elapsed = time.perf_counter() - started
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    text = table(outcomes(rows))
    print(text)
    print(f"stress: {len(rows)} runs in {elapsed:.0f}s")
    if args.markdown:
        command = ("python -m scaling stress " + " ".join(f"--trace {trace}" for trace in args.trace)
                   + f" --json {args.json} --markdown {args.markdown}"
                   + (f" --skews {','.join(map(str, args.skews))}" if tuple(args.skews) != SKEWS else "")
                   + (f" --assignments {','.join(args.assignments)}" if tuple(args.assignments) != ASSIGNMENTS else "")
                   + (f" --seeds {','.join(map(str, args.seeds))}" if tuple(args.seeds) != SEEDS else ""))
        Path(args.markdown).write_text(
            "# Stress cells\n\n"
            "Generated by a command, not typed: regenerate with `make stress`, i.e.\n\n"
            f"```\n{command}\n```\n\n"
            "project-default in the stress worlds, beside the clairvoyant reference's cheapest horizon that meets "
            "the SLO in the same world: the standard scenario of docs/benchmark-contract.md, then each `skew` under each "
            "`assignment` (`modulo`: partition p by instance p mod n; `balanced`: the processor's load balancer), then "
            "`realistic` per seed. The goals: meet the SLO (at most 0.1% of minutes in violation), cost at most the "
            "clairvoyant's best (`–` where no horizon meets the SLO), at least 30 minutes per scale action. Costs are "
            "ratios to the fluid lower bound. All runs are in the JSON file.\n\n"
            f"{text}\n\nWall time: {elapsed:.0f}s for {len(rows)} runs.\n",
            encoding="utf-8")
    return 0
