"""Event Hubs namespaces on the local ARM endpoint (``scaling.plans.local_arm``): there is no
Event Hubs or ARM emulator, so this stand-in answers the same HTTP interface the real clients
speak.

- ``GET``/``PATCH .../providers/Microsoft.EventHub/namespaces/NAME`` for
  ``azure.mgmt.eventhub.EventHubManagementClient`` (``namespaces.get`` / ``namespaces.update``):
  ``sku.capacity`` (TUs), ``isAutoInflateEnabled``, ``maximumThroughputUnits``; every write is
  recorded.
- ``GET .../namespaces/NAME/providers/Microsoft.Insights/metrics`` for
  ``azure.monitor.query.aio.MetricsQueryClient``: the five metrics the namespace target reads
  (``IncomingBytes``, ``IncomingMessages``, ``OutgoingBytes``, ``OutgoingMessages``,
  ``ThrottledRequests``), Total per minute, from the minutes a test or the demo sets.
- ``lose_replies(n)``: the next ``n`` writes are applied and then answered 504 (the reply of a
  write that landed is lost: what a client sees when the gateway times out after ARM applied it).

Development dependencies only (werkzeug): tests and the demo import it, never the Function App.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

NAMESPACE_PATH = re.compile(
    r"^(?P<id>/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.EventHub/namespaces/(?P<name>[^/]+))"
    r"(?P<metrics>/providers/Microsoft\.Insights/metrics)?$",
    re.IGNORECASE,
)
METRIC_NAMES = ("IncomingBytes", "IncomingMessages", "OutgoingBytes", "OutgoingMessages", "ThrottledRequests")
METRIC_UNITS = {"IncomingBytes": "Bytes", "OutgoingBytes": "Bytes"}


def _reply(status: int, document: Any) -> Any:
    from werkzeug import Response

    return Response(json.dumps(document), status=status, content_type="application/json")


@dataclass(frozen=True, slots=True)
class NamespaceWrite:
    method: str
    resource_id: str
    body: dict


@dataclass
class LocalNamespace:
    """One namespace: its ARM document and its per-minute metric totals (minute -> name -> total)."""

    document: dict
    minutes: dict[datetime, dict[str, float]] = field(default_factory=dict)


class LocalEventHubNamespaces:
    """The namespaces, their metrics, the writes and the lost replies; ``handle`` answers one request."""

    def __init__(self) -> None:
        self.namespaces: dict[str, LocalNamespace] = {}
        self.writes: list[NamespaceWrite] = []
        self.requests: list[tuple[str, str]] = []
        self.metric_queries: list[dict[str, str]] = []
        self._lost_replies = 0
        self._lock = threading.Lock()

    def add_namespace(self, resource_id: str, *, capacity: int = 1, tier: str = "Standard", auto_inflate: bool = False,
                      maximum_throughput_units: int = 0) -> dict:
        name = resource_id.rstrip("/").rsplit("/", 1)[-1]
        document = {
            "id": resource_id, "name": name, "type": "Microsoft.EventHub/Namespaces", "location": "West Europe",
            "sku": {"name": tier, "tier": tier, "capacity": capacity},
            "properties": {"provisioningState": "Succeeded", "status": "Active", "isAutoInflateEnabled": auto_inflate,
                           "maximumThroughputUnits": maximum_throughput_units, "kafkaEnabled": True,
                           "serviceBusEndpoint": f"https://{name}.servicebus.windows.net:443/"},
        }
        with self._lock:
            self.namespaces[resource_id.lower()] = LocalNamespace(document)
        return document

    def capacity(self, resource_id: str) -> int:
        return int(self.namespaces[resource_id.lower()].document["sku"]["capacity"])

    def set_capacity(self, resource_id: str, capacity: int) -> None:
        """A change from outside the autoscaler (auto-inflate, the portal)."""
        with self._lock:
            self.namespaces[resource_id.lower()].document["sku"]["capacity"] = capacity

    def set_minute(self, resource_id: str, minute: datetime, **totals: float) -> None:
        """One minute's totals, by metric name (``IncomingBytes=...``); unset metrics report 0."""
        with self._lock:
            self.namespaces[resource_id.lower()].minutes[minute.astimezone(UTC).replace(second=0, microsecond=0)] = {
                name: float(totals.get(name, 0.0)) for name in METRIC_NAMES}

    def lose_replies(self, count: int = 1) -> None:
        with self._lock:
            self._lost_replies += count

    def handle(self, request: Any) -> Any:
        """The reply to a namespace or namespace-metrics request; ``None`` for any other path."""
        match = NAMESPACE_PATH.match(request.path)
        if not match:
            return None
        with self._lock:
            self.requests.append((request.method, request.path))
            namespace = self.namespaces.get(match["id"].lower())
            if namespace is None:
                return _reply(404, {"error": {"code": "ResourceNotFound", "message": (
                    f"The Resource 'Microsoft.EventHub/namespaces/{match['name']}' under resource group "
                    f"'{match['rg']}' was not found.")}})
            if match["metrics"]:
                return self._metrics(request, match["id"], namespace)
            if not request.args.get("api-version"):
                return _reply(400, {"error": {"code": "MissingApiVersionParameter", "message": "api-version is required"}})
            if request.method == "GET":
                return _reply(200, namespace.document)
            if request.method == "PATCH":
                body = json.loads(request.get_data() or b"{}")
                self.writes.append(NamespaceWrite(request.method, namespace.document["id"], body))
                updated = copy.deepcopy(namespace.document)
                if "capacity" in (body.get("sku") or {}):
                    updated["sku"]["capacity"] = int(body["sku"]["capacity"])
                namespace.document = updated
                if self._lost_replies > 0:
                    self._lost_replies -= 1
                    return _reply(504, {"error": {"code": "GatewayTimeout", "message": "the reply was lost (scripted)"}})
                return _reply(200, updated)
            return _reply(405, {"error": {"code": "MethodNotAllowed", "message": request.method}})

    def _metrics(self, request: Any, resource_id: str, namespace: LocalNamespace) -> Any:
        """Total per minute over the query's timespan, for the metric names asked for."""
        query = {key: request.args.get(key, "") for key in ("metricnames", "timespan", "interval", "aggregation")}
        self.metric_queries.append(query)
        names = [name for name in query["metricnames"].split(",") if name]
        unknown = [name for name in names if name not in METRIC_NAMES]
        if unknown:
            return _reply(400, {"error": {"code": "BadRequest", "message": f"Failed to find metric configuration for "
                                                                          f"provider: Microsoft.EventHub, metric: {unknown[0]}"}})
        start, end = _timespan(query["timespan"])
        minute = start.replace(second=0, microsecond=0)
        stamps = []
        while minute < end:
            stamps.append(minute)
            minute += timedelta(minutes=1)

        def series(name: str) -> dict:
            data = []
            for stamp in stamps:
                point = {"timeStamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ")}
                totals = namespace.minutes.get(stamp)
                if totals is not None:  # a minute not set is one Azure Monitor has not ingested yet
                    point["total"] = totals[name]
                data.append(point)
            return {"id": f"{resource_id}/providers/Microsoft.Insights/metrics/{name}", "type": "Microsoft.Insights/metrics",
                    "name": {"value": name, "localizedValue": name}, "unit": METRIC_UNITS.get(name, "Count"),
                    "timeseries": [{"metadatavalues": [], "data": data}]}

        return _reply(200, {"cost": 0, "timespan": query["timespan"], "interval": "PT1M",
                            "namespace": "Microsoft.EventHub/namespaces", "resourceregion": "westeurope",
                            "value": [series(name) for name in names]})


def _timespan(text: str) -> tuple[datetime, datetime]:
    """``start/end`` (ISO 8601) as the metrics API takes it; ``start/duration`` is not sent by the client we use."""
    first, _, second = text.partition("/")
    return _parse_time(first), _parse_time(second)


def _parse_time(text: str) -> datetime:
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
