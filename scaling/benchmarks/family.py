"""The benchmark's ``family`` set: every member of the trace family (trace_family.py) in every
scenario, every algorithm, and the tables per shape and per noise level.

the benchmark (``jobs.py``, ``runs.py``) calls in here at three points only: ``load_arrivals`` (a family member is
generated, a file is read), ``keeps`` (which of a member's jobs run: each peer's sweep cut to
``FAMILY_SWEEPS``) and, through family_cli.py, ``family_markdown``/``readme_summary`` (the tables). A member's rows are
the benchmark's ordinary rows with ``trace`` = ``family/NAME``.

Why the family's sweeps are shorter than the public traces' (``FAMILY_SWEEPS``): 30 members in
two scenarios are 15 times the public traces' work, and ``make benchmark`` must stay a run one waits for. Once
a trace is scaled to the standard peak a peer's best setting moves little from trace to trace,
so each peer keeps its documented default (the setting a user gets) and the region of its best
settings on the public traces with one value beyond it either side; ``sweep_edges`` counts, in
the generated tables, the members whose best setting sits at an edge of the cut sweep. The
public traces keep the full sweeps of docs/benchmark-contract.md.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from scaling.simulation.peers.flink import sweep as flink_sweep
from scaling.simulation.world import trace_family
from scaling.simulation.world.judges import JUDGE_TEXT, judged_violation_minutes, table_judge

#: Per algorithm, the knob values the family runs (``Job.value``; azure-monitor: (threshold, step)).
#: Documented defaults: KEDA's ``unprocessedEventThreshold`` 64, the Functions extension's
#: ``maxEventBatchSize`` 100. The seed rule runs at its own threshold, 1000, only: on the public
#: traces no value meets the SLO in standard, and 1000 is its one best in realistic.
FAMILY_SWEEPS: dict[str, tuple] = {
    "keda-hpa": (64.0, 200.0, 400.0, 1000.0),
    "functions-target": (100.0, 200.0, 400.0, 1000.0),
    "azure-monitor": ((200.0, 1), (200.0, 4)),
    "seed": (1000.0,),
    "clairvoyant": (1.0, 3.0, 5.0),
    # The Flink operator's autoscaler: its documented defaults and its best settings on the public
    # traces (standard and realistic), with the utilization target one step below the best.
    "flink": tuple(float(index) for index, settings in enumerate(flink_sweep()) if settings.label in (
        "target=0.7 window=15m catch-up=30m scale-down=60m", "target=0.7 window=15m catch-up=30m scale-down=0m",
        "target=0.9 window=5m catch-up=30m scale-down=0m", "target=0.8 window=5m catch-up=30m scale-down=0m",
        "target=0.9 window=5m catch-up=30m scale-down=30m")),
}
#: The scenarios in which ``project-tuned`` runs on the family: every one with a history to tune on
#: (``cold`` has none). Its tuning (every candidate of the job's grid on the first 30%, then the
#: stress replays) is the largest share of the family's work in ``realistic``, but a target whose
#: own history shows bursts the default cannot catch is what the tuner is for: the
#: realistic family is where that shows.
TUNED_SCENARIOS = ("standard", "realistic")

#: Algorithms of one setting: their cost counts in the tables whether or not it meets the SLO.
ONE_SETTING = ("project-default", "project-tuned", "project-forecast", "perfect-lookahead", "perfect-lookahead-30")
#: The shapes' and noise levels' order in the tables.
SHAPES = tuple(trace_family.SHAPES)
ALGORITHM_ORDER = ("project-default", "project-forecast", "perfect-lookahead", "perfect-lookahead-30", "project-tuned",
                   "clairvoyant", "keda-hpa", "functions-target", "azure-monitor", "seed")


def family_traces(shapes: Sequence[str] | None = None, seeds: Sequence[int] = trace_family.SEEDS) -> list[str]:
    """The family's benchmark traces: ``family/NAME`` for every member."""
    return [trace_family.FAMILY_PREFIX + name for name in trace_family.family_names(tuple(shapes) if shapes else None,
                                                                                      tuple(seeds))]


def load_arrivals(trace: str) -> np.ndarray:
    """A benchmark trace's arrivals per minute: a family member is generated, a path is read."""
    from scaling.simulation.world.loop import load_trace

    if trace_family.is_member(trace):
        return trace_family.arrivals(trace)
    return load_trace(trace)


