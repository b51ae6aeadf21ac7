"""The benchmark's ``cold`` scenario: a first deployment onto a busy hub.

Every trace is also started at 1 instance with nothing learned (a new autoscaler, empty backlog)
at its busiest hour and at ``OTHER_STARTS`` other busy minutes drawn from the seed, and each such
start is scored on its first ``COLD_MINUTES`` minutes. The world is the standard scenario's (with
any overrides); the trace stays scaled on its whole length, so a start at the busiest hour needs
about as many instances as the peak does. One row per algorithm and setting sums the starts
(cost, violation minutes, actions) and takes the worst age; ``windows`` keeps each start's numbers.

A start is a minute whose arrivals are at least ``BUSY_FRACTION`` of the peak's, no closer than
``COLD_MINUTES`` to another start (so that no two windows share minutes).
"""

from __future__ import annotations

import numpy as np

from scaling.simulation.world.scenario import RunResult, Scenario

#: The scenario's name in the benchmark (not a world of scenario.py: the standard world, cut).
COLD = "cold"
COLD_MINUTES = 120
OTHER_STARTS = 3
BUSY_FRACTION = 0.4


def busiest_hour(arrivals: np.ndarray) -> int:
    """The first minute of the 60 with the most arrivals (the earliest such hour)."""
    if len(arrivals) <= 60:
        return 0
    cumulative = np.concatenate(([0.0], np.cumsum(arrivals)))
    return int(np.argmax(cumulative[60:] - cumulative[:-60]))


def cold_starts(arrivals: np.ndarray, seed: int, *, others: int = OTHER_STARTS, minutes: int = COLD_MINUTES) -> list[int]:
    """The busiest hour's first minute, then up to ``others`` busy minutes drawn from ``seed``,
    each window of ``minutes`` within the trace and apart from the others."""
    last = max(len(arrivals) - minutes, 0)
    starts = [min(busiest_hour(arrivals), last)]
    draws = np.random.default_rng([int(seed), 33])
    busy = np.flatnonzero(arrivals[:last + 1] >= BUSY_FRACTION * arrivals.max())
    for _ in range(others):
        free = busy[np.all(np.abs(busy[:, None] - np.asarray(starts)[None, :]) >= minutes, axis=1)]
        if not free.size:
            break
        starts.append(int(draws.choice(free)))
    return starts


def merged(results: list[RunResult], scenario: Scenario) -> RunResult:
    """The starts' runs as one: their minutes, costs, fluid bounds, violation minutes and actions
    summed, ages concatenated (the p99 and the maximum over all of them)."""
    ages = np.concatenate([result.age for result in results])
    servable = [result.servable_partitions_violation_minutes for result in results]
    avoidable = [result.avoidable_violation_minutes for result in results]
    return RunResult(
        algorithm=results[0].algorithm, knob=results[0].knob, minutes=sum(result.minutes for result in results),
        cost=sum(result.cost for result in results), fluid_lower_bound=sum(result.fluid_lower_bound for result in results),
        slo_violation_minutes=sum(result.slo_violation_minutes for result in results),
        p99_age_minutes=float(np.percentile(ages, 99)), max_age_minutes=float(ages.max()),
        scale_actions=sum(result.scale_actions for result in results),
        final_backlog=sum(result.final_backlog for result in results),
        capacity=np.concatenate([result.capacity for result in results]),
        serving=np.concatenate([result.serving for result in results]),
        backlog=np.concatenate([result.backlog for result in results]), age=ages,
        arrivals=np.concatenate([result.arrivals for result in results]),
        servable_partitions_violation_minutes=None if None in servable else sum(servable),
        avoidable_violation_minutes=None if None in avoidable else sum(avoidable))


def windows(starts: list[int], results: list[RunResult]) -> list[dict]:
    """Each start's numbers, for the JSON row (the first is the busiest hour)."""
    return [{"start_minute": start, "cost_ratio": round(result.cost_ratio, 4),
             "slo_violation_minutes": result.slo_violation_minutes, "max_age_minutes": round(result.max_age_minutes, 3)}
            for start, result in zip(starts, results, strict=True)]


def closest(group: list[dict]) -> dict:
    """The setting reported for an algorithm: the cheapest that meets the SLO, or when none does,
    the nearest to it (the fewest violation minutes, then the lowest max age, then cost)."""
    meeting = [row for row in group if row["meets_slo"]]
    if meeting:
        return min(meeting, key=lambda row: (row["cost_ratio"], row["scale_actions"]))
    return min(group, key=lambda row: (row["slo_violation_minutes"], row["max_age_minutes"], row["cost_ratio"]))


def cold_table(trace: str, rows: list[dict], order: tuple[str, ...], documented: dict[str, str]) -> list[str]:
    """Markdown: per algorithm, its setting nearest the SLO on the cold starts (violation minutes,
    max oldest-event age, cost), the busiest hour's start alone, and its documented default's."""
    lines = [f"### {trace} ({COLD})", "",
             "| algorithm | cheapest setting meeting the SLO, else the closest | SLO-violation min | max age (min) | cost / fluid bound | "
             "busiest hour: violation min, max age | documented default: violation min, max age | settings meeting SLO |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for algorithm in order:
        group = [row for row in rows if row["algorithm"] == algorithm]
        if not group:
            continue
        row = closest(group)
        busiest = row.get("windows", [{}])[0]
        default = next((other for other in group if other["knob"] == documented.get(algorithm)), None)
        default_cell = f"{default['slo_violation_minutes']}, {default['max_age_minutes']:.1f}" if default else "–"
        meeting = sum(bool(other["meets_slo"]) for other in group)
        lines.append(f"| {algorithm} | {row['knob']} | {row['slo_violation_minutes']} | {row['max_age_minutes']:.1f} | "
                     f"{row['cost_ratio']:.3f} | {busiest.get('slo_violation_minutes', '–')}, "
                     f"{busiest.get('max_age_minutes', 0.0):.1f} | {default_cell} | {meeting}/{len(group)} |")
    lines.append("")
    return lines


def cold_readme(rows: list[dict], traces: list[str], order: tuple[str, ...]) -> list[str]:
    """The README's cold block: per algorithm and trace, its closest setting's violation minutes
    and max age over the starts."""
    lines = [f"**{COLD}** (1 instance, nothing learned, at the busiest hour and {OTHER_STARTS} other busy minutes, "
             f"{COLD_MINUTES} minutes each: violation minutes / max age in minutes of the cheapest setting meeting the SLO, "
             "else of the closest)", "",
             "| algorithm | " + " | ".join(traces) + " |", "|---|" + "---:|" * len(traces)]
    for algorithm in order:
        cells = []
        for trace in traces:
            group = [row for row in rows if row["trace"] == trace and row["algorithm"] == algorithm]
            row = closest(group) if group else None
            cells.append(f"{row['slo_violation_minutes']} / {row['max_age_minutes']:.1f}" if row else "–")
        if any(cell != "–" for cell in cells):
            lines.append(f"| {algorithm} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines
