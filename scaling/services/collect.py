"""The collect service: one ``MetricSample`` per target, all sources read concurrently.

Every remote call goes through one ``CallGate`` per run (at most ``collect_concurrency`` calls
in flight, each bounded by ``collect_timeout_seconds``). A source that fails or times out
yields a reading with ``ok`` false and the error; a plan whose capacity cannot be read yields
``capacity`` ``None`` with ``capacity_error``. Neither stops the other targets' samples.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from scaling.domain.policy import PlanSettings, Policy, SourceSettings, TargetPolicy
from scaling.domain.samples import MAX_AUTOSCALE_SETTINGS, MetricSample, SourceReading
from scaling.domain.telemetry import CAPACITY_OBSERVED, COLLECTION_FAILURES, TARGET_ATTRIBUTE
from scaling.services.telemetry import NO_TELEMETRY, Telemetry
from scaling.sources.base import CallGate, Clock, SourceReader, error_text, utc_now
from scaling.sources.layouts import NO_LAYOUT_NOTE

logger = logging.getLogger(__name__)


class CapacityReader(Protocol):
    """The plan's current instance count (the azure-mgmt-web adapter lives in scaling/plans/)."""

    async def current_capacity(self, plan: PlanSettings) -> int: ...


class AutoscaleSettingsReader(Protocol):
    """The names of the enabled Azure Monitor autoscale settings whose target is the plan."""

    async def current_autoscale_settings(self, plan: PlanSettings) -> tuple[str, ...]: ...


def collection_time(moment: datetime) -> datetime:
    """The sample's ``collected_at``: UTC, floored to the second (so a retried run keeps its id)."""
    if moment.tzinfo is None:
        raise ValueError("the clock must return timezone-aware times")
    return moment.astimezone(UTC).replace(microsecond=0)


class Collector:
    """Reads every target of the policy into one sample each."""

    def __init__(
        self,
        policy: Policy,
        readers: Mapping[str, SourceReader] | Iterable[SourceReader],
        capacity: CapacityReader,
        *,
        concurrency: int = 16,
        timeout_seconds: float = 10.0,
        clock: Clock = utc_now,
        closers: Iterable[Callable[[], Any]] = (),
        telemetry: Telemetry = NO_TELEMETRY,
        controllers: AutoscaleSettingsReader | None = None,
    ) -> None:
        self.policy = policy
        self.controllers = controllers
        self.readers: dict[str, SourceReader] = (
            dict(readers) if isinstance(readers, Mapping) else {reader.kind: reader for reader in readers}
        )
        self.capacity = capacity
        self.concurrency = concurrency
        self.timeout_seconds = timeout_seconds
        self.clock = clock
        self._closers = list(closers)
        self.telemetry = telemetry

    async def collect(self, now: datetime | None = None) -> list[MetricSample]:
        """One sample per target, in policy order."""
        moment = (now or self.clock()).astimezone(UTC)
        gate = CallGate(self.concurrency, self.timeout_seconds)
        samples = await asyncio.gather(*(self._collect_target(target, gate, moment) for target in self.policy.targets))
        for sample in samples:
            failed = [f"{s.name}: {s.error}" for s in sample.sources if not s.ok]
            if failed or sample.capacity_error:
                logger.warning("collect %s at %s: failed sources %s; capacity error %s", sample.target,
                               sample.sample_id, failed, sample.capacity_error)
            for source in sample.sources:  # no checkpoints found: the backlog is the whole stream, say why
                for note in source.notes:
                    if note.startswith(NO_LAYOUT_NOTE):
                        logger.warning("collect %s/%s: %s", sample.target, source.name, note)
        return list(samples)

    async def collect_messages(self, now: datetime | None = None) -> list[str]:
        """The ``metrics`` queue messages: one JSON sample per target."""
        return [sample.to_json() for sample in await self.collect(now)]

    async def _collect_target(self, target: TargetPolicy, gate: CallGate, moment: datetime) -> MetricSample:
        # The first span of the decision's trace: its traceparent travels in the sample.
        with self.telemetry.span("collect", attributes={TARGET_ATTRIBUTE: target.name}) as span:
            capacity_result, autoscale_settings, *readings = await asyncio.gather(
                self._read_capacity(target.plan, gate),
                self._read_autoscale_settings(target.plan, gate),
                *(self._read_source(source, gate, moment) for source in target.sources),
            )
            capacity, capacity_error = capacity_result
            sample = MetricSample(
                target=target.name,
                collected_at=collection_time(moment),
                capacity=capacity,
                sources=tuple(readings),
                capacity_error=capacity_error,
                traceparent=span.traceparent,
                autoscale_settings=autoscale_settings,
            )
            span.set_attribute("autoscaler.sample_id", sample.sample_id)
            self._report(sample)
        return sample

    def _report(self, sample: MetricSample) -> None:
        if sample.capacity is not None:
            self.telemetry.record(CAPACITY_OBSERVED, sample.capacity, {"target": sample.target})
        for source in sample.sources:
            if not source.ok:
                self.telemetry.record(COLLECTION_FAILURES, 1, {"target": sample.target, "source": source.name})

    async def _read_capacity(self, plan: PlanSettings, gate: CallGate) -> tuple[int | None, str | None]:
        try:
            value = await gate.call("reading the plan's capacity", lambda: self.capacity.current_capacity(plan))
        except Exception as error:
            return None, error_text(error)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return None, f"the plan reported an invalid capacity: {value!r}"
        return value, None

    async def _read_autoscale_settings(self, plan: PlanSettings, gate: CallGate) -> tuple[str, ...]:
        """The enabled Azure Monitor autoscale settings driving the plan (another controller: the
        target holds while there is one). A failed read says none, with a warning: the scale
        service checks again before it writes."""
        if self.controllers is None:
            return ()
        try:
            names = await gate.call("listing the plan's autoscale settings",
                                    lambda: self.controllers.current_autoscale_settings(plan))
        except Exception as error:
            logger.warning("collect: could not list the autoscale settings of plan %s's resource group: %s",
                           plan.resource_id, error_text(error))
            return ()
        return tuple(str(name) for name in names)[:MAX_AUTOSCALE_SETTINGS]

    async def _read_source(self, source: SourceSettings, gate: CallGate, moment: datetime) -> SourceReading:
        reader = self.readers.get(source.kind)
        if reader is None:
            return SourceReading(name=source.name, kind=source.kind, ok=False,
                                 error=f"no reader for source kind {source.kind!r}")
        try:
            return await reader.read(source, gate, moment)
        except Exception as error:
            return SourceReading(name=source.name, kind=source.kind, ok=False, error=error_text(error))

    async def aclose(self) -> None:
        """Close every client the readers and the capacity reader hold (call on shutdown)."""
        closers: list[Callable[[], Any]] = [reader.aclose for reader in self.readers.values() if hasattr(reader, "aclose")]
        for name in ("aclose", "close"):
            close = getattr(self.capacity, name, None)
            if close is not None:
                closers.append(close)
                break
        closers.extend(self._closers)
        for close in closers:
            try:
                result = close()
                if inspect.isawaitable(result):
                    await result
            except Exception:  # closing must not hide the others
                logger.exception("closing a collector client failed")
