"""Policy checks over Bicep parse trees (pycep-parser), shared by the infra tests.

pycep turns a .bicep file into JSON-like data: ``parameters``, ``variables``, ``resources``,
``modules`` and ``outputs``, each expression either a literal, a symbol name (a plain string),
or ``{"function": {"type": ..., "parameters": {...}}}`` / ``{"operator": {"type": ...,
"operands": {...}}}``. Looped or conditional resources wrap their body in
``{"loop_type"|"condition": ..., "config": body}``. Quoted object keys keep their quotes.

Every checker returns a list of human-readable problems (empty = compliant), so the tests can
run each checker on the real templates and on small broken snippets alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pycep import BicepParser

ROLE_ASSIGNMENT = "Microsoft.Authorization/roleAssignments"
ROLE_DEFINITION = "Microsoft.Authorization/roleDefinitions"
SERVER_FARM = "Microsoft.Web/serverfarms"
SERVICE_BUS_NAMESPACE = "Microsoft.ServiceBus/namespaces"
SERVICE_BUS_QUEUE = "Microsoft.ServiceBus/namespaces/queues"
CUSTOM = "custom"
PLAN_SCALER = "App Service Plan Scaler (custom)"
SERVICE_BUS_READER = "Service Bus Entity Reader (custom)"
AUTOSCALE_READER = "Autoscale Settings Reader (custom)"
TU_SCALER = "Event Hubs Throughput Unit Scaler (custom)"
EVENT_HUBS_NAMESPACE = "Microsoft.EventHub/namespaces"
#: The scope of an assignment with no ``scope``: the resource group the module is deployed to.
RESOURCE_GROUP_SCOPE = "resource group"

#: The custom roles main.bicep defines: exactly these actions, no data action.
CUSTOM_ROLE_ACTIONS: dict[str, tuple[str, ...]] = {
    PLAN_SCALER: ("Microsoft.Web/serverfarms/read", "Microsoft.Web/serverfarms/write"),
    SERVICE_BUS_READER: ("Microsoft.ServiceBus/namespaces/queues/read", "Microsoft.ServiceBus/namespaces/topics/subscriptions/read"),
    AUTOSCALE_READER: ("Microsoft.Insights/autoscalesettings/read",),
    TU_SCALER: ("Microsoft.EventHub/namespaces/read", "Microsoft.EventHub/namespaces/write"),
}

# Built-in role GUIDs (learn.microsoft.com, "Azure built-in roles") and the only resource types
# each may be scoped to. The custom roles have no fixed GUID: they are defined in main.bicep, the
# plan scaler may only be assigned on an App Service Plan, the Service Bus entity reader on a
# namespace.
EXPECTED_ROLES: dict[str, tuple[str, frozenset[str]]] = {
    "Storage Queue Data Contributor": ("974c5e8b-45b9-4653-ba55-5f855dd0fb88", frozenset({"Microsoft.Storage/storageAccounts"})),
    "Storage Table Data Contributor": ("0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3", frozenset({"Microsoft.Storage/storageAccounts"})),
    "Storage Blob Data Owner": ("b7e6dc6d-f1e8-4753-8033-0f276bb0955b", frozenset({"Microsoft.Storage/storageAccounts"})),
    "Storage Blob Data Reader": (
        "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
        frozenset({"Microsoft.Storage/storageAccounts/blobServices/containers"}),
    ),
    "Azure Event Hubs Data Receiver": (
        "a638d3c7-ab3a-418d-83e6-5f17a39d4fde",
        frozenset({"Microsoft.EventHub/namespaces", "Microsoft.EventHub/namespaces/eventhubs"}),
    ),
    # Listen for the SLO mode's peek, on that queue only (never the namespace: see service_bus_rights).
    "Azure Service Bus Data Receiver": ("4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0", frozenset({SERVICE_BUS_QUEUE})),
    "Monitoring Reader": ("43d0d8ad-25c7-4714-9337-8ba259a9fe05", frozenset({SERVICE_BUS_NAMESPACE, EVENT_HUBS_NAMESPACE})),
    "Monitoring Metrics Publisher": ("3913510d-42f4-4e42-8a64-420c390055eb", frozenset({"Microsoft.Insights/components"})),
    PLAN_SCALER: (CUSTOM, frozenset({SERVER_FARM})),
    SERVICE_BUS_READER: (CUSTOM, frozenset({SERVICE_BUS_NAMESPACE})),
    # Throughput units: the namespace resource only (issue 34).
    TU_SCALER: (CUSTOM, frozenset({EVENT_HUBS_NAMESPACE})),
    # Listing autoscale settings needs read on the resource group: the one role that may be
    # assigned there (a target plan's group), and it reads nothing but autoscale settings.
    AUTOSCALE_READER: (CUSTOM, frozenset({RESOURCE_GROUP_SCOPE})),
}

#: Service Bus data-plane rights of the built-in roles (Manage includes Send and Listen). The
#: app's identity may hold Listen on single queues only, and never Send or Manage.
SERVICE_BUS_DATA_RIGHTS: dict[str, tuple[str, frozenset[str]]] = {
    "090c5cfd-751d-490a-894a-3ce6f1109419": ("Azure Service Bus Data Owner", frozenset({"manage", "send", "listen"})),
    "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39": ("Azure Service Bus Data Sender", frozenset({"send"})),
    "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0": ("Azure Service Bus Data Receiver", frozenset({"listen"})),
}

# Roles that must never be granted, whatever the description says.
FORBIDDEN_ROLE_GUIDS = {
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635": "Owner",
    "b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
    "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9": "User Access Administrator",
    "17d1049b-9a84-46fb-8f53-869881c3d3ab": "Storage Account Contributor (reads account keys)",
    "de139f84-1756-47ae-9be6-808fbbe84772": "Website Contributor",
    "2cc479cb-7b4d-49a8-b449-8c00fd0f0a4b": "Web Plan Contributor",
    "090c5cfd-751d-490a-894a-3ce6f1109419": "Azure Service Bus Data Owner (send, receive and delete every message)",
    "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39": "Azure Service Bus Data Sender",
}

GUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
SECRET_TEXT = re.compile(r"AccountKey=|SharedAccessKey=|SharedAccessSignature=", re.IGNORECASE)
UPPER_SNAKE = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$")


# --- parsing -----------------------------------------------------------------------------------


def parse_text(text: str) -> dict[str, Any]:
    return BicepParser().parse(text=text)


def parse_file(path: Path) -> dict[str, Any]:
    return BicepParser().parse(file_path=path)


def unwrap(config: Any) -> Any:
    """The body of a resource or module, without its loop or deploy condition."""
    while isinstance(config, Mapping) and "config" in config and ("loop_type" in config or "condition" in config):
        config = config["config"]
    return config


def unquote(key: str) -> str:
    return key[1:-1] if len(key) >= 2 and key[0] == key[-1] == "'" else key


def walk(node: Any) -> Iterator[Any]:
    """Every node of an expression tree, depth first."""
    yield node
    if isinstance(node, Mapping):
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def function(node: Any) -> tuple[str, dict[str, Any]] | None:
    if isinstance(node, Mapping) and isinstance(node.get("function"), Mapping):
        return node["function"]["type"], node["function"].get("parameters") or {}
    return None


def operator(node: Any) -> tuple[str, dict[str, Any]] | None:
    if isinstance(node, Mapping) and isinstance(node.get("operator"), Mapping):
        return node["operator"]["type"], node["operator"].get("operands") or {}
    return None


def base_symbol(node: Any) -> str | None:
    """``storage`` for ``storage``, ``hubs[i]`` or ``storage.id``."""
    if isinstance(node, str):
        return node
    op = operator(node)
    if op and op[0] in ("index_accessor", "property_accessor"):
        return base_symbol(op[1].get("operand_1"))
    return None


def is_id_of(node: Any, symbol: str) -> bool:
    """True for ``<symbol>.id`` and ``<symbol>[i].id``."""
    op = operator(node)
    return bool(
        op and op[0] == "property_accessor" and op[1].get("operand_2") == "id" and base_symbol(op[1].get("operand_1")) == symbol
    )


def is_resource_group_id(node: Any) -> bool:
    """True for ``resourceGroup().id``."""
    op = operator(node)
    if not (op and op[0] == "property_accessor" and op[1].get("operand_2") == "id"):
        return False
    fn = function(op[1].get("operand_1"))
    return bool(fn and fn[0] == "resource_group")


# --- the model of one file ---------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    name: str
    tree: dict[str, Any]
    text: str

    @classmethod
    def from_file(cls, path: Path, root: Path | None = None) -> Template:
        name = str(path.relative_to(root)) if root else path.name
        return cls(name, parse_file(path), path.read_text(encoding="utf-8"))

    @classmethod
    def from_text(cls, text: str, name: str = "snippet.bicep") -> Template:
        return cls(name, parse_text(text), text)

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.tree.get("resources") or {}

    @property
    def modules(self) -> dict[str, dict[str, Any]]:
        return self.tree.get("modules") or {}

    @property
    def parameters(self) -> dict[str, dict[str, Any]]:
        return self.tree.get("parameters") or {}

    @property
    def variables(self) -> dict[str, dict[str, Any]]:
        return self.tree.get("variables") or {}

    @property
    def outputs(self) -> dict[str, dict[str, Any]]:
        return self.tree.get("outputs") or {}

    def body(self, symbol: str) -> dict[str, Any]:
        return unwrap(self.resources[symbol]["config"])

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {name: self.body(name) for name, res in self.resources.items() if res["type"] == resource_type}

    def resolve(self, node: Any) -> Any:
        """Follows variable references (one symbol at a time) to their value."""
        seen: set[str] = set()
        while isinstance(node, str) and node in self.variables and node not in seen:
            seen.add(node)
            node = self.variables[node]["value"]
        return node


# --- checks ------------------------------------------------------------------------------------


def key_material(template: Template) -> list[str]:
    """No list*() call (listKeys, listAccountSas, listConnectionStrings, ...) and no string that
    carries an account key or SAS anywhere in the file."""
    problems = []
    for node in walk(template.tree):
        if isinstance(node, Mapping):
            for candidate in (node.get("function"), node.get("operator")):
                if not isinstance(candidate, Mapping):
                    continue
                container = candidate.get("parameters") or candidate.get("operands") or {}
                func_name = container.get("func_name") if isinstance(container, Mapping) else None
                if isinstance(func_name, str) and func_name.lower().startswith("list"):
                    problems.append(f"{template.name}: {func_name}() returns secrets")
        elif isinstance(node, str) and SECRET_TEXT.search(node):
            problems.append(f"{template.name}: secret in a string: {node[:60]!r}")
    return problems


def app_settings(template: Template) -> dict[str, dict[str, Any]]:
    """App settings per Function/Web App: ``siteConfig.appSettings`` (name/value list) and
    ``Microsoft.Web/sites/config`` resources named ``appsettings`` (an object)."""
    found: dict[str, dict[str, Any]] = {}
    for symbol, body in template.of_type("Microsoft.Web/sites").items():
        entries = ((body.get("properties") or {}).get("siteConfig") or {}).get("appSettings") or []
        entries = unwrap(template.resolve(entries))
        settings = found.setdefault(symbol, {})
        if isinstance(entries, list):
            for entry in entries:
                settings[unquote(str(entry.get("name")))] = entry.get("value")
    for symbol, body in template.of_type("Microsoft.Web/sites/config").items():
        if body.get("name") == "appsettings":
            props = template.resolve(body.get("properties") or {})
            if isinstance(props, Mapping):
                found.setdefault(symbol, {}).update({unquote(k): v for k, v in props.items()})
    return found


def identity_settings(settings: Mapping[str, Any]) -> list[str]:
    """Identity-based connections only: every ``X__credential`` is ``managedidentity`` and has a
    matching ``X__clientId``; no plain connection-string setting next to it."""
    problems = []
    for name, value in settings.items():
        if name.endswith("__credential"):
            prefix = name[: -len("__credential")]
            if value != "managedidentity":
                problems.append(f"{name} is {value!r}, expected 'managedidentity'")
            if f"{prefix}__clientId" not in settings:
                problems.append(f"{name} has no matching {prefix}__clientId")
            if prefix in settings:
                problems.append(f"{prefix} (a connection string) is set next to identity-based {prefix}__*")
    for forbidden in (
        "AzureWebJobsStorage",
        "WEBSITE_CONTENTAZUREFILECONNECTIONSTRING",
        "AzureWebJobsSecretStorageKeyVaultConnectionString",
    ):
        if forbidden in settings:
            problems.append(f"{forbidden} must not be set (connection string with a key)")
    return problems


@dataclass(frozen=True)
class Assignment:
    template: str
    symbol: str
    role: str | None  # a key of EXPECTED_ROLES, or None when the description names no known role
    role_guid: str | None  # the literal GUID, or CUSTOM when it comes from a parameter
    scope_type: str | None


def role_definition_guid(template: Template, node: Any) -> str | None:
    """The GUID behind ``subscriptionResourceId('Microsoft.Authorization/roleDefinitions', X)``;
    CUSTOM when X is a parameter (the custom role's name passed in), None when unrecognised."""
    node = template.resolve(node)
    fn = function(node)
    if not fn or fn[0] not in ("subscription_resource_id", "resource_id", "tenant_resource_id"):
        return None
    params = fn[1]
    if params.get("resource_type") != ROLE_DEFINITION:
        return None
    name = template.resolve(params.get("resource_name_1"))
    if isinstance(name, str) and GUID.match(name):
        return name.lower()
    if isinstance(name, str) and name in template.parameters:
        return CUSTOM
    return None


def role_assignments(template: Template) -> tuple[list[Assignment], list[str]]:
    """Every role assignment of the file, checked; returns the assignments and the problems."""
    assignments, problems = [], []
    for symbol, body in template.of_type(ROLE_ASSIGNMENT).items():
        where = f"{template.name}:{symbol}"
        props = body.get("properties") or {}
        role_id = props.get("roleDefinitionId")
        principal = props.get("principalId")

        # Scope: an explicit resource of this file, never the deployment's resource group or
        # subscription (an absent scope means exactly that).
        scope = body.get("scope")
        scope_symbol = base_symbol(scope)
        scope_type = None
        described = str(props.get("description") or "")
        if scope is None and described.startswith(AUTOSCALE_READER):
            scope_type = RESOURCE_GROUP_SCOPE
        elif scope is None:
            problems.append(f"{where}: no scope, so it applies to the whole resource group or subscription")
        elif scope_symbol not in template.resources:
            problems.append(f"{where}: scope {scope!r} is not a resource (resource group, subscription or unknown)")
        else:
            scope_type = template.resources[scope_symbol]["type"]

        # Name: guid(<scope>.id, <principal>, <role>), deterministic and unique per triple.
        fn = function(body.get("name"))
        if not fn or fn[0] != "guid":
            problems.append(f"{where}: name is not a guid(...) call: {body.get('name')!r}")
        else:
            args = list(fn[1].values())
            if len(args) < 3:
                problems.append(f"{where}: guid() needs scope, principal and role, got {len(args)} argument(s)")
            if scope_type == RESOURCE_GROUP_SCOPE:
                if not args or not is_resource_group_id(args[0]):
                    problems.append(f"{where}: guid() must start with resourceGroup().id")
            elif not args or scope_symbol is None or not is_id_of(args[0], scope_symbol):
                problems.append(f"{where}: guid() must start with the scope's id ({scope_symbol}.id)")
            if principal not in args:
                problems.append(f"{where}: guid() does not include the principal {principal!r}")
            if role_id not in args:
                problems.append(f"{where}: guid() does not include the role definition {role_id!r}")

        if props.get("principalType") != "ServicePrincipal":
            problems.append(f"{where}: principalType must be 'ServicePrincipal' (a managed identity)")

        guid = role_definition_guid(template, role_id)
        if guid is None:
            problems.append(f"{where}: roleDefinitionId is not subscriptionResourceId('{ROLE_DEFINITION}', <GUID or role param>)")
        elif guid in FORBIDDEN_ROLE_GUIDS:
            problems.append(f"{where}: grants {FORBIDDEN_ROLE_GUIDS[guid]}")

        description = str(props.get("description") or "")
        role = next((name for name in EXPECTED_ROLES if description.startswith(name)), None)
        if role is None:
            problems.append(f"{where}: description {description!r} does not start with a known role name")
        else:
            expected_guid, scope_types = EXPECTED_ROLES[role]
            if guid is not None and guid != expected_guid:
                problems.append(f"{where}: described as {role} ({expected_guid}) but assigns {guid}")
            if scope_type is not None and scope_type not in scope_types:
                problems.append(f"{where}: {role} scoped to {scope_type}, allowed: {sorted(scope_types)}")
        if guid == CUSTOM and role not in CUSTOM_ROLE_ACTIONS:
            problems.append(f"{where}: assigns a custom role but is described as {role!r}, not one of {sorted(CUSTOM_ROLE_ACTIONS)}")
        elif guid == CUSTOM and role == PLAN_SCALER and scope_type != SERVER_FARM:
            problems.append(f"{where}: the custom plan role must be scoped to a {SERVER_FARM} resource, got {scope_type}")
        elif guid == CUSTOM and role == TU_SCALER and scope_type != EVENT_HUBS_NAMESPACE:
            problems.append(f"{where}: the custom TU scaler role must be scoped to a {EVENT_HUBS_NAMESPACE} resource, "
                            f"got {scope_type}")
        elif guid == CUSTOM and role == SERVICE_BUS_READER and scope_type != SERVICE_BUS_NAMESPACE:
            problems.append(f"{where}: the custom Service Bus reader role must be scoped to a {SERVICE_BUS_NAMESPACE} "
                            f"resource, got {scope_type}")
        assignments.append(Assignment(template.name, symbol, role, guid, scope_type))
    return assignments, problems


def service_bus_rights(assignments: list[Assignment]) -> list[str]:
    """Least privilege on Service Bus, over every role assignment of the deployment (all to the
    app's identity): no data-plane Send or Manage anywhere, and Listen (receive, peek) only on a
    single queue, never on a namespace, resource group or subscription."""
    problems = []
    for assignment in assignments:
        name, rights = SERVICE_BUS_DATA_RIGHTS.get(assignment.role_guid or "", ("", frozenset()))
        where = f"{assignment.template}:{assignment.symbol}"
        for right in sorted(rights & {"send", "manage"}):
            problems.append(f"{where}: {name} grants the data-plane {right} right")
        if "listen" in rights and assignment.scope_type != SERVICE_BUS_QUEUE:
            problems.append(f"{where}: {name} grants listen (receive) on {assignment.scope_type or 'an unknown scope'}, "
                            f"not on a single queue ({SERVICE_BUS_QUEUE})")
    return problems


def storage_hardening(template: Template) -> list[str]:
    """Storage accounts created here: Entra ID only, TLS 1.2, HTTPS only, no public blobs."""
    problems = []
    expected = {
        "allowSharedKeyAccess": False,
        "minimumTlsVersion": "TLS1_2",
        "supportsHttpsTrafficOnly": True,
        "allowBlobPublicAccess": False,
    }
    for symbol, body in template.of_type("Microsoft.Storage/storageAccounts").items():
        if template.resources[symbol]["existing"]:
            continue
        props = body.get("properties") or {}
        for key, value in expected.items():
            if props.get(key) != value:
                problems.append(f"{template.name}:{symbol}: properties.{key} is {props.get(key)!r}, expected {value!r}")
    for symbol, body in template.of_type("Microsoft.Storage/storageAccounts/blobServices/containers").items():
        if template.resources[symbol]["existing"]:
            continue
        access = (body.get("properties") or {}).get("publicAccess", "None")
        if access != "None":
            problems.append(f"{template.name}:{symbol}: publicAccess is {access!r}")
    return problems


def custom_role_definitions(template: Template) -> list[str]:
    """Custom roles: exactly the actions of one of CUSTOM_ROLE_ACTIONS (serverfarms read/write, or
    Service Bus queue and subscription reads), no data action, never assignable at subscription."""
    problems = []
    for symbol, body in template.of_type(ROLE_DEFINITION).items():
        where = f"{template.name}:{symbol}"
        props = body.get("properties") or {}
        permissions = props.get("permissions") or []
        actions = tuple(sorted(a for p in permissions for a in (p.get("actions") or [])))
        if actions not in {tuple(sorted(expected)) for expected in CUSTOM_ROLE_ACTIONS.values()}:
            problems.append(f"{where}: actions {list(actions)}, expected serverfarms read and write only, Service Bus "
                            "queues/read and topics/subscriptions/read only, autoscalesettings/read only, or Event Hubs "
                            "namespaces read and write only")
        for key in ("notActions", "dataActions", "notDataActions"):
            if any(p.get(key) for p in permissions):
                problems.append(f"{where}: {key} must be empty")
        scopes = props.get("assignableScopes")
        for node in walk(scopes):
            fn = function(node)
            if fn and fn[0] in ("subscription", "management_group", "tenant"):
                problems.append(f"{where}: assignableScopes uses {fn[0]}(); the targets' resource groups only")
        if scopes is None:
            problems.append(f"{where}: no assignableScopes")
    return problems


# --- the operator's views: workbook and alert rules ----------------------------------------------

#: The telemetry contract (docs/operations-monitoring.md): every metric the app emits to
#: Application Insights as customMetrics, with its dimensions.
TELEMETRY_METRICS: dict[str, frozenset[str]] = {
    "autoscaler.arrival_rate": frozenset({"target", "source"}),
    "autoscaler.backlog": frozenset({"target", "source"}),
    "autoscaler.oldest_event_age_seconds": frozenset({"target"}),
    "autoscaler.slo_seconds": frozenset({"target"}),
    "autoscaler.predicted_age_seconds": frozenset({"target"}),
    "autoscaler.throughput_per_instance": frozenset({"target"}),
    "autoscaler.capacity_desired": frozenset({"target"}),
    "autoscaler.capacity_requested": frozenset({"target"}),
    "autoscaler.capacity_observed": frozenset({"target"}),
    "autoscaler.samples": frozenset({"target"}),
    "autoscaler.decisions": frozenset({"target", "direction", "reason"}),
    "autoscaler.collection_failures": frozenset({"target", "source"}),
    "autoscaler.dead_letters": frozenset({"function"}),
    "autoscaler.arm_writes": frozenset({"target", "outcome"}),
    "autoscaler.arm_write_duration_ms": frozenset({"target"}),
    "autoscaler.throughput_units": frozenset({"target"}),
    "autoscaler.throttled_requests": frozenset({"target"}),
}
WORKBOOK = "Microsoft.Insights/workbooks"
QUERY_RULE = "Microsoft.Insights/scheduledQueryRules"
ACTION_GROUP = "Microsoft.Insights/actionGroups"
METRIC_NAME = re.compile(r"autoscaler\.[a-z_]+")
DIMENSION = re.compile(r"customDimensions(?:\.([A-Za-z_]+)|\[\"([A-Za-z_]+)\"\])")


def metric_names(query: str) -> set[str]:
    return set(METRIC_NAME.findall(query))


def resolved(template: Template, node: Any) -> Any:
    """``node`` with every variable reference replaced by its value, recursively."""
    node = template.resolve(node)
    if isinstance(node, Mapping):
        return {key: resolved(template, value) for key, value in node.items()}
    if isinstance(node, list):
        return [resolved(template, value) for value in node]
    return node


def workbook_content(template: Template, symbol: str) -> dict[str, Any]:
    """The workbook's Notebook JSON: ``serializedData: string(<object variable>)``, resolved."""
    data = template.body(symbol)["properties"]["serializedData"]
    fn = function(data)
    if not fn or fn[0] != "string":
        raise AssertionError(f"{symbol}: serializedData is not string(<object>), got {data!r}")
    return resolved(template, next(iter(fn[1].values())))


def workbook_queries(content: Mapping[str, Any]) -> dict[str, str]:
    """Every KQL query of a workbook: its query items by name, and each query parameter's."""
    queries: dict[str, str] = {}
    for item in content.get("items") or []:
        body = item.get("content") or {}
        if item.get("type") == 3:
            queries[item["name"]] = body["query"]
        for parameter in body.get("parameters") or []:
            if parameter.get("query"):
                queries[f"parameter {parameter['name']}"] = parameter["query"]
    return queries


def query_problems(where: str, query: Any) -> list[str]:
    """A query over the telemetry contract: customMetrics, only known metric names and, for
    each, only dimensions the contract gives it (when the query names a single metric)."""
    if not isinstance(query, str):
        return [f"{where}: the query is not a literal string: {query!r}"]
    problems = []
    if "customMetrics" not in query:
        problems.append(f"{where}: does not read customMetrics")
    names = metric_names(query)
    problems += [f"{where}: unknown metric {name}" for name in sorted(names - set(TELEMETRY_METRICS))]
    allowed = set().union(*(TELEMETRY_METRICS.get(name, frozenset()) for name in names)) if names else set()
    for match in DIMENSION.finditer(query):
        dimension = match.group(1) or match.group(2)
        if names and dimension not in allowed:
            problems.append(f"{where}: dimension {dimension} is not one of {sorted(allowed)}")
    return problems
