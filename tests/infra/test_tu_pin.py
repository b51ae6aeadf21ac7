"""The namespace pin (issue 34): the TU scaler role holds Microsoft.EventHub/namespaces/write (no
narrower action exists), and a deny Azure Policy assigned on each sized namespace makes that write
able to change nothing but sku.capacity within the target's bounds.

Checked offline, over what the deployment ships:
- every writable property of the namespace, as azure-mgmt-eventhub's models describe it (its own
  read-only flag), is bounded (sku.capacity), pinned by the rule, or in UNPINNED with its reason;
  a new writable property fails the coverage test until it is one of the three;
- the rule JSON (infra/app/eventhubs-tu-pin.policy.json), applied by a small evaluator
  (tests/infra/azure_policy.py) to namespace documents before and after a PUT or PATCH: a capacity
  change within bounds passes, everything else is denied;
- the Bicep: one definition per namespace at its subscription, one assignment on the namespace
  resource named guid(...), its parameters the namespace's current values, switchable to
  report-only with pinEventHubsNamespaceSettings.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.infra.azure_policy import (
    ALIASES,
    EVENT_HUBS_NAMESPACE,
    Unsupported,
    _arm_string,
    evaluate,
    merge_patch,
    request_content,
)
from tests.infra.bicep_rules import Template, function, operator, walk

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
RULE_FILE = INFRA / "app" / "eventhubs-tu-pin.policy.json"
PIN = "app/eventhubs-tu-pin.bicep"
PIN_ASSIGNMENT = "app/eventhubs-tu-pin-assignment.bicep"
POLICY_DEFINITION = "Microsoft.Authorization/policyDefinitions"
POLICY_ASSIGNMENT = "Microsoft.Authorization/policyAssignments"


def alias(name: str) -> str:
    return f"{EVENT_HUBS_NAMESPACE}/{name}"


#: The one property the autoscaler writes: allowed to change, between the target's bounds.
BOUNDED = {"sku.capacity": alias("sku.capacity")}

#: Writable properties (or whole objects) the rule pins, and the policy field it reads each through.
PINNED: dict[str, str] = {
    "sku.name": alias("sku.name"),
    "sku.tier": alias("sku.tier"),
    "location": "location",
    "tags": "tags",
    "identity.type": "identity.type",
    "properties.minimumTlsVersion": alias("minimumTlsVersion"),
    "properties.publicNetworkAccess": alias("publicNetworkAccess"),
    "properties.disableLocalAuth": alias("disableLocalAuth"),
    "properties.isAutoInflateEnabled": alias("isAutoInflateEnabled"),
    "properties.maximumThroughputUnits": alias("maximumThroughputUnits"),
    "properties.kafkaEnabled": alias("kafkaEnabled"),
    "properties.zoneRedundant": alias("zoneRedundant"),
    "properties.clusterArmId": alias("clusterArmId"),
    "properties.alternateName": alias("alternateName"),
    # The whole object, compared with equals() (deep): every member inside it is pinned.
    "properties.encryption": alias("encryption"),
}

#: Writable properties the pin cannot or should not cover, with the reason (docs/deploy.md lists
#: them too). Keep it short: a property leaves this list as soon as an alias for it exists.
UNPINNED: dict[str, str] = {
    "identity.userAssignedIdentities": (
        "no policy field or alias (Azure Policy reads identity.type only); adding an identity also needs "
        "Microsoft.ManagedIdentity/userAssignedIdentities/*/assign/action on it, which the role lacks, but removing "
        "one of several is possible"),
    "properties.privateEndpointConnections": (
        "managed through its own child resource (privateEndpointConnections/write, not granted) and by the "
        "endpoints' owners; it changes outside namespace writes, so a value pinned at deployment would go stale and "
        "refuse the autoscaler's own writes"),
    "properties.platformCapabilities": "no policy alias found (confidential compute mode)",
    "properties.geoDataReplication": "no policy alias found; it also changes through the failover action",
    "properties.ipAddressType": "no policy alias found",
}


# --- the SDK's model of a namespace --------------------------------------------------------------


def _model_fields(cls: type) -> Mapping[str, Any]:
    cls()  # the generated models compute their field table on first instantiation
    return cls._attr_to_rest_field  # type: ignore[attr-defined]


def _model_types(cls: type) -> dict[str, Any]:
    from azure.mgmt.eventhub import models
    from azure.mgmt.eventhub.models import _models

    return typing.get_type_hints(cls, {**vars(_models), "_models": models})


def _nested_model(annotation: Any) -> tuple[type | None, bool]:
    """The model class inside Optional[...] / list[...] (and whether it is a list); dicts are leaves."""
    from azure.mgmt.eventhub._utils.model_base import Model

    origin = typing.get_origin(annotation)
    if origin is dict:
        return None, False
    if origin is list:
        inner, _ = _nested_model(typing.get_args(annotation)[0])
        return inner, True
    if origin is typing.Union:
        for arg in typing.get_args(annotation):
            inner, is_list = _nested_model(arg)
            if inner is not None:
                return inner, is_list
        return None, False
    if isinstance(annotation, type) and issubclass(annotation, Model):
        return annotation, False
    return None, False


def writable_paths(cls: type | None = None, prefix: str = "") -> Iterator[str]:
    """Every property a create or update of the namespace can set, by REST path: the SDK's own
    read-only test (model_base._is_readonly: visibility ['read'] only) decides, nested models are
    walked (list members as ``[*]``)."""
    from azure.mgmt.eventhub._utils.model_base import _is_readonly
    from azure.mgmt.eventhub.models import EHNamespace

    cls = cls or EHNamespace
    types = _model_types(cls)
    for attribute, rest_field in _model_fields(cls).items():
        if _is_readonly(rest_field):
            continue
        path = f"{prefix}{rest_field._rest_name}"
        inner, is_list = _nested_model(types.get(attribute))
        if inner is None:
            yield path
        else:
            yield from writable_paths(inner, f"{path}[*]." if is_list else f"{path}.")


def _covered_by(path: str, roots: typing.Iterable[str]) -> str | None:
    return next((root for root in roots if path == root or path.startswith((f"{root}.", f"{root}[*]"))), None)


def coverage_problems(paths: typing.Iterable[str]) -> list[str]:
    """Writable paths that are neither bounded, pinned nor listed as unpinned."""
    return [f"{path}: writable but neither bounded, pinned by the rule nor in UNPINNED" for path in paths
            if _covered_by(path, [*BOUNDED, *PINNED, *UNPINNED]) is None]


@pytest.fixture(scope="module")
def paths() -> list[str]:
    return list(writable_paths())


def test_the_model_walk_sees_writable_and_skips_read_only_properties(paths: list[str]) -> None:
    assert {"sku.capacity", "sku.name", "properties.minimumTlsVersion", "properties.disableLocalAuth", "tags",
            "location", "identity.type", "properties.encryption.keyVaultProperties[*].keyName"} <= set(paths)
    for read_only in ("properties.provisioningState", "properties.status", "properties.serviceBusEndpoint",
                      "properties.metricId", "identity.principalId", "id", "name", "systemData.createdBy"):
        assert not any(path == read_only or path.startswith(read_only + ".") for path in paths), read_only


def test_every_writable_namespace_property_is_bounded_pinned_or_listed(paths: list[str]) -> None:
    assert coverage_problems(paths) == []


@pytest.mark.parametrize("listed", [*BOUNDED, *PINNED, *UNPINNED])
def test_every_listed_property_is_writable(paths: list[str], listed: str) -> None:
    """No stale entry: each name in the three tables is (the root of) a writable property."""
    assert any(path == listed or path.startswith((f"{listed}.", f"{listed}[*]")) for path in paths)


@pytest.mark.parametrize("new", ["properties.newSecuritySwitch", "sku.family", "identity.federatedCredentials",
                                 "properties.platformCapabilitiesV2.mode"])
def test_a_new_writable_property_fails_the_coverage_check(paths: list[str], new: str) -> None:
    assert coverage_problems([*paths, new]) == [f"{new}: writable but neither bounded, pinned by the rule nor in UNPINNED"]


def test_the_unpinned_list_is_documented() -> None:
    docs = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    for path in UNPINNED:
        assert f"`{path}`" in docs, f"docs/deploy.md does not list {path} as not pinned"


# --- the rule JSON -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def definition() -> dict[str, Any]:
    return json.loads(RULE_FILE.read_text(encoding="utf-8"))


def conditions(node: Any) -> Iterator[dict[str, Any]]:
    """Every leaf condition of a rule (a dict with field or value)."""
    if isinstance(node, Mapping):
        if "field" in node or "value" in node:
            yield dict(node)
        for key in ("allOf", "anyOf"):
            for child in node.get(key, []):
                yield from conditions(child)
        if "not" in node:
            yield from conditions(node["not"])


def reads(condition: Mapping[str, Any]) -> set[str]:
    """The fields a condition reads: its ``field``, and field('...') calls in its expressions."""
    read = {condition["field"]} if "field" in condition else set()
    for value in condition.values():
        if isinstance(value, str):
            read |= set(re.findall(r"field\('([^']+)'\)", value))
    return read


def compares_with_a_parameter(condition: Mapping[str, Any]) -> bool:
    return any(isinstance(value, str) and "parameters('" in value for value in condition.values())


def test_the_definition_is_an_indexed_deny_on_namespaces(definition: dict[str, Any]) -> None:
    """Indexed: the rule reads tags and location (definition-structure-basics.md, mode)."""
    assert definition["mode"] == "Indexed"
    rule = definition["policyRule"]
    assert rule["then"] == {"effect": "deny"}
    assert rule["if"]["allOf"][0] == {"field": "type", "equals": EVENT_HUBS_NAMESPACE}
    assert list(rule["if"]["allOf"][1]) == ["anyOf"]


@pytest.mark.parametrize(("path", "field"), sorted(PINNED.items()))
def test_every_pinned_property_is_compared_with_its_pinned_value(definition: dict[str, Any], path: str,
                                                                 field: str) -> None:
    matching = [c for c in conditions(definition["policyRule"]["if"]) if field in reads(c) and compares_with_a_parameter(c)]
    assert matching, f"{path}: no condition compares {field} with a parameter"


def test_capacity_is_bounded_by_the_two_parameters(definition: dict[str, Any]) -> None:
    field = BOUNDED["sku.capacity"]
    bounds = {(key, c[key]) for c in conditions(definition["policyRule"]["if"]) if c.get("field") == field
              for key in ("less", "greater") if key in c}
    assert bounds == {("less", "[parameters('minimumCapacity')]"), ("greater", "[parameters('maximumCapacity')]")}
    assert not [c for c in conditions(definition["policyRule"]["if"]) if field in reads(c) and "equals" in c]


def test_every_parameter_is_used_and_declared(definition: dict[str, Any]) -> None:
    text = json.dumps(definition["policyRule"])
    used = set(re.findall(r"parameters\('([^']+)'\)", text))
    assert used == set(definition["parameters"])


def test_every_field_the_rule_reads_is_a_known_alias_or_field(definition: dict[str, Any]) -> None:
    read = set().union(*(reads(c) for c in conditions(definition["policyRule"]["if"])))
    assert read <= set(ALIASES) | {"type", "location", "tags", "identity.type"}


# --- the rule applied to namespace documents -----------------------------------------------------

NAMESPACE_ID = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-orders/providers/"
                "Microsoft.EventHub/namespaces/evhns-orders")
MIN_TUS, MAX_TUS = 2, 10

#: A Standard namespace as GET returns it (read-only members included), hardened by its owner.
EXISTING: dict[str, Any] = {
    "id": NAMESPACE_ID,
    "name": "evhns-orders",
    "type": EVENT_HUBS_NAMESPACE,
    "location": "westeurope",
    "tags": {"team": "orders", "cost-center": "42"},
    "sku": {"name": "Standard", "tier": "Standard", "capacity": 4},
    "identity": {"type": "UserAssigned", "principalId": None,
                 "userAssignedIdentities": {"/subscriptions/0/resourceGroups/rg/providers/"
                                            "Microsoft.ManagedIdentity/userAssignedIdentities/id-cmk": {}}},
    "properties": {
        "minimumTlsVersion": "1.2",
        "publicNetworkAccess": "Disabled",
        "disableLocalAuth": True,
        "isAutoInflateEnabled": False,
        "maximumThroughputUnits": 0,
        "kafkaEnabled": True,
        "zoneRedundant": True,
        "encryption": {"keySource": "Microsoft.KeyVault", "requireInfrastructureEncryption": False,
                       "keyVaultProperties": [{"keyName": "cmk", "keyVaultUri": "https://kv-orders.vault.azure.net",
                                               "keyVersion": "", "identity": {"userAssignedIdentity": "id-cmk"}}]},
        "provisioningState": "Succeeded",
        "status": "Active",
        "serviceBusEndpoint": "https://evhns-orders.servicebus.windows.net:443/",
        "metricId": "00000000-0000-0000-0000-000000000000:evhns-orders",
        "privateEndpointConnections": [],
    },
}


def pinned_parameters(namespace: Mapping[str, Any], minimum: int, maximum: int) -> dict[str, Any]:
    """The assignment's parameter values for a namespace, as eventhubs-tu-pin-assignment.bicep
    computes them (test_the_assignment_parameters_mirror_the_bicep holds the two together)."""
    properties = namespace.get("properties") or {}
    optional = {name: _arm_string(properties.get(name, "")) for name in SCALAR_PROPERTIES}
    return {
        "minimumCapacity": minimum,
        "maximumCapacity": maximum,
        "skuName": namespace["sku"]["name"],
        "skuTier": namespace["sku"]["tier"],
        "location": namespace["location"],
        "identityType": _arm_string((namespace.get("identity") or {}).get("type", "")),
        **optional,
        "tags": namespace.get("tags") or {},
        "encryption": properties.get("encryption") or {},
    }


SCALAR_PROPERTIES = ("minimumTlsVersion", "publicNetworkAccess", "disableLocalAuth", "isAutoInflateEnabled",
                     "maximumThroughputUnits", "kafkaEnabled", "zoneRedundant", "clusterArmId", "alternateName")


def denied(definition: Mapping[str, Any], method: str, body: Mapping[str, Any],
           existing: Mapping[str, Any] = EXISTING) -> bool:
    parameters = pinned_parameters(existing, MIN_TUS, MAX_TUS)
    return evaluate(definition["policyRule"], request_content(existing, method, body), parameters)


def patched(**changes: Any) -> dict[str, Any]:
    """A full PUT body: the existing namespace with ``changes`` applied (``a__b`` is a.b; None removes)."""
    body = copy.deepcopy(EXISTING)
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = body
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return body


ALLOWED = [
    pytest.param("PATCH", {"sku": {"name": "Standard", "tier": "Standard", "capacity": 6}}, id="patch-capacity-as-the-app-does"),
    pytest.param("PATCH", {"sku": {"capacity": MIN_TUS}}, id="patch-capacity-at-the-minimum"),
    pytest.param("PATCH", {"sku": {"capacity": MAX_TUS}}, id="patch-capacity-at-the-maximum"),
    pytest.param("PUT", patched(sku__capacity=8), id="put-of-everything-but-a-new-capacity"),
    pytest.param("PATCH", {"tags": {"cost-center": "42", "team": "orders"}}, id="patch-same-tags-other-order"),
    pytest.param("PATCH", {"properties": {"minimumTlsVersion": "1.2"}}, id="patch-a-setting-to-its-value"),
    pytest.param("PATCH", {"properties": {"privateEndpointConnections": []}}, id="patch-unpinned-connections"),
]

DENIED = [
    pytest.param("PATCH", {"sku": {"capacity": MIN_TUS - 1}}, id="capacity-below-min_tus"),
    pytest.param("PATCH", {"sku": {"capacity": MAX_TUS + 1}}, id="capacity-above-max_tus"),
    pytest.param("PATCH", {"sku": {"name": "Premium", "tier": "Premium", "capacity": 4}}, id="sku-name-and-tier"),
    pytest.param("PATCH", {"sku": {"name": "Basic"}}, id="sku-name"),
    pytest.param("PATCH", {"sku": {"tier": "Premium"}}, id="sku-tier"),
    pytest.param("PATCH", {"properties": {"minimumTlsVersion": "1.0"}}, id="minimumTlsVersion"),
    pytest.param("PATCH", {"properties": {"publicNetworkAccess": "Enabled"}}, id="publicNetworkAccess"),
    pytest.param("PATCH", {"properties": {"disableLocalAuth": False}}, id="disableLocalAuth"),
    pytest.param("PATCH", {"properties": {"isAutoInflateEnabled": True, "maximumThroughputUnits": 20}},
                 id="auto-inflate"),
    pytest.param("PATCH", {"properties": {"maximumThroughputUnits": 20}}, id="maximumThroughputUnits"),
    pytest.param("PATCH", {"properties": {"kafkaEnabled": False}}, id="kafkaEnabled"),
    pytest.param("PATCH", {"properties": {"zoneRedundant": False}}, id="zoneRedundant"),
    pytest.param("PATCH", {"properties": {"alternateName": "evhns-orders-alt"}}, id="alternateName-added"),
    pytest.param("PATCH", {"properties": {"clusterArmId": "/subscriptions/0/resourceGroups/rg/providers/"
                                                          "Microsoft.EventHub/clusters/c"}}, id="clusterArmId-added"),
    pytest.param("PATCH", {"properties": {"encryption": {"requireInfrastructureEncryption": True}}},
                 id="encryption-member"),
    pytest.param("PATCH", {"properties": {"encryption": {"keyVaultProperties": [
        {"keyName": "attacker", "keyVaultUri": "https://kv-x.vault.azure.net", "keyVersion": "",
         "identity": {"userAssignedIdentity": "id-cmk"}}]}}}, id="encryption-key"),
    pytest.param("PATCH", {"properties": {"encryption": None}}, id="encryption-removed"),
    pytest.param("PATCH", {"identity": {"type": "None"}}, id="identity-type"),
    pytest.param("PATCH", {"identity": None}, id="identity-removed"),
    pytest.param("PATCH", {"tags": {"team": "someone-else"}}, id="tag-value"),
    pytest.param("PATCH", {"tags": {"new": "tag"}}, id="tag-added"),
    pytest.param("PATCH", {"tags": None}, id="tags-removed"),
    pytest.param("PUT", patched(location="northeurope"), id="put-location"),
    pytest.param("PUT", patched(properties__disableLocalAuth=None), id="put-omitting-a-pinned-setting"),
    pytest.param("PUT", patched(properties__minimumTlsVersion="1.1", sku__capacity=5), id="put-capacity-and-tls"),
    pytest.param("PATCH", {"sku": {"capacity": 5}, "properties": {"minimumTlsVersion": "1.0"}},
                 id="patch-capacity-and-tls"),
]


@pytest.mark.parametrize(("method", "body"), ALLOWED)
def test_capacity_writes_within_bounds_pass(definition: dict[str, Any], method: str, body: dict[str, Any]) -> None:
    assert not denied(definition, method, body)


@pytest.mark.parametrize(("method", "body"), DENIED)
def test_every_other_change_is_denied(definition: dict[str, Any], method: str, body: dict[str, Any]) -> None:
    assert denied(definition, method, body)


#: A value other than EXISTING's for each optional setting.
OTHER_VALUES: dict[str, Any] = {"minimumTlsVersion": "1.0", "publicNetworkAccess": "Enabled", "disableLocalAuth": False,
                                "isAutoInflateEnabled": True, "maximumThroughputUnits": 20, "kafkaEnabled": False,
                                "zoneRedundant": False, "clusterArmId": "/subscriptions/0/resourceGroups/rg/providers/"
                                "Microsoft.EventHub/clusters/c", "alternateName": "evhns-orders-alt"}


@pytest.mark.parametrize("name", SCALAR_PROPERTIES)
def test_each_optional_setting_is_pinned_both_ways(definition: dict[str, Any], name: str) -> None:
    """Changed (or added) by a PATCH: denied. Left out of a PUT: denied when the namespace has it
    (the provider would reset it to its default), allowed when it has none (it stays absent)."""
    assert set(OTHER_VALUES) == set(SCALAR_PROPERTIES)
    assert denied(definition, "PATCH", {"properties": {name: OTHER_VALUES[name]}})
    has_it = name in EXISTING["properties"]
    assert denied(definition, "PUT", patched(**{f"properties__{name}": None})) is has_it


#: A namespace with none of the optional settings: no tags, identity, encryption, alternate name.
BARE: dict[str, Any] = {
    "id": NAMESPACE_ID, "type": EVENT_HUBS_NAMESPACE, "location": "westeurope",
    "sku": {"name": "Standard", "tier": "Standard", "capacity": MIN_TUS},
    "properties": {"minimumTlsVersion": "1.2", "publicNetworkAccess": "Enabled", "disableLocalAuth": False,
                   "isAutoInflateEnabled": False, "maximumThroughputUnits": 0, "kafkaEnabled": True,
                   "zoneRedundant": True},
}


@pytest.mark.parametrize(("method", "body", "expected"), [
    pytest.param("PATCH", {"sku": {"name": "Standard", "tier": "Standard", "capacity": 3}}, False, id="capacity"),
    pytest.param("PATCH", {"tags": {}}, False, id="empty-tags-are-no-tags"),
    pytest.param("PATCH", {"tags": {"a": "b"}}, True, id="first-tag"),
    pytest.param("PATCH", {"identity": {"type": "SystemAssigned"}}, True, id="first-identity"),
    pytest.param("PATCH", {"properties": {"encryption": {"keySource": "Microsoft.KeyVault"}}}, True,
                 id="first-encryption"),
    pytest.param("PATCH", {"properties": {"alternateName": "alt"}}, True, id="first-alternate-name"),
])
def test_absent_settings_are_pinned_as_absent(definition: dict[str, Any], method: str, body: dict[str, Any],
                                              expected: bool) -> None:
    assert denied(definition, method, body, existing=BARE) is expected


@pytest.mark.parametrize(("body", "expected"), [
    pytest.param({"sku": {"capacity": MAX_TUS}}, False, id="a-capacity-inside-passes"),
    pytest.param({"tags": {"team": "orders", "cost-center": "42"}}, True, id="anything-else-is-denied"),
])
def test_a_namespace_outside_its_bounds_only_takes_a_capacity_inside(definition: dict[str, Any],
                                                                      body: dict[str, Any], expected: bool) -> None:
    """Auto-inflate (or an older pin) left 30 TUs: the rule reads the namespace as it would be after
    the write, so only a write that brings the capacity back within bounds passes."""
    above = patched(sku__capacity=30)
    assert denied(definition, "PATCH", body, existing=above) is expected


def test_the_rule_leaves_other_resource_types_alone(definition: dict[str, Any]) -> None:
    hub = {"type": "Microsoft.EventHub/namespaces/eventhubs", "location": "westeurope", "properties": {}}
    assert not evaluate(definition["policyRule"], hub, pinned_parameters(EXISTING, MIN_TUS, MAX_TUS))


# --- the evaluator itself ------------------------------------------------------------------------


@pytest.mark.parametrize(("rule", "document", "expected"), [
    pytest.param({"field": "location", "equals": "WestEurope"}, {"location": "westeurope"}, True, id="case-insensitive"),
    pytest.param({"field": "tags", "exists": False}, {}, True, id="missing-field"),
    pytest.param({"field": "tags", "exists": "true"}, {"tags": {}}, True, id="exists-as-string"),
    pytest.param({"value": "[string(field('Microsoft.EventHub/namespaces/disableLocalAuth'))]", "equals": "True"},
                 {"properties": {"disableLocalAuth": True}}, True, id="string-of-a-boolean"),
    pytest.param({"value": "[equals(createObject('a', 'x', 'b', 'y'), field('tags'))]", "equals": True},
                 {"tags": {"b": "y", "a": "x"}}, True, id="deep-equality-ignores-member-order"),
    pytest.param({"value": "[coalesce(field('tags'), createObject())]", "equals": "[[literal"}, {}, False,
                 id="escaped-bracket-is-a-literal"),
    pytest.param({"not": {"field": "Microsoft.EventHub/namespaces/sku.capacity", "less": 3}}, {"sku": {"capacity": 3}},
                 True, id="not-and-less"),
])
def test_the_evaluator(rule: dict[str, Any], document: dict[str, Any], expected: bool) -> None:
    assert evaluate({"if": rule}, document, {}) is expected


@pytest.mark.parametrize("rule", [
    pytest.param({"field": "Microsoft.EventHub/namespaces/unknownAlias", "exists": True}, id="unknown-alias"),
    pytest.param({"value": "[requestContext().apiVersion]", "equals": "x"}, id="unknown-function"),
    pytest.param({"field": "location", "like": "west*"}, id="unknown-operator"),
    pytest.param({"count": {"field": "x[*]"}, "equals": 0}, id="count"),
    pytest.param({"field": "location", "less": 3}, id="less-on-a-string"),
])
def test_the_evaluator_refuses_what_it_does_not_implement(rule: dict[str, Any]) -> None:
    with pytest.raises(Unsupported):
        evaluate({"if": rule}, {"location": "westeurope"}, {})


def test_merge_patch_follows_rfc_7396() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "d": 3}, {"a": {"b": None, "e": 4}, "d": [1]}) == {"a": {"c": 2, "e": 4},
                                                                                                  "d": [1]}


# --- the Bicep -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def main() -> Template:
    return Template.from_file(INFRA / "main.bicep", INFRA)


@pytest.fixture(scope="module")
def pin() -> Template:
    return Template.from_file(INFRA / PIN, INFRA)


@pytest.fixture(scope="module")
def assignment() -> Template:
    return Template.from_file(INFRA / PIN_ASSIGNMENT, INFRA)


def _module_body(module: dict[str, Any]) -> dict[str, Any]:
    body = module["config"]
    while "config" in body and ("loop_type" in body or "condition" in body):
        body = body["config"]
    return body


def test_main_pins_each_sized_namespace_at_its_subscription(main: Template) -> None:
    (module,) = [m for m in main.modules.values() if m["detail"]["path"] == PIN]
    assert module["config"]["loop_type"]["detail"]["array_name"] == "eventHubsTuNamespaceIds"
    body = _module_body(module)
    scope = function(body["scope"])
    assert scope is not None and scope[0] == "subscription"
    assert body["params"]["namespaceId"] == module["config"]["loop_type"]["detail"]["item_name"]
    assert body["params"]["enforce"] == "pinEventHubsNamespaceSettings"
    assert "autoscalerPolicy" in json.dumps(body["params"]["namespacePolicies"])


def test_the_switch_is_a_documented_bool_that_defaults_to_pinning(main: Template) -> None:
    parameter = main.parameters["pinEventHubsNamespaceSettings"]
    assert parameter["type"] == "bool" and parameter["default"] is True
    for doc in (ROOT / "docs" / "deploy.md", ROOT / "README.md"):
        assert "`pinEventHubsNamespaceSettings`" in doc.read_text(encoding="utf-8"), doc


def test_the_definition_is_the_json_file_at_subscription_scope(pin: Template) -> None:
    assert pin.tree["globals"]["scope"]["value"] == "subscription"
    (body,) = pin.of_type(POLICY_DEFINITION).values()
    loaded = pin.resolve("definition")
    assert function(loaded) == ("load_json_content", {"file_path": RULE_FILE.name, "json_path": None, "encoding": None})
    properties = body["properties"]
    assert properties["policyType"] == "Custom"
    for key in ("mode", "parameters", "policyRule"):
        assert operator(properties[key]) == ("property_accessor", {"operand_1": "definition", "operand_2": key}), key
    name = function(body["name"])
    assert name is not None and name[0] == "guid" and "namespaceId" in name[1].values()


def test_the_bounds_default_to_the_policy_models_defaults(pin: Template) -> None:
    from scaling.domain.namespace.policy import EventHubsNamespaceTarget

    defaults = {f.name: f.default for f in dataclasses.fields(EventHubsNamespaceTarget)}
    for variable, key in (("minimumCapacity", "min_tus"), ("maximumCapacity", "max_tus")):
        value = pin.variables[variable]["value"]
        conditional = operator(value)
        assert conditional is not None and conditional[0] == "conditional", variable
        assert conditional[1]["true_value"] == defaults[key], f"{variable}: no policy entry for the namespace"
        fallbacks = [op[1]["operand_2"] for op in map(operator, walk(value)) if op and op[0] == "coalesce"]
        assert fallbacks == [defaults[key]], f"{variable}: an entry without {key}"
        assert key in json.dumps(value)


def test_the_assignment_is_on_the_namespace_and_named_with_guid(assignment: Template) -> None:
    (symbol,) = [s for s, res in assignment.resources.items() if res["type"] == EVENT_HUBS_NAMESPACE]
    assert assignment.resources[symbol]["existing"]
    (body,) = assignment.of_type(POLICY_ASSIGNMENT).values()
    assert body["scope"] == symbol, "the assignment must be scoped to the namespace resource, not its group"
    name = function(body["name"])
    assert name is not None and name[0] == "guid"
    first, *rest = name[1].values()
    assert operator(first) == ("property_accessor", {"operand_1": symbol, "operand_2": "id"})
    assert "policyDefinitionId" in rest
    properties = body["properties"]
    assert properties["policyDefinitionId"] == "policyDefinitionId"
    mode = operator(properties["enforcementMode"])
    assert mode is not None and mode[0] == "conditional"
    assert mode[1]["condition"] == "enforce" and (mode[1]["true_value"], mode[1]["false_value"]) == ("Default",
                                                                                                    "DoNotEnforce")


def test_the_pin_module_hands_its_definition_to_the_assignment(pin: Template) -> None:
    (module,) = [m for m in pin.modules.values() if m["detail"]["path"] == Path(PIN_ASSIGNMENT).name]
    body = _module_body(module)
    (definition_symbol,) = pin.of_type(POLICY_DEFINITION)
    assert operator(body["params"]["policyDefinitionId"]) == ("property_accessor",
                                                              {"operand_1": definition_symbol, "operand_2": "id"})
    assert function(body["scope"])[0] == "resource_group"


#: What each assignment parameter must be read from, by the property names its Bicep expression uses.
PARAMETER_SOURCES: dict[str, tuple[str, ...]] = {
    "minimumCapacity": ("minimumCapacity",),
    "maximumCapacity": ("maximumCapacity",),
    "skuName": ("sku", "name"),
    "skuTier": ("sku", "tier"),
    "location": ("location",),
    "identityType": ("identity", "type"),
    **{name: ("properties", name) for name in SCALAR_PROPERTIES},
    "tags": ("tags",),
    "encryption": ("properties", "encryption"),
}


def test_the_assignment_parameters_mirror_the_bicep(assignment: Template, definition: dict[str, Any]) -> None:
    """The Bicep passes exactly the definition's parameters, each read from the namespace property
    the rule compares it with (so pinned_parameters above, used by the evaluator tests, is what
    the deployment sends)."""
    (body,) = assignment.of_type(POLICY_ASSIGNMENT).values()
    given = {key: entry["value"] for key, entry in body["properties"]["parameters"].items()}
    assert set(given) == set(definition["parameters"]) == set(PARAMETER_SOURCES)
    assert set(pinned_parameters(EXISTING, 1, 2)) == set(given)
    for key, names in PARAMETER_SOURCES.items():
        text = json.dumps(given[key])
        assert all(f'"{name}"' in text for name in names), f"{key}: {text}"
    string_valued = {key for key, decl in definition["parameters"].items() if decl["type"] == "String"}
    for key in string_valued - {"skuName", "skuTier", "location"}:
        fn = function(given[key])
        assert fn is not None and fn[0] == "string", f"{key}: the rule compares string() of the value"
