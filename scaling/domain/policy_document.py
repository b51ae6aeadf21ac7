"""A policy document (parsed JSON) in, a ``Policy`` or one ``PolicyError`` per problem out; and
the JSON Schema of the same model for editors.

pydantic reports errors as locations and types; this module turns them into the project's
messages, which start with the field path and say why, for example
``targets[0].rules[1].scale_down_below must be lower than scale_up_above``. A field is named the
way the document spells it: a source written with KEDA's camelCase names gets camelCase names back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic.json_schema import GenerateJsonSchema

from scaling.domain.policy_fields import KEDA_ALIASES
from scaling.domain.policy_model import Policy
from scaling.domain.policy_rules import Step
from scaling.domain.policy_sources import SourceSettings

SCHEMA_FILE = "policy.schema.json"
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_CAMEL = {camel: snake for snake, camel in KEDA_ALIASES.items()}
#: A list's items, for "must list at least one ...".
_ITEM_NAMES = {"targets": "target", "sources": "source", "rules": "rule", "tiers": "tier"}


class PolicyError(ValueError):
    """An invalid policy; the message starts with the field path."""


@cache
def _adapter() -> TypeAdapter[Policy]:
    return TypeAdapter(Policy)


def validate_document(document: Any) -> Policy:
    """The policy a parsed JSON document describes; ``PolicyError`` lists every problem found,
    one per line, each starting with its field path."""
    try:
        return _adapter().validate_python(document)
    except ValidationError as error:
        items = error.errors(include_url=False)
        # A list whose items failed is also reported too short; the items' errors say more.
        failed = [tuple(item["loc"]) for item in items if item["type"] != "too_short"]
        items = [item for item in items if item["type"] != "too_short"
                 or not any(loc[:len(item["loc"])] == tuple(item["loc"]) for loc in failed)]
        messages = list(dict.fromkeys(_message(item, document) for item in items))
        raise PolicyError("\n".join(messages)) from None


# --- messages ------------------------------------------------------------------------------------


def _message(item: Mapping[str, Any], document: Any) -> str:
    location = tuple(item["loc"])
    context = item.get("ctx") or {}
    kind = item["type"]
    if kind == "policy":
        # Raised by the model's own validators: the location is the object (or the field for a
        # field-level check), the context names the field inside it and the fields it mentions.
        holder = _value_at(document, location)
        if context.get("field") and not isinstance(holder, Mapping):
            holder = _value_at(document, location[:-1])
        field = context.get("field") or ""
        path = _path(location)
        names = [_spelled(name, holder) for name in context.get("names", "").split("\x1f") if name]
        reason = _render(context["reason"], names, path or "policy")
        subject = ".".join(part for part in (path, _spelled_path(field, holder)) if part)
        if not subject:
            return reason
        return f"{subject}{'' if reason.startswith(':') else ' '}{reason}"
    holder = _value_at(document, location[:-1]) if location else None
    subject = _path(location[:-1] + (_spelled(location[-1], holder),)) if location else "policy"
    return f"{subject} {_reason(kind, item, context, location)}"


def _reason(kind: str, item: Mapping[str, Any], context: Mapping[str, Any], location: tuple[Any, ...]) -> str:
    got = _shown(item.get("input"))
    reasons = {
        "missing": "is required",
        "string_type": "must be a non-empty string",
        "string_too_short": "must be a non-empty string",
        "string_too_long": f"must be at most {context.get('max_length')} characters",
        "int_from_float": f"must be a whole number, got {got}",
        "int_type": f"must be a whole number, got {got}",
        "int_parsing": f"must be a whole number, got {got}",
        "float_type": f"must be a number, got {got}",
        "float_parsing": f"must be a number, got {got}",
        "finite_number": f"must be a finite number, got {got}",
        "greater_than_equal": f"must be at least {_bound(context.get('ge'))}, got {got}",
        "greater_than": f"must be greater than {_bound(context.get('gt'))}, got {got}",
        "less_than_equal": f"must be at most {_bound(context.get('le'))}, got {got}",
        "less_than": f"must be less than {_bound(context.get('lt'))}, got {got}",
        "literal_error": f"must be one of {_choices(context.get('expected', ''))}, got {got}",
        "bool_type": f"must be true or false, got {got}",
        "bool_parsing": f"must be true or false, got {got}",
        "tuple_type": "must be a list",
        "list_type": "must be a list",
        "dataclass_type": "must be an object",
        "dataclass_arguments_type": "must be an object",
        "dict_type": "must be an object",
        "model_type": "must be an object",
        "too_long": f"must list at most {context.get('max_length')}, got {context.get('actual_length')}",
        "unexpected_keyword_argument": "is not a known setting",
        "string_pattern_mismatch": f"must be a time of day, HH:MM from 00:00 to 23:59, got {got}",
        "timezone_aware": f"must carry an offset (e.g. +01:00 or Z), got {got}",
        "datetime_parsing": f"must be an ISO 8601 time with an offset, got {got}",
        "datetime_from_date_parsing": f"must be an ISO 8601 time with an offset, got {got}",
        "datetime_type": f"must be an ISO 8601 time with an offset, got {got}",
    }
    if kind == "too_long" and isinstance(item.get("input"), str):
        return f"must be at most {context.get('max_length')} characters"
    if kind == "too_short":
        item_name = _ITEM_NAMES.get(str(location[-1]) if location else "", "item")
        return f"must list at least one {item_name}"
    return reasons.get(kind, str(item.get("msg", kind)))


def _bound(value: Any) -> str:
    """A limit as a person writes it: 1000000000000, not 1000000000000.0."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _render(reason: str, names: list[str], path: str) -> str:
    """``{0}``, ``{1}``... are the mentioned fields, ``{path}`` the object's path (no
    ``str.format``: a quoted value may hold braces)."""

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key == "path":
            return path
        index = int(key)
        return names[index] if index < len(names) else match.group(0)

    return re.sub(r"\{(\d+|path)\}", replace, reason)


