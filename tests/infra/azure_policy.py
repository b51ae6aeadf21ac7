"""A small, pure evaluator of Azure Policy rules, for the subset of the policy language the
namespace pin (infra/app/eventhubs-tu-pin.policy.json) uses, so the tests can apply the rule JSON
the deployment ships to namespace documents.

What it implements, after learn.microsoft.com "Azure Policy definition structure policy rule"
(articles/governance/policy/concepts/definition-structure-policy-rule.md):

- logical operators ``allOf``, ``anyOf``, ``not``;
- conditions on a ``field`` (the fields ``type``, ``location``, ``tags``, ``identity.type`` and the
  property aliases of ``ALIASES``) or a ``value``: ``equals``, ``notEquals`` (strings compared
  case-insensitively, as the docs say: InvariantCultureIgnoreCase), ``less``, ``greater`` (numbers
  only) and ``exists``;
- expressions ``[function(...)]`` with the functions ``parameters``, ``field``, ``string``,
  ``equals``, ``coalesce`` and ``createObject`` (ARM template functions; ``string`` writes a
  boolean as ``True``/``False`` like ARM's) and ``[[`` as the escape for a literal ``[``.

Anything else raises ``Unsupported``: a rule that grows past this subset fails its tests instead
of being evaluated wrongly.

What a write is evaluated on: a PUT on its body; a PATCH on the existing resource with the body
merged in (JSON merge patch, RFC 7396). Azure Policy documents no PATCH algorithm; the Azure/azure-
policy README ("Nonstandard update pattern through Azure Portal") says a partial PUT, unlike a
PATCH, is evaluated "as if some properties do not have values", i.e. a PATCH is evaluated with the
values it leaves alone; effect-basics.md adds that a PATCH changing only tags is evaluated by the
policies that inspect tags only (the pin does).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

EVENT_HUBS_NAMESPACE = "Microsoft.EventHub/namespaces"

#: Property aliases of Microsoft.EventHub/namespaces and their paths in the resource document, as
#: `Get-AzPolicyAlias` lists them (the public mirror maciejporebski/azure-policy-aliases,
#: aliases/Microsoft.EventHub/namespaces.md). Only the ones the pin uses.
ALIASES: dict[str, str] = {
    f"{EVENT_HUBS_NAMESPACE}/sku.name": "sku.name",
    f"{EVENT_HUBS_NAMESPACE}/sku.tier": "sku.tier",
    f"{EVENT_HUBS_NAMESPACE}/sku.capacity": "sku.capacity",
    f"{EVENT_HUBS_NAMESPACE}/minimumTlsVersion": "properties.minimumTlsVersion",
    f"{EVENT_HUBS_NAMESPACE}/publicNetworkAccess": "properties.publicNetworkAccess",
    f"{EVENT_HUBS_NAMESPACE}/disableLocalAuth": "properties.disableLocalAuth",
    f"{EVENT_HUBS_NAMESPACE}/isAutoInflateEnabled": "properties.isAutoInflateEnabled",
    f"{EVENT_HUBS_NAMESPACE}/maximumThroughputUnits": "properties.maximumThroughputUnits",
    f"{EVENT_HUBS_NAMESPACE}/kafkaEnabled": "properties.kafkaEnabled",
    f"{EVENT_HUBS_NAMESPACE}/zoneRedundant": "properties.zoneRedundant",
    f"{EVENT_HUBS_NAMESPACE}/clusterArmId": "properties.clusterArmId",
    f"{EVENT_HUBS_NAMESPACE}/alternateName": "properties.alternateName",
    f"{EVENT_HUBS_NAMESPACE}/encryption": "properties.encryption",
}
#: Fields every resource has (definition-structure-policy-rule.md, "Fields"), by document path.
FIELDS: dict[str, str] = {"type": "type", "name": "name", "id": "id", "location": "location", "tags": "tags",
                          "identity.type": "identity.type"}

_MISSING = object()


class Unsupported(ValueError):
    """The rule uses something outside the implemented subset."""


# --- documents -----------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396: objects merge member by member, ``null`` removes a member, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def request_content(existing: Mapping[str, Any], method: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """What a write is evaluated on: the PUT body, or the existing resource with the PATCH merged in."""
    if method == "PUT":
        return copy.deepcopy(dict(body))
    if method == "PATCH":
        return merge_patch(existing, body)
    raise Unsupported(f"method {method}")


def _lookup(document: Mapping[str, Any], path: str) -> Any:
    node: Any = document
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def field_value(document: Mapping[str, Any], name: str) -> Any:
    """The value of a field or alias; ``_MISSING`` when the document has none."""
    path = FIELDS.get(name) or ALIASES.get(name)
    if path is None:
        raise Unsupported(f"field {name!r}")
    return _lookup(document, path)


# --- expressions ---------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>-?\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
                    r"|(?P<punct>[(),]))")


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            if text[position:].strip() == "":
                break
            raise Unsupported(f"expression syntax at {text[position:]!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


def _arm_string(value: Any) -> str:
    if value is None or value is _MISSING:
        return ""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


class _Context:
    def __init__(self, document: Mapping[str, Any], parameters: Mapping[str, Any]) -> None:
        self.document = document
        self.parameters = parameters

    def call(self, name: str, args: list[Any]) -> Any:
        lowered = name.lower()
        if lowered == "parameters":
            (key,) = args
            if key not in self.parameters:
                raise KeyError(f"parameter {key!r} has no value")
            return self.parameters[key]
        if lowered == "field":
            (key,) = args
            value = field_value(self.document, key)
            return None if value is _MISSING else value
        if lowered == "string":
            (value,) = args
            return _arm_string(value)
        if lowered == "equals":
            left, right = args
            return _deep_equals(left, right)
        if lowered == "coalesce":
            return next((arg for arg in args if arg is not None), None)
        if lowered == "createobject":
            if len(args) % 2:
                raise Unsupported("createObject needs key/value pairs")
            return {args[i]: args[i + 1] for i in range(0, len(args), 2)}
        raise Unsupported(f"function {name}()")


def _deep_equals(left: Any, right: Any) -> bool:
    """ARM's equals(): deep, member order of objects does not matter, array order does."""
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(_deep_equals(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_deep_equals(a, b) for a, b in zip(left, right, strict=True))
    return type(left) is type(right) and left == right


def _parse(tokens: list[tuple[str, str]], position: int, context: _Context) -> tuple[Any, int]:
    kind, text = tokens[position]
    if kind == "string":
        return text[1:-1].replace("''", "'"), position + 1
    if kind == "number":
        return int(text), position + 1
    if kind == "name":
        if text in ("true", "false"):
            return text == "true", position + 1
        if position + 1 >= len(tokens) or tokens[position + 1] != ("punct", "("):
            raise Unsupported(f"bare name {text!r}")
        args, position = [], position + 2
        while tokens[position] != ("punct", ")"):
            value, position = _parse(tokens, position, context)
            args.append(value)
            if tokens[position] == ("punct", ","):
                position += 1
        return context.call(text, args), position + 1
    raise Unsupported(f"token {text!r}")


def resolve(value: Any, context: _Context) -> Any:
    """A condition operand: ``[expression]`` evaluated, ``[[...`` unescaped, anything else as is."""
    if isinstance(value, str) and value.startswith("[["):
        return value[1:]
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        tokens = _tokens(value[1:-1])
        result, position = _parse(tokens, 0, context)
        if position != len(tokens):
            raise Unsupported(f"trailing tokens in {value!r}")
        return result
    return value


# --- conditions ----------------------------------------------------------------------------------

_OPERATORS = ("equals", "notEquals", "less", "greater", "exists")


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold() == right.casefold()
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    return left == right


def evaluate(rule: Mapping[str, Any], document: Mapping[str, Any], parameters: Mapping[str, Any]) -> bool:
    """Whether a policy rule's ``if`` block matches the document (the effect then applies)."""
    return _condition(rule["if"], _Context(document, parameters))


def _condition(node: Mapping[str, Any], context: _Context) -> bool:
    if "allOf" in node:
        return all(_condition(child, context) for child in node["allOf"])
    if "anyOf" in node:
        return any(_condition(child, context) for child in node["anyOf"])
    if "not" in node:
        return not _condition(node["not"], context)
    operators = [key for key in node if key in _OPERATORS]
    unknown = [key for key in node if key not in _OPERATORS and key not in ("field", "value")]
    if len(operators) != 1 or unknown or ("field" in node) == ("value" in node):
        raise Unsupported(f"condition {node!r}")
    operator = operators[0]
    if "field" in node:
        name = resolve(node["field"], context)
        actual = field_value(context.document, name)
    else:
        actual = resolve(node["value"], context)
    expected = resolve(node[operator], context)
    if operator == "exists":
        present = actual is not _MISSING and actual is not None
        return present == (expected is True or (isinstance(expected, str) and expected.lower() == "true"))
    value = None if actual is _MISSING else actual
    if operator == "equals":
        return _same(value, expected)
    if operator == "notEquals":
        return not _same(value, expected)
    if not isinstance(value, int) or isinstance(value, bool) or not isinstance(expected, int):
        raise Unsupported(f"{operator} on {value!r} and {expected!r} (the engine throws on a type mismatch)")
    return value < expected if operator == "less" else value > expected
