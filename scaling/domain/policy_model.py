"""The policy model: frozen dataclasses whose annotations (pydantic v2) carry every field's
description and bounds, so that one definition gives the validation of a policy file and its JSON
Schema (``python -m scaling policy-schema``). One piece on purpose (~490 lines): the model is the
schema, and the classes refer to each other (a target holds its sources, bounds, rules and
steps); splitting them would only scatter the one definition a policy author reads.

The classes stay plain dataclasses: code that builds them directly (simulator, tuning, tests) is
not validated, exactly as before; a *document* is validated by ``validate_document`` in
scaling/domain/policy_document.py. Bounds are chosen so that nothing that validates can crash an
evaluation or overflow a Table entity or key (docs/policy.md, "Bounds").

A new field: ``name: Annotated[type, Field(bounds..., description=...)] = default`` at the end of
its class (positional construction keeps working), cross-field checks in the class's ``after``
validator raising ``invalid(field, reason)``; then regenerate policy.schema.json, add its row to
docs/policy.md and its limits to tests/unit/test_domain_policy_bounds.py.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, Field, StrictBool, model_validator

from scaling.domain.knobs import KNOB
from scaling.domain.names import MAX_KEY_CHARS
from scaling.domain.policy_fields import (
    DOCUMENT_CONFIG,
    KEDA_ALIASES,
    MAX_EVENTS,
    MAX_INSTANCES,
    MAX_RULES,
    MAX_SOURCES,
    MAX_TARGETS,
    MAX_TIERS,
    NUMBER,
    POLICY_VERSION,
    Aggregate,
    Capacity,
    LongText,
    Name,
    Text,
    Threshold,
    check_threshold_pair,
    document_keys,
    document_object,
    escaped_key_length,
    invalid,
    knob,
    printable_text,
)
from scaling.domain.policy_namespace import EventHubsNamespaceTarget
from scaling.domain.policy_profiles import MAX_PROFILES, Profile

# --- the model ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tier:
    """Thresholds that apply while the current capacity is within ``[min_capacity, max_capacity]``."""

    __pydantic_config__ = DOCUMENT_CONFIG

    min_capacity: Annotated[Capacity, Field(description="lowest current instance count this tier applies to")] = 1
    max_capacity: Annotated[Capacity, Field(description="highest current instance count this tier applies to")] = MAX_INSTANCES
    scale_up_above: Annotated[Threshold | None, Field(description="scale out while the metric is above this (required)")] = None
    scale_down_below: Annotated[Threshold | None, Field(
        description="scale in while the metric is below this (required, lower than scale_up_above)")] = None

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> Tier:
        if self.max_capacity < self.min_capacity:
            raise invalid("max_capacity", "must not be lower than {0}", "min_capacity")
        check_threshold_pair(self.scale_up_above, self.scale_down_below)
        if self.scale_up_above is None or self.scale_down_below is None:
            raise invalid(None, "needs both {0} and {1}", "scale_up_above", "scale_down_below")
        return self


@dataclass(frozen=True, slots=True)
class Rule:
    """A threshold rule over a window of samples."""

    __pydantic_config__ = DOCUMENT_CONFIG

    name: Annotated[Name, Field(description="names the rule in decisions (default: ruleN by position)")] = ""
    metric: Annotated[Literal["backlog", "backlog_per_instance", "lag_seconds"], knob("rules.metric")] = \
        KNOB["rules.metric"].default  # type: ignore[assignment]
    aggregate: Annotated[Aggregate, knob("rules.aggregate")] = KNOB["rules.aggregate"].default  # type: ignore[assignment]
    window_seconds: Annotated[int, knob("rules.window_seconds"), NUMBER] = KNOB["rules.window_seconds"].default
    min_samples: Annotated[int, knob("rules.min_samples"), NUMBER] = KNOB["rules.min_samples"].default
    scale_up_above: Annotated[Threshold | None, Field(description="scale out while the aggregate is above this")] = None
    scale_down_below: Annotated[Threshold | None, Field(
        description="scale in while the aggregate is below this (lower than scale_up_above)")] = None
    scale_up_aggregate: Annotated[Aggregate | None, Field(description="overrides aggregate for scaling out")] = None
    scale_down_aggregate: Annotated[Aggregate | None, Field(description="overrides aggregate for scaling in")] = None
    tiers: Annotated[tuple[Tier, ...], Field(max_length=MAX_TIERS,
        description="thresholds by current instance count; the first matching tier wins")] = ()
    source: Annotated[Name | None, Field(description="restrict the rule to this source of the target (default: all)")] = None

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> Rule:
        check_threshold_pair(self.scale_up_above, self.scale_down_below)
        ordered = sorted(self.tiers, key=lambda tier: tier.min_capacity)
        for first, second in zip(ordered, ordered[1:], strict=False):
            if second.min_capacity <= first.max_capacity:
                raise invalid("tiers", f"overlap at capacity {second.min_capacity}")
        if self.scale_up_above is None and self.scale_down_below is None and not self.tiers:
            raise invalid(None, "needs {0}, {1} or {2}", "scale_up_above", "scale_down_below", "tiers")
        return self

    def thresholds_for(self, capacity: int) -> tuple[float | None, float | None]:
        for tier in self.tiers:
            if tier.min_capacity <= capacity <= tier.max_capacity:
                return tier.scale_up_above, tier.scale_down_below
        return self.scale_up_above, self.scale_down_below


@dataclass(frozen=True, slots=True)
class Step:
    """How far one action moves, and how long after the previous action it may happen."""

    __pydantic_config__ = DOCUMENT_CONFIG

    step: Annotated[int, knob("scale_up.step", "instances added or removed per action"), NUMBER] = KNOB["scale_up.step"].default
    step_percent: Annotated[Annotated[float, knob("scale_up.step_percent", ""), NUMBER] | None, Field(
        description=KNOB["scale_up.step_percent"].meaning)] = None
    #: ``None``: the direction's default (``TargetPolicy`` fills it in), in code as in a document.
    cooldown_seconds: Annotated[int, knob("scale_up.cooldown_seconds",
        "seconds since the previous action of any direction (default: up 0, down 300)"), NUMBER] = None  # type: ignore[assignment]

    @model_validator(mode="before")
    @classmethod
    def _document(cls, data: Any) -> Any:
        data = document_object(cls, data)
        if isinstance(data, dict) and "step" in data and "step_percent" in data:
            raise invalid(None, "sets both {0} and {1}; choose one", "step", "step_percent")
        return data

    def size(self, capacity: int) -> int:
        if self.step_percent is not None:
            return max(1, math.ceil(capacity * self.step_percent / 100))
        return self.step


#: Scale out whenever needed; scale in no sooner than 5 minutes after any action, so that new
#: instances are seen serving before the engine judges what they can do (``knobs.KNOBS``).
DEFAULT_SCALE_UP = Step(step=KNOB["scale_up.step"].default, cooldown_seconds=KNOB["scale_up.cooldown_seconds"].default)
DEFAULT_SCALE_DOWN = Step(step=KNOB["scale_down.step"].default,
                          cooldown_seconds=KNOB["scale_down.cooldown_seconds"].default)


@dataclass(frozen=True, slots=True)
class Bounds:
    """The instance counts the autoscaler may choose from."""

    __pydantic_config__ = DOCUMENT_CONFIG

    min_instances: Annotated[int, knob("bounds.min_instances"), NUMBER] = KNOB["bounds.min_instances"].default
    max_instances: Annotated[int, knob("bounds.max_instances"), NUMBER] = KNOB["bounds.max_instances"].default
    cap_at_partitions: Annotated[StrictBool, knob("bounds.cap_at_partitions")] = KNOB["bounds.cap_at_partitions"].default
    balanced_counts: Annotated[StrictBool, knob("bounds.balanced_counts")] = KNOB["bounds.balanced_counts"].default

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> Bounds:
        if self.max_instances < self.min_instances:
            raise invalid("max_instances", "must not be lower than {0}", "min_instances")
        return self


@dataclass(frozen=True, slots=True)
class SloSettings:
    """The SLO-driven mode: keep the oldest unprocessed event younger than ``max_event_age_seconds``.

    ``events_per_instance_per_second`` is a prior; the engine learns the real throughput from
    saturated periods. ``provisioning_delay_seconds`` is how long new instances take to serve.
    ``min_dwell_seconds`` is the shortest time a scale-in must be expected to hold, at the
    forecast and, on noisy traffic (``scale_in_peak_full_noise``), at the busiest collection interval
    of the last ``scale_in_peak_seconds`` (a lull between bursts is no reason to scale in, and scale
    out again at the next burst; on quiet traffic a busier interval minutes ago is a passed trend).
    ``max_actions_per_hour`` is an action budget (a token bucket): scale-outs are never held
    back, but a scale-in waits until the budget covers it and the scale-out likely to follow,
    because every action rebalances partitions and makes consumers process events twice.
    """

    __pydantic_config__ = DOCUMENT_CONFIG

    max_event_age_seconds: Annotated[float, knob("slo.max_event_age_seconds"), NUMBER] = \
        KNOB["slo.max_event_age_seconds"].default
    events_per_instance_per_second: Annotated[Annotated[float, knob("slo.events_per_instance_per_second", ""), NUMBER] | None,
                                              Field(description=KNOB["slo.events_per_instance_per_second"].meaning)] = None
    provisioning_delay_seconds: Annotated[float, knob("slo.provisioning_delay_seconds"), NUMBER] = \
        KNOB["slo.provisioning_delay_seconds"].default
    safety_seconds: Annotated[float, knob("slo.safety_seconds"), NUMBER] = KNOB["slo.safety_seconds"].default
    min_dwell_seconds: Annotated[float, knob("slo.min_dwell_seconds"), NUMBER] = KNOB["slo.min_dwell_seconds"].default
    headroom: Annotated[float, knob("slo.headroom"), NUMBER] = KNOB["slo.headroom"].default
    max_actions_per_hour: Annotated[float, knob("slo.max_actions_per_hour"), NUMBER] = \
        KNOB["slo.max_actions_per_hour"].default
    rate_window_seconds: Annotated[float, knob("slo.rate_window_seconds"), NUMBER] = \
        KNOB["slo.rate_window_seconds"].default
    history_seconds: Annotated[float, knob("slo.history_seconds"), NUMBER] = KNOB["slo.history_seconds"].default
    scale_in_peak_seconds: Annotated[float, knob("slo.scale_in_peak_seconds"), NUMBER] = \
        KNOB["slo.scale_in_peak_seconds"].default
    scale_in_peak_full_noise: Annotated[float, knob("slo.scale_in_peak_full_noise"), NUMBER] = \
        KNOB["slo.scale_in_peak_full_noise"].default

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> SloSettings:
        if self.safety_seconds >= self.max_event_age_seconds:
            raise invalid("safety_seconds", "must be lower than {0}", "max_event_age_seconds")
        return self


def _alias(name: str) -> AliasChoices:
    return AliasChoices(name, KEDA_ALIASES[name])


SERVICE_BUS_NAMESPACE = "/providers/microsoft.servicebus/namespaces/"
NAMESPACE_ID_SHAPE = "/subscriptions/SUB/resourceGroups/RG/providers/Microsoft.ServiceBus/namespaces/NAME"
_NAMESPACE_ID = re.compile(r"^/subscriptions/(?P<subscription>[^/]+)/resourceGroups/(?P<group>[^/]+)"
                           r"/providers/Microsoft\.ServiceBus/namespaces/(?P<name>[^/]+)/?$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ServiceBusNamespaceId:
    """The parts of a Service Bus namespace's resource id a management-plane read needs."""

    subscription_id: str
    resource_group: str
    name: str

    @property
    def resource_id(self) -> str:
        return (f"/subscriptions/{self.subscription_id}/resourceGroups/{self.resource_group}"
                f"/providers/Microsoft.ServiceBus/namespaces/{self.name}")


