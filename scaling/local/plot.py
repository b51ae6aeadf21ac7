"""The demo's plot: arrivals, backlog and plan capacity over the simulated run (matplotlib Agg)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def plot_run(
    path: str | Path,
    *,
    arrivals: np.ndarray,
    backlog: np.ndarray,
    capacity: np.ndarray,
    serving: np.ndarray,
    age_minutes: np.ndarray,
    events_per_instance_per_minute: float,
    slo_minutes: float,
    actions: Sequence[tuple[float, str]] = (),
    title: str = "",
    first_minute: int = 0,
) -> Path:
    """Write a three-panel PNG; ``actions`` are (minute, direction) pairs from the decision log.
    The x axis is the trace's own time in hours (``first_minute`` is the window's offset)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    hours = (first_minute + np.arange(len(arrivals))) / 60.0
    figure, (top, middle, bottom) = plt.subplots(3, 1, figsize=(12, 8.5), sharex=True,
                                                 gridspec_kw={"height_ratios": [3, 2, 2]})
    top.plot(hours, arrivals, color="tab:blue", linewidth=0.8, label="arrivals (events/min)")
    top.step(hours, serving * events_per_instance_per_minute, where="post", color="tab:green", linewidth=1.2,
             label="serving capacity (events/min)")
    top.set_ylabel("events / minute")
    top.legend(loc="upper left", fontsize=8)
    top.grid(alpha=0.3)

    middle.fill_between(hours, backlog, color="tab:orange", alpha=0.5, linewidth=0, label="backlog (events)")
    middle.set_ylabel("backlog (events)")
    age_axis = middle.twinx()
    age_axis.plot(hours, age_minutes, color="tab:red", linewidth=0.8, label="oldest event age (min)")
    age_axis.axhline(slo_minutes, color="tab:red", linestyle="--", linewidth=0.8, label=f"SLO {slo_minutes:g} min")
    age_axis.set_ylabel("age (minutes)")
    age_axis.set_ylim(bottom=0, top=max(slo_minutes * 1.5, float(age_minutes.max()) * 1.1 if len(age_minutes) else 1.0))
    lines = middle.get_legend_handles_labels()
    more = age_axis.get_legend_handles_labels()
    middle.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left", fontsize=8)
    middle.grid(alpha=0.3)

    bottom.step(hours, capacity, where="post", color="tab:purple", linewidth=1.2, label="plan capacity (requested)")
    bottom.step(hours, serving, where="post", color="tab:green", linewidth=0.9, linestyle="--",
                label="serving (after provisioning)")
    for direction, marker, color in (("up", "^", "tab:red"), ("down", "v", "tab:blue")):
        points = [((first_minute + minute) / 60.0, capacity[min(int(minute), len(capacity) - 1)])
                  for minute, d in actions if d == direction]
        if points:
            xs, ys = zip(*points, strict=True)
            bottom.scatter(xs, ys, marker=marker, color=color, s=18, zorder=3, label=f"scale {direction} (decision log)")
    bottom.set_ylabel("instances")
    bottom.set_xlabel("trace time (hours from the trace's first minute)")
    bottom.legend(loc="upper left", fontsize=8)
    bottom.grid(alpha=0.3)
    if title:
        figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
