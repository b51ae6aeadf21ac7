"""A local endpoint speaking the ARM REST shape for App Service Plans (and the Service Bus entity
and Azure Monitor autoscale-setting reads the autoscaler makes), over TLS.

For tests and the local demo: the real ``azure.mgmt.web`` client talks to it exactly as to ARM.
azure-core refuses bearer tokens over plain http, so the endpoint serves HTTPS with a throwaway
certificate authority (``trustme``); clients pass ``connection_verify=<ca file>`` and a
``StaticTokenCredential``. Faults (429 with Retry-After, 5xx, 409, 404) can be scripted, and
every request and write is recorded.

Development dependencies only (pytest-httpserver/werkzeug, trustme): import this module from
tests and the demo, never from the Function App.
"""

from __future__ import annotations

import copy
import json
import re
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from azure.core.credentials import AccessToken

from scaling.plans.namespace.local import LocalEventHubNamespaces

PLAN_PATH = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Web/serverfarms/(?P<name>[^/]+)$",
    re.IGNORECASE,
)

SKU_FAMILIES = {"basic": ("B1", "B"), "standard": ("S1", "S"), "premiumv3": ("P1v3", "Pv3"),
                "isolatedv2": ("I1v2", "Iv2"), "elasticpremium": ("EP1", "EP")}


class StaticTokenCredential:
    """A token credential that always returns the same fake token (local endpoints only)."""

    def __init__(self, token: str = "local-arm-token") -> None:
        self.token = token
        self.requests = 0

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.requests += 1
        return AccessToken(self.token, int(time.time()) + 3600)

    def close(self) -> None:
        pass


@dataclass
class Fault:
    status: int
    method: str | None = None
    times: int = 1
    headers: dict[str, str] = field(default_factory=dict)
    code: str = "Failure"
    message: str = "scripted failure"


@dataclass(frozen=True, slots=True)
class Write:
    method: str
    resource_id: str
    body: dict


def json_reply(status: int, document: Any, headers: dict[str, str] | None = None) -> Any:
    """A JSON response as ARM sends it (werkzeug, imported here: a development dependency)."""
    from werkzeug import Response

    return Response(json.dumps(document), status=status, headers=headers or {}, content_type="application/json")


