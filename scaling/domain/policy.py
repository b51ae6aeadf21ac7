"""The policy file: one entry per target App Service Plan, read by the rule engine, the
simulator and the tuning job alike.

Parsing validates everything up front; every error names the field path and the reason, for
example ``targets[0].rules[1].scale_down_below must be lower than scale_up_above``.
Schema and examples: docs/policy.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

POLICY_VERSION = 1
METRICS = ("backlog", "backlog_per_instance", "lag_seconds")
AGGREGATES = ("average", "maximum", "latest")
MODES = ("slo", "rules")
SOURCE_KINDS = ("eventhub", "servicebus")
CHECKPOINT_STRATEGIES = ("blobMetadata", "azureFunction")
PLAN_KINDS = ("dedicated", "elastic")


class PolicyError(ValueError):
    """An invalid policy; the message starts with the field path."""


@dataclass(frozen=True, slots=True)
class Tier:
    """Thresholds that apply while the current capacity is within ``[min_capacity, max_capacity]``."""

    min_capacity: int
    max_capacity: int
    scale_up_above: float
    scale_down_below: float


@dataclass(frozen=True, slots=True)
class Rule:
    """A threshold rule over a window of samples."""

    name: str
    metric: str = "backlog"
    aggregate: str = "average"
    window_seconds: int = 600
    min_samples: int = 5
    scale_up_above: float | None = None
    scale_down_below: float | None = None
    scale_up_aggregate: str | None = None
    scale_down_aggregate: str | None = None
    tiers: tuple[Tier, ...] = ()
    source: str | None = None

    def thresholds_for(self, capacity: int) -> tuple[float | None, float | None]:
        for tier in self.tiers:
            if tier.min_capacity <= capacity <= tier.max_capacity:
                return tier.scale_up_above, tier.scale_down_below
        return self.scale_up_above, self.scale_down_below


@dataclass(frozen=True, slots=True)
class Step:
    """How far one action moves, and how long after the previous action it may happen."""

    step: int = 1
    step_percent: float | None = None
    cooldown_seconds: int = 600

    def size(self, capacity: int) -> int:
        if self.step_percent is not None:
            return max(1, math.ceil(capacity * self.step_percent / 100))
        return self.step


#: Scale out whenever needed; scale in no sooner than 5 minutes after any action, so that new
#: instances are seen serving before the engine judges what they can do.
DEFAULT_SCALE_UP = Step(step=1, cooldown_seconds=0)
DEFAULT_SCALE_DOWN = Step(step=1, cooldown_seconds=300)


@dataclass(frozen=True, slots=True)
class Bounds:
    min_instances: int = 1
    max_instances: int = 10
    cap_at_partitions: bool = True
    balanced_counts: bool = True


@dataclass(frozen=True, slots=True)
class SloSettings:
    """The SLO-driven mode: keep the oldest unprocessed event younger than ``max_event_age_seconds``.

    ``events_per_instance_per_second`` is a prior; the engine learns the real throughput from
    saturated periods. ``provisioning_delay_seconds`` is how long new instances take to serve.
    ``min_dwell_seconds`` is the shortest time a scale-in must be expected to hold.
    ``max_actions_per_hour`` is an action budget (a token bucket): scale-outs are never held
    back, but a scale-in waits until the budget covers it and the scale-out likely to follow,
    because every action rebalances partitions and makes consumers process events twice.
    """

    max_event_age_seconds: float = 300.0
    events_per_instance_per_second: float | None = None
    provisioning_delay_seconds: float = 120.0
    safety_seconds: float = 90.0
    min_dwell_seconds: float = 2400.0
    headroom: float = 0.05
    max_actions_per_hour: float = 4.0
    rate_window_seconds: float = 180.0
    history_seconds: float = 600.0


@dataclass(frozen=True, slots=True)
class SourceSettings:
    """One metric source. Names follow KEDA's azure-eventhub trigger where they exist."""

    kind: str
    name: str
    fully_qualified_namespace: str | None = None
    event_hub_name: str | None = None
    consumer_group: str = "$Default"
    checkpoint_strategy: str = "blobMetadata"
    blob_container: str = "azure-webjobs-eventhub"
    checkpoint_account_url: str | None = None
    connection_from_env: str | None = None
    storage_connection_from_env: str | None = None
    unprocessed_event_threshold: int = 64
    activation_unprocessed_event_threshold: int = 0
    queue_name: str | None = None
    topic_name: str | None = None
    subscription_name: str | None = None