def parse_namespace_id(resource_id: str | None) -> ServiceBusNamespaceId | None:
    """``/subscriptions/SUB/resourceGroups/RG/providers/Microsoft.ServiceBus/namespaces/NAME``
    (a trailing slash is tolerated) in parts; ``None`` for anything else."""
    match = _NAMESPACE_ID.match(resource_id or "")
    return ServiceBusNamespaceId(match["subscription"], match["group"], match["name"]) if match else None


@dataclass(frozen=True, slots=True)
class SourceSettings:
    """One metric source. Field names are KEDA's azure-eventhub trigger's, in snake_case; KEDA's
    camelCase spelling is accepted as an alias."""

    __pydantic_config__ = DOCUMENT_CONFIG

    kind: Annotated[Literal["eventhub", "servicebus"], Field(description="eventhub or servicebus")] = "eventhub"
    name: Annotated[Name, Field(description="unique within the target (default: sourceN by position)")] = ""
    fully_qualified_namespace: Annotated[Text | None, Field(validation_alias=_alias("fully_qualified_namespace"),
        description="NAMESPACE.servicebus.windows.net (identity-based); or connection_from_env")] = None
    event_hub_name: Annotated[Text | None, Field(validation_alias=_alias("event_hub_name"),
        description="the hub (eventhub sources)")] = None
    consumer_group: Annotated[Text, Field(validation_alias=_alias("consumer_group"),
        description="the consumers' group")] = "$Default"
    checkpoint_strategy: Annotated[Literal["auto", "blobMetadata", "azureFunction"], Field(
        validation_alias=_alias("checkpoint_strategy"),
        description="checkpoint layout: auto (found in the container), blobMetadata (current SDKs, Functions v5+) "
                    "or azureFunction (legacy JSON blobs)")] = "auto"
    blob_container: Annotated[Text, Field(validation_alias=_alias("blob_container"),
        description="the checkpoint container")] = "azure-webjobs-eventhub"
    checkpoint_account_url: Annotated[LongText | None, Field(validation_alias=_alias("checkpoint_account_url"),
        description="https://ACCOUNT.blob.core.windows.net (identity-based); or storage_connection_from_env")] = None
    connection_from_env: Annotated[Text | None, Field(validation_alias=_alias("connection_from_env"),
        description="app setting holding an Event Hubs / Service Bus connection string (local use)")] = None
    storage_connection_from_env: Annotated[Text | None, Field(validation_alias=_alias("storage_connection_from_env"),
        description="app setting holding the checkpoint storage connection string (local use)")] = None
    unprocessed_event_threshold: Annotated[int, Field(ge=1, le=MAX_EVENTS, validation_alias=_alias("unprocessed_event_threshold"),
        description="KEDA's per-instance target; informational for the SLO mode"), NUMBER] = 64
    activation_unprocessed_event_threshold: Annotated[int, Field(ge=0, le=MAX_EVENTS,
        validation_alias=_alias("activation_unprocessed_event_threshold"), description="KEDA's activation threshold"), NUMBER] = 0
    queue_name: Annotated[Text | None, Field(validation_alias=_alias("queue_name"), description="Service Bus queue")] = None
    topic_name: Annotated[Text | None, Field(validation_alias=_alias("topic_name"),
        description="Service Bus topic (with subscription_name)")] = None
    subscription_name: Annotated[Text | None, Field(validation_alias=_alias("subscription_name"),
        description="Service Bus subscription")] = None
    metrics_resource_id: Annotated[LongText | None, Field(validation_alias=_alias("metrics_resource_id"),
        description="the Service Bus namespace's resource id (/subscriptions/…/providers/Microsoft.ServiceBus/namespaces/"
                    "NAME): where mode slo reads the queue's arrival and completion rates from Azure Monitor")] = None
    namespace_resource_id: Annotated[LongText | None, Field(validation_alias=_alias("namespace_resource_id"),
        description="the Service Bus namespace's resource id (/subscriptions/…/resourceGroups/…/providers/"
                    "Microsoft.ServiceBus/namespaces/NAME): where the active message count is read, from the "
                    "management plane with a reader role (default: metrics_resource_id; required with identity)")] = None

    _document = document_keys()

    @property
    def service_bus_namespace(self) -> ServiceBusNamespaceId | None:
        """The namespace whose management plane gives this source's counts: ``namespace_resource_id``,
        else ``metrics_resource_id`` (the same namespace); ``None`` when neither is a namespace id."""
        return parse_namespace_id(self.namespace_resource_id or self.metrics_resource_id)

    @model_validator(mode="after")
    def _complete(self) -> SourceSettings:
        if self.kind == "eventhub":
            if not self.event_hub_name:
                raise invalid("event_hub_name", "is required for an eventhub source")
            if not self.fully_qualified_namespace and not self.connection_from_env:
                raise invalid("fully_qualified_namespace", "or {0} is required for an eventhub source", "connection_from_env")
            if not self.checkpoint_account_url and not self.storage_connection_from_env:
                raise invalid("checkpoint_account_url", "or {0} is required for an eventhub source",
                              "storage_connection_from_env")
            return self
        if not (self.fully_qualified_namespace or self.connection_from_env or self.namespace_resource_id
                or self.service_bus_namespace):
            raise invalid("fully_qualified_namespace", "or {0} is required for a servicebus source", "connection_from_env")
        if self.queue_name and self.metrics_resource_id and not self.fully_qualified_namespace and not self.connection_from_env:
            raise invalid("fully_qualified_namespace", "is required to peek the queue's oldest message (with {0}), "
                                                       "or {1} (local use)", "metrics_resource_id", "connection_from_env")
        if bool(self.queue_name) == bool(self.topic_name):
            raise invalid("queue_name", ": set either {0} or {1} with {2}", "queue_name", "topic_name", "subscription_name")
        if self.topic_name and not self.subscription_name:
            raise invalid("subscription_name", "is required with {0}", "topic_name")
        if self.metrics_resource_id and SERVICE_BUS_NAMESPACE not in self.metrics_resource_id.lower():
            raise invalid("metrics_resource_id", "must be a Service Bus namespace resource id "
                                                 "(.../providers/Microsoft.ServiceBus/namespaces/NAME)")
        self._check_namespace_id()
        return self

    def _check_namespace_id(self) -> None:
        """Counts come from the management plane (a reader role, not Data Owner), which needs the
        namespace's subscription and resource group: required with identity. Only a source that
        reads with a connection string (local use) may go without, and keeps the data-plane count."""
        namespace = parse_namespace_id(self.namespace_resource_id)
        if self.namespace_resource_id and namespace is None:
            raise invalid("namespace_resource_id", f"must be a Service Bus namespace resource id ({NAMESPACE_ID_SHAPE})")
        if namespace and self.metrics_resource_id:
            metrics = parse_namespace_id(self.metrics_resource_id)
            if metrics is None or metrics.resource_id.lower() != namespace.resource_id.lower():
                raise invalid("metrics_resource_id", "must name the same namespace as {0}", "namespace_resource_id")
        if self.connection_from_env:
            return
        counted = self.service_bus_namespace
        if counted is None:
            raise invalid("namespace_resource_id", f"is required for a servicebus source read with identity ({NAMESPACE_ID_SHAPE}: "
                                                   "its counts are read from the management plane); or {0} (local use)",
                          "connection_from_env")
        label = (self.fully_qualified_namespace or "").split(".", 1)[0]
        if label and label.lower() != counted.name.lower():
            field_name = "namespace_resource_id" if self.namespace_resource_id else "metrics_resource_id"
            raise invalid(field_name, f"names namespace {counted.name!r}, but {{0}} is {self.fully_qualified_namespace!r}",
                          "fully_qualified_namespace")


