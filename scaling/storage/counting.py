"""An azure-core per-call policy that counts storage requests by kind (benchmark and tests)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from azure.core.pipeline.policies import SansIOHTTPPolicy


class CountingPolicy(SansIOHTTPPolicy):
    """Counts requests by kind; per call, so a retried request counts once."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    @staticmethod
    def kind(method: str, url: str) -> str:
        path = url.split("?", 1)[0]
        if path.endswith("/$batch"):
            return "transaction"
        if path.rstrip("/").endswith("/Tables"):
            return "create_table"
        if method == "POST":
            return "insert"
        if method == "GET":
            return "get" if "PartitionKey=" in path else "query"
        if method == "DELETE":
            return "delete"
        return "update"

    def on_request(self, request: Any) -> None:
        http = request.http_request
        with self._lock:
            self.counts[self.kind(http.method, http.url)] += 1

    def take(self) -> Counter[str]:
        with self._lock:
            counts, self.counts = self.counts, Counter()
        return counts