@dataclass(frozen=True, slots=True)
class PlanSettings:
    resource_id: str
    kind: str = "dedicated"

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
class TargetPolicy:
    """Everything the autoscaler knows about one App Service Plan."""

    name: str
    plan: PlanSettings
    sources: tuple[SourceSettings, ...]
    bounds: Bounds = field(default_factory=Bounds)
    mode: str = "slo"
    slo: SloSettings = field(default_factory=SloSettings)
    rules: tuple[Rule, ...] = ()
    scale_up: Step = field(default_factory=lambda: DEFAULT_SCALE_UP)
    scale_down: Step = field(default_factory=lambda: DEFAULT_SCALE_DOWN)
    preset: str | None = None
    #: What to do when someone else resized the plan: ``adopt`` it or ``revert`` to the desired capacity.
    on_external_change: str = "adopt"

    @property
    def window_seconds(self) -> float:
        """How much history the engine needs to see."""
        rule_window = max((rule.window_seconds for rule in self.rules), default=0)
        return max(rule_window, self.slo.history_seconds if self.mode == "slo" else 0)


@dataclass(frozen=True, slots=True)
class Policy:
    targets: tuple[TargetPolicy, ...]
    version: int = POLICY_VERSION

    def target(self, name: str) -> TargetPolicy:
        for target in self.targets:
            if target.name == name:
                return target
        raise KeyError(name)


# --- presets -----------------------------------------------------------------------------------


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


# --- parsing -----------------------------------------------------------------------------------