@dataclass(frozen=True, slots=True)
class PlanSettings:
    """The App Service Plan a target resizes."""

    __pydantic_config__ = DOCUMENT_CONFIG

    resource_id: Annotated[LongText, Field(
        description="/subscriptions/…/resourceGroups/…/providers/Microsoft.Web/serverfarms/NAME")]
    kind: Annotated[Literal["dedicated", "elastic"], Field(
        description="dedicated (sets sku.capacity) or elastic (Elastic Premium worker count)")] = "dedicated"

    _document = document_keys()

    @model_validator(mode="after")
    def _is_a_plan(self) -> PlanSettings:
        if "/providers/microsoft.web/serverfarms/" not in self.resource_id.lower():
            raise invalid("resource_id", "must be an App Service Plan resource id (.../providers/Microsoft.Web/serverfarms/NAME)")
        return self

    @property
    def resource_group(self) -> str:
        return _resource_id_part(self.resource_id, "resourcegroups")

    @property
    def name(self) -> str:
        return self.resource_id.rstrip("/").rsplit("/", 1)[-1]

    @property
    def subscription_id(self) -> str:
        return _resource_id_part(self.resource_id, "subscriptions")


def _resource_id_part(resource_id: str, key: str) -> str:
    parts = resource_id.strip("/").split("/")
    for index, part in enumerate(parts[:-1]):
        if part.lower() == key:
            return parts[index + 1]
    return ""


