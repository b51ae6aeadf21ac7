"""The infrastructure, checked offline: the Bicep CLI cannot run here, so every .bicep file is
parsed with pycep-parser and the parse trees are held to the deployment's security rules
(identity-based connections only, least-privilege role assignments, Flex Consumption shape) and
to their own wiring (module parameters and outputs, azd outputs, parameters file, docs).

Each checker in bicep_rules is also run on small broken snippets, so a checker that silently
accepts everything fails here too.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.infra.bicep_rules import (
    ACTION_GROUP,
    CUSTOM,
    EVENT_HUBS_NAMESPACE,
    EXPECTED_ROLES,
    PLAN_SCALER,
    QUERY_RULE,
    ROLE_ASSIGNMENT,
    SERVER_FARM,
    SERVICE_BUS_DATA_RIGHTS,
    SERVICE_BUS_NAMESPACE,
    SERVICE_BUS_QUEUE,
    SERVICE_BUS_READER,
    TELEMETRY_METRICS,
    TU_SCALER,
    UPPER_SNAKE,
    WORKBOOK,
    Template,
    app_settings,
    custom_role_definitions,
    function,
    identity_settings,
    key_material,
    metric_names,
    operator,
    query_problems,
    resolved,
    role_assignments,
    service_bus_rights,
    storage_hardening,
    unquote,
    walk,
    workbook_content,
    workbook_queries,
)

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
BICEP_FILES = sorted(INFRA.rglob("*.bicep"))
BICEP_IDS = [str(path.relative_to(INFRA)) for path in BICEP_FILES]

# What the Function App must be configured with, and nothing else (see docs/deploy.md).
APP_SETTINGS = {
    "AzureWebJobsStorage__accountName",
    "AzureWebJobsStorage__credential",
    "AzureWebJobsStorage__clientId",
    "AzureWebJobsStorage__blobServiceUri",
    "AzureWebJobsStorage__queueServiceUri",
    "AzureWebJobsStorage__tableServiceUri",
    "AZURE_CLIENT_ID",
    "APPLICATIONINSIGHTS_CONNECTION_STRING",
    "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
    "PYTHON_ENABLE_OPENTELEMETRY",
    "AUTOSCALER_POLICY",
    "COLLECT_SCHEDULE",
    "SCALER_DRY_RUN",
    "HISTORY_RETENTION_DAYS",
    "OWNERSHIP_EXPIRY_SECONDS",
}
# Flex Consumption rejects these: the runtime and the package location live in functionAppConfig.
FLEX_FORBIDDEN_SETTINGS = {
    "FUNCTIONS_WORKER_RUNTIME",
    "FUNCTIONS_EXTENSION_VERSION",
    "WEBSITE_RUN_FROM_PACKAGE",
    "WEBSITE_CONTENTSHARE",
    "WEBSITE_CONTENTAZUREFILECONNECTIONSTRING",
}
QUEUES = {"metrics", "metrics-poison", "actions", "actions-poison"}
TABLES = {"metrichistory", "scalerstate", "deadletters", "appliedactions"}
REQUIRED_OUTPUTS = {
    "AZURE_LOCATION",
    "AZURE_TENANT_ID",
    "AZURE_RESOURCE_GROUP",
    "AZURE_FUNCTION_APP_NAME",
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_BLOB_ENDPOINT",
    "AZURE_STORAGE_QUEUE_ENDPOINT",
    "AZURE_STORAGE_TABLE_ENDPOINT",
    "AZURE_CLIENT_ID",
    "APPLICATIONINSIGHTS_CONNECTION_STRING",
    "AUTOSCALER_POLICY",
    "COLLECT_SCHEDULE",
    "SCALER_DRY_RUN",
    "HISTORY_RETENTION_DAYS",
    "OWNERSHIP_EXPIRY_SECONDS",
}


def load(path: Path) -> Template:
    return Template.from_file(path, INFRA)


@pytest.fixture(scope="module")
def templates() -> dict[str, Template]:
    return {name: load(path) for name, path in zip(BICEP_IDS, BICEP_FILES, strict=True)}


@pytest.fixture(scope="module")
def main(templates: dict[str, Template]) -> Template:
    return templates["main.bicep"]


@pytest.fixture(scope="module")
def parameters_file() -> dict:
    return json.loads((INFRA / "main.parameters.json").read_text(encoding="utf-8"))["parameters"]


# --- every file ----------------------------------------------------------------------------------


def test_the_expected_files_exist() -> None:
    assert set(BICEP_IDS) >= {
        "main.bicep",
        "app/identity.bicep",
        "app/monitoring.bicep",
        "app/storage.bicep",
        "app/function.bicep",
        "app/checkpoint-reader.bicep",
        "app/eventhubs-receiver.bicep",
        "app/servicebus-reader.bicep",
        "app/servicebus-queue-receiver.bicep",
        "app/servicebus-metrics-reader.bicep",
        "app/plan-scaler.bicep",
        "app/eventhubs-tu-scaler.bicep",
        "app/eventhubs-tu-pin.bicep",
        "app/eventhubs-tu-pin-assignment.bicep",
    }


@pytest.mark.parametrize("path", BICEP_FILES, ids=BICEP_IDS)
def test_every_bicep_file_parses(path: Path) -> None:
    tree = load(path).tree
    assert tree.get("resources") or tree.get("modules"), f"{path} declares nothing"


@pytest.mark.parametrize("path", BICEP_FILES, ids=BICEP_IDS)
def test_no_keys_or_connection_strings(path: Path) -> None:
    template = load(path)
    assert key_material(template) == []
    # Belt and braces on the raw text (comments included).
    assert "listKeys(" not in template.text
    assert "AccountKey=" not in template.text


@pytest.mark.parametrize("path", BICEP_FILES, ids=BICEP_IDS)
def test_role_assignments_are_least_privilege(path: Path) -> None:
    _, problems = role_assignments(load(path))
    assert problems == []


@pytest.mark.parametrize("path", BICEP_FILES, ids=BICEP_IDS)
def test_storage_accounts_are_hardened(path: Path) -> None:
    assert storage_hardening(load(path)) == []


@pytest.mark.parametrize("path", BICEP_FILES, ids=BICEP_IDS)
def test_app_settings_are_identity_based(path: Path) -> None:
    for settings in app_settings(load(path)).values():
        assert identity_settings(settings) == []


@pytest.mark.parametrize("path", BICEP_FILES, ids=BICEP_IDS)
def test_module_calls_match_module_parameters_and_outputs(path: Path) -> None:
    """What the Bicep compiler would reject: unknown or missing module parameters, and
    references to module outputs that do not exist."""
    template = load(path)
    for symbol, module in template.modules.items():
        target = (path.parent / module["detail"]["path"]).resolve()
        assert target.is_file(), f"{symbol}: {target} does not exist"
        callee = load(target)
        given = set((module_body(module).get("params") or {}).keys())
        declared = set(callee.parameters)
        required = {name for name, param in callee.parameters.items() if "default" not in param}
        assert given <= declared, f"{symbol}: unknown parameters {sorted(given - declared)}"
        assert required <= given, f"{symbol}: missing parameters {sorted(required - given)}"
        for node in walk(template.tree):
            op = operator(node)
            if op and op[0] == "property_accessor" and op[1].get("operand_1") == symbol:
                inner = operator(op[1].get("operand_2"))
                if inner and inner[0] == "property_accessor" and inner[1].get("operand_1") == "outputs":
                    output = inner[1].get("operand_2")
                    assert output in callee.outputs, f"{symbol}.outputs.{output} is not an output of {target.name}"


def module_body(module: dict) -> dict:
    body = module["config"]
    while "config" in body and ("loop_type" in body or "condition" in body):
        body = body["config"]
    return body


# --- role assignments across the deployment ------------------------------------------------------


def test_every_intended_role_is_assigned(templates: dict[str, Template]) -> None:
    assigned = {a.role for t in templates.values() for a in role_assignments(t)[0]}
    assert assigned == set(EXPECTED_ROLES)


def test_role_guids_in_the_table_are_well_formed() -> None:
    guids = [guid for guid, _ in EXPECTED_ROLES.values() if guid != CUSTOM]
    assert len(set(guids)) == len(guids)
    assert all(re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", guid) for guid in guids)


@pytest.mark.parametrize(("role", "scope_type"), [(PLAN_SCALER, SERVER_FARM), (SERVICE_BUS_READER, SERVICE_BUS_NAMESPACE),
                                                  (TU_SCALER, EVENT_HUBS_NAMESPACE)])
def test_custom_roles_are_scoped_to_their_resources_only(templates: dict[str, Template], role: str, scope_type: str) -> None:
    custom = [a for t in templates.values() for a in role_assignments(t)[0] if a.role == role]
    assert custom, f"no assignment of {role}"
    assert {(a.role_guid, a.scope_type) for a in custom} == {(CUSTOM, scope_type)}


def role_definition(main: Template, first_action: str) -> tuple[str, dict]:
    """The custom role definition of main.bicep whose actions start with ``first_action``."""
    [(symbol, body)] = [(symbol, body) for symbol, body in main.of_type("Microsoft.Authorization/roleDefinitions").items()
                        if sorted(body["properties"]["permissions"][0]["actions"])[0] == first_action]
    return symbol, body


def test_custom_role_definitions_are_the_four_narrow_ones(main: Template) -> None:
    assert len(main.of_type("Microsoft.Authorization/roleDefinitions")) == 4
    assert custom_role_definitions(main) == []


def test_custom_plan_role_definition(main: Template) -> None:
    symbol, body = role_definition(main, "Microsoft.Web/serverfarms/read")
    # assignableScopes: the resource groups of the target plans, computed from targetPlanIds.
    scopes = body["properties"]["assignableScopes"]
    loops = [main.resolve(node) for node in walk(scopes) if isinstance(node, str) and node in main.variables]
    assert any(
        isinstance(v, dict) and v.get("loop_type", {}).get("detail", {}).get("array_name") == "targetPlanIds" for v in loops
    )
    # The plan module receives that role's name, once per target plan.
    plan_modules = [m for m in main.modules.values() if m["detail"]["path"] == "app/plan-scaler.bicep"]
    assert len(plan_modules) == 1
    plan_module = plan_modules[0]
    assert plan_module["config"]["loop_type"]["detail"]["array_name"] == "targetPlanIds"
    passed = module_body(plan_module)["params"]["roleDefinitionName"]
    assert operator(passed) == ("property_accessor", {"operand_1": symbol, "operand_2": "name"})


def test_watched_resources_get_modules_in_their_own_resource_group(main: Template) -> None:
    """Event Hubs, checkpoint stores, Service Bus and plans may live in other resource groups or
    subscriptions: each access module is deployed to resourceGroup(<sub>, <rg>) of its target."""
    expected = {
        "app/eventhubs-receiver.bicep": "eventHubNamespaces",
        "app/checkpoint-reader.bicep": "checkpointContainers",
        "app/servicebus-reader.bicep": "serviceBusNamespaceIds",
        "app/servicebus-metrics-reader.bicep": "serviceBusSloNamespaceIds",
        "app/servicebus-queue-receiver.bicep": "serviceBusSloQueueIds",
        "app/plan-scaler.bicep": "targetPlanIds",
        "app/eventhubs-tu-scaler.bicep": "eventHubsTuNamespaceIds",
    }
    for path, array in expected.items():
        modules = [m for m in main.modules.values() if m["detail"]["path"] == path]
        assert len(modules) == 1, path
        assert modules[0]["config"]["loop_type"]["detail"]["array_name"] == array
        scope = function(module_body(modules[0])["scope"])
        assert scope and scope[0] == "resource_group", path
        assert scope[1]["subscription_id"] is not None and scope[1]["resource_group_name"] is not None, path


@pytest.mark.parametrize("name", ["serviceBusNamespaceIds", "serviceBusSloNamespaceIds", "serviceBusSloQueueIds",
                                  "eventHubsTuNamespaceIds"])
def test_service_bus_is_optional(main: Template, name: str) -> None:
    assert main.parameters[name]["type"] == "array"
    assert main.parameters[name]["default"] == []


def test_custom_service_bus_reader_role_definition(main: Template) -> None:
    """Defined only when a namespace is watched, assignable in the namespaces' resource groups only,
    and handed by name to the module that assigns it on each namespace (after it exists)."""
    symbol, body = role_definition(main, "Microsoft.ServiceBus/namespaces/queues/read")
    condition = main.resources[symbol]["config"]["condition"]
    assert operator(condition)[0] == "not"
    assert function(operator(condition)[1]["bool_value"]) == ("empty", {"item_to_test": "serviceBusNamespaceIds"})
    scopes = body["properties"]["assignableScopes"]
    loops = [main.resolve(node) for node in walk(scopes) if isinstance(node, str) and node in main.variables]
    assert any(isinstance(v, dict) and v.get("loop_type", {}).get("detail", {}).get("array_name") == "serviceBusNamespaceIds"
               for v in loops)
    (module,) = [m for m in main.modules.values() if m["detail"]["path"] == "app/servicebus-reader.bicep"]
    assert module_body(module)["params"]["roleDefinitionName"] == body["name"] == "serviceBusReaderRoleName"
    assert module_body(module)["dependsOn"] == [symbol]


def role_json(body: dict) -> dict:
    """A role definition as ARM stores it (roleName, permissions, assignableScopes), from the parsed Bicep."""
    return json.loads(json.dumps({"properties": body["properties"]}, default=str))["properties"]


#: What a role holding these actions could do to an Event Hubs namespace beyond its SKU, each a
#: separate ARM action: deleting it, its keys, its child resources, and every event.
NAMESPACE_ESCAPES = (
    "Microsoft.EventHub/namespaces/delete",
    "Microsoft.EventHub/namespaces/listKeys/action",
    "Microsoft.EventHub/namespaces/authorizationRules/write",
    "Microsoft.EventHub/namespaces/authorizationRules/listKeys/action",
    "Microsoft.EventHub/namespaces/eventhubs/write",
    "Microsoft.EventHub/namespaces/eventhubs/delete",
    "Microsoft.EventHub/namespaces/eventhubs/consumergroups/write",
    "Microsoft.EventHub/namespaces/networkRuleSets/write",
    "Microsoft.EventHub/namespaces/privateEndpointConnections/write",
    "Microsoft.EventHub/namespaces/messages/receive/action",
    "Microsoft.EventHub/namespaces/messages/send/action",
    "Microsoft.Authorization/roleAssignments/write",
    "Microsoft.Resources/deployments/write",
)


def grants(actions: list[str], action: str) -> bool:
    """Whether an action pattern list grants ``action`` (ARM wildcards: ``*`` matches any run)."""
    return any(re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), action, re.IGNORECASE) for pattern in actions)


def test_custom_tu_scaler_role_can_change_nothing_but_the_namespace(main: Template) -> None:
    """The role JSON: namespace read and write only (ARM has no SKU-only action; main.bicep says
    why and what else write covers), no wildcard, no delete, no keys, no child resource, no data
    action, no role or deployment writes; assignable in the namespaces' resource groups only and
    handed to the module that assigns it on each namespace resource."""
    symbol, body = role_definition(main, "Microsoft.EventHub/namespaces/read")
    role = role_json(body)
    [permission] = role["permissions"]
    assert sorted(permission["actions"]) == ["Microsoft.EventHub/namespaces/read", "Microsoft.EventHub/namespaces/write"]
    assert not any("*" in action for action in permission["actions"])
    assert permission["dataActions"] == [] and permission["notActions"] == [] and permission["notDataActions"] == []
    for action in NAMESPACE_ESCAPES:
        assert not grants(permission["actions"], action), action
    assert grants(permission["actions"], "Microsoft.EventHub/namespaces/write")
    condition = main.resources[symbol]["config"]["condition"]
    assert function(operator(condition)[1]["bool_value"]) == ("empty", {"item_to_test": "eventHubsTuNamespaceIds"})
    loops = [main.resolve(node) for node in walk(role["assignableScopes"]) if isinstance(node, str) and node in main.variables]
    assert any(isinstance(v, dict) and v.get("loop_type", {}).get("detail", {}).get("array_name") == "eventHubsTuNamespaceIds"
               for v in loops)
    (module,) = [m for m in main.modules.values() if m["detail"]["path"] == "app/eventhubs-tu-scaler.bicep"]
    assert module_body(module)["params"]["roleDefinitionName"] == body["name"] == "tuScalerRoleName"
    assert module_body(module)["dependsOn"] == [symbol]
    assert "ARM has no action narrower" in main.text


@pytest.mark.parametrize(("actions", "escape"), [
    (["Microsoft.EventHub/namespaces/*"], "Microsoft.EventHub/namespaces/delete"),
    (["Microsoft.EventHub/*"], "Microsoft.EventHub/namespaces/eventhubs/write"),
    (["*"], "Microsoft.Authorization/roleAssignments/write"),
])
def test_the_escape_check_catches_wildcards(actions: list[str], escape: str) -> None:
    assert grants(actions, escape)


def test_service_bus_grants_counts_and_single_queue_peeks_only(templates: dict[str, Template]) -> None:
    """The acceptance of least privilege on Service Bus, over every role assignment of the
    deployment (each to the app's identity): no data-plane Send or Manage (so no Data Owner or
    Sender), Listen only on single queues (Data Receiver per SLO-mode queue), the counts through
    the read-only custom role on the namespace."""
    assignments = [a for t in templates.values() for a in role_assignments(t)[0]]
    assert service_bus_rights(assignments) == []
    data_roles = [(a.role, a.scope_type) for a in assignments if a.role_guid in SERVICE_BUS_DATA_RIGHTS]
    assert data_roles == [("Azure Service Bus Data Receiver", SERVICE_BUS_QUEUE)]
    assert {a.scope_type for a in assignments if a.role == SERVICE_BUS_READER} == {SERVICE_BUS_NAMESPACE}
    # Monitoring Reader: on Service Bus namespaces (queue rates) and Event Hubs namespaces (TU sizing) only.
    assert {a.scope_type for a in assignments if a.role == "Monitoring Reader"} == {SERVICE_BUS_NAMESPACE, EVENT_HUBS_NAMESPACE}
    # Belt and braces on the raw text: neither role's GUID appears anywhere under infra/.
    for path in sorted(INFRA.rglob("*")):
        if path.is_file():
            text = path.read_text(encoding="utf-8").lower()
            for guid in ("090c5cfd-751d-490a-894a-3ce6f1109419", "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39"):
                assert guid not in text, f"{path}: {SERVICE_BUS_DATA_RIGHTS[guid][0]}"


SERVICE_BUS_SNIPPET = """
param principalId string
var roleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', 'GUID')
resource namespace 'Microsoft.ServiceBus/namespaces@2022-10-01-preview' existing = {
  name: 'payments-ns'
}
resource queue 'Microsoft.ServiceBus/namespaces/queues@2022-10-01-preview' existing = {
  parent: namespace
  name: 'payments'
}
resource grant 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(SCOPE.id, principalId, roleId)
  scope: SCOPE
  properties: {
    description: 'DESCRIPTION: test'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: roleId
  }
}
"""


@pytest.mark.parametrize(
    ("guid", "scope", "message"),
    [
        pytest.param("090c5cfd-751d-490a-894a-3ce6f1109419", "namespace", "Azure Service Bus Data Owner grants the data-plane manage right",
                     id="data-owner"),
        pytest.param("090c5cfd-751d-490a-894a-3ce6f1109419", "queue", "Azure Service Bus Data Owner grants the data-plane send right",
                     id="data-owner-even-on-a-queue"),
        pytest.param("69a216fc-b8fb-44d8-bc22-1f3c2cd27a39", "queue", "Azure Service Bus Data Sender grants the data-plane send right",
                     id="data-sender"),
        pytest.param("4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0", "namespace",
                     f"Azure Service Bus Data Receiver grants listen (receive) on {SERVICE_BUS_NAMESPACE}, not on a single queue",
                     id="namespace-wide-receiver"),
    ],
)
def test_service_bus_rights_checker_rejects(guid: str, scope: str, message: str) -> None:
    name = SERVICE_BUS_DATA_RIGHTS[guid][0]
    template = Template.from_text(SERVICE_BUS_SNIPPET.replace("GUID", guid).replace("SCOPE", scope).replace("DESCRIPTION", name))
    assignments, _ = role_assignments(template)
    problems = service_bus_rights(assignments)
    assert any(message in problem for problem in problems), problems


def test_service_bus_rights_checker_accepts_a_receiver_on_one_queue() -> None:
    guid = "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0"
    template = Template.from_text(SERVICE_BUS_SNIPPET.replace("GUID", guid).replace("SCOPE", "queue")
                                  .replace("DESCRIPTION", "Azure Service Bus Data Receiver"))
    assignments, problems = role_assignments(template)
    assert problems == [] and service_bus_rights(assignments) == []
    assert [(a.role, a.scope_type) for a in assignments] == [("Azure Service Bus Data Receiver", SERVICE_BUS_QUEUE)]


# --- the Function App -----------------------------------------------------------------------------


def test_function_app_settings(templates: dict[str, Template]) -> None:
    function_template = templates["app/function.bicep"]
    (settings,) = app_settings(function_template).values()
    assert set(settings) == APP_SETTINGS
    assert not set(settings) & FLEX_FORBIDDEN_SETTINGS
    assert settings["AzureWebJobsStorage__credential"] == "managedidentity"
    assert settings["AzureWebJobsStorage__clientId"] == settings["AZURE_CLIENT_ID"] == "identityClientId"
    assert settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"] == "ClientId=${identityClientId};Authorization=AAD"
    assert settings["PYTHON_ENABLE_OPENTELEMETRY"] == "true"  # with host.json "telemetryMode": "OpenTelemetry"
    for kind in ("blob", "queue", "table"):
        assert settings[f"AzureWebJobsStorage__{kind}ServiceUri"] == f"{kind}Endpoint"


def test_function_app_is_flex_consumption_python_311(templates: dict[str, Template]) -> None:
    template = templates["app/function.bicep"]
    (plan,) = template.of_type("Microsoft.Web/serverfarms").values()
    assert plan["sku"] == {"name": "FC1", "tier": "FlexConsumption"}
    assert plan["properties"]["reserved"] is True
    (site,) = template.of_type("Microsoft.Web/sites").values()
    assert site["kind"] == "functionapp,linux"
    assert site["identity"]["type"] == "UserAssigned"
    assert [unquote(k) for k in site["identity"]["userAssignedIdentities"]] == ["${identityId}"]
    props = site["properties"]
    assert props["httpsOnly"] is True
    assert props["siteConfig"]["minTlsVersion"] == "1.2"
    assert props["siteConfig"]["ftpsState"] == "Disabled"
    config = props["functionAppConfig"]
    assert config["runtime"] == {"name": "python", "version": "3.11"}
    storage = config["deployment"]["storage"]
    assert storage["type"] == "blobContainer"
    assert storage["authentication"] == {"type": "UserAssignedIdentity", "userAssignedIdentityResourceId": "identityId"}
    assert set(config["scaleAndConcurrency"]) == {"maximumInstanceCount", "instanceMemoryMB"}


def test_application_insights_accepts_entra_id_only(templates: dict[str, Template]) -> None:
    (component,) = templates["app/monitoring.bicep"].of_type("Microsoft.Insights/components").values()
    assert component["properties"]["DisableLocalAuth"] is True
    assert component["properties"]["WorkspaceResourceId"]


def test_storage_queues_tables_and_deployment_container(templates: dict[str, Template]) -> None:
    template = templates["app/storage.bicep"]
    assert set(template.parameters["queueNames"]["default"]) == QUEUES
    assert set(template.parameters["tableNames"]["default"]) == TABLES
    assert template.of_type("Microsoft.Storage/storageAccounts/queueServices/queues")
    assert template.of_type("Microsoft.Storage/storageAccounts/tableServices/tables")
    assert template.of_type("Microsoft.Storage/storageAccounts/blobServices/containers")


# --- azd: outputs, parameters file, azure.yaml, docs ---------------------------------------------


def test_main_targets_the_subscription_and_outputs_upper_snake(main: Template) -> None:
    assert main.tree["globals"]["scope"]["value"] == "subscription"
    assert all(UPPER_SNAKE.match(name) for name in main.outputs), sorted(main.outputs)
    assert set(main.outputs) >= REQUIRED_OUTPUTS


def test_parameters_file_matches_main(main: Template, parameters_file: dict) -> None:
    declared = set(main.parameters)
    required = {name for name, param in main.parameters.items() if "default" not in param}
    assert set(parameters_file) <= declared, sorted(set(parameters_file) - declared)
    assert required <= set(parameters_file), sorted(required - set(parameters_file))
    python_types = {"string": str, "array": list, "object": dict, "bool": bool, "int": int}
    for name, entry in parameters_file.items():
        assert isinstance(entry["value"], python_types[main.parameters[name]["type"]]), name


def test_parameters_file_has_no_stray_dollar_signs() -> None:
    """azd substitutes environment references in this file before deploying: only ${AZURE_*}
    references may contain '$' (the '$schema' key aside), so a literal such as '$Default' is not
    silently replaced."""
    text = (INFRA / "main.parameters.json").read_text(encoding="utf-8")
    stray = re.sub(r"\$\{AZURE_[A-Z_]+\}", "", text).replace('"$schema"', "")
    assert "$" not in stray


def access_problems(parameters: dict) -> list[str]:
    """What the policy in ``parameters`` names that the deployment grants no access to: plans,
    Event Hubs namespaces (and hubs), checkpoint containers, and for Service Bus the namespace
    whose counts are read (serviceBusNamespaceIds), the namespace whose metrics mode slo reads
    (serviceBusSloNamespaceIds) and the queue it peeks (serviceBusSloQueueIds)."""
    from scaling.domain.policy import policy_from_dict

    def values(name: str) -> list:
        return parameters.get(name, {}).get("value", [])

    policy = policy_from_dict(parameters["autoscalerPolicy"]["value"])
    plans = {plan_id.lower() for plan_id in values("targetPlanIds")}
    namespaces = {entry["resourceId"].rsplit("/", 1)[-1].lower(): entry for entry in values("eventHubNamespaces")}
    stores = {(entry["storageAccountId"].rsplit("/", 1)[-1].lower(), entry["containerName"])
              for entry in values("checkpointContainers")}
    service_bus = {sb_id.lower() for sb_id in values("serviceBusNamespaceIds")}
    slo_namespaces = {sb_id.lower() for sb_id in values("serviceBusSloNamespaceIds")}
    slo_queues = {queue_id.lower() for queue_id in values("serviceBusSloQueueIds")}
    tu_namespaces = {ns_id.lower() for ns_id in values("eventHubsTuNamespaceIds")}
    problems = [f"{namespace.name}: namespace not in eventHubsTuNamespaceIds" for namespace in policy.namespaces
                if namespace.resource_id.lower() not in tu_namespaces]
    for target in policy.targets:
        if target.plan.resource_id.lower() not in plans:
            problems.append(f"{target.name}: plan not in targetPlanIds")
        for source in target.sources:
            where = f"{target.name}/{source.name}"
            if source.kind == "servicebus":
                counted = source.service_bus_namespace
                if counted is None or counted.resource_id.lower() not in service_bus:
                    problems.append(f"{where}: namespace not in serviceBusNamespaceIds")
                if source.queue_name and source.metrics_resource_id:
                    metrics = source.metrics_resource_id.rstrip("/").lower()
                    if metrics not in slo_namespaces:
                        problems.append(f"{where}: metricsResourceId not in serviceBusSloNamespaceIds")
                    if f"{metrics}/queues/{source.queue_name.lower()}" not in slo_queues:
                        problems.append(f"{where}: queue not in serviceBusSloQueueIds")
                continue
            namespace = (source.fully_qualified_namespace or "").split(".")[0].lower()
            hubs = namespaces.get(namespace, {}).get("eventHubs")
            if namespace not in namespaces or (hubs and source.event_hub_name not in hubs):
                problems.append(f"{where}: hub not in eventHubNamespaces")
            account = (source.checkpoint_account_url or "").split("//")[-1].split(".")[0].lower()
            if (account, source.blob_container) not in stores:
                problems.append(f"{where}: checkpoint container not in checkpointContainers")
    return problems


def test_example_policy_matches_the_role_assignments(parameters_file: dict) -> None:
    """The policy in the parameters file parses, and every plan, namespace and checkpoint store it
    names is one the deployment grants access to."""
    assert access_problems(parameters_file) == []


SB_NS = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-billing/providers/Microsoft.ServiceBus/namespaces/billing"
SB_PLAN = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-billing/providers/Microsoft.Web/serverfarms/plan"
#: One target per plan (two on one plan would fight each other: the policy refuses them).
SB_AUDIT_PLAN = SB_PLAN + "-audit"


def service_bus_parameters(**overrides: list) -> dict:
    """Parameters for one SLO-mode queue and one rules-mode subscription in one namespace."""
    policy = {"version": 1, "targets": [
        {"name": "invoices", "plan": {"resource_id": SB_PLAN}, "mode": "slo", "bounds": {"balanced_counts": False},
         "sources": [{"kind": "servicebus", "name": "invoices", "queueName": "invoices", "metricsResourceId": SB_NS,
                      "fullyQualifiedNamespace": "billing.servicebus.windows.net"}]},
        {"name": "audit", "plan": {"resource_id": SB_AUDIT_PLAN}, "mode": "rules",
         "rules": [{"name": "backlog", "scale_up_above": 100}],
         "sources": [{"kind": "servicebus", "name": "audit", "topicName": "events", "subscriptionName": "audit",
                      "namespaceResourceId": SB_NS}]},
    ]}
    values = {"targetPlanIds": [SB_PLAN, SB_AUDIT_PLAN], "serviceBusNamespaceIds": [SB_NS], "serviceBusSloNamespaceIds": [SB_NS],
              "serviceBusSloQueueIds": [f"{SB_NS}/queues/invoices"], **overrides}
    return {"autoscalerPolicy": {"value": policy}, **{name: {"value": value} for name, value in values.items()}}


@pytest.mark.parametrize(
    ("overrides", "problems"),
    [
        pytest.param({}, [], id="complete"),
        pytest.param({"serviceBusNamespaceIds": []}, ["invoices/invoices: namespace not in serviceBusNamespaceIds",
                                                      "audit/audit: namespace not in serviceBusNamespaceIds"], id="no-reader"),
        pytest.param({"serviceBusSloQueueIds": [f"{SB_NS}/queues/other"]},
                     ["invoices/invoices: queue not in serviceBusSloQueueIds"], id="peek-on-another-queue"),
        pytest.param({"serviceBusSloNamespaceIds": []},
                     ["invoices/invoices: metricsResourceId not in serviceBusSloNamespaceIds"], id="no-metrics"),
    ],
)
def test_service_bus_sources_need_their_three_parameters(overrides: dict, problems: list[str]) -> None:
    assert access_problems(service_bus_parameters(**overrides)) == problems


def test_azure_yaml_deploys_the_function_app_and_runs_the_hook(main: Template) -> None:
    text = (ROOT / "azure.yaml").read_text(encoding="utf-8")
    service = main.variables["serviceName"]["value"]
    assert re.search(rf"^services:\n  {service}:\n", text, re.MULTILINE)
    assert re.search(r"^\s+host: function$", text, re.MULTILINE)
    assert re.search(r"^\s+language: python$", text, re.MULTILINE)
    assert re.search(r"^\s+provider: bicep$", text, re.MULTILINE)
    assert re.search(r"^\s+postprovision:$", text, re.MULTILINE)
    hook = re.search(r"^\s+run: (\S+)$", text, re.MULTILINE)
    assert hook and hook.group(1) == "./scripts/write-local-settings.sh"
    script = ROOT / hook.group(1)
    assert script.is_file() and os.access(script, os.X_OK)


def test_deploy_docs_list_every_parameter_and_setting(parameters_file: dict) -> None:
    docs = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    for name in parameters_file:
        assert f"`{name}`" in docs, f"docs/deploy.md does not document parameter {name}"
    for name in APP_SETTINGS:
        assert f"`{name}`" in docs, f"docs/deploy.md does not document app setting {name}"
    assert "azd up" in docs and "func start" in docs and "local.settings.sample.json" in docs


def test_readme_deploy_section_lists_every_parameter(parameters_file: dict) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Deploy to Azure"):]
    section = section[:section.index("\n## ", 1)]
    for name in parameters_file:
        assert f"`{name}`" in section, f"README.md's deploy section does not name parameter {name}"
    assert "azd up" in section and "func start" in section and "local.settings.sample.json" in section


# --- the checkers catch what they are meant to catch ----------------------------------------------

GOOD_ASSIGNMENT = """
param principalId string
var readerRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1')
resource account 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: 'stcheckpoints'
}
resource blobs 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' existing = {
  parent: account
  name: 'default'
}
resource container 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' existing = {
  parent: blobs
  name: 'checkpoints'
}
resource reader 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: NAME
  scope: SCOPE
  properties: {
    description: 'DESCRIPTION: checkpoints'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: ROLE
  }
}
"""


def assignment_snippet(
    name: str = "guid(container.id, principalId, readerRoleId)",
    scope: str = "container",
    description: str = "Storage Blob Data Reader",
    role: str = "readerRoleId",
) -> Template:
    text = GOOD_ASSIGNMENT.replace("NAME", name).replace("SCOPE", scope).replace("DESCRIPTION", description).replace("ROLE", role)
    if scope == "":
        text = text.replace("  scope: \n", "")
    return Template.from_text(text)


def test_assignment_checker_accepts_a_compliant_snippet() -> None:
    assignments, problems = role_assignments(assignment_snippet())
    assert problems == []
    assert [(a.role, a.scope_type) for a in assignments] == [
        ("Storage Blob Data Reader", "Microsoft.Storage/storageAccounts/blobServices/containers")
    ]


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        ({"name": "'fixed-name'"}, "not a guid"),
        ({"name": "guid(container.id, principalId)"}, "needs scope, principal and role"),
        ({"name": "guid(account.id, principalId, readerRoleId)"}, "must start with the scope's id"),
        ({"name": "guid(container.id, 'someone', readerRoleId)"}, "does not include the principal"),
        ({"scope": ""}, "no scope"),
        ({"scope": "resourceGroup()"}, "is not a resource"),
        (
            {"name": "guid(account.id, principalId, readerRoleId)", "scope": "account"},
            "scoped to Microsoft.Storage/storageAccounts",
        ),
        ({"description": "Storage Blob Data Owner"}, "described as Storage Blob Data Owner"),
        ({"description": "Storage Blob Data Contributor"}, "does not start with a known role name"),
        (
            {"role": "subscriptionResourceId('Microsoft.Authorization/roleDefinitions', 'b24988ac-6180-42a0-ab88-20f7382dd24c')"},
            "grants Contributor",
        ),
        ({"role": "'/providers/Microsoft.Authorization/roleDefinitions/2a2b9908'"}, "roleDefinitionId is not"),
    ],
)
def test_assignment_checker_rejects(broken: dict[str, str], message: str) -> None:
    _, problems = role_assignments(assignment_snippet(**broken))
    assert any(message in problem for problem in problems), problems


def test_plan_role_at_a_resource_group_is_rejected() -> None:
    template = Template.from_text(
        """
