"""The report page, rows in, HTML out: no I/O, no storage, no clock.

One file an operator can open anywhere (plotly's JavaScript is embedded, nothing is fetched):
arrivals against the serving capacity, backlog and oldest-event age against the SLO, the plan's
capacity with every acting decision as a marker whose hover says why, and the decision log below,
filterable by direction and reason. The browser test (tests/e2e/test_report_browser.py) counts
the markers drawn against the table's acting rows, so both come from the same decisions here.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from scaling.domain.conflict import CONFLICT_PREFIX
from scaling.storage.records import DecisionRecord

#: The decision markers' plotly ``meta``: the browser test finds the marker traces by it.
DECISION_META = "decision-markers"
CHART_ID = "charts"
TABLE_ID = "decisions"
#: Numbers of a decision's metrics shown in its hover and in the table, with their labels.
DECISION_NUMBERS = (
    ("arrival_rate", "arrivals/s"),
    ("backlog", "backlog"),
    ("oldest_age_seconds", "oldest age s"),
    ("predicted_age_seconds", "predicted age s"),
    ("throughput_per_instance", "events/s per instance"),
)
MARKERS = {"up": ("triangle-up", "#2ca02c"), "down": ("triangle-down", "#d62728")}


@dataclass(frozen=True, slots=True)
class Point:
    """What was known of the target at one time (``None``: not measured then)."""

    at: datetime
    arrival_rate: float | None = None  # events/s arriving
    serving_rate: float | None = None  # events/s the plan's instances can process
    backlog: float | None = None  # events not yet processed
    oldest_age_seconds: float | None = None
    capacity: int | None = None  # the plan's instance count
    throughput_units: int | None = None  # an Event Hubs namespace target's TUs, when shown beside the plan


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything one page shows: the target's series and its decision log, oldest first."""

    target: str
    points: Sequence[Point]
    decisions: Sequence[DecisionRecord]
    slo_seconds: float | None = None
    origin: str = ""  # where the rows came from, shown under the title
    notes: Sequence[str] = field(default_factory=tuple)
    pause: str | None = None  # the operator's pause or pin in force: who asked, why, until when


def _time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _number(value: Any, digits: int = 1) -> str:
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if abs(value) < 1e15 else f"{value:.3g}"
    return html.escape(str(value))


def acting(decisions: Sequence[DecisionRecord]) -> list[DecisionRecord]:
    """The decisions that changed (or asked to change) the capacity: one marker each."""
    return [record for record in decisions if record.acts]


def decision_hover(record: DecisionRecord) -> str:
    """A marker's hover: direction, capacities, the reason in words, the numbers behind it."""
    metrics = record.metrics or {}
    lines = [f"<b>{html.escape(record.direction)} {record.capacity_before} → {record.capacity_after}</b>"
             f" at {_time(record.evaluated_at)}",
             f"reason: {html.escape(record.reason_code)}"]
    lines += [html.escape(reason) for reason in record.reasons]
    numbers = [f"{label} {_number(metrics.get(key))}" for key, label in DECISION_NUMBERS if metrics.get(key) is not None]
    if numbers:
        lines.append(", ".join(numbers))
    if record.outcome:
        lines.append(f"outcome: {html.escape(record.outcome)}")
    return "<br>".join(_wrap(line) for line in lines)


@dataclass(frozen=True, slots=True)
class Expected:
    """What the look-ahead expected at one decision (``forecast: shadow`` or ``on``): the peak of
    arrivals over its window, when it was expected, and whether it was trusted and acted."""

    at: datetime  # when the peak was expected
    rate: float  # events/s
    hover: str


def expected_load(decisions: Sequence[DecisionRecord]) -> list[Expected]:
    """The look-ahead's expected peaks from the decision log's metrics, placed at the minute each
    was expected, so the page draws them beside the arrivals that came."""
    found = []
    for record in decisions:
        metrics = record.metrics or {}
        peak, minutes = metrics.get("forecast_expected_peak"), metrics.get("forecast_expected_peak_in_minutes")
        if not isinstance(peak, int | float) or isinstance(peak, bool) or not isinstance(minutes, int | float):
            continue
        trusted, acted = bool(metrics.get("forecast_trusted")), bool(metrics.get("forecast_acted"))
        hover = (f"expected {peak / 60:,.1f} events/s at {_time(record.evaluated_at + timedelta(minutes=minutes))}"
                 f"<br>by the decision at {_time(record.evaluated_at)} ({html.escape(str(metrics.get('forecast', '')))}, "
                 f"{'trusted' if trusted else 'not trusted'}, {'acted' if acted else 'did not act'})")
        found.append(Expected(record.evaluated_at + timedelta(minutes=minutes), peak / 60, hover))
    return found


def _wrap(line: str, width: int = 110) -> str:
    """Long reasons over several hover lines (plotly does not wrap)."""
    if len(line) <= width:
        return line
    words, rows, current = line.split(" "), [], ""
    for word in words:
        if current and len(current) + 1 + len(word) > width:
            rows.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    rows.append(current)
    return "<br>".join(rows)