class _Reader:
    """Reads one JSON object, remembering its path so that errors name the field."""

    def __init__(self, document: Any, path: str) -> None:
        if not isinstance(document, Mapping):
            raise PolicyError(f"{path or 'policy'} must be an object")
        self.document = document
        self.path = path

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return key in self.document and self.document[key] is not None

    def raw(self, key: str, default: Any = None) -> Any:
        return self.document.get(key, default)

    def string(self, key: str, default: str | None = None, *, required: bool = False, choices: Sequence[str] = ()) -> Any:
        value = self.document.get(key)
        if value is None:
            if required:
                raise PolicyError(f"{self.at(key)} is required")
            return default
        if not isinstance(value, str) or not value:
            raise PolicyError(f"{self.at(key)} must be a non-empty string")
        if choices and value not in choices:
            raise PolicyError(f"{self.at(key)} must be one of {', '.join(choices)}, got {value!r}")
        return value

    def number(self, key: str, default: float | None = None, *, minimum: float | None = None,
               above: float | None = None, maximum: float | None = None) -> Any:
        value = self.document.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise PolicyError(f"{self.at(key)} must be a number, got {value!r}")
        if minimum is not None and value < minimum:
            raise PolicyError(f"{self.at(key)} must be at least {minimum}, got {value}")
        if above is not None and value <= above:
            raise PolicyError(f"{self.at(key)} must be greater than {above}, got {value}")
        if maximum is not None and value > maximum:
            raise PolicyError(f"{self.at(key)} must be at most {maximum}, got {value}")
        return value

    def integer(self, key: str, default: int | None = None, *, minimum: int | None = None) -> Any:
        value = self.number(key, default, minimum=minimum)
        if value is None:
            return None
        if isinstance(value, float) and not value.is_integer():
            raise PolicyError(f"{self.at(key)} must be a whole number, got {value}")
        return int(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.document.get(key, default)
        if not isinstance(value, bool):
            raise PolicyError(f"{self.at(key)} must be true or false, got {value!r}")
        return value

    def child(self, key: str) -> _Reader:
        return _Reader(self.document.get(key) or {}, self.at(key))

    def children(self, key: str, *, required: bool = False) -> list[_Reader]:
        value = self.document.get(key)
        if value is None:
            if required:
                raise PolicyError(f"{self.at(key)} is required")
            return []
        if not isinstance(value, list):
            raise PolicyError(f"{self.at(key)} must be a list")
        return [_Reader(item, f"{self.at(key)}[{index}]") for index, item in enumerate(value)]

    def reject_unknown(self, known: Sequence[str]) -> None:
        unknown = sorted(set(self.document) - set(known))
        if unknown:
            raise PolicyError(f"{self.at(unknown[0])} is not a known setting (known: {', '.join(sorted(known))})")


def _thresholds(reader: _Reader, up_key: str, down_key: str, *, pair_path: str) -> tuple[float | None, float | None]:
    up = reader.number(up_key, minimum=0)
    down = reader.number(down_key, minimum=0)
    if up is not None and down is not None and down >= up:
        raise PolicyError(f"{pair_path}.{down_key} must be lower than {up_key}")
    return up, down


def _parse_rule(reader: _Reader, index: int) -> Rule:
    reader.reject_unknown(
        ("name", "metric", "aggregate", "window_seconds", "min_samples", "scale_up_above", "scale_down_below",
         "scale_up_aggregate", "scale_down_aggregate", "tiers", "source")
    )
    up, down = _thresholds(reader, "scale_up_above", "scale_down_below", pair_path=reader.path)
    tiers = []
    for tier_reader in reader.children("tiers"):
        tier_reader.reject_unknown(("min_capacity", "max_capacity", "scale_up_above", "scale_down_below"))
        low = tier_reader.integer("min_capacity", 1, minimum=0)
        high = tier_reader.integer("max_capacity", 10**6, minimum=0)
        if high < low:
            raise PolicyError(f"{tier_reader.path}.max_capacity must not be lower than min_capacity")
        tier_up, tier_down = _thresholds(tier_reader, "scale_up_above", "scale_down_below", pair_path=tier_reader.path)
        if tier_up is None or tier_down is None:
            raise PolicyError(f"{tier_reader.path} needs both scale_up_above and scale_down_below")
        tiers.append(Tier(low, high, tier_up, tier_down))
    for first, second in zip(sorted(tiers, key=lambda t: t.min_capacity), sorted(tiers, key=lambda t: t.min_capacity)[1:], strict=False):
        if second.min_capacity <= first.max_capacity:
            raise PolicyError(f"{reader.path}.tiers overlap at capacity {second.min_capacity}")
    if up is None and down is None and not tiers:
        raise PolicyError(f"{reader.path} needs scale_up_above, scale_down_below or tiers")
    window = reader.integer("window_seconds", 600, minimum=60)
    min_samples = reader.integer("min_samples", 5, minimum=1)
    return Rule(
        name=reader.string("name", f"rule{index}"),
        metric=reader.string("metric", "backlog", choices=METRICS),
        aggregate=reader.string("aggregate", "average", choices=AGGREGATES),
        window_seconds=window,
        min_samples=min_samples,
        scale_up_above=up,
        scale_down_below=down,
        scale_up_aggregate=reader.string("scale_up_aggregate", None, choices=AGGREGATES),
        scale_down_aggregate=reader.string("scale_down_aggregate", None, choices=AGGREGATES),
        tiers=tuple(tiers),
        source=reader.string("source", None),
    )


def _parse_step(reader: _Reader, default: Step) -> Step:
    reader.reject_unknown(("step", "step_percent", "cooldown_seconds"))
    step = reader.integer("step", default.step, minimum=1)
    percent = reader.number("step_percent", default.step_percent, above=0, maximum=1000)
    if reader.has("step") and reader.has("step_percent"):
        raise PolicyError(f"{reader.path} sets both step and step_percent; choose one")
    return Step(step=step, step_percent=percent, cooldown_seconds=reader.integer("cooldown_seconds", default.cooldown_seconds, minimum=0))


_SOURCE_KEYS = {
    "kind": "kind", "name": "name", "fullyQualifiedNamespace": "fully_qualified_namespace",
    "eventHubName": "event_hub_name", "consumerGroup": "consumer_group", "checkpointStrategy": "checkpoint_strategy",
    "blobContainer": "blob_container", "checkpointAccountUrl": "checkpoint_account_url",
    "connectionFromEnv": "connection_from_env", "storageConnectionFromEnv": "storage_connection_from_env",
    "unprocessedEventThreshold": "unprocessed_event_threshold",
    "activationUnprocessedEventThreshold": "activation_unprocessed_event_threshold",
    "queueName": "queue_name", "topicName": "topic_name", "subscriptionName": "subscription_name",
}


def _parse_source(reader: _Reader, index: int) -> SourceSettings:
    reader.reject_unknown(tuple(_SOURCE_KEYS))
    kind = reader.string("kind", "eventhub", choices=SOURCE_KINDS)
    values: dict[str, Any] = {"kind": kind, "name": reader.string("name", f"source{index}")}
    for key in ("fullyQualifiedNamespace", "eventHubName", "consumerGroup", "checkpointAccountUrl",
                "connectionFromEnv", "storageConnectionFromEnv", "queueName", "topicName", "subscriptionName",
                "blobContainer"):
        if reader.has(key):
            values[_SOURCE_KEYS[key]] = reader.string(key)
    if reader.has("checkpointStrategy"):
        values["checkpoint_strategy"] = reader.string("checkpointStrategy", choices=CHECKPOINT_STRATEGIES)
    values["unprocessed_event_threshold"] = reader.integer("unprocessedEventThreshold", 64, minimum=1)
    values["activation_unprocessed_event_threshold"] = reader.integer("activationUnprocessedEventThreshold", 0, minimum=0)
    settings = SourceSettings(**values)
    if kind == "eventhub":
        if not settings.event_hub_name:
            raise PolicyError(f"{reader.at('eventHubName')} is required for an eventhub source")
        if not settings.fully_qualified_namespace and not settings.connection_from_env:
            raise PolicyError(f"{reader.at('fullyQualifiedNamespace')} or connectionFromEnv is required for an eventhub source")
        if not settings.checkpoint_account_url and not settings.storage_connection_from_env:
            raise PolicyError(f"{reader.at('checkpointAccountUrl')} or storageConnectionFromEnv is required for an eventhub source")
    else:
        if not settings.fully_qualified_namespace and not settings.connection_from_env:
            raise PolicyError(f"{reader.at('fullyQualifiedNamespace')} or connectionFromEnv is required for a servicebus source")
        if bool(settings.queue_name) == bool(settings.topic_name):
            raise PolicyError(f"{reader.at('queueName')}: set either queueName or topicName with subscriptionName")
        if settings.topic_name and not settings.subscription_name:
            raise PolicyError(f"{reader.at('subscriptionName')} is required with topicName")
    return settings


def _parse_slo(reader: _Reader) -> SloSettings:
    defaults = SloSettings()
    reader.reject_unknown(SloSettings.__slots__)
    slo = SloSettings(
        max_event_age_seconds=reader.number("max_event_age_seconds", defaults.max_event_age_seconds, above=0),
        events_per_instance_per_second=reader.number("events_per_instance_per_second", None, above=0),
        provisioning_delay_seconds=reader.number("provisioning_delay_seconds", defaults.provisioning_delay_seconds, minimum=0),
        safety_seconds=reader.number("safety_seconds", defaults.safety_seconds, minimum=0),
        min_dwell_seconds=reader.number("min_dwell_seconds", defaults.min_dwell_seconds, minimum=0),
        headroom=reader.number("headroom", defaults.headroom, minimum=0, maximum=10),
        max_actions_per_hour=reader.number("max_actions_per_hour", defaults.max_actions_per_hour, above=0),
        rate_window_seconds=reader.number("rate_window_seconds", defaults.rate_window_seconds, minimum=60),
        history_seconds=reader.number("history_seconds", defaults.history_seconds, minimum=120),
    )
    if slo.safety_seconds >= slo.max_event_age_seconds:
        raise PolicyError(f"{reader.path}.safety_seconds must be lower than max_event_age_seconds")
    return slo


def _parse_target(reader: _Reader) -> TargetPolicy:
    reader.reject_unknown(
        ("name", "plan", "sources", "bounds", "mode", "preset", "seed", "slo", "rules", "scale_up", "scale_down",
         "on_external_change")
    )
    name = reader.string("name", required=True)
    on_external_change = reader.string("on_external_change", "adopt", choices=("adopt", "revert"))
    plan_reader = reader.child("plan")
    plan_reader.reject_unknown(("resource_id", "kind"))
    resource_id = plan_reader.string("resource_id", required=True)
    if "/providers/microsoft.web/serverfarms/" not in resource_id.lower():
        raise PolicyError(f"{plan_reader.at('resource_id')} must be an App Service Plan resource id (.../providers/Microsoft.Web/serverfarms/NAME)")
    plan = PlanSettings(resource_id=resource_id, kind=plan_reader.string("kind", "dedicated", choices=PLAN_KINDS))
    sources = tuple(_parse_source(child, index) for index, child in enumerate(reader.children("sources", required=True)))
    if not sources:
        raise PolicyError(f"{reader.at('sources')} must list at least one source")
    names = [source.name for source in sources]
    if len(set(names)) != len(names):
        raise PolicyError(f"{reader.at('sources')} has duplicate source names")

    preset = reader.string("preset", None, choices=("seed",))
    bounds_reader = reader.child("bounds")
    bounds_reader.reject_unknown(("min_instances", "max_instances", "cap_at_partitions", "balanced_counts"))
    bounds = Bounds(
        min_instances=bounds_reader.integer("min_instances", 1, minimum=1),
        max_instances=bounds_reader.integer("max_instances", 10, minimum=1),
        cap_at_partitions=bounds_reader.boolean("cap_at_partitions", True),
        # The seed design steps by exactly one instance unless told to spread partitions evenly.
        balanced_counts=bounds_reader.boolean("balanced_counts", preset != "seed"),
    )
    if bounds.max_instances < bounds.min_instances:
        raise PolicyError(f"{bounds_reader.at('max_instances')} must not be lower than min_instances")

    mode = reader.string("mode", "rules" if preset else "slo", choices=MODES)
    if reader.has("seed") and preset != "seed":
        raise PolicyError(f"{reader.at('seed')} is only read with preset 'seed'; add the preset or remove the block")
    if preset == "seed":
        fixed = [key for key in ("rules", "scale_up", "scale_down", "slo") if reader.has(key)]
        if fixed or mode != "rules":
            what = fixed[0] if fixed else "mode"
            raise PolicyError(f"{reader.at('preset')} 'seed' fixes rules, scale_up, scale_down and mode, and has no slo: "
                              f"remove {reader.at(what)} or the preset")
        seed_reader = reader.child("seed")
        seed_reader.reject_unknown(("scale_up_above", "scale_down_below"))
        up, down = _thresholds(seed_reader, "scale_up_above", "scale_down_below", pair_path=seed_reader.path)
        rules = seed_rules(1000.0 if up is None else up, 100.0 if down is None else down)
        return TargetPolicy(name, plan, sources, bounds, "rules", SloSettings(), rules, SEED_STEP, SEED_STEP, preset,
                            on_external_change)

    rules = tuple(_parse_rule(child, index) for index, child in enumerate(reader.children("rules")))
    for index, rule in enumerate(rules):
        if rule.source is not None and rule.source not in names:
            raise PolicyError(f"{reader.at('rules')}[{index}].source names no source of this target: {rule.source!r}")
    if mode == "rules" and not rules:
        raise PolicyError(f"{reader.at('rules')} must list at least one rule in mode 'rules'")
    if mode == "slo":
        # The SLO mode reads event ages off per-partition sequence numbers; a Service Bus count
        # has none, and a target that holds forever (or ignores a queue) must not start.
        queue = next((index for index, source in enumerate(sources) if source.kind != "eventhub"), None)
        if queue is not None:
            raise PolicyError(f"{reader.at('sources')}[{queue}].kind 'servicebus' cannot drive mode 'slo' (it reads "
                              "Event Hubs partitions only): set mode 'rules' with backlog rules for this target")
    return TargetPolicy(
        name=name,
        plan=plan,
        sources=sources,
        bounds=bounds,
        mode=mode,
        slo=_parse_slo(reader.child("slo")),
        rules=rules,
        scale_up=_parse_step(reader.child("scale_up"), DEFAULT_SCALE_UP),
        scale_down=_parse_step(reader.child("scale_down"), DEFAULT_SCALE_DOWN),
        preset=preset,
        on_external_change=on_external_change,
    )


def policy_from_dict(document: Any) -> Policy:
    reader = _Reader(document, "")
    reader.reject_unknown(("version", "targets"))
    version = reader.integer("version", POLICY_VERSION)
    if version != POLICY_VERSION:
        raise PolicyError(f"version {version} is not supported (expected {POLICY_VERSION})")
    targets = tuple(_parse_target(child) for child in reader.children("targets", required=True))
    if not targets:
        raise PolicyError("targets must list at least one target")
    names = [target.name for target in targets]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise PolicyError(f"targets has duplicate name {duplicates[0]!r}")
    return Policy(targets=targets, version=version)


def load_policy_text(text: str, *, origin: str = "policy") -> Policy:
    try:
        document = json.loads(text)
    except ValueError as error:
        raise PolicyError(f"{origin} is not valid JSON: {error}") from error
    return policy_from_dict(document)


def load_policy(path: str | Path) -> Policy:
    return load_policy_text(Path(path).read_text(encoding="utf-8"), origin=str(path))


# --- writing (the tuning job's recommendations are policy files) -------------------------------


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def target_to_dict(target: TargetPolicy) -> dict[str, Any]:
    inverse = {snake: camel for camel, snake in _SOURCE_KEYS.items()}
    document: dict[str, Any] = {
        "name": target.name,
        "plan": {"resource_id": target.plan.resource_id, "kind": target.plan.kind},
        "sources": [
            _drop_none({inverse[key]: getattr(source, key) for key in SourceSettings.__slots__}) for source in target.sources
        ],
        "bounds": {key: getattr(target.bounds, key) for key in Bounds.__slots__},
    }
    if target.preset:
        document["preset"] = target.preset
        seed = target.rules[0]
        document["seed"] = {"scale_up_above": seed.scale_up_above, "scale_down_below": seed.scale_down_below}
        return document
    document["mode"] = target.mode
    document["slo"] = _drop_none({key: getattr(target.slo, key) for key in SloSettings.__slots__})
    if target.rules:
        document["rules"] = [
            _drop_none(
                {
                    **{key: getattr(rule, key) for key in Rule.__slots__ if key != "tiers"},
                    "tiers": [{key: getattr(tier, key) for key in Tier.__slots__} for tier in rule.tiers] or None,
                }
            )
            for rule in target.rules
        ]
    document["scale_up"] = _step_to_dict(target.scale_up)
    document["scale_down"] = _step_to_dict(target.scale_down)
    return document


def _step_to_dict(step: Step) -> dict[str, Any]:
    """``step`` or ``step_percent``, never both (the parser refuses both)."""
    size = {"step_percent": step.step_percent} if step.step_percent is not None else {"step": step.step}
    return {**size, "cooldown_seconds": step.cooldown_seconds}


def policy_to_dict(policy: Policy) -> dict[str, Any]:
    return {"version": policy.version, "targets": [target_to_dict(target) for target in policy.targets]}


def with_slo(target: TargetPolicy, **changes: Any) -> TargetPolicy:
    """A copy of ``target`` with some SLO settings changed (used by tuning and benchmarks)."""
    return replace(target, slo=replace(target.slo, **changes))