param principalId string
param roleDefinitionName string
var roleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleDefinitionName)
resource plans 'Microsoft.Resources/resourceGroups@2022-09-01' existing = {
  scope: subscription()
  name: 'rg-plans'
}
resource scaler 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(plans.id, principalId, roleId)
  scope: plans
  properties: {
    description: 'App Service Plan Scaler (custom): every plan of the group'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: roleId
  }
}
"""
    )
    assignments, problems = role_assignments(template)
    assert assignments[0].role_guid == CUSTOM
    assert any("must be scoped to a Microsoft.Web/serverfarms resource" in problem for problem in problems), problems


@pytest.mark.parametrize(
    ("scope", "name", "problem"),
    [
        ("scope: plan", "guid(plan.id, principalId, roleId)", "Autoscale Settings Reader (custom) scoped to Microsoft.Web/serverfarms"),
        ("", "guid(subscription().id, principalId, roleId)", "guid() must start with resourceGroup().id"),
    ],
)
def test_the_autoscale_reader_goes_on_the_resource_group_and_nowhere_else(scope: str, name: str, problem: str) -> None:
    template = Template.from_text(
        f"""
param principalId string
param roleDefinitionName string
var roleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleDefinitionName)
resource plan 'Microsoft.Web/serverfarms@2024-04-01' existing = {{
  name: 'plan'
}}
resource reader 'Microsoft.Authorization/roleAssignments@2022-04-01' = {{
  name: {name}
  {scope}
  properties: {{
    description: 'Autoscale Settings Reader (custom): wrong place'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: roleId
  }}
}}
"""
    )
    _, problems = role_assignments(template)
    assert any(problem in found for found in problems), problems


@pytest.mark.parametrize(
    "expression",
    [
        "listKeys(account.id, '2023-05-01').keys[0].value",
        "account.listKeys().keys[0].value",
        "account.listAccountSas('2023-05-01', {}).accountSasToken",
        "'DefaultEndpointsProtocol=https;AccountName=x;AccountKey=abc'",
        "'Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=r;SharedAccessKey=abc'",
    ],
)
def test_key_checker_rejects(expression: str) -> None:
    template = Template.from_text(
        f"""