@dataclass(frozen=True, slots=True)
class SeedThresholds:
    """The two thresholds of preset ``seed``."""

    __pydantic_config__ = DOCUMENT_CONFIG

    scale_up_above: Annotated[Threshold, Field(
        description="scale out by one while the 10-minute average backlog is above this")] = 1000.0
    scale_down_below: Annotated[Threshold, Field(
        description="scale in by one while the 10-minute maximum backlog is below this")] = 100.0

    _document = document_keys()

    @model_validator(mode="after")
    def _consistent(self) -> SeedThresholds:
        check_threshold_pair(self.scale_up_above, self.scale_down_below)
        return self


def seed_rules(scale_up_above: float = 1000.0, scale_down_below: float = 100.0) -> tuple[Rule, ...]:
    """The seed design: 10-minute window, at least 5 samples, average above the upper threshold
    scales up by one, maximum below the lower threshold scales down by one."""
    return (
        Rule(
            name="seed",
            metric="backlog",
            aggregate="average",
            window_seconds=600,
            min_samples=5,
            scale_up_above=scale_up_above,
            scale_down_below=scale_down_below,
            scale_up_aggregate="average",
            scale_down_aggregate="maximum",
        ),
    )


SEED_STEP = Step(step=1, cooldown_seconds=600)
_SEED_FIXED = ("rules", "scale_up", "scale_down", "slo")