def _choices(expected: str) -> str:
    return expected.replace("'", "").replace(" or ", ", ")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _path(location: tuple[Any, ...]) -> str:
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _value_at(document: Any, location: tuple[Any, ...]) -> Any:
    value = document
    for part in location:
        in_mapping = isinstance(value, Mapping) and part in value
        in_list = isinstance(value, list | tuple) and isinstance(part, int) and 0 <= part < len(value)
        if not (in_mapping or in_list):
            return None
        value = value[part]
    return value


def _uses_keda_spelling(holder: Any) -> bool:
    return isinstance(holder, Mapping) and any(key in _CAMEL for key in holder)


def _spelled(name: Any, holder: Any) -> Any:
    """``name`` in the spelling the object uses: KEDA's camelCase if any of its keys is one."""
    if isinstance(name, str) and name in KEDA_ALIASES and _uses_keda_spelling(holder):
        return KEDA_ALIASES[name]
    return name


def _spelled_path(field: str, holder: Any) -> str:
    """A field of ``holder``, or of an object inside it (``sources[1].metrics_resource_id``),
    spelled the way the object that holds it spells its keys."""
    head, dot, last = field.rpartition(".")
    if dot:
        location = tuple(int(part) if part.isdigit() else part for part in re.findall(r"[^.\[\]]+", head))
        return f"{head}.{_spelled(last, _value_at(holder, location))}"
    return _spelled(field, holder) if field in KEDA_ALIASES else field


# --- JSON Schema ---------------------------------------------------------------------------------


class _SchemaGenerator(GenerateJsonSchema):
    """Field names (snake_case), not aliases; no generated titles (descriptions say more)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def policy_json_schema() -> dict[str, Any]:
    """The JSON Schema of a policy file, generated from the model (``python -m scaling policy-schema``)."""
    schema = _adapter().json_schema(by_alias=False, mode="validation", schema_generator=_SchemaGenerator)
    definitions = schema.get("$defs", {})
    for definition in definitions.values():
        definition.pop("title", None)
        for property_schema in definition.get("properties", {}).values():
            # A name given by position (ruleN, sourceN) has no constant default.
            if property_schema.get("default") == "":
                property_schema.pop("default")
    _add_keda_aliases(definitions[SourceSettings.__name__])
    step = definitions[Step.__name__]
    # The cooldown's default depends on the direction (described); one size, not both.
    step["properties"]["cooldown_seconds"].pop("default")
    step["not"] = {"required": ["step", "step_percent"]}
    properties = {"$schema": {"type": "string", "description": f"the schema this file follows: ./{SCHEMA_FILE}"},
                  **schema["properties"]}
    rest = {key: value for key, value in schema.items() if key not in ("properties", "title", "description")}
    return {
        "$schema": SCHEMA_DIALECT,
        "title": "Event Hubs lag autoscaler policy",
        "description": "One entry per App Service Plan the autoscaler drives (docs/policy.md). "
                       "Generated by `python -m scaling policy-schema`.",
        **rest,
        "properties": properties,
    }


def _add_keda_aliases(source_schema: dict[str, Any]) -> None:
    """KEDA's camelCase names are accepted too: described, so that editors do not flag them."""
    properties = source_schema["properties"]
    for snake, camel in KEDA_ALIASES.items():
        alias = {key: value for key, value in properties[snake].items() if key not in ("default", "description")}
        alias["description"] = f"KEDA's spelling of {snake} (accepted; {snake} is the canonical name)"
        properties[camel] = alias
