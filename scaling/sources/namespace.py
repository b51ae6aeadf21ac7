"""An Event Hubs namespace's per-minute metrics from Azure Monitor, for the namespace target.

``MonitorNamespaceMetrics`` asks ``azure.monitor.query.aio.MetricsQueryClient`` (the client the
Service Bus SLO mode uses) for ``IncomingBytes``, ``IncomingMessages``, ``OutgoingBytes``,
``OutgoingMessages`` and ``ThrottledRequests``, Total per minute, over the scale-down hold and a
few minutes more (one query: a lower count must be shown to have carried every minute of the
hold). Needs Monitoring Reader on the namespace. A minute Azure Monitor has not ingested yet has
no totals and is left out; only minutes that ended by ``now`` count.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol

from scaling.domain.namespace.sizing import NamespaceMinute
from scaling.sources.base import minute_totals

INCOMING_BYTES = "IncomingBytes"
INCOMING_MESSAGES = "IncomingMessages"
OUTGOING_BYTES = "OutgoingBytes"
OUTGOING_MESSAGES = "OutgoingMessages"
THROTTLED_REQUESTS = "ThrottledRequests"
NAMESPACE_METRICS = (INCOMING_BYTES, INCOMING_MESSAGES, OUTGOING_BYTES, OUTGOING_MESSAGES, THROTTLED_REQUESTS)
#: Azure Monitor's ingestion delay plus a little: added to the hold the query looks back over.
METRICS_DELAY = timedelta(minutes=5)


class NamespaceMetricsReader(Protocol):
    async def namespace_minutes(self, resource_id: str, now: datetime, lookback: timedelta) -> tuple[NamespaceMinute, ...]: ...


def minutes_from_metrics(result: Any, now: datetime) -> tuple[NamespaceMinute, ...]:
    """The complete minutes of a ``MetricsQueryResult`` (oldest first) in which every one of the
    five metrics has a total (several time series are summed)."""
    totals = minute_totals(result, NAMESPACE_METRICS, now, value=lambda total: max(float(total), 0.0))
    complete = sorted(set.intersection(*(set(values) for values in totals.values())))
    return tuple(NamespaceMinute(stamp, *(totals[name][stamp] for name in NAMESPACE_METRICS)) for stamp in complete)


class MonitorNamespaceMetrics:
    """``NamespaceMetricsReader`` over ``MetricsQueryClient`` (or an object with its ``query_resource``/``close``)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def namespace_minutes(self, resource_id: str, now: datetime, lookback: timedelta) -> tuple[NamespaceMinute, ...]:
        result = await self.client.query_resource(
            resource_id, list(NAMESPACE_METRICS), timespan=(now - lookback - METRICS_DELAY, now),
            granularity=timedelta(minutes=1), aggregations=["Total"])
        return minutes_from_metrics(result, now)

    async def close(self) -> None:
        await self.client.close()