def _target_name(value: str) -> str:
    if escaped_key_length(value) > MAX_KEY_CHARS:
        raise invalid(None, f"is too long once escaped as a Table key ({escaped_key_length(value)} characters, "
                          f"at most {MAX_KEY_CHARS}): use a shorter name or fewer non-ASCII characters")
    return value


def _check_slo_sources(sources: tuple[SourceSettings, ...]) -> None:
    """The SLO mode reads either Event Hubs partitions (sequence numbers and checkpoints) or
    Service Bus queues (the oldest message's age by peek, the rates from Azure Monitor), never
    both in one target, and a target that would hold forever on a source it cannot read must not
    start."""
    kinds = {source.kind for source in sources}
    for index, source in enumerate(sources):
        if source.kind != "servicebus":
            continue
        if len(kinds) > 1:
            raise invalid(f"sources[{index}].kind", "'servicebus' cannot share a target in mode 'slo' with eventhub "
                                                    "sources (a queue's ages and rates are read differently): "
                                                    "give the queue its own target")
        if source.topic_name:
            raise invalid(f"sources[{index}].topic_name", "cannot drive mode 'slo': Azure Monitor reports a topic's "
                                                          "IncomingMessages and CompleteMessage, not a subscription's; "
                                                          "set mode 'rules' with backlog rules for this target")
        if not source.metrics_resource_id:
            raise invalid(f"sources[{index}].metrics_resource_id", "is required for a servicebus source in mode 'slo' "
                                                                   "(the namespace whose Azure Monitor metrics give "
                                                                   "the queue's arrival and completion rates)")