resource account 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {{
  name: 'st'
}}
var secret = {expression}
"""
    )
    assert key_material(template) != []


def test_key_checker_accepts_identity_based_settings() -> None:
    template = Template.from_text(
        """
resource account 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: 'st'
}
var blob = account.properties.primaryEndpoints.blob
"""
    )
    assert key_material(template) == []


SITE = """
resource site 'Microsoft.Web/sites@2024-04-01' = {
  name: 'func'
  location: 'westeurope'
  properties: {
    siteConfig: {
      appSettings: [
SETTINGS
      ]
    }
  }
}
"""


def site_with(settings: dict[str, str]) -> Template:
    entries = "\n".join(f"        {{\n          name: '{k}'\n          value: '{v}'\n        }}" for k, v in settings.items())
    return Template.from_text(SITE.replace("SETTINGS", entries))


def test_settings_checker() -> None:
    good = {
        "AzureWebJobsStorage__accountName": "st",
        "AzureWebJobsStorage__credential": "managedidentity",
        "AzureWebJobsStorage__clientId": "c",
    }
    (settings,) = app_settings(site_with(good)).values()
    assert identity_settings(settings) == []

    missing_client = {k: v for k, v in good.items() if k != "AzureWebJobsStorage__clientId"}
    (settings,) = app_settings(site_with(missing_client)).values()
    assert any("no matching AzureWebJobsStorage__clientId" in p for p in identity_settings(settings))

    (settings,) = app_settings(site_with({**good, "AzureWebJobsStorage__credential": "connectionstring"})).values()
    assert any("expected 'managedidentity'" in p for p in identity_settings(settings))

    (settings,) = app_settings(site_with({"AzureWebJobsStorage": "DefaultEndpointsProtocol=https;AccountName=st"})).values()
    assert any("must not be set" in p for p in identity_settings(settings))


def test_storage_checker_rejects_shared_keys_and_public_blobs() -> None:
    template = Template.from_text(
        """
