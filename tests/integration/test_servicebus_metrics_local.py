"""The queue-rate reader with the REAL ``azure.monitor.query.aio.MetricsQueryClient`` against a
local endpoint speaking Azure Monitor's metrics API (no Azure Monitor emulator exists).

The endpoint is the local ARM server's TLS setup (``scaling.plans.local_arm.serve_local_arm``:
pytest-httpserver, a throwaway ``trustme`` CA, ``connection_verify``) with a handler answering
``GET {resource}/providers/Microsoft.Insights/metrics`` the way the service does. It checks the
query the SDK sends for our arguments and that its parsed ``MetricsQueryResult`` gives the rates.
Skipped where azure-monitor-query is not installed yet (``pip install -r requirements-dev.txt``).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

pytest.importorskip("azure.monitor.query.aio")

from werkzeug import Request, Response  # noqa: E402

from scaling.plans.local_arm import serve_local_arm  # noqa: E402
from scaling.sources.servicebus import MonitorQueueMetrics, QueueRates  # noqa: E402

NOW = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC)
NAMESPACE_ID = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/jobs-ns"


class AsyncCredential:
    """The local endpoint's static token, for the async client."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def get_token(self, *scopes: str, **kwargs: Any):
        return self.inner.get_token(*scopes, **kwargs)

    async def close(self) -> None:
        pass


class MetricsApi:
    """Answers the metrics list call with per-minute totals; the last minute not ingested yet."""

    def __init__(self) -> None:
        self.requests: list[Request] = []

    def handle(self, request: Request) -> Response:
        self.requests.append(request)
        if not request.path.lower().endswith("/providers/microsoft.insights/metrics"):
            return Response(json.dumps({"error": {"code": "NotFound", "message": request.path}}), 404,
                            content_type="application/json")

        def metric(name: str, totals: list[float | None]) -> dict:
            data = [{"timeStamp": f"2026-03-01T11:{57 + index:02d}:00Z", **({} if total is None else {"total": total})}
                    for index, total in enumerate(totals)]
            return {"id": f"{NAMESPACE_ID}/providers/Microsoft.Insights/metrics/{name}", "type": "Microsoft.Insights/metrics",
                    "name": {"value": name, "localizedValue": name}, "unit": "Count",
                    "timeseries": [{"metadatavalues": [{"name": {"value": "entityname", "localizedValue": "EntityName"},
                                                        "value": "jobs"}], "data": data}]}

        body = {"cost": 0, "timespan": "2026-03-01T11:50:30Z/2026-03-01T12:00:30Z", "interval": "PT1M",
                "namespace": "Microsoft.ServiceBus/namespaces", "resourceregion": "westeurope",
                "value": [metric("IncomingMessages", [540.0, 600.0, None]), metric("CompleteMessage", [500.0, 570.0, None])]}
        return Response(json.dumps(body), 200, content_type="application/json")


def test_the_real_metrics_client_asks_for_the_queue_totals_and_the_reader_takes_the_latest_minute() -> None:
    from azure.monitor.query.aio import MetricsQueryClient

    api = MetricsApi()
    with serve_local_arm(api) as endpoint:
        async def scenario() -> QueueRates:
            client = MetricsQueryClient(AsyncCredential(endpoint.credential), endpoint=endpoint.base_url,
                                        connection_verify=endpoint.ca_file)
            reader = MonitorQueueMetrics(client)
            try:
                return await reader.queue_rates(NAMESPACE_ID, "jobs", NOW)
            finally:
                await reader.close()

        rates = asyncio.run(scenario())
    assert rates == QueueRates(600.0, 570.0, datetime(2026, 3, 1, 11, 58, tzinfo=UTC))
    (request,) = api.requests
    assert request.path.lower() == f"{NAMESPACE_ID}/providers/microsoft.insights/metrics".lower()
    query = request.args
    assert query["metricnames"] == "IncomingMessages,CompleteMessage"
    assert query["aggregation"] == "Total" and query["interval"] == "PT1M"
    assert query["$filter"] == "EntityName eq 'jobs'"
    start, end = query["timespan"].split("/")
    assert datetime.fromisoformat(end.replace("Z", "+00:00")) == NOW
    assert NOW - datetime.fromisoformat(start.replace("Z", "+00:00")) == timedelta(minutes=10)
    assert request.headers["Authorization"] == "Bearer local-arm-token"
