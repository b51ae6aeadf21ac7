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
             f"History `{evidence['history']}`, grid `{evidence['grid']}`, train fraction {evidence['train_fraction']:g}; "
             f"{evidence['simulation']['candidate_policy_minutes']:,} candidate-policy-minutes simulated in "
             f"{evidence['simulation']['seconds']:.1f}s on {evidence['simulation']['parallelism']} cores "
             f"({evidence['simulation']['minutes_per_second']:,.0f}/s).", ""]
    for message in evidence["messages"]:
        lines.append(f"- {message}")
    if evidence["messages"]:
        lines.append("")
    lines += ["| target | status | throughput (events/min/instance) | current: cost ratio / violation min / actions | "
              "recommended: cost ratio / violation min / actions | recommended candidate |",
              "|---|---|---:|---|---|---|"]
    for name, item in evidence["targets"].items():
        current, recommended = item.get("current"), item.get("recommended")

        def cell(numbers: dict | None) -> str:
            if not numbers:
                return "–"
            v = numbers["validation"]
            return f"{v['cost_ratio']} / {v['slo_violation_minutes']} / {v['scale_actions']}"

        throughput = item.get("throughput", {}).get("events_per_instance_per_minute")
        lines.append(f"| {name} | {item['status']} | {throughput if throughput is not None else '–'} | {cell(current)} | "
                     f"{cell(recommended)} | {recommended['label'] if recommended else '–'} |")
    lines.append("")
    for name, item in evidence["targets"].items():
        lines.append(f"## {name}")
        lines.append("")
        for note in item.get("messages", []):
            lines.append(f"- {note}")
        if item.get("plot"):
            lines += ["", f"![Pareto plot of {name}]({item['plot']})"]
        lines.append("")
    return "\n".join(lines)


def safe_name(name: str) -> str:
    return "".join(char if char.isalnum() or char in "-_." else "_" for char in name)