resource st 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: 'st'
  location: 'westeurope'
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    allowSharedKeyAccess: true
    minimumTlsVersion: 'TLS1_0'
    supportsHttpsTrafficOnly: true
  }
}
"""
    )
    problems = "\n".join(storage_hardening(template))
    assert "allowSharedKeyAccess" in problems
    assert "minimumTlsVersion" in problems
    assert "allowBlobPublicAccess" in problems
    assert "supportsHttpsTrafficOnly" not in problems


def test_role_definition_checker_rejects_wide_roles() -> None:
    template = Template.from_text(
        """
resource role 'Microsoft.Authorization/roleDefinitions@2022-04-01' = {
  name: guid('x')
  properties: {
    roleName: 'too wide'
    permissions: [
      {
        actions: [
          'Microsoft.Web/serverfarms/*'
        ]
        notActions: []
      }
    ]
    assignableScopes: [
      subscription().id
    ]
  }
}
"""
    )
    problems = "\n".join(custom_role_definitions(template))
    assert "expected serverfarms read and write only" in problems
    assert "uses subscription()" in problems


# --- the operator's views: workbook and alert rules (infra/app/operations.bicep) -------------------

ALERTS = {
    "slo-breached": {"autoscaler.oldest_event_age_seconds", "autoscaler.slo_seconds"},
    "collector-silent": {"autoscaler.samples"},
    "scale-writes-failing": {"autoscaler.arm_writes"},
    "dead-letters": {"autoscaler.dead_letters"},
    "partition-problem": {"autoscaler.decisions"},
    "controller-conflict": {"autoscaler.decisions"},
    "state-unreadable": {"autoscaler.decisions"},
    "namespace-throttled": {"autoscaler.throttled_requests", "autoscaler.throughput_units"},
}
#: Workbook charts and the metrics each must show (issue 12: per target, arrivals vs serving
#: capacity, backlog and oldest age against the SLO, capacity with decisions, reasons table,
#: collection failures and dead letters).
CHARTS = {
    "arrivals": {"autoscaler.arrival_rate", "autoscaler.capacity_observed", "autoscaler.throughput_per_instance"},
    "backlog": {"autoscaler.backlog"},
    "age": {"autoscaler.oldest_event_age_seconds", "autoscaler.slo_seconds"},
    "capacity": {"autoscaler.capacity_desired", "autoscaler.capacity_requested", "autoscaler.capacity_observed",
                 "autoscaler.decisions"},
    # a namespace target (issue 34): its TUs and its throttled requests
    "namespace": {"autoscaler.throughput_units", "autoscaler.throttled_requests"},
    "reasons": {"autoscaler.decisions"},
    "failures": {"autoscaler.collection_failures", "autoscaler.dead_letters"},
}


@pytest.fixture(scope="module")
def operations(templates: dict[str, Template]) -> Template:
    return templates["app/operations.bicep"]


def alert_rules(operations: Template) -> dict[str, dict]:
    (symbol,) = operations.of_type(QUERY_RULE)
    loop = operations.resources[symbol]["config"]["loop_type"]["detail"]
    rules = resolved(operations, loop["array_name"])
    return {rule["name"]: rule for rule in rules}


def test_operations_module_is_wired_to_the_application_insights_component(main: Template,
                                                                           templates: dict[str, Template]) -> None:
    (module,) = [m for m in main.modules.values() if m["detail"]["path"] == "app/operations.bicep"]
    params = module_body(module)["params"]
    assert operator(params["applicationInsightsId"]) == ("property_accessor", {
        "operand_1": "monitoring", "operand_2": {"operator": {"type": "property_accessor", "operands": {
            "operand_1": "outputs", "operand_2": "applicationInsightsId"}}}})
    assert params["alertEmailAddresses"] == "alertEmailAddresses"
    assert main.parameters["alertEmailAddresses"] == {**main.parameters["alertEmailAddresses"], "type": "array", "default": []}
    (component,) = templates["app/monitoring.bicep"].of_type("Microsoft.Insights/components")
    assert templates["app/monitoring.bicep"].outputs["applicationInsightsId"]["value"] == {
        "operator": {"type": "property_accessor", "operands": {"operand_1": component, "operand_2": "id"}}}
    assert "AZURE_MONITOR_WORKBOOK_ID" in main.outputs


def test_workbook_is_a_shared_workbook_on_the_component(operations: Template) -> None:
    ((symbol, body),) = operations.of_type(WORKBOOK).items()
    assert body["kind"] == "shared"
    assert function(body["name"])[0] == "guid"  # workbook names must be GUIDs
    assert body["properties"]["sourceId"] == "applicationInsightsId"
    assert body["properties"]["category"] == "workbook"
    content = workbook_content(operations, symbol)
    assert content["version"] == "Notebook/1.0"
    assert content["fallbackResourceIds"] == ["applicationInsightsId"]


def test_workbook_has_a_target_dropdown_and_every_chart_per_target(operations: Template) -> None:
    (symbol,) = operations.of_type(WORKBOOK)
    content = workbook_content(operations, symbol)
    (parameters,) = [item["content"]["parameters"] for item in content["items"] if item["type"] == 9]
    by_name = {parameter["name"]: parameter for parameter in parameters}
    assert by_name["Target"]["type"] == 2 and by_name["Target"]["isRequired"] is True  # a dropdown
    assert "customDimensions.target" in by_name["Target"]["query"]
    assert by_name["TimeRange"]["type"] == 4
    queries = workbook_queries(content)
    for chart, metrics in CHARTS.items():
        assert metrics <= metric_names(queries[chart]), chart
        assert '"{Target}"' in queries[chart], f"{chart} is not filtered to the selected target"
    items = {item["name"]: item["content"] for item in content["items"] if item["type"] == 3}
    assert items["reasons"]["visualization"] == "table"
    assert all(item["timeContextFromParameter"] == "TimeRange" for item in items.values())
    assert "customDimensions.reason" in queries["reasons"] and "customDimensions.direction" in queries["reasons"]


def test_alert_rules_cover_the_operators_conditions(operations: Template) -> None:
    rules = alert_rules(operations)
    assert set(rules) == set(ALERTS)
    for name, metrics in ALERTS.items():
        assert metric_names(rules[name]["query"]) == metrics, name
    assert rules["slo-breached"]["window"] == "PT5M" and "age > slo" in rules["slo-breached"]["query"]
    assert "ago(5m)" in rules["collector-silent"]["query"]
    assert '"failed"' in rules["scale-writes-failing"]["query"]
    assert '"hot_partition"' in rules["partition-problem"]["query"] and '"unowned_partitions"' in rules["partition-problem"]["query"]
    assert '"stall"' in rules["partition-problem"]["query"]
    assert 'reason startswith "conflict:"' in rules["controller-conflict"]["query"]
    assert 'reason == "state_unreadable"' in rules["state-unreadable"]["query"]
    assert all(rule["severity"] in (0, 1, 2, 3, 4) and rule["description"] for rule in rules.values())


def test_alert_rules_query_the_component_and_notify_the_optional_action_group(operations: Template) -> None:
    ((symbol, body),) = operations.of_type(QUERY_RULE).items()
    props = body["properties"]
    assert props["scopes"] == ["applicationInsightsId"]
    assert body["kind"] == "LogAlert" and "identity" not in body  # no principal, nothing granted
    (criterion,) = props["criteria"]["allOf"]
    assert criterion["timeAggregation"] == "Count" and criterion["operator"] == "GreaterThan" and criterion["threshold"] == 0
    assert [d["values"] for d in criterion["dimensions"]] == [["*"]]  # one alert per target (or function)
    actions = operator(props["actions"]["actionGroups"])
    assert actions[0] == "conditional" and actions[1]["condition"] == "hasActionGroup" and actions[1]["false_value"] == []
    (group_symbol,) = operations.of_type(ACTION_GROUP)
    assert operations.resources[group_symbol]["config"]["condition"] == "hasActionGroup"
    assert operations.resolve("hasActionGroup") == {"operator": {"type": "not", "operands": {"bool_value": {
        "function": {"type": "empty", "parameters": {"item_to_test": "alertEmailAddresses"}}}}}}
    receivers = operations.body(group_symbol)["properties"]["emailReceivers"]
    assert receivers["loop_type"]["detail"]["array_name"] == "alertEmailAddresses"
    assert not operations.of_type(ROLE_ASSIGNMENT)


def test_every_query_reads_the_telemetry_contract(operations: Template) -> None:
    (symbol,) = operations.of_type(WORKBOOK)
    queries = {f"workbook {name}": query for name, query in workbook_queries(workbook_content(operations, symbol)).items()}
    queries |= {f"alert {name}": rule["query"] for name, rule in alert_rules(operations).items()}
    problems = [problem for where, query in queries.items() for problem in query_problems(where, query)]
    assert problems == []
    used = set().union(*(metric_names(query) for query in queries.values()))
    assert used == set(TELEMETRY_METRICS), f"never shown or alerted on: {sorted(set(TELEMETRY_METRICS) - used)}"


def test_docs_state_the_contract_and_how_to_open_the_workbook() -> None:
    contract = (ROOT / "docs" / "operations-monitoring.md").read_text(encoding="utf-8")
    for name, dimensions in TELEMETRY_METRICS.items():
        line = next((line for line in contract.splitlines() if f"`{name}`" in line), "")
        assert line, f"docs/operations-monitoring.md does not list {name}"
        assert all(f"`{dimension}`" in line for dimension in dimensions), f"{name}: dimensions {sorted(dimensions)}"
    deploy = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    assert "workbook" in deploy.lower() and "AZURE_MONITOR_WORKBOOK_ID" in deploy


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ('requests | where name == "autoscaler.backlog"', "does not read customMetrics"),
        ('customMetrics | where name == "autoscaler.backlogg"', "unknown metric autoscaler.backlogg"),
        ('customMetrics | where name == "autoscaler.samples" | extend s = tostring(customDimensions.source)',
         "dimension source is not one of ['target']"),
        ('customMetrics | where name == "autoscaler.dead_letters" | extend t = customDimensions["target"]',
         "dimension target is not one of ['function']"),
    ],
)
def test_query_checker_rejects(query: str, message: str) -> None:
    assert any(message in problem for problem in query_problems("q", query))


def test_query_checker_accepts_a_contract_query() -> None:
    query = 'customMetrics | where name == "autoscaler.decisions" | extend r = tostring(customDimensions.reason)'
    assert query_problems("q", query) == []
