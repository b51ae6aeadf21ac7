"""The policy model: frozen dataclasses whose annotations (pydantic v2) carry every field's
description and bounds, so that one definition gives the validation of a policy file and its JSON
Schema (``python -m scaling policy-schema``). Here the target and the policy document; a target's
decision settings (rules, steps, bounds, SLO, seed) are in ``policy_rules.py``, its resources
(sources, plan) in ``policy_sources.py``, profiles in ``policy_profiles.py``.

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

from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from scaling.domain.knobs import KNOB
from scaling.domain.names import MAX_KEY_CHARS
from scaling.domain.namespace.policy import EventHubsNamespaceTarget
from scaling.domain.policy_fields import (
    DOCUMENT_CONFIG,
    MAX_RULES,
    MAX_SOURCES,
    MAX_TARGETS,
    NUMBER,
    POLICY_VERSION,
    Name,
    document_object,
    escaped_key_length,
    invalid,
    knob,
    printable_text,
)
from scaling.domain.policy_profiles import MAX_PROFILES, Profile
from scaling.domain.policy_rules import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    SEED_STEP,
    Bounds,
    Rule,
    SeedThresholds,
    SloSettings,
    Step,
    seed_rules,
)
from scaling.domain.policy_sources import PlanSettings, SourceSettings

#: What preset ``seed`` sets itself: a document that also sets one of them is refused.
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
