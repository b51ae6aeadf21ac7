"""What every metric source shares: the call gate (concurrency bound + per-call timeout), the
``SourceReader`` protocol a source kind implements, and error text for failed readings.

A new source kind is one module with a class satisfying ``SourceReader`` plus its settings in
the policy (``SourceSettings.kind``); the collector dispatches on ``kind``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from scaling.domain.policy import SourceSettings
from scaling.domain.samples import SourceReading

T = TypeVar("T")

#: Longest error text carried in a sample; SDK errors can be pages long.
MAX_ERROR_TEXT = 500

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def connection_from_env(source: SourceSettings, environ: Mapping[str, str]) -> str | None:
    """The source's connection string from its ``connectionFromEnv`` setting (``None``: the source
    uses identity); a named setting that is unset or empty is an error naming both."""
    if not source.connection_from_env:
        return None
    value = environ.get(source.connection_from_env)
    if not value:
        raise LookupError(f"{source.connection_from_env} (connectionFromEnv of source {source.name!r}) is not set")
    return value


class ReadError(Exception):
    """A failure whose message already says what went wrong (reported without the class name)."""


class CallTimeout(ReadError):
    """One remote call took longer than the collection timeout."""


def error_text(error: BaseException) -> str:
    """A one-line description of a failure for ``SourceReading.error``."""
    if isinstance(error, ReadError):
        text = str(error)
    else:
        detail = " ".join(str(error).split())
        text = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
    return text if len(text) <= MAX_ERROR_TEXT else text[: MAX_ERROR_TEXT - 3] + "..."


class CallGate:
    """Bounds the remote calls in flight and gives each one a timeout.

    Only leaf calls (one SDK request or one listing) pass through the gate, never a call that
    itself waits for gated calls, so a bound of 1 serialises everything without deadlocking.
    The timeout starts once the call holds its slot: waiting for a slot is not the remote
    side's fault. Create one per collection run (the semaphore belongs to the running loop).
    """

    def __init__(self, concurrency: int = 16, timeout_seconds: float = 10.0) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        self.concurrency = concurrency
        self.timeout_seconds = timeout_seconds
        self._slots = asyncio.Semaphore(concurrency)

    async def call(self, what: str, start: Callable[[], Awaitable[T]]) -> T:
        async with self._slots:
            try:
                return await asyncio.wait_for(start(), self.timeout_seconds)
            except TimeoutError:
                raise CallTimeout(f"{what} timed out after {self.timeout_seconds:g}s") from None


class SourceReader(Protocol):
    """Reads one configured source of one kind into a ``SourceReading``.

    Implementations may raise; the collector turns any exception into a failed reading
    (``ok`` false, ``error`` set) without affecting the other sources.
    """

    kind: str

    async def read(self, source: SourceSettings, gate: CallGate, now: datetime) -> SourceReading: ...

    async def aclose(self) -> None: ...


def minute_totals(result: Any, names: Sequence[str], now: datetime,
                  value: Callable[[Any], float] = float) -> dict[str, dict[datetime, float]]:
    """Per metric of ``names``, the complete minutes' totals (UTC minute -> ``value`` of each point,
    summed over the time series) of an Azure Monitor ``MetricsQueryResult``. A minute Azure Monitor
    has not ingested yet has no total, and one that has not ended by ``now`` is left out."""
    totals: dict[str, dict[datetime, float]] = {name: {} for name in names}
    for metric in getattr(result, "metrics", None) or ():
        per_minute = totals.get(getattr(metric, "name", None))
        if per_minute is None:
            continue
        for series in getattr(metric, "timeseries", None) or ():
            for point in getattr(series, "data", None) or ():
                total, stamp = getattr(point, "total", None), getattr(point, "timestamp", None)
                if total is None or stamp is None:
                    continue
                stamp = stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)
                if stamp + timedelta(minutes=1) <= now:
                    per_minute[stamp] = per_minute.get(stamp, 0.0) + value(total)
    return totals