def trace_label(trace: str) -> str:
    """How rows name a trace: ``family/NAME`` for a member, ``folder/file.csv`` for a path."""
    if trace_family.is_member(trace):
        return trace
    return Path(trace).parent.name + "/" + Path(trace).name


def keeps(job) -> bool:
    """Whether a job of the full sweep (``benchmark.jobs_for``) runs on a family member: the
    algorithms of ``FAMILY_SWEEPS`` at its values only, ``project-tuned`` in ``TUNED_SCENARIOS``
    only, every other algorithm whole."""
    if job.algorithm == "project-tuned":
        return job.scenario in TUNED_SCENARIOS
    values = FAMILY_SWEEPS.get(job.algorithm)
    if values is None:
        return True
    return (job.value, job.step) in values if job.algorithm == "azure-monitor" else job.value in values


def is_family_row(row: dict) -> bool:
    return trace_family.is_member(row["trace"])


# --- the tables ---------------------------------------------------------------------------------


def member_figures(rows: Sequence[dict]) -> dict[tuple[str, str, str], dict]:
    """Per (scenario, member, algorithm): the best row's figures (the cheapest setting that meets
    the SLO; ``mark_best`` must have run); when no setting meets it, an algorithm of one setting
    (the project's) still has its figures, a swept one only the closest setting's violation
    minutes. ``versus`` is the cost over the clairvoyant's best on the same member and scenario
    (``None`` when the clairvoyant meets the SLO with no setting there)."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for row in rows:
        if is_family_row(row):
            groups.setdefault((row.get("scenario", "standard"), row["trace"], row["algorithm"]), []).append(row)
    figures = {}
    for key, group in groups.items():
        best = next((row for row in group if row["best"]), None)
        if best is None and key[2] in ONE_SETTING:  # its figures, SLO missed or not
            only = group[0]
            figures[key] = {"meets": False, "cost_ratio": only["cost_ratio"], "violation_minutes": judged_violation_minutes(only),
                            "whole_hub_minutes": only["slo_violation_minutes"],
                            "minutes_per_action": only["minutes"] / only["scale_actions"] if only["scale_actions"] else float("inf"),
                            "knob": only["knob"]}
        elif best is None:
            closest = min(group, key=judged_violation_minutes)
            figures[key] = {"meets": False, "cost_ratio": None, "violation_minutes": judged_violation_minutes(closest),
                            "whole_hub_minutes": closest["slo_violation_minutes"],
                            "minutes_per_action": None, "knob": closest["knob"]}
        else:
            figures[key] = {"meets": True, "cost_ratio": best["cost_ratio"], "violation_minutes": judged_violation_minutes(best),
                            "whole_hub_minutes": best["slo_violation_minutes"],
                            "minutes_per_action": best["minutes"] / best["scale_actions"] if best["scale_actions"] else float("inf"),
                            "knob": best["knob"]}
    for (scenario, trace, _), figure in figures.items():
        reference = figures.get((scenario, trace, "clairvoyant"))
        figure["versus"] = (figure["cost_ratio"] / reference["cost_ratio"]
                            if figure["cost_ratio"] is not None and reference and reference["meets"] else None)
    return figures


def group_figures(figures: dict[tuple[str, str, str], dict], scenario: str, algorithm: str,
                  members: Sequence[str]) -> dict:
    """One table row's numbers over ``members``: how many meet the SLO, median and worst cost over
    the clairvoyant (members where both meet it) and over the fluid bound, violation minutes
    (summed, and the worst member's), minutes per action (median and least)."""
    found = [figures[(scenario, member, algorithm)] for member in members if (scenario, member, algorithm) in figures]
    versus = [figure["versus"] for figure in found if figure["versus"] is not None]
    ratios = [figure["cost_ratio"] for figure in found if figure["cost_ratio"] is not None]
    per_action = [figure["minutes_per_action"] for figure in found if figure["minutes_per_action"] is not None]
    violations = [figure["violation_minutes"] for figure in found]
    return {
        "members": len(found),
        "meeting": sum(figure["meets"] for figure in found),
        "median_versus": statistics.median(versus) if versus else None,
        "worst_versus": max(versus) if versus else None,
        "compared": len(versus),
        "median_ratio": statistics.median(ratios) if ratios else None,
        "worst_ratio": max(ratios) if ratios else None,
        "violation_minutes": sum(violations),
        "whole_hub_minutes": sum(figure.get("whole_hub_minutes", figure["violation_minutes"]) for figure in found),
        "worst_violation_minutes": max(violations) if violations else None,
        "median_minutes_per_action": statistics.median(per_action) if per_action else None,
        "least_minutes_per_action": min(per_action) if per_action else None,
    }


def _number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    return "∞" if value == float("inf") else f"{value:.{digits}f}"


TABLE_HEADER = ("| {group} | algorithm | meets SLO | cost / clairvoyant: median | worst | cost / fluid bound: median | worst |"
                " violation min (judged): total | worst | whole-hub violation min: total | min per action: median | least |")
TABLE_RULE = "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"


def _table(figures: dict, scenario: str, group_name: str, groups: Sequence[tuple[str, Sequence[str]]],
           algorithms: Sequence[str]) -> list[str]:
    lines = [TABLE_HEADER.format(group=group_name), TABLE_RULE]
    for label, members in groups:
        for algorithm in algorithms:
            numbers = group_figures(figures, scenario, algorithm, members)
            if not numbers["members"]:
                continue
            compared = "" if numbers["compared"] in (0, numbers["members"]) else f" ({numbers['compared']})"
            lines.append(
                f"| {label} | {algorithm} | {numbers['meeting']}/{numbers['members']} | "
                f"{_number(numbers['median_versus'])}{compared} | {_number(numbers['worst_versus'])} | "
                f"{_number(numbers['median_ratio'])} | {_number(numbers['worst_ratio'])} | {numbers['violation_minutes']} | "
                f"{numbers['worst_violation_minutes']} | {numbers['whole_hub_minutes']} | "
                f"{_number(numbers['median_minutes_per_action'], 1)} | "
                f"{_number(numbers['least_minutes_per_action'], 1)} |")
    return lines


def _members_by(rows: Sequence[dict], scenario: str, key: Callable[[str], str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for trace in sorted({row["trace"] for row in rows if is_family_row(row) and row.get("scenario", "standard") == scenario}):
        groups.setdefault(key(trace), []).append(trace)
    return groups


def _shape(trace: str) -> str:
    return trace_family.parse_name(trace)[0]


def _noise(trace: str) -> str:
    return f"{round(trace_family.parse_name(trace)[2] * 100)}%"


def _scenarios(rows: Sequence[dict]) -> list[str]:
    return sorted({row.get("scenario", "standard") for row in rows if is_family_row(row)},
                  key=lambda name: (name != "standard", name))


def _algorithms(rows: Sequence[dict]) -> list[str]:
    present = {row["algorithm"] for row in rows if is_family_row(row)}
    return [name for name in ALGORITHM_ORDER if name in present] + sorted(present - set(ALGORITHM_ORDER))


def family_markdown(rows: Sequence[dict]) -> str:
    """docs/benchmark.md's family section: per scenario, the whole family, then per shape and per
    noise level, every algorithm; then every member's cost over the clairvoyant side by side."""
    figures = member_figures(rows)
    algorithms = _algorithms(rows)
    lines = []
    for scenario in _scenarios(rows):
        by_shape = _members_by(rows, scenario, _shape)
        by_noise = _members_by(rows, scenario, _noise)
        members = [member for group in by_shape.values() for member in group]
        mine = [row for row in rows if is_family_row(row) and row.get("scenario", "standard") == scenario]
        lines += [f"### The family ({scenario})", "",
                  f"{len(members)} members. Each algorithm at its cheapest setting that meets the SLO on each member "
                  "(project-default and project-tuned have one setting: it counts whether or not it meets the SLO); "
                  "cost / clairvoyant over the members where the clairvoyant meets the SLO too (their count in "
                  "brackets when not all); violation minutes of that setting (of the closest setting where none meets "
                  f"the SLO). The SLO is {JUDGE_TEXT[table_judge(mine)]}.", ""]
        lines += _table(figures, scenario, "family", [("all", members)], algorithms) + [""] + tuned_line(rows, scenario)
        lines += [f"#### Per shape ({scenario})", ""]
        lines += _table(figures, scenario, "shape", [(shape, by_shape[shape]) for shape in SHAPES if shape in by_shape],
                        algorithms) + [""]
        lines += [f"#### Per noise level ({scenario})", ""]
        order = sorted(by_noise, key=lambda label: int(label.rstrip("%")))
        lines += _table(figures, scenario, "noise", [(label, by_noise[label]) for label in order], algorithms) + [""]
        lines += [f"#### Every member ({scenario}): cost / clairvoyant (cost / fluid bound where the clairvoyant misses "
                  "the SLO), minutes per action; `miss`: no setting meets the SLO", "",
                  "| member | " + " | ".join(algorithms) + " |", "|---|" + "---:|" * len(algorithms)]
        for member in members:
            cells = []
            for algorithm in algorithms:
                figure = figures.get((scenario, member, algorithm))
                if figure is None:
                    cells.append("")
                elif not figure["meets"] and figure["cost_ratio"] is None:
                    cells.append(f"miss ({figure['violation_minutes']} min)")
                else:
                    cost = (f"{figure['versus']:.3f}" if figure["versus"] is not None
                            else f"({figure['cost_ratio']:.3f})")
                    missed = "" if figure["meets"] else f", misses ({figure['violation_minutes']} min)"
                    cells.append(f"{cost}, {_number(figure['minutes_per_action'], 1)}{missed}")
            lines.append(f"| {member.removeprefix(trace_family.FAMILY_PREFIX)} | " + " | ".join(cells) + " |")
        lines.append("")
        lines += look_ahead_lines(mine, scenario)
    edges = sweep_edges(rows)
    if edges:
        lines += ["Where the peers' best settings fall in the family's sweeps (members x scenarios with a setting that "
                  "meets the SLO; at an edge, a wider sweep might find a cheaper one): "
                  + "; ".join(f"{algorithm} {counts['lowest']} at its lowest value and {counts['highest']} at its highest "
                              f"of {counts['best']}" for algorithm, counts in sorted(edges.items())) + ".", ""]
    return "\n".join(lines)


def look_ahead_share(default: float, learned: float, perfect: float) -> float | None:
    """The share of the perfect look-ahead's saving the learned one captured:
    ``(default - learned) / (default - perfect)``; ``None`` when the perfect one saves nothing."""
    saving = default - perfect
    return (default - learned) / saving if saving > 1e-9 else None


def look_ahead_lines(rows: Sequence[dict], scenario: str) -> list[str]:
    """Per trace with the look-ahead's rows (``--algorithm project-forecast`` and a perfect one):
    cost over the fluid bound, minutes per action, and the share of the perfect saving captured."""
    cost: dict[tuple[str, str], dict] = {(row["trace"], row["algorithm"]): row for row in rows}
    traces = sorted({trace for trace, algorithm in cost if algorithm == "project-forecast"})
    if not traces:
        return []
    lines = [f"#### The look-ahead ({scenario}): cost / fluid bound, minutes per action, and the share of the perfect "
             "look-ahead's saving captured, (default - forecast) / (default - perfect)", "",
             "| trace | project-default | project-forecast | perfect 15 min | perfect 30 min | share (15) | share (30) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for trace in traces:
        cells, figures = [], {}
        for algorithm in ("project-default", "project-forecast", "perfect-lookahead", "perfect-lookahead-30"):
            row = cost.get((trace, algorithm))
            figures[algorithm] = None if row is None else row["cost_ratio"]
            cells.append("" if row is None else f"{row['cost_ratio']:.3f}, {_number(row['minutes'] / row['scale_actions'], 1)}"
                         if row["scale_actions"] else f"{row['cost_ratio']:.3f}")
        for perfect in ("perfect-lookahead", "perfect-lookahead-30"):
            known = figures["project-default"] is not None and figures[perfect] is not None
            share = look_ahead_share(figures["project-default"], figures["project-forecast"], figures[perfect]) if known else None
            cells.append("" if share is None else f"{share:.2f}")
        lines.append(f"| {trace.removeprefix(trace_family.FAMILY_PREFIX)} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _first_number(knob: str) -> float | None:
    """The knob's value as its label writes it first (``target=700``, ``per-instance>200 step=4``: 700, 200)."""
    found = re.search(r"\d+(?:\.\d+)?", knob)
    return float(found.group()) if found else None


def sweep_edges(rows: Sequence[dict]) -> dict[str, dict[str, int]]:
    """Per peer of ``FAMILY_SWEEPS``: on how many members (and scenarios) its best setting is the
    lowest or the highest value of the family's sweep, and on how many it has one at all; a peer
    often best at an edge would want the sweep widened there."""
    edges: dict[str, dict[str, int]] = {}
    for (_, _, algorithm), figure in member_figures(rows).items():
        if algorithm not in FAMILY_SWEEPS or algorithm == "clairvoyant" or not figure["meets"]:  # (its sweep is whole)
            continue
        values = [value[0] if isinstance(value, tuple) else value for value in FAMILY_SWEEPS[algorithm]]
        if len(set(values)) < 2:  # one value (Azure Monitor's threshold): no edge to speak of
            continue
        value = _first_number(figure["knob"])
        counts = edges.setdefault(algorithm, {"best": 0, "lowest": 0, "highest": 0})
        counts["best"] += 1
        counts["lowest"] += value == min(values)
        counts["highest"] += value == max(values)
    return edges


#: ``project-tuned`` counts as cheaper than the default on a member at this saving or more.
TUNED_SAVING = 0.03


def tuned_against_default(rows: Sequence[dict], scenario: str) -> dict | None:
    """``project-tuned`` against ``project-default`` on the same scored minutes (the default's run
    scored from the split: its ``tuned_window``) over the family's members in ``scenario``: how
    many were compared, at least ``TUNED_SAVING`` cheaper, dearer, and outside the SLO (as judged);
    ``None`` when the run has no pair there."""
    from scaling.simulation.world.judges import judged_meets_slo

    mine = {(row["trace"], row["algorithm"]): row for row in rows
            if is_family_row(row) and row.get("scenario", "standard") == scenario}
    ratios, outside = [], 0
    for (trace, algorithm), tuned in mine.items():
        default = mine.get((trace, "project-default"))
        if algorithm != "project-tuned" or not default or "tuned_window" not in default:
            continue
        ratios.append(tuned["cost_ratio"] / default["tuned_window"]["cost_ratio"])
        outside += not judged_meets_slo(tuned)
    if not ratios:
        return None
    return {"members": len(ratios), "cheaper": sum(ratio <= 1 - TUNED_SAVING for ratio in ratios),
            "dearer": sum(ratio > 1.0005 for ratio in ratios), "outside_slo": outside, "worst": max(ratios),
            "median": statistics.median(ratios)}


def tuned_line(rows: Sequence[dict], scenario: str) -> list[str]:
    """The family tables' line on ``project-tuned`` against the default on the same minutes."""
    found = tuned_against_default(rows, scenario)
    if found is None:
        return []
    return [f"project-tuned against project-default on the same scored minutes (the last 70%): at least "
            f"{TUNED_SAVING:.0%} cheaper on {found['cheaper']} of {found['members']} members, dearer on {found['dearer']} "
            f"(worst {found['worst']:.3f}, median {found['median']:.3f} of the default's cost), outside the SLO on "
            f"{found['outside_slo']}.", ""]


def readme_summary(rows: Sequence[dict]) -> str:
    """The README's family lines: per scenario, every algorithm over the whole family."""
    figures = member_figures(rows)
    algorithms = _algorithms(rows)
    lines = []
    for scenario in _scenarios(rows):
        members = [member for group in _members_by(rows, scenario, _shape).values() for member in group]
        mine = [row for row in rows if is_family_row(row) and row.get("scenario", "standard") == scenario]
        lines += [f"**family ({scenario}, {len(members)} members; {JUDGE_TEXT[table_judge(mine)].split(';')[0]})**", "",
                  "| algorithm | meets SLO | cost / clairvoyant: median (on the members where the clairvoyant meets the SLO) "
                  "| worst | min per action: median | least |",
                  "|---|---:|---:|---:|---:|---:|"]
        for algorithm in algorithms:
            numbers = group_figures(figures, scenario, algorithm, members)
            if not numbers["members"]:  # (project-tuned in cold: nothing learned to tune on)
                continue
            compared = "" if numbers["compared"] in (0, numbers["members"]) else f" (on {numbers['compared']})"
            lines.append(f"| {algorithm} | {numbers['meeting']}/{numbers['members']} | {_number(numbers['median_versus'])}{compared} | "
                         f"{_number(numbers['worst_versus'])} | {_number(numbers['median_minutes_per_action'], 1)} | "
                         f"{_number(numbers['least_minutes_per_action'], 1)} |")
        lines.append("")
        lines += tuned_line(rows, scenario)
    return "\n".join(lines)