@dataclass(frozen=True, slots=True)
class TargetPolicy:
    """Everything the autoscaler knows about one App Service Plan."""

    __pydantic_config__ = DOCUMENT_CONFIG

    name: Annotated[Name, Field(description="identifies the target in samples, history, decisions and actions "
                                            "(printable; at most 512 characters once URL-escaped as a Table key)"),
                    BeforeValidator(lambda value: _target_name(printable_text(value)))]
    plan: Annotated[PlanSettings, Field(description="the App Service Plan to resize")]
    sources: Annotated[tuple[SourceSettings, ...], Field(min_length=1, max_length=MAX_SOURCES, description="metric sources")]
    bounds: Annotated[Bounds, Field(description="instance bounds")] = field(default_factory=Bounds)
    mode: Annotated[Literal["slo", "rules"], Field(
        description="slo (default; Event Hubs sources, or Service Bus queues with metrics_resource_id) or rules (default with preset seed)")] = "slo"
    slo: Annotated[SloSettings, Field(description="SLO-mode settings")] = field(default_factory=SloSettings)
    rules: Annotated[tuple[Rule, ...], Field(max_length=MAX_RULES, description="threshold rules (mode rules)")] = ()
    scale_up: Annotated[Step, Field(description="scale-out step and cooldown (default: step 1, cooldown 0 s)")] = field(
        default_factory=lambda: DEFAULT_SCALE_UP)
    scale_down: Annotated[Step, Field(description="scale-in step and cooldown (default: step 1, cooldown 300 s)")] = field(
        default_factory=lambda: DEFAULT_SCALE_DOWN)
    preset: Annotated[Literal["seed"] | None, Field(
        description="seed: the seed design exactly (no rules, scale_up, scale_down, slo)")] = None
    seed: Annotated[SeedThresholds | None, Field(description="the thresholds of preset seed")] = None
    on_external_change: Annotated[Literal["adopt", "revert"], knob("on_external_change")] = \
        KNOB["on_external_change"].default  # type: ignore[assignment]
    forecast: Annotated[Literal["off", "shadow", "on"], knob("forecast")] = \
        KNOB["forecast"].default  # type: ignore[assignment]
    profiles: Annotated[tuple[Profile, ...], Field(max_length=MAX_PROFILES,
        description="schedule profiles in order: the first whose window holds sets the bounds (docs/policy.md)")] = ()

    def __post_init__(self) -> None:
        # A step without a cooldown takes its direction's (``knobs.KNOBS``), whether it came from
        # a document (``{"scale_up": {"step": 2}}``) or from code (``Step(step=2)``).
        for key, default in (("scale_up", DEFAULT_SCALE_UP), ("scale_down", DEFAULT_SCALE_DOWN)):
            step = getattr(self, key)
            if step.cooldown_seconds is None:
                object.__setattr__(self, key, replace(step, cooldown_seconds=default.cooldown_seconds))

    @model_validator(mode="before")
    @classmethod
    def _document(cls, data: Any) -> Any:
        data = document_object(cls, data)
        if not isinstance(data, dict):
            return data
        # A missing plan is reported as its missing resource id, the one thing a plan needs.
        data = {"plan": {}, **data}
        for key, prefix in (("rules", "rule"), ("sources", "source")):
            if isinstance(data.get(key), list):
                data[key] = [{"name": f"{prefix}{index}", **item} if isinstance(item, dict) and item.get("name") is None
                             else item for index, item in enumerate(data[key])]
        if "seed" in data and data.get("preset") != "seed":
            raise invalid("seed", "is only read with preset 'seed'; add the preset or remove the block")
        if data.get("preset") == "seed":
            fixed = [key for key in _SEED_FIXED if key in data]
            if fixed or data.get("mode", "rules") != "rules":
                what = fixed[0] if fixed else "mode"
                raise invalid("preset", "'seed' fixes rules, scale_up, scale_down and mode, and has no slo: "
                                      "remove {path}.{0} or the preset", what)
            data["mode"] = "rules"
            data.setdefault("seed", {})
            # The seed design steps by exactly one instance unless told to spread partitions evenly.
            if isinstance(data.get("bounds", {}), dict):
                data["bounds"] = {"balanced_counts": False, **data.get("bounds", {})}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> TargetPolicy:
        names = [source.name for source in self.sources]
        if len(set(names)) != len(names):
            raise invalid("sources", "has duplicate source names")
        self._check_profiles()
        if self.preset == "seed":
            seed = self.seed or SeedThresholds()
            return replace(self, rules=seed_rules(seed.scale_up_above, seed.scale_down_below), scale_up=SEED_STEP,
                           scale_down=SEED_STEP, seed=seed)
        for index, rule in enumerate(self.rules):
            if rule.source is not None and rule.source not in names:
                raise invalid(f"rules[{index}].source", f"names no source of this target: {rule.source!r}")
        if self.mode == "rules" and not self.rules:
            raise invalid("rules", "must list at least one rule in mode 'rules'")
        if self.mode == "slo":
            _check_slo_sources(self.sources)
        return self

    def _check_profiles(self) -> None:
        names = [profile.name for profile in self.profiles]
        if len(set(names)) != len(names):
            raise invalid("profiles", "has duplicate profile names")
        for index, profile in enumerate(self.profiles):
            low = profile.min_instances if profile.min_instances is not None else self.bounds.min_instances
            high = profile.max_instances if profile.max_instances is not None else self.bounds.max_instances
            if low > high:
                if profile.min_instances is not None:
                    raise invalid(f"profiles[{index}].min_instances",
                                  f"({low}) must not be above {{0}} ({high}), which applies with this profile",
                                  "bounds.max_instances")
                raise invalid(f"profiles[{index}].max_instances",
                              f"({high}) must not be below {{0}} ({low}), which applies with this profile",
                              "bounds.min_instances")

    @property
    def window_seconds(self) -> float:
        """How much history the engine needs to see."""
        rule_window = max((rule.window_seconds for rule in self.rules), default=0)
        return max(rule_window, self.slo.history_seconds if self.mode == "slo" else 0)


