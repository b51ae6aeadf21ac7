"""Step 4 of the tuning job: the report for people, a Pareto plot per target (PNG) and a Markdown
summary of the evidence.
"""

from __future__ import annotations

import math
from typing import Any


def pareto_png(target: str, rows: list[dict], current_index: int, recommended_index: int | None, scenario: Any) -> bytes:
    """Cost ratio vs SLO-violation minutes on validation: all candidates, current and recommended marked."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=110)
    points = [(row["validation"]["slo_violation_minutes"], row["validation"]["cost_ratio"] or 0.0, row) for row in rows]
    slo_points = [(x, y) for x, y, row in points if row["label"].startswith("slo")]
    rule_points = [(x, y) for x, y, row in points if row["label"].startswith("rules")]
    if slo_points:
        axes.scatter(*zip(*slo_points, strict=True), s=22, color="#4c72b0", label="SLO-mode candidates")
    if rule_points:
        axes.scatter(*zip(*rule_points, strict=True), s=22, marker="s", color="#8172b2", label="rule candidates")
    front, best = [], math.inf
    for x, y, _ in sorted(points, key=lambda p: (p[0], p[1])):
        if y < best:
            front.append((x, y))
            best = y
    if len(front) > 1:
        axes.step(*zip(*front, strict=True), where="post", color="#999999", linewidth=1, label="Pareto front")
    for x, y, row in points:
        if row["index"] == current_index:
            axes.scatter([x], [y], s=160, marker="X", color="#c44e52", label="current", zorder=5)
        if row["index"] == recommended_index:
            axes.scatter([x], [y], s=220, marker="*", color="#55a868", label="recommended", zorder=6)
    allowed = scenario.max_violation_fraction * (rows[0]["validation"]["minutes"] if rows else 0)
    axes.axvline(allowed, color="#dd8452", linestyle="--", linewidth=1, label=f"SLO budget ({allowed:.1f} min)")
    axes.set_xscale("symlog", linthresh=1)
    axes.set_xlim(left=-0.3)  # (violation minutes are never negative: no ticks below 0)
    axes.set_xlabel("SLO-violation minutes (validation window)")
    axes.set_ylabel("cost / fluid lower bound")
    axes.set_title(f"{target}: candidates on the validation window")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8, loc="best")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def summary_markdown(evidence: dict) -> str:
    lines = ["# Tuning report", "",
             f"History `{evidence['history']}`, grid `{evidence['grid']}`, first training block {evidence['train_fraction']:g} "
             f"of the history, then {evidence.get('folds', 1)} out-of-time validation blocks; "
             f"{evidence['simulation']['candidate_policy_minutes']:,} candidate-policy-minutes simulated (stress replays "
             f"included) in {evidence['simulation']['seconds']:.1f}s on {evidence['simulation']['parallelism']} cores "
             f"({evidence['simulation']['minutes_per_second']:,.0f}/s).", ""]
    for message in evidence["messages"]:
        lines.append(f"- {message}")
    if evidence["messages"]:
        lines.append("")
    lines += ["| target | status | throughput (events/min/instance) | current: cost ratio / violation min / actions | "
              "recommended: cost ratio / violation min / actions | recommended candidate | regime change |",
              "|---|---|---:|---|---|---|---|"]
    for name, item in evidence["targets"].items():
        current, recommended = item.get("current"), item.get("recommended")

        def cell(numbers: dict | None) -> str:
            if not numbers:
                return "–"
            v = numbers["validation"]
            return f"{v['cost_ratio']} / {v['slo_violation_minutes']} / {v['scale_actions']}"

        throughput = item.get("throughput", {}).get("events_per_instance_per_minute")
        selection = item.get("selection")
        regime = ("yes" if selection["regime_change"] else "no") if selection else "–"
        lines.append(f"| {name} | {item['status']} | {throughput if throughput is not None else '–'} | {cell(current)} | "
                     f"{cell(recommended)} | {recommended['label'] if recommended else '–'} | {regime} |")
    lines.append("")
    for name, item in evidence["targets"].items():
        lines.append(f"## {name}")
        lines.append("")
        for note in item.get("messages", []):
            lines.append(f"- {note}")
        selection = item.get("selection")
        if selection:
            lines += ["", *risk_table(selection)]
        if item.get("plot"):
            lines += ["", f"![Pareto plot of {name}]({item['plot']})"]
        lines.append("")
    return "\n".join(lines)


def risk_table(selection: dict) -> list[str]:
    """Expected cost and SLO risk of the recommendation and of the current policy: min / median /
    max across the validation folds, the worst fold of each stress replay, and the regime check."""

    def spread(numbers: dict, key: str) -> str:
        values = numbers[key]
        return "–" if values["min"] is None else f"{values['min']:g} / {values['median']:g} / {values['max']:g}"

    margin = selection["margin"]
    lines = [f"Margin: on every validation fold and stress replay, oldest-event age p99 <= {margin['p99_fraction']:g} x SLO "
             f"and max <= {margin['max_fraction']:g} x SLO.", "",
             "| policy | cost / fluid bound (min / median / max over folds) | SLO-violation min | p99 age (min) | max age (min) | "
             "stress: worst p99 / max age (min), violation min |",
             "|---|---|---|---|---|---|"]
    rows = [("recommended" if not selection["kept_current"] else "current (kept)", selection["risk"])]
    if not selection["kept_current"]:
        rows.append(("current", selection["current_risk"]))
    for label, numbers in rows:
        stress = "; ".join(f"{name}: {replay['worst_p99_age_minutes']:g} / {replay['worst_max_age_minutes']:g}, "
                           f"{replay['slo_violation_minutes']}" for name, replay in numbers["stress"].items()) or "–"
        lines.append(f"| {label} | {spread(numbers, 'cost_ratio')} | {spread(numbers, 'slo_violation_minutes')} | "
                     f"{spread(numbers, 'p99_age_minutes')} | {spread(numbers, 'max_age_minutes')} | {stress} |")
    changed = [f"fold {fold['fold']}: " + "; ".join(fold["changes"]) for fold in selection["regime"] if fold["changes"]]
    lines += ["", "Regime change (validation traffic unlike its training window): " + (" | ".join(changed) if changed else "none")]
    if selection.get("safer"):
        lines.append(f"Holds but costs more than the current policy (not recommended): {selection['safer']}")
    return lines


def safe_name(name: str) -> str:
    return "".join(char if char.isalnum() or char in "-_." else "_" for char in name)
