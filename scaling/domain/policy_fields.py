"""The building blocks of the policy model: the enumerations, the bounds every number and
string is held to (docs/policy.md, "Bounds"), the annotated types that carry them into both the
validation and the JSON Schema, and the document conventions (unknown keys are errors, ``null``
means "not set", KEDA's camelCase names are aliases)."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

# The limits shared with the samples are defined once, in the knob registry.
from scaling.domain.knobs import KNOB
from scaling.domain.knobs import MAX_INSTANCES as MAX_INSTANCES
from scaling.domain.knobs import MAX_NAME_CHARS as MAX_NAME_CHARS
from scaling.domain.knobs import MAX_PROVISIONING_SECONDS as MAX_PROVISIONING_SECONDS
from scaling.domain.knobs import MAX_SAMPLES as MAX_SAMPLES
from scaling.domain.knobs import MAX_SECONDS as MAX_SECONDS
from scaling.domain.knobs import MAX_SOURCES as MAX_SOURCES
from scaling.domain.knobs import MAX_TEXT_CHARS as MAX_TEXT_CHARS
from scaling.domain.names import table_key

POLICY_VERSION = 1
METRICS = ("backlog", "backlog_per_instance", "lag_seconds")
AGGREGATES = ("average", "maximum", "latest")
MODES = ("slo", "rules")
SOURCE_KINDS = ("eventhub", "servicebus")
CHECKPOINT_STRATEGIES = ("auto", "blobMetadata", "azureFunction")
PLAN_KINDS = ("dedicated", "elastic")
EXTERNAL_CHANGE_POLICIES = ("adopt", "revert")

# --- bounds (docs/policy.md, "Bounds") --------------------------------------------------------

#: Thresholds and event counts: far above any backlog, far below float trouble.
MAX_EVENTS = 1e12
MAX_EVENTS_PER_SECOND = 1e9
#: Rules, tiers and targets (sources: ``knobs.MAX_SOURCES``): enough for any real plan, small enough that a decision
#: with every rule's numbers fits in one Table entity next to the state.
MAX_RULES = 20
MAX_TIERS = 10
MAX_TARGETS = 100
MAX_ID_CHARS = 1024

def knob(key: str, meaning: str | None = None) -> FieldInfo:
    """The bounds and description of the registry's knob ``key`` (``knobs.KNOBS``), for the
    model's ``Annotated`` field: the schema is generated from the registry through it. ``meaning``
    overrides the description (``""``: none, for the inner type of an optional knob)."""
    entry = KNOB[key]
    bounds: dict[str, float] = {}
    if entry.minimum is not None:
        bounds["gt" if entry.above else "ge"] = entry.minimum
    if entry.maximum is not None:
        bounds["le"] = entry.maximum
    return Field(description=entry.meaning if meaning is None else (meaning or None), **bounds)


def escaped_key_length(name: str) -> int:
    """Length of ``name`` as a Table key once escaped (``scaling.domain.names.table_key``, which
    the storage layer's ``partition_key`` uses)."""
    return len(table_key(name))


def invalid(field_name: str | None, reason: str, *names: str) -> PydanticCustomError:
    """An error about ``field_name`` (relative to the object validated); ``{0}``, ``{1}`` in the
    reason are the other fields it mentions, ``{path}`` the object's own path. Field names are
    spelled the way the document spells them (scaling/domain/policy_document.py)."""
    return PydanticCustomError("policy", reason, {"field": field_name or "", "names": "\x1f".join(names), "reason": reason})


def json_number(value: Any) -> Any:
    """JSON numbers only: no booleans, no numeric strings (pydantic's lax mode would take them)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(None, "must be a number, got {0}", repr(value))
    if isinstance(value, float) and not math.isfinite(value):
        raise invalid(None, "must be a finite number, got {0}", repr(value))
    return value


def printable_text(value: Any) -> Any:
    if not isinstance(value, str) or not value:
        raise invalid(None, "must be a non-empty string")
    if not value.isprintable():
        # Control characters, lone surrogates and other unprintables break keys, logs and JSON.
        raise invalid(None, "must hold printable characters only (no control characters or lone surrogates)")
    return value


#: Placed after the bounds (``Annotated[int, Field(ge=..), NUMBER]``) so that the schema keeps them.
NUMBER = BeforeValidator(json_number)
Text = Annotated[str, BeforeValidator(printable_text), Field(min_length=1, max_length=MAX_TEXT_CHARS)]
Name = Annotated[str, BeforeValidator(printable_text), Field(min_length=1, max_length=MAX_NAME_CHARS)]
LongText = Annotated[str, BeforeValidator(printable_text), Field(min_length=1, max_length=MAX_ID_CHARS)]
Threshold = Annotated[float, Field(ge=0, le=MAX_EVENTS), NUMBER]
Aggregate = Literal["average", "maximum", "latest"]
Capacity = Annotated[int, Field(ge=0, le=MAX_INSTANCES), NUMBER]

DOCUMENT_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False, validate_by_name=True, validate_by_alias=True)


def known_keys(cls: type) -> tuple[str, ...]:
    """The keys a document may use for ``cls``: field names, their KEDA aliases, extras."""
    aliases = tuple(KEDA_ALIASES[name] for name in cls.__dataclass_fields__ if name in KEDA_ALIASES)
    return (*cls.__dataclass_fields__, *aliases, *getattr(cls, "_EXTRA_KEYS", ()))


def document_object(cls: type, data: Any) -> Any:
    """Before field validation: a ``null`` value means "not set" (the default applies), and a
    key this object does not know is an error naming it."""
    if not isinstance(data, dict):
        return data
    known = known_keys(cls)
    unknown = sorted(key for key in data if key not in known)
    if unknown:
        visible = sorted(key for key in known if not key.startswith("$"))
        raise invalid(unknown[0], "is not a known setting (known: {0})", ", ".join(visible))
    return {key: value for key, value in data.items() if value is not None}


def document_keys() -> Any:
    """The before-validator of a policy object with no checks of its own: ``document_object``."""
    return model_validator(mode="before")(classmethod(document_object))


def check_threshold_pair(up: float | None, down: float | None) -> None:
    if up is not None and down is not None and down >= up:
        raise invalid("scale_down_below", "must be lower than {0}", "scale_up_above")


#: snake_case field -> KEDA's camelCase spelling, accepted as an alias.
KEDA_ALIASES = {
    "fully_qualified_namespace": "fullyQualifiedNamespace", "event_hub_name": "eventHubName",
    "consumer_group": "consumerGroup", "checkpoint_strategy": "checkpointStrategy", "blob_container": "blobContainer",
    "checkpoint_account_url": "checkpointAccountUrl", "connection_from_env": "connectionFromEnv",
    "storage_connection_from_env": "storageConnectionFromEnv", "unprocessed_event_threshold": "unprocessedEventThreshold",
    "activation_unprocessed_event_threshold": "activationUnprocessedEventThreshold", "queue_name": "queueName",
    "topic_name": "topicName", "subscription_name": "subscriptionName",
    # Not KEDA's, but a source's other fields are spelt both ways, so this one is too.
    "metrics_resource_id": "metricsResourceId", "namespace_resource_id": "namespaceResourceId",
}
