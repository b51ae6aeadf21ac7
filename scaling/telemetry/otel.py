"""``Telemetry`` over OpenTelemetry: one instrument per metric of the contract, spans whose parent
comes from the ``traceparent`` carried in the queue message.

Providers are injected (the SDK's in-memory reader and exporter in tests); by default the global
ones, which ``configure_azure_monitor`` sets up.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from scaling.domain.telemetry import COUNTER, GAUGE, METRICS, Attributes, MetricSpec

SCOPE = "scaling"
_PROPAGATOR = TraceContextTextMapPropagator()


class OtelSpan:
    """An open OpenTelemetry span as the services see it."""

    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    @property
    def traceparent(self) -> str | None:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(self._span))
        return carrier.get("traceparent")

    def set_attribute(self, key: str, value: str | int | float | bool) -> None:
        self._span.set_attribute(key, value)


class OpenTelemetry:
    """The services' telemetry through an OpenTelemetry meter and tracer."""

    def __init__(self, meter_provider: Any = None, tracer_provider: Any = None) -> None:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(SCOPE)
        self._tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(SCOPE)
        self._instruments: dict[str, Any] = {}
        for spec in METRICS:
            create = {GAUGE: meter.create_gauge, COUNTER: meter.create_counter}.get(spec.kind, meter.create_histogram)
            self._instruments[spec.name] = create(spec.name, unit=spec.unit, description=spec.description)

    def record(self, metric: MetricSpec, value: float, attributes: Attributes) -> None:
        instrument = self._instruments[metric.name]
        if metric.kind == GAUGE:
            instrument.set(value, dict(attributes))
        elif metric.kind == COUNTER:
            instrument.add(value, dict(attributes))
        else:
            instrument.record(value, dict(attributes))

    @contextmanager
    def span(self, name: str, *, parent: str | None = None, attributes: Attributes | None = None) -> Iterator[OtelSpan]:
        """A child of the span ``parent`` names (the message's ``traceparent``), or a new trace;
        the span current here (the Functions invocation's) is linked, so both views connect."""
        context = _PROPAGATOR.extract({"traceparent": parent}) if parent else Context()
        ambient = trace.get_current_span().get_span_context()
        links = [Link(ambient)] if ambient.is_valid else []
        span = self._tracer.start_span(name, context=context, kind=SpanKind.INTERNAL, links=links,
                                       attributes=dict(attributes or {}))
        with trace.use_span(span, end_on_exit=True):
            yield OtelSpan(span)