def figure(data: ReportData) -> Any:
    """The three charts on one shared time axis."""
    from plotly.subplots import make_subplots

    points = data.points
    times = [_time(point.at) for point in points]
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        specs=[[{}], [{"secondary_y": True}], [{}]],
                        subplot_titles=("Arrivals vs serving capacity (events/s)",
                                        "Backlog (events) and oldest-event age (s) against the SLO",
                                        "Plan capacity (instances) and scale decisions"))
    fig.add_scatter(x=times, y=[p.arrival_rate for p in points], name="arrivals/s", mode="lines",
                    line={"color": "#1f77b4"}, row=1, col=1)
    fig.add_scatter(x=times, y=[p.serving_rate for p in points], name="serving capacity/s", mode="lines",
                    line={"color": "#ff7f0e", "shape": "hv"}, row=1, col=1)
    expected = expected_load(data.decisions)
    if expected:
        fig.add_scatter(x=[_time(item.at) for item in expected], y=[item.rate for item in expected],
                        name="expected by the look-ahead/s", mode="markers", marker={"symbol": "x", "color": "#1f77b4"},
                        text=[item.hover for item in expected], hovertemplate="%{text}<extra></extra>", row=1, col=1)
    fig.add_scatter(x=times, y=[p.backlog for p in points], name="backlog", mode="lines", fill="tozeroy",
                    line={"color": "#9467bd"}, row=2, col=1, secondary_y=False)
    fig.add_scatter(x=times, y=[p.oldest_age_seconds for p in points], name="oldest-event age (s)", mode="lines",
                    line={"color": "#8c564b"}, row=2, col=1, secondary_y=True)
    if data.slo_seconds is not None and times:
        fig.add_scatter(x=[times[0], times[-1]], y=[data.slo_seconds, data.slo_seconds], mode="lines",
                        name=f"SLO {data.slo_seconds:g} s", line={"color": "#d62728", "dash": "dash"},
                        row=2, col=1, secondary_y=True)
    fig.add_scatter(x=times, y=[p.capacity for p in points], name="capacity", mode="lines",
                    line={"color": "#2f4f4f", "shape": "hv"}, row=3, col=1)
    if any(point.throughput_units is not None for point in points):
        fig.add_scatter(x=times, y=[p.throughput_units for p in points], name="namespace TUs", mode="lines",
                        line={"color": "#17becf", "shape": "hv", "dash": "dot"}, row=3, col=1)
    for direction, (symbol, color) in MARKERS.items():
        chosen = [record for record in acting(data.decisions) if record.direction == direction]
        fig.add_scatter(x=[_time(r.evaluated_at) for r in chosen], y=[r.capacity_after for r in chosen],
                        mode="markers", name=f"scale {direction} ({len(chosen)})", meta=DECISION_META,
                        marker={"symbol": symbol, "size": 11, "color": color, "line": {"width": 1, "color": "#222"}},
                        text=[decision_hover(r) for r in chosen], hovertemplate="%{text}<extra></extra>",
                        row=3, col=1)
    others = [r for r in acting(data.decisions) if r.direction not in MARKERS]
    if others:  # never silently lose a marker (an unknown direction)
        fig.add_scatter(x=[_time(r.evaluated_at) for r in others], y=[r.capacity_after for r in others],
                        mode="markers", name="other decisions", meta=DECISION_META,
                        text=[decision_hover(r) for r in others], hovertemplate="%{text}<extra></extra>", row=3, col=1)
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(title_text="events/s", row=1, col=1)
    fig.update_yaxes(title_text="events", row=2, col=1, secondary_y=False)
    ages = [p.oldest_age_seconds for p in points if p.oldest_age_seconds is not None]
    top = max([*ages, data.slo_seconds or 0.0, 1.0]) * 1.1  # the SLO line always in view
    fig.update_yaxes(title_text="seconds", row=2, col=1, secondary_y=True, showgrid=False, range=[0, top])
    fig.update_yaxes(title_text="instances", row=3, col=1)
    fig.update_xaxes(title_text="time (UTC)", row=3, col=1)
    fig.update_layout(height=900, margin={"l": 70, "r": 70, "t": 60, "b": 50}, hovermode="closest",
                      legend={"orientation": "h", "y": -0.08}, template="plotly_white")
    return fig


def _table_rows(decisions: Sequence[DecisionRecord]) -> str:
    rows = []
    for record in decisions:
        direction = record.direction if record.acts else "hold"
        metrics = record.metrics or {}
        reasons = html.escape("; ".join(record.reasons))
        cells = [
            _time(record.evaluated_at), direction, f"{_number(record.capacity_before)} → {_number(record.capacity_after)}",
            f"<code>{html.escape(record.reason_code)}</code>",
            *(_number(metrics.get(key)) for key, _ in DECISION_NUMBERS),
            html.escape(record.outcome or ("pending" if record.acts else "")), reasons,
        ]
        rows.append(f'<tr data-direction="{html.escape(direction)}" data-reason="{html.escape(record.reason_code)}" '
                    f'data-acts="{"true" if record.acts else "false"}">' + "".join(f"<td>{cell}</td>" for cell in cells)
                    + "</tr>")
    return "\n".join(rows)


