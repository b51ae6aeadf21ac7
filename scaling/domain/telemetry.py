"""The telemetry contract: every metric's name, kind, unit and dimensions, pure data.

docs/operations-monitoring.md documents it, and the workbook and the alert rules in infra/ query
exactly these names (``tests/infra/bicep_rules.py::TELEMETRY_METRICS``). The services report
through ``scaling.services.telemetry.Telemetry``; the OpenTelemetry adapter (``scaling/telemetry/``)
creates one instrument per entry of ``METRICS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

GAUGE = "gauge"
COUNTER = "counter"
HISTOGRAM = "histogram"

#: The span attribute that names the decision a span belongs to (evaluate and scale).
DECISION_ID_ATTRIBUTE = "autoscaler.decision_id"
TARGET_ATTRIBUTE = "autoscaler.target"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric of the contract: how the adapter creates its instrument."""

    name: str
    kind: str
    unit: str
    dimensions: tuple[str, ...]
    description: str


ARRIVAL_RATE = MetricSpec("autoscaler.arrival_rate", GAUGE, "{event}/s", ("target", "source"),
                          "events arriving, from the partitions' sequence numbers")
BACKLOG = MetricSpec("autoscaler.backlog", GAUGE, "{event}", ("target", "source"), "unprocessed events")
OLDEST_EVENT_AGE = MetricSpec("autoscaler.oldest_event_age_seconds", GAUGE, "s", ("target",),
                              "age of the oldest unprocessed event, the worst partition")
SLO_SECONDS = MetricSpec("autoscaler.slo_seconds", GAUGE, "s", ("target",), "the target's SLO on the oldest event's age")
PREDICTED_AGE = MetricSpec("autoscaler.predicted_age_seconds", GAUGE, "s", ("target",),
                           "the predicted oldest age when new instances could help")
THROUGHPUT_PER_INSTANCE = MetricSpec("autoscaler.throughput_per_instance", GAUGE, "{event}/s", ("target",),
                                     "the learned throughput of one instance")
CAPACITY_DESIRED = MetricSpec("autoscaler.capacity_desired", GAUGE, "{instance}", ("target",), "what the engine wants")
CAPACITY_REQUESTED = MetricSpec("autoscaler.capacity_requested", GAUGE, "{instance}", ("target",),
                                "what was last written to the plan")
CAPACITY_OBSERVED = MetricSpec("autoscaler.capacity_observed", GAUGE, "{instance}", ("target",),
                               "what the plan has, read by collect")
SAMPLES = MetricSpec("autoscaler.samples", COUNTER, "{sample}", ("target",), "samples evaluated")
DECISIONS = MetricSpec("autoscaler.decisions", COUNTER, "{decision}", ("target", "direction", "reason"),
                       "every evaluation's outcome")
COLLECTION_FAILURES = MetricSpec("autoscaler.collection_failures", COUNTER, "{failure}", ("target", "source"),
                                 "a source that failed or timed out in collect")
DEAD_LETTERS = MetricSpec("autoscaler.dead_letters", COUNTER, "{message}", ("function",),
                          "messages recorded in the deadletters table")
ARM_WRITES = MetricSpec("autoscaler.arm_writes", COUNTER, "{write}", ("target", "outcome"),
                        "what scale did with each action")
ARM_WRITE_DURATION = MetricSpec("autoscaler.arm_write_duration_ms", HISTOGRAM, "ms", ("target",),
                                "ARM plan write latency, retries included")
THROUGHPUT_UNITS = MetricSpec("autoscaler.throughput_units", GAUGE, "{TU}", ("target",),
                              "a namespace target's throughput units, read by collect")
THROTTLED_REQUESTS = MetricSpec("autoscaler.throttled_requests", GAUGE, "{request}", ("target",),
                                "a namespace target's ThrottledRequests in its latest complete minute")

METRICS: tuple[MetricSpec, ...] = (
    ARRIVAL_RATE, BACKLOG, OLDEST_EVENT_AGE, SLO_SECONDS, PREDICTED_AGE, THROUGHPUT_PER_INSTANCE,
    CAPACITY_DESIRED, CAPACITY_REQUESTED, CAPACITY_OBSERVED, SAMPLES, DECISIONS, COLLECTION_FAILURES,
    DEAD_LETTERS, ARM_WRITES, ARM_WRITE_DURATION, THROUGHPUT_UNITS, THROTTLED_REQUESTS,
)

Attributes = Mapping[str, str | int | float | bool]