def _one_target_per_resource(field_name: str, resources: list[tuple[str, str]]) -> None:
    """Two targets that resize one plan (or one namespace) would fight each other, each undoing
    the other's writes and counting them as an external writer: refused, naming both. Resource
    ids compare as ARM compares them (case-insensitively, a trailing slash ignored)."""
    first: dict[str, tuple[int, str]] = {}
    for index, (name, resource_id) in enumerate(resources):
        key = resource_id.strip().rstrip("/").lower()
        if key in first:
            other_index, other = first[key]
            raise invalid(f"{field_name}[{index}]", f"{name!r} resizes the same resource as "
                          f"{field_name}[{other_index}] {other!r} ({resource_id}): the two would fight each "
                          "other; give each resource one target")
        first[key] = (index, name)


@dataclass(frozen=True, slots=True)
class Policy:
    """The whole file: one target per App Service Plan."""

    __pydantic_config__ = DOCUMENT_CONFIG
    #: Editors' schema reference (``"$schema": "./policy.schema.json"``): accepted and ignored.
    _EXTRA_KEYS = ("$schema",)

    targets: Annotated[tuple[TargetPolicy, ...], Field(min_length=1, max_length=MAX_TARGETS,
        description="one entry per App Service Plan (unique name)")]
    version: Annotated[int, Field(description="the policy format version: 1",
                                     json_schema_extra={"const": POLICY_VERSION}), NUMBER] = POLICY_VERSION
    namespaces: Annotated[tuple[EventHubsNamespaceTarget, ...], Field(max_length=MAX_TARGETS,
        description="targets of kind eventhubs_namespace: Event Hubs namespaces sized in throughput units "
                    "with their consumer targets (docs/policy.md)")] = ()

    @model_validator(mode="before")
    @classmethod
    def _document(cls, data: Any) -> Any:
        data = document_object(cls, data)
        if isinstance(data, dict):
            data = {key: value for key, value in data.items() if key not in cls._EXTRA_KEYS}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Policy:
        if self.version != POLICY_VERSION:
            raise invalid(None, f"version {self.version} is not supported (expected {POLICY_VERSION})")
        names = [target.name for target in self.targets]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise invalid("targets", f"has duplicate name {duplicates[0]!r}")
        _one_target_per_resource("targets", [(target.name, target.plan.resource_id) for target in self.targets])
        self._check_namespaces(names)
        _one_target_per_resource("namespaces", [(namespace.name, namespace.resource_id) for namespace in self.namespaces])
        return self

    def _check_namespaces(self, plan_targets: list[str]) -> None:
        """Namespace targets share the state and decision tables with plan targets (one name, one
        row set), and a consumer target reads its egress from one namespace only."""
        seen: dict[str, str] = {}
        for index, namespace in enumerate(self.namespaces):
            if namespace.name in plan_targets or any(other.name == namespace.name for other in self.namespaces[:index]):
                raise invalid(f"namespaces[{index}].name", f"{namespace.name!r} is already a target's name")
            for position, consumer in enumerate(namespace.consumer_targets):
                where = f"namespaces[{index}].consumer_targets[{position}]"
                if consumer not in plan_targets:
                    raise invalid(where, f"names no target of this policy: {consumer!r}")
                if consumer in seen:
                    raise invalid(where, f"{consumer!r} is already a consumer of namespace target {seen[consumer]!r}")
                seen[consumer] = namespace.name

    def namespace(self, name: str) -> EventHubsNamespaceTarget:
        for namespace in self.namespaces:
            if namespace.name == name:
                return namespace
        raise KeyError(name)

    def namespace_of(self, consumer_target: str) -> EventHubsNamespaceTarget | None:
        """The namespace target whose egress ``consumer_target`` reads, if any."""
        return next((ns for ns in self.namespaces if consumer_target in ns.consumer_targets), None)

    def scale_target(self, name: str) -> TargetPolicy | EventHubsNamespaceTarget:
        """A plan target or a namespace target by name: what ``scale`` writes for an action."""
        try:
            return self.target(name)
        except KeyError:
            return self.namespace(name)

    def target(self, name: str) -> TargetPolicy:
        for target in self.targets:
            if target.name == name:
                return target
        raise KeyError(name)