class LocalArm:
    """The plans and the scripted faults; ``handle`` answers one werkzeug request."""

    def __init__(self) -> None:
        self.plans: dict[str, dict] = {}
        self.writes: list[Write] = []
        self.requests: list[tuple[str, str]] = []
        self.faults: list[Fault] = []
        self.service_bus = LocalServiceBus()
        self.autoscale = LocalAutoscaleSettings()
        self.event_hubs = LocalEventHubNamespaces()
        self._lock = threading.Lock()

    @staticmethod
    def resource_id(subscription: str, group: str, name: str) -> str:
        return f"/subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.Web/serverfarms/{name}"

    def add_plan(self, resource_id: str, *, capacity: int = 1, tier: str = "Standard", sku_name: str | None = None,
                 maximum_elastic_worker_count: int | None = None, maximum_number_of_workers: int | None = None,
                 linux: bool = True) -> dict:
        name = resource_id.rstrip("/").rsplit("/", 1)[-1]
        default_name, family = SKU_FAMILIES.get(tier.lower(), ("S1", "S"))
        sku_name = sku_name or default_name
        elastic = tier.lower() == "elasticpremium"
        document = {
            "id": resource_id,
            "name": name,
            "type": "Microsoft.Web/serverfarms",
            "location": "West Europe",
            "kind": ("elastic" if elastic else "linux") if linux else ("elastic" if elastic else "app"),
            "sku": {"name": sku_name, "tier": tier, "size": sku_name, "family": family, "capacity": capacity},
            "properties": {
                "status": "Ready",
                "provisioningState": "Succeeded",
                "reserved": linux,
                "numberOfWorkers": capacity,
                "maximumNumberOfWorkers": maximum_number_of_workers or 30,
                "maximumElasticWorkerCount": maximum_elastic_worker_count if elastic else 1,
                "elasticScaleEnabled": elastic,
                "perSiteScaling": False,
                "numberOfSites": 1,
            },
        }
        with self._lock:
            self.plans[resource_id.lower()] = document
        return document

    def capacity(self, resource_id: str) -> int:
        document = self.plans[resource_id.lower()]
        if document["sku"]["tier"].lower() == "elasticpremium":
            return document["properties"]["maximumElasticWorkerCount"]
        return document["sku"]["capacity"]

    def fail(self, status: int, *, method: str | None = None, times: int = 1, retry_after: str | None = None,
             code: str | None = None, message: str | None = None) -> None:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        default_code = {409: "Conflict", 429: "TooManyRequests", 404: "ResourceNotFound"}.get(status, "InternalServerError")
        self.faults.append(Fault(status, method.upper() if method else None, times, headers, code or default_code,
                                 message or f"scripted {status}"))

    def _fault_for(self, method: str) -> Fault | None:
        for fault in self.faults:
            if fault.times > 0 and fault.method in (None, method):
                fault.times -= 1
                if fault.times == 0:
                    self.faults.remove(fault)
                return fault
        return None

    def handle(self, request: Any) -> Any:
        service_bus_reply = self.service_bus.handle(request)  # its own routes, log and denials
        if service_bus_reply is not None:
            return service_bus_reply
        autoscale_reply = self.autoscale.handle(request)  # likewise
        if autoscale_reply is not None:
            return autoscale_reply
        event_hubs_reply = self.event_hubs.handle(request)  # namespaces and their metrics
        if event_hubs_reply is not None:
            return event_hubs_reply
        with self._lock:
            self.requests.append((request.method, request.path))
            fault = self._fault_for(request.method)
            if fault is not None:
                return json_reply(fault.status, {"error": {"code": fault.code, "message": fault.message}}, fault.headers)
            match = PLAN_PATH.match(request.path)
            if not match:
                return json_reply(404, {"error": {"code": "NotFound", "message": f"no route {request.path}"}})
            key = request.path.lower()
            document = self.plans.get(key)
            if document is None:
                return json_reply(404, {"error": {"code": "ResourceNotFound",
                                              "message": f"The Resource 'Microsoft.Web/serverfarms/{match['name']}' under "
                                                         f"resource group '{match['rg']}' was not found."}})
            if request.method == "GET":
                return json_reply(200, document)
            if request.method in ("PUT", "PATCH"):
                body = json.loads(request.get_data() or b"{}")
                self.writes.append(Write(request.method, document["id"], body))
                updated = copy.deepcopy(document)
                sku = body.get("sku") or {}
                if "capacity" in sku:
                    updated["sku"]["capacity"] = sku["capacity"]
                    updated["properties"]["numberOfWorkers"] = sku["capacity"]
                properties = body.get("properties") or {}
                if "maximumElasticWorkerCount" in properties:
                    updated["properties"]["maximumElasticWorkerCount"] = properties["maximumElasticWorkerCount"]
                self.plans[key] = updated
                return json_reply(200, updated)
            return json_reply(405, {"error": {"code": "MethodNotAllowed", "message": request.method}})


# --- Service Bus entities (Microsoft.ServiceBus): the queue and topic-subscription GETs ---------
# The management plane's reads the Service Bus source counts with (azure-mgmt-servicebus): a GET
# of .../namespaces/{ns}/queues/{queue} or .../topics/{topic}/subscriptions/{sub} carries
# properties.countDetails and properties.messageCount. Read-only; a namespace can be set to
# refuse every read (403 AuthorizationFailed, as ARM answers an identity without a reader role).

SERVICE_BUS_ENTITY_PATH = re.compile(
    r"^(?P<namespace>/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.ServiceBus/namespaces/[^/]+)"
    r"/(?:queues/(?P<queue>[^/]+)|topics/(?P<topic>[^/]+)/subscriptions/(?P<subscription>[^/]+))$",
    re.IGNORECASE,
)


@dataclass
class EntityCounts:
    """What ``countDetails`` reports; ``active_from`` (when set) gives the active count at each read."""

    active: int = 0
    dead_letter: int = 0
    scheduled: int = 0
    transfer: int = 0
    transfer_dead_letter: int = 0
    active_from: Any = None

    def details(self) -> dict[str, int]:
        active = int(self.active_from()) if self.active_from is not None else self.active
        return {"activeMessageCount": active, "deadLetterMessageCount": self.dead_letter,
                "scheduledMessageCount": self.scheduled, "transferMessageCount": self.transfer,
                "transferDeadLetterMessageCount": self.transfer_dead_letter}


