"""Rows for the report page from what the autoscaler stored, or from a simulation.

Pure: samples, decision records and simulation arrays in, ``ReportData`` out. The arrival rate and
the oldest-event age of a stored sample are computed the way the engine computes them
(``scaling.domain.slo.partition_outlooks`` over the samples before it), so the chart shows what
the engine saw; the serving capacity is the plan's capacity times the per-instance throughput the
engine had learned by then (from the decision log's numbers).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from scaling.domain.samples import MetricSample
from scaling.report.page import Point, ReportData
from scaling.storage.records import DecisionRecord

#: How far back the age of a sample's oldest event is traced (older ones are extrapolated at the
#: arrival rate, as the engine does beyond its history).
AGE_LOOKBACK = timedelta(minutes=30)
#: The arrival rate of a point: events enqueued over about the last collection interval.
RATE_WINDOW_SECONDS = 60.0


def learned_throughput(decisions: Sequence[DecisionRecord]) -> tuple[list[datetime], list[float]]:
    """When the engine reported a per-instance throughput, and its value (oldest first)."""
    times, values = [], []
    for record in sorted(decisions, key=lambda r: r.evaluated_at):
        value = (record.metrics or {}).get("throughput_per_instance")
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            times.append(record.evaluated_at)
            values.append(float(value))
    return times, values


def _known_at(times: list[datetime], values: list[float], moment: datetime) -> float | None:
    index = bisect.bisect_right(times, moment) - 1
    return values[index] if index >= 0 else None


def points_from_samples(samples: Sequence[MetricSample], decisions: Sequence[DecisionRecord] = ()) -> list[Point]:
    """One point per stored sample, oldest first."""
    from scaling.domain.slo import partition_outlooks

    ordered = sorted(samples, key=lambda s: s.collected_at)
    throughput_times, throughput_values = learned_throughput(decisions)
    points, first = [], 0
    for index, sample in enumerate(ordered):
        while ordered[first].collected_at < sample.collected_at - AGE_LOOKBACK:
            first += 1
        outlooks = partition_outlooks(ordered[first:index + 1], RATE_WINDOW_SECONDS) if sample.ok or any(
            source.ok for source in sample.sources) else {}
        arrival = sum(float(o.arrival_rate.sum()) for o in outlooks.values()) if outlooks and index > first else None
        age = max((float(o.age_seconds.max()) for o in outlooks.values() if o.partitions), default=None)
        throughput = _known_at(throughput_times, throughput_values, sample.collected_at)
        serving = throughput * sample.capacity if throughput is not None and sample.capacity is not None else None
        points.append(Point(at=sample.collected_at, arrival_rate=arrival, serving_rate=serving,
                            backlog=float(sample.backlog), oldest_age_seconds=age, capacity=sample.capacity))
    return points


def report_from_history(target: str, samples: Sequence[MetricSample], decisions: Sequence[DecisionRecord], *,
                        slo_seconds: float | None, origin: str) -> ReportData:
    return ReportData(target=target, points=points_from_samples(samples, decisions),
                      decisions=sorted(decisions, key=lambda r: r.evaluated_at), slo_seconds=slo_seconds, origin=origin)


def logged_decisions(decisions: Sequence[DecisionRecord]) -> list[DecisionRecord]:
    """What evaluate writes to the log: every acting decision and every change of reason while holding."""
    logged, previous = [], None
    for record in decisions:
        if record.acts or record.reason_code != previous:
            logged.append(record)
        previous = record.reason_code
    return logged


def report_from_run(target: str, result: Any, decisions: Sequence[DecisionRecord], *, start: datetime,
                    events_per_instance_per_minute: float, slo_seconds: float, origin: str,
                    minute: timedelta = timedelta(minutes=1)) -> ReportData:
    """A simulated (or demo) run: the world's per-minute truth, arrivals and serving capacity in events/s.

    The world's minute ``i`` is observed (and decided on) at its end, ``start + (i + 1)`` minutes,
    which is where its point goes so that a decision's marker sits on the capacity it changed."""
    points = [
        Point(at=start + (index + 1) * minute,
              arrival_rate=float(result.arrivals[index]) / 60.0,
              serving_rate=float(result.serving[index]) * events_per_instance_per_minute / 60.0,
              backlog=float(result.backlog[index]),
              oldest_age_seconds=float(result.age[index]) * 60.0,
              capacity=int(result.capacity[index]))
        for index in range(int(result.minutes))
    ]
    return ReportData(target=target, points=points, decisions=list(decisions), slo_seconds=slo_seconds, origin=origin)
