"""The report page (``scaling.report.page``) and the rows it is built from (``scaling.report.history``):
pure, no storage, no browser (tests/e2e/test_report_browser.py opens the page in Chromium)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np
import pytest

from scaling.domain.samples import MetricSample, PartitionReading, SourceReading
from scaling.report.history import logged_decisions, points_from_samples, report_from_run
from scaling.report.page import DECISION_META, Point, ReportData, decision_hover, figure, render
from scaling.storage.records import DecisionRecord

T0 = datetime(2026, 3, 1, 15, 0, tzinfo=UTC)


def decision(minute: int, *, acts: bool, direction: str = "none", reason: str = "slo_ok", before: int = 2,
             after: int | None = None, reasons: tuple[str, ...] = (), **metrics) -> DecisionRecord:
    return DecisionRecord(target="orders", decision_id=f"d{minute}", evaluated_at=T0 + timedelta(minutes=minute),
                          trigger_sample_id=f"s{minute}", acts=acts, direction=direction if acts else "none",
                          reason_code=reason, reasons=reasons, metrics=metrics, capacity_before=before,
                          capacity_after=after if after is not None else before)


DECISIONS = [
    decision(1, acts=False, reason="too_few_samples"),
    decision(4, acts=True, direction="up", reason="slo_at_risk", before=2, after=4,
             reasons=("oldest event would be 218s old in 202s (limit 210s)",), arrival_rate=77.7, backlog=15712,
             oldest_age_seconds=179.0, predicted_age_seconds=218.0, throughput_per_instance=16.67),
    decision(6, acts=False, reason="cooldown", before=4),
    decision(9, acts=True, direction="down", reason="slo_surplus", before=4, after=3, backlog=0),
    decision(12, acts=True, direction="up", reason="rule_scale_up", before=3, after=5),
]


def data(**changes) -> ReportData:
    points = [Point(at=T0 + timedelta(minutes=m), arrival_rate=50.0 + m, serving_rate=33.3, backlog=100.0 * m,
                    oldest_age_seconds=10.0 * m, capacity=2 + m // 5) for m in range(15)]
    values = {"target": "orders", "points": points, "decisions": DECISIONS, "slo_seconds": 300.0, "origin": "test rows"}
    return ReportData(**{**values, **changes})


def test_every_acting_decision_is_one_marker_on_the_capacity_chart():
    fig = figure(data())
    markers = [trace for trace in fig.data if trace.meta == DECISION_META]
    assert sorted(len(trace.x) for trace in markers) == [1, 2]  # one down, two up
    up = next(trace for trace in markers if trace.marker.symbol == "triangle-up")
    assert list(up.x) == ["2026-03-01 15:04:00", "2026-03-01 15:12:00"] and list(up.y) == [4, 5]
    assert all(trace.yaxis == "y4" for trace in markers)  # the third chart (row 2 has a secondary axis)


def test_a_marker_hover_says_why_with_the_numbers():
    text = decision_hover(DECISIONS[1])
    assert "up 2 → 4" in text and "slo_at_risk" in text and "218s old in 202s" in text
    assert "arrivals/s 77.7" in text and "backlog 15,712" in text and "predicted age s 218.0" in text


def test_hover_text_is_escaped():
    odd = decision(3, acts=True, direction="up", reason="x<script>", after=3, reasons=("a & <b>",))
    text = decision_hover(odd)
    assert "<script>" not in text and "x&lt;script&gt;" in text and "a &amp; &lt;b&gt;" in text


def test_the_slo_is_a_line_on_the_age_axis_and_always_in_view():
    fig = figure(data(slo_seconds=600.0))
    slo = next(trace for trace in fig.data if trace.name.startswith("SLO"))
    assert list(slo.y) == [600.0, 600.0] and slo.yaxis == "y3"
    assert fig.layout.yaxis3.range[1] >= 600.0
    assert not any(trace.name.startswith("SLO") for trace in figure(data(slo_seconds=None)).data)


def test_page_is_self_contained_and_lists_every_decision():
    page = render(data())
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"<script[^>]+src=", page), "a script is fetched from somewhere"
    assert not re.search(r"<link[^>]+href=\"?https?:", page)
    assert "Plotly.newPlot" in page and len(page) > 1_000_000  # plotly.js is inline
    rows = re.findall(r'<tr data-direction="([^"]+)" data-reason="([^"]+)" data-acts="(true|false)"', page)
    assert rows == [("hold", "too_few_samples", "false"), ("up", "slo_at_risk", "true"), ("hold", "cooldown", "false"),
                    ("down", "slo_surplus", "true"), ("up", "rule_scale_up", "true")]
    assert '<b id="acting-count">3</b>' in page


def test_filters_offer_each_direction_and_reason_once():
    page = render(data())
    direction = re.search(r'<select id="filter-direction">(.*?)</select>', page).group(1)
    reason = re.search(r'<select id="filter-reason">(.*?)</select>', page).group(1)
    assert re.findall(r'value="([^"]*)"', direction) == ["", "down", "hold", "up"]
    assert re.findall(r'value="([^"]*)"', reason) == ["", "cooldown", "rule_scale_up", "slo_at_risk", "slo_surplus",
                                                     "too_few_samples"]


def test_an_empty_report_still_renders():
    page = render(data(points=[], decisions=[]))
    assert "no samples" in page and '<b id="acting-count">0</b>' in page


def hub(minute: int, last: list[int], checkpoints: list[int | None], capacity: int = 2) -> MetricSample:
    partitions = tuple(PartitionReading.measure(str(i), 0, position, checkpoint)
                       for i, (position, checkpoint) in enumerate(zip(last, checkpoints, strict=True)))
    return MetricSample(target="orders", collected_at=T0 + timedelta(minutes=minute), capacity=capacity,
                        sources=(SourceReading("hub", "eventhub", partitions=partitions),))


def test_points_from_samples_read_rates_and_ages_like_the_engine():
    # Two partitions, 60 events/min each (1/s each, 2/s in all); consumers stop after minute 2.
    samples = [hub(m, [60 * m + 59, 60 * m + 59], [min(60 * m + 59, 179)] * 2, capacity=3) for m in range(6)]
    points = points_from_samples(samples, [decision(0, acts=False, throughput_per_instance=5.0)])
    assert points[0].arrival_rate is None  # one sample tells no rate
    assert [p.arrival_rate for p in points[1:]] == pytest.approx([2.0] * 5)
    assert [p.backlog for p in points] == [0, 0, 0, 120, 240, 360]
    assert points[2].oldest_age_seconds == 0
    # At minute 5 the oldest unprocessed event (sequence number 180) was enqueued 1 s after minute 2
    # (interpolated between the positions 179 at minute 2 and 239 at minute 3).
    assert points[5].oldest_age_seconds == pytest.approx(179.0)
    assert all(p.serving_rate == 15.0 and p.capacity == 3 for p in points)  # 3 instances x 5 events/s learned


def test_serving_capacity_is_unknown_until_the_engine_learned_a_throughput():
    samples = [hub(m, [60 * m], [60 * m], capacity=2) for m in range(4)]
    points = points_from_samples(samples, [decision(2, acts=False, throughput_per_instance=8.0)])
    assert [p.serving_rate for p in points] == [None, None, 16.0, 16.0]


def test_logged_decisions_keep_actions_and_changes_of_reason_like_evaluate():
    stream = [decision(m, acts=False, reason=code) for m, code in enumerate(["a", "a", "b", "b", "a"])]
    stream.insert(3, decision(10, acts=True, direction="up", reason="b", after=3))
    assert [r.decision_id for r in logged_decisions(stream)] == ["d0", "d2", "d10", "d4"]


def test_report_from_run_puts_minute_i_at_its_end():
    result = SimpleNamespace(minutes=2, arrivals=np.array([600.0, 1200.0]), serving=np.array([1.0, 2.0]),
                             backlog=np.array([0.0, 50.0]), age=np.array([0.0, 0.5]), capacity=np.array([1, 2]))
    report = report_from_run("orders", result, [], start=T0, events_per_instance_per_minute=1000.0,
                             slo_seconds=300.0, origin="run")
    assert [p.at for p in report.points] == [T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)]
    assert [p.arrival_rate for p in report.points] == [10.0, 20.0]
    assert [p.serving_rate for p in report.points] == pytest.approx([1000 / 60, 2000 / 60])
    assert [p.oldest_age_seconds for p in report.points] == [0.0, 30.0]


def test_a_target_held_for_another_controller_says_so_at_the_top():
    held = decision(14, acts=False, reason="conflict:autoscale-setting", reasons=(
        "conflict:autoscale-setting cpu-autoscale: an enabled Azure Monitor autoscale setting targets this plan",))
    page = render(data(decisions=[*DECISIONS, held]))
    banner = re.search(r'<p class="pause" id="conflict">(.*?)</p>', page).group(1)
    assert "Held since 2026-03-01 15:14" in banner and "cpu-autoscale" in banner
    # Once the log's newest row has another reason, the hold is over and the banner gone.
    page = render(data(decisions=[*DECISIONS, held, decision(20, acts=True, direction="up", reason="rule_scale_up")]))
    assert 'id="conflict"' not in page


def test_the_look_ahead_s_expected_load_is_drawn_beside_the_arrivals():
    """Each decision that carried the look-ahead's expectation puts its peak (events/min in the
    log, events/s on the page) at the minute it was expected, on the arrivals chart; a log
    without the look-ahead draws nothing of it."""
    looked = [decision(2, acts=False, forecast="shadow", forecast_trusted=True, forecast_acted=False,
                       forecast_expected_peak=600.0, forecast_expected_peak_in_minutes=7),
              decision(5, acts=True, direction="up", reason="forecast_floor", after=6, forecast="on", forecast_trusted=True,
                       forecast_acted=True, forecast_expected_peak=1200.0, forecast_expected_peak_in_minutes=3)]
    fig = figure(data(decisions=[*DECISIONS, *looked]))
    expected = next(trace for trace in fig.data if trace.name.startswith("expected by the look-ahead"))
    assert list(expected.x) == ["2026-03-01 15:09:00", "2026-03-01 15:08:00"] and list(expected.y) == [10.0, 20.0]
    assert expected.yaxis == "y" and "not trusted" not in expected.text[0] and "acted" in expected.text[1]
    assert not any(trace.name.startswith("expected") for trace in figure(data()).data)