class LocalServiceBus:
    """Service Bus queues and topic subscriptions, answered as ARM's GET returns them. ``requests``
    logs (method, path, api-version); ``deny`` makes a namespace refuse reads with a 403."""

    def __init__(self) -> None:
        self.entities: dict[str, EntityCounts] = {}
        self.denied: set[str] = set()
        self.requests: list[tuple[str, str, str | None]] = []
        self._lock = threading.Lock()

    def add_queue(self, namespace_id: str, queue_name: str, counts: EntityCounts | None = None) -> EntityCounts:
        return self._add(f"{namespace_id.rstrip('/')}/queues/{queue_name}", counts)

    def add_subscription(self, namespace_id: str, topic_name: str, subscription_name: str,
                         counts: EntityCounts | None = None) -> EntityCounts:
        return self._add(f"{namespace_id.rstrip('/')}/topics/{topic_name}/subscriptions/{subscription_name}", counts)

    def _add(self, entity_id: str, counts: EntityCounts | None) -> EntityCounts:
        counts = counts or EntityCounts()
        with self._lock:
            self.entities[entity_id.lower()] = counts
        return counts

    def deny(self, namespace_id: str) -> None:
        with self._lock:
            self.denied.add(namespace_id.rstrip("/").lower())

    def handle(self, request: Any) -> Any:
        """The reply to a Service Bus entity request; ``None`` for any other path."""
        match = SERVICE_BUS_ENTITY_PATH.match(request.path)
        if not match:
            return None
        with self._lock:
            self.requests.append((request.method, request.path, request.args.get("api-version")))
            if request.method != "GET":
                return json_reply(405, {"error": {"code": "MethodNotAllowed", "message": f"{request.method}: read-only here"}})
            if not request.args.get("api-version"):
                return json_reply(400, {"error": {"code": "MissingApiVersionParameter",
                                              "message": "The api-version query parameter (?api-version=) is required."}})
            if match["namespace"].lower() in self.denied:
                action = "queues/read" if match["queue"] else "topics/subscriptions/read"
                return json_reply(403, {"error": {"code": "AuthorizationFailed", "message": (
                    f"The client does not have authorization to perform action 'Microsoft.ServiceBus/namespaces/{action}' "
                    f"over scope '{request.path}' or the scope is invalid.")}})
            counts = self.entities.get(request.path.lower())
            name = match["queue"] or match["subscription"]
            if counts is None:
                return json_reply(404, {"error": {"code": "NotFound", "message": f"The entity '{name}' was not found in "
                                                                             f"namespace '{match['namespace']}'."}})
            details = counts.details()
        kind = "Queues" if match["queue"] else "Topics/Subscriptions"
        return json_reply(200, {
            "id": request.path, "name": name, "type": f"Microsoft.ServiceBus/Namespaces/{kind}", "location": "West Europe",
            "properties": {"countDetails": details, "messageCount": sum(details.values()), "status": "Active",
                           "sizeInBytes": 0, "maxDeliveryCount": 10, "createdAt": "2026-01-01T00:00:00Z",
                           "updatedAt": "2026-01-01T00:00:00Z", "accessedAt": "2026-01-01T00:00:00Z"},
        })


# --- Azure Monitor autoscale settings (Microsoft.Insights): the resource group's list ------------
# What the conflict check reads (azure-mgmt-monitor's autoscale_settings.list_by_resource_group):
# another controller on a plan. Settings are added, enabled and disabled by the tests; the list is
# read-only here.

AUTOSCALE_SETTINGS_PATH = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)(?:/resourceGroups/(?P<rg>[^/]+))?/providers/Microsoft\.Insights/autoscalesettings$",
    re.IGNORECASE,
)