def _options(values: Sequence[str]) -> str:
    return "".join(f'<option value="{html.escape(value)}">{html.escape(value)}</option>' for value in values)


STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 1.4em; margin: 0 0 4px; } .origin { color: #555; margin: 0 0 8px; }
.summary span { margin-right: 18px; } table { border-collapse: collapse; font-size: 13px; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; position: sticky; top: 0; } tr[data-acts="true"] { background: #fbfbe8; }
td:nth-child(5), td:nth-child(6), td:nth-child(7), td:nth-child(8), td:nth-child(9) { text-align: right; }
.pause { background: #fdecea; border-left: 4px solid #c0392b; padding: 6px 10px; }
.filters { margin: 12px 0 8px; } .filters label { margin-right: 16px; }
"""

FILTER_SCRIPT = """
(function () {
  var direction = document.getElementById("filter-direction");
  var reason = document.getElementById("filter-reason");
  var shown = document.getElementById("shown-count");
  function apply() {
    var rows = document.querySelectorAll("#TABLE_ID tbody tr"), count = 0;
    rows.forEach(function (row) {
      var visible = (!direction.value || row.dataset.direction === direction.value) &&
                    (!reason.value || row.dataset.reason === reason.value);
      row.hidden = !visible;
      if (visible) { count += 1; }
    });
    shown.textContent = count + " of " + rows.length + " rows";
  }
  direction.addEventListener("change", apply);
  reason.addEventListener("change", apply);
  apply();
})();
""".replace("TABLE_ID", TABLE_ID)


def held_by_another_controller(decisions: list[DecisionRecord]) -> DecisionRecord | None:
    """The row that began the current hold for another controller (``domain/conflict.py``), if the
    log's newest row says the target is held: rows are logged when the reason changes."""
    if decisions and decisions[-1].reason_code.startswith(CONFLICT_PREFIX):
        return decisions[-1]
    return None


def render(data: ReportData) -> str:
    """The whole page as one HTML document (plotly.js inline, so it opens without a network)."""
    fig = figure(data)
    chart = fig.to_html(include_plotlyjs=True, full_html=False, div_id=CHART_ID,
                        config={"displaylogo": False, "responsive": True})
    decisions = list(data.decisions)
    acts = acting(decisions)
    directions = sorted({record.direction if record.acts else "hold" for record in decisions})
    reasons = sorted({record.reason_code for record in decisions})
    span = f"{_time(data.points[0].at)} – {_time(data.points[-1].at)} UTC" if data.points else "no samples"
    summary = [
        f"<span>{span}</span>", f"<span>{len(data.points):,} samples</span>",
        f"<span>{len(decisions):,} logged decisions, <b id=\"acting-count\">{len(acts)}</b> acting "
        f"({sum(r.direction == 'up' for r in acts)} up, {sum(r.direction == 'down' for r in acts)} down)</span>",
    ]
    if data.slo_seconds is not None:
        summary.append(f"<span>SLO: oldest event under {data.slo_seconds:g} s</span>")
    header = "".join(f"<th>{html.escape(name)}</th>" for name in (
        "time (UTC)", "action", "capacity", "reason", *(label for _, label in DECISION_NUMBERS), "outcome", "why"))
    notes = "".join(f"<p class=\"origin\">{html.escape(note)}</p>" for note in data.notes)
    if data.pause:
        notes += f"<p class=\"pause\" id=\"pause\"><b>Paused now:</b> {html.escape(data.pause)}</p>"
    held = held_by_another_controller(decisions)
    if held is not None:
        notes += (f"<p class=\"pause\" id=\"conflict\"><b>Held since {_time(held.evaluated_at)} UTC: another controller "
                  f"drives this plan</b> ({html.escape(held.reason_code)}). {html.escape(' '.join(held.reasons))}</p>")
    title = f"Autoscaler report: {data.target}"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{STYLE}</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
<p class="origin">{html.escape(data.origin)}</p>
{notes}
<p class="summary">{"".join(summary)}</p>
{chart}
<h2>Decision log</h2>
<p>Every action, and every change of reason while holding ("why not"). Hover a marker above for the
same reason and numbers.</p>
<div class="filters">
<label>direction <select id="filter-direction"><option value="">all</option>{_options(directions)}</select></label>
<label>reason <select id="filter-reason"><option value="">all</option>{_options(reasons)}</select></label>
<span id="shown-count"></span>
</div>
<table id="{TABLE_ID}">
<thead><tr>{header}</tr></thead>
<tbody>
{_table_rows(decisions)}
</tbody>
</table>
<script>{FILTER_SCRIPT}</script>
<script type="application/json" id="report-meta">{_json_for_script({"target": data.target, "acting": len(acts), "decisions": len(decisions), "points": len(data.points)})}</script>
</body>
</html>
"""


def _json_for_script(value: Mapping[str, Any]) -> str:
    return json.dumps(value).replace("<", "\\u003c")
