"""How the services report to operators: the ``Telemetry`` protocol, with no SDK behind it.

The services receive a ``Telemetry`` by injection; the OpenTelemetry implementation lives in
``scaling/telemetry/`` and the composition root hands it in. ``NO_TELEMETRY`` (the default)
reports nothing: local runs and tests that do not look at telemetry. The metrics themselves are
the contract in ``scaling.domain.telemetry``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from scaling.domain.telemetry import Attributes, MetricSpec


class Span(Protocol):
    """An open span: its W3C ``traceparent`` (carried in the next queue message) and attributes."""

    @property
    def traceparent(self) -> str | None: ...

    def set_attribute(self, key: str, value: str | int | float | bool) -> None: ...


class Telemetry(Protocol):
    """Where the services report; ``record`` sets a gauge, adds to a counter or records a histogram
    value, as the metric's kind says."""

    def record(self, metric: MetricSpec, value: float, attributes: Attributes) -> None: ...

    def span(self, name: str, *, parent: str | None = None,
             attributes: Attributes | None = None) -> AbstractContextManager[Span]: ...


class _NoSpan:
    traceparent: str | None = None

    def set_attribute(self, key: str, value: str | int | float | bool) -> None:
        pass


class NoTelemetry:
    """Reports nothing: local runs and tests that do not look at telemetry."""

    def record(self, metric: MetricSpec, value: float, attributes: Attributes) -> None:
        pass

    @contextmanager
    def span(self, name: str, *, parent: str | None = None, attributes: Attributes | None = None) -> Iterator[Span]:
        yield _NoSpan()


NO_TELEMETRY: Telemetry = NoTelemetry()


def number(value: object) -> float | None:
    """A decision metric as a float, or ``None`` when it is missing or not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