class LocalAutoscaleSettings:
    """Autoscale settings, answered as ARM lists them per resource group or per subscription.
    ``requests`` logs each list (method, path); ``denied`` makes every list answer 403 (an
    identity without the role), ``subscription_denied`` only the subscription's (the role
    assigned on resource groups only)."""

    def __init__(self) -> None:
        self.settings: dict[str, dict] = {}
        self.requests: list[tuple[str, str]] = []
        self.denied = False
        self.subscription_denied = False
        self._lock = threading.Lock()

    def add(self, name: str, target_resource_uri: str, *, enabled: bool = True, resource_group: str | None = None) -> dict:
        """An autoscale setting in the target's resource group (where ARM keeps it, usually), or
        in ``resource_group`` of the same subscription (Azure lets it live anywhere there)."""
        group = target_resource_uri.split("/providers/")[0]
        if resource_group is not None:
            group = f"{group.split('/resourceGroups/')[0]}/resourceGroups/{resource_group}"
        document = {
            "id": f"{group}/providers/microsoft.insights/autoscalesettings/{name}",
            "name": name, "type": "Microsoft.Insights/autoscaleSettings", "location": "West Europe",
            "properties": {"enabled": enabled, "targetResourceUri": target_resource_uri, "name": name,
                           "profiles": [{"name": "default", "capacity": {"minimum": "1", "maximum": "10", "default": "2"},
                                         "rules": []}]},
        }
        with self._lock:
            self.settings[document["id"].lower()] = document
        return document

    def set_enabled(self, name: str, enabled: bool) -> None:
        with self._lock:
            for document in self.settings.values():
                if document["name"] == name:
                    document["properties"]["enabled"] = enabled

    def handle(self, request: Any) -> Any:
        """The reply to a list of a resource group's autoscale settings; ``None`` for other paths."""
        match = AUTOSCALE_SETTINGS_PATH.match(request.path)
        if not match:
            return None
        with self._lock:
            self.requests.append((request.method, request.path))
            if request.method != "GET":
                return json_reply(405, {"error": {"code": "MethodNotAllowed", "message": f"{request.method}: read-only here"}})
            if self.denied or (self.subscription_denied and match["rg"] is None):
                return json_reply(403, {"error": {"code": "AuthorizationFailed", "message": (
                    "The client does not have authorization to perform action "
                    f"'Microsoft.Insights/autoscalesettings/read' over scope '{request.path}'.")}})
            prefix = (f"/subscriptions/{match['sub']}/" if match["rg"] is None
                      else f"/subscriptions/{match['sub']}/resourcegroups/{match['rg']}/").lower()
            value = [copy.deepcopy(document) for key, document in self.settings.items() if key.startswith(prefix)]
        return json_reply(200, {"value": value})


class AsyncStaticTokenCredential:
    """``StaticTokenCredential`` for the async clients (azure-mgmt-servicebus' aio client)."""

    def __init__(self, token: str = "local-arm-token") -> None:
        self.inner = StaticTokenCredential(token)

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return self.inner.get_token(*scopes, **kwargs)

    async def close(self) -> None:
        pass


# --- serving -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LocalArmEndpoint:
    base_url: str
    ca_file: str
    arm: LocalArm
    credential: StaticTokenCredential

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` of the endpoint, for a TCP-level proxy in front of it."""
        host, _, port = self.base_url.removeprefix("https://").rpartition(":")
        return host, int(port)

    def client_kwargs(self) -> dict[str, Any]:
        """What ``AppServicePlanAdapter`` needs to trust the local certificate."""
        return {"connection_verify": self.ca_file}


@contextmanager
def serve_local_arm(arm: LocalArm | None = None) -> Iterator[LocalArmEndpoint]:
    """Serve ``arm`` over HTTPS on a free loopback port, with a throwaway CA."""
    import trustme
    from pytest_httpserver import HTTPServer

    arm = arm or LocalArm()
    authority = trustme.CA()
    certificate = authority.issue_cert("127.0.0.1", "localhost")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # No TLS 1.3 session tickets: the server then sends nothing the client did not ask for, which
    # is what lets a byte-level fault proxy (tests/faultproxy.py) tell a reply from a ticket.
    context.num_tickets = 0
    certificate.configure_cert(context)
    with tempfile.TemporaryDirectory(prefix="local-arm-") as folder:
        ca_file = str(Path(folder) / "ca.pem")
        authority.cert_pem.write_to_path(ca_file)
        server = HTTPServer(host="127.0.0.1", port=0, ssl_context=context, threaded=True)
        server.expect_request(re.compile(".*")).respond_with_handler(arm.handle)
        server.start()
        try:
            yield LocalArmEndpoint(f"https://127.0.0.1:{server.port}", ca_file, arm, StaticTokenCredential())
        finally:
            server.clear()
            server.stop()
