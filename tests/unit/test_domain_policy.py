"""Policy parsing and validation (scaling/domain/policy.py): every error names the field path,
unknown keys are rejected, presets expand exactly, and a policy survives a write/read round trip."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from scaling.domain.policy import (
    PolicyError,
    Rule,
    Step,
    Tier,
    load_policy,
    load_policy_text,
    policy_from_dict,
    policy_to_dict,
)

REPO = Path(__file__).resolve().parents[2]
PLAN = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Web/serverfarms/asp"


SB_NAMESPACE_ID = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/jobs-ns"
#: A Service Bus source with nothing but its namespace (the entity and mode-specific fields added per case).
SB_Q = {"kind": "servicebus", "name": "q", "fullyQualifiedNamespace": "jobs-ns.servicebus.windows.net",
        "namespaceResourceId": SB_NAMESPACE_ID}
SB_SLO_QUEUE = {"kind": "servicebus", "name": "jobs", "fullyQualifiedNamespace": "jobs-ns.servicebus.windows.net",
                "queueName": "jobs", "metricsResourceId": SB_NAMESPACE_ID}


def eventhub_source(**changes) -> dict:
    source = {"kind": "eventhub", "name": "orders", "fullyQualifiedNamespace": "contoso.servicebus.windows.net",
              "eventHubName": "orders", "checkpointAccountUrl": "https://contoso.blob.core.windows.net"}
    source.update(changes)
    return source


def rule(**changes) -> dict:
    values = {"name": "backlog", "metric": "backlog", "scale_up_above": 1000, "scale_down_below": 100}
    values.update(changes)
    return values


def target(**changes) -> dict:
    values = {"name": "orders-consumers", "plan": {"resource_id": PLAN}, "sources": [eventhub_source()]}
    values.update(changes)
    return values


def policy(*targets: dict) -> dict:
    return {"version": 1, "targets": list(targets) or [target()]}


def rules_policy(*rules: dict, **target_changes) -> dict:
    return policy(target(mode="rules", rules=list(rules) or [rule()], **target_changes))


def error_of(document) -> str:
    with pytest.raises(PolicyError) as caught:
        policy_from_dict(document)
    return str(caught.value)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param(rules_policy(rule(), rule(name="second", scale_up_above=100, scale_down_below=100)),
                     "targets[0].rules[1].scale_down_below must be lower than scale_up_above", id="down-equals-up"),
        pytest.param(rules_policy(rule(scale_up_above=10, scale_down_below=20)),
                     "targets[0].rules[0].scale_down_below must be lower than scale_up_above", id="down-above-up"),
        pytest.param(rules_policy(rule(scale_up_above=-1)), "targets[0].rules[0].scale_up_above must be at least 0",
                     id="negative-threshold"),
        pytest.param(rules_policy(rule(scale_up_above="high")), "targets[0].rules[0].scale_up_above must be a number",
                     id="threshold-not-number"),
        pytest.param(rules_policy(rule(metric="cpu")), "targets[0].rules[0].metric must be one of", id="unknown-metric"),
        pytest.param(rules_policy(rule(aggregate="median")), "targets[0].rules[0].aggregate must be one of",
                     id="unknown-aggregate"),
        pytest.param(rules_policy(rule(window_seconds=30)), "targets[0].rules[0].window_seconds must be at least 60",
                     id="window-too-short"),
        pytest.param(rules_policy(rule(min_samples=0)), "targets[0].rules[0].min_samples must be at least 1",
                     id="min-samples-zero"),
        pytest.param(rules_policy(rule(min_samples=2.5)), "targets[0].rules[0].min_samples must be a whole number",
                     id="min-samples-fraction"),
        pytest.param(rules_policy({"name": "empty"}), "targets[0].rules[0] needs scale_up_above, scale_down_below or tiers",
                     id="rule-without-thresholds"),
        pytest.param(rules_policy(rule(tiers=[{"min_capacity": 1, "max_capacity": 3, "scale_up_above": 5}])),
                     "targets[0].rules[0].tiers[0] needs both scale_up_above and scale_down_below", id="tier-half"),
        pytest.param(rules_policy(rule(tiers=[{"min_capacity": 4, "max_capacity": 3, "scale_up_above": 5,
                                               "scale_down_below": 1}])),
                     "targets[0].rules[0].tiers[0].max_capacity must not be lower than min_capacity", id="tier-inverted"),
        pytest.param(rules_policy(rule(tiers=[{"min_capacity": 1, "max_capacity": 3, "scale_up_above": 5, "scale_down_below": 1},
                                              {"min_capacity": 3, "max_capacity": 6, "scale_up_above": 9, "scale_down_below": 2}])),
                     "targets[0].rules[0].tiers overlap at capacity 3", id="tiers-overlap"),
        pytest.param(rules_policy(rule(tiers=[{"min_capacity": 1, "max_capacity": 3, "scale_up_above": 5,
                                               "scale_down_below": 5}])),
                     "targets[0].rules[0].tiers[0].scale_down_below must be lower than scale_up_above", id="tier-thresholds"),
        pytest.param(rules_policy(rule(source="payments")), "targets[0].rules[0].source names no source of this target",
                     id="rule-source-unknown"),
        pytest.param(policy(target(mode="rules")), "targets[0].rules must list at least one rule in mode 'rules'",
                     id="rules-mode-without-rules"),
        pytest.param(policy(target(mode="magic")), "targets[0].mode must be one of", id="unknown-mode"),
        pytest.param(policy(target(name=None)), "targets[0].name is required", id="no-name"),
        pytest.param(policy(target(plan={})), "targets[0].plan.resource_id is required", id="no-plan-id"),
        pytest.param(policy(target(plan={"resource_id": "/subscriptions/x/resourceGroups/rg/providers/Microsoft.Web/sites/app"})),
                     "targets[0].plan.resource_id must be an App Service Plan resource id", id="plan-id-is-a-site"),
        pytest.param(policy(target(plan={"resource_id": PLAN, "kind": "consumption"})), "targets[0].plan.kind must be one of",
                     id="plan-kind"),
        pytest.param(policy(target(sources=None)), "targets[0].sources is required", id="no-sources"),
        pytest.param(policy(target(sources=[])), "targets[0].sources must list at least one source", id="empty-sources"),
        pytest.param(policy(target(sources=[eventhub_source(), eventhub_source()])), "targets[0].sources has duplicate source names",
                     id="duplicate-source"),
        pytest.param(policy(target(sources=[eventhub_source(eventHubName=None)])),
                     "targets[0].sources[0].eventHubName is required", id="eventhub-without-hub"),
        pytest.param(policy(target(sources=[eventhub_source(fullyQualifiedNamespace=None)])),
                     "targets[0].sources[0].fullyQualifiedNamespace or connectionFromEnv is required", id="eventhub-without-ns"),
        pytest.param(policy(target(sources=[eventhub_source(checkpointAccountUrl=None)])),
                     "targets[0].sources[0].checkpointAccountUrl or storageConnectionFromEnv is required",
                     id="eventhub-without-checkpoints"),
        pytest.param(policy(target(sources=[eventhub_source(checkpointStrategy="dapr")])),
                     "targets[0].sources[0].checkpointStrategy must be one of", id="checkpoint-strategy"),
        pytest.param(policy(target(sources=[eventhub_source(unprocessedEventThreshold=0)])),
                     "targets[0].sources[0].unprocessedEventThreshold must be at least 1", id="threshold-zero"),
        pytest.param(policy(target(sources=[eventhub_source(activationUnprocessedEventThreshold=-1)])),
                     "targets[0].sources[0].activationUnprocessedEventThreshold must be at least 0", id="activation-negative"),
        pytest.param(policy(target(sources=[{**SB_Q}])),
                     "targets[0].sources[0].queueName: set either queueName or topicName", id="servicebus-no-entity"),
        pytest.param(policy(target(sources=[{**SB_Q,
                                              "topicName": "t"}])),
                     "targets[0].sources[0].subscriptionName is required with topicName", id="topic-without-subscription"),
        pytest.param(policy(target(sources=[{"kind": "kafka", "name": "k"}])), "targets[0].sources[0].kind must be one of",
                     id="unknown-source-kind"),
        pytest.param(policy(target(sources=[eventhub_source(), {**SB_Q,
                                                                "queueName": "q"}])),
                     "targets[0].sources[1].kind 'servicebus' cannot share a target in mode 'slo' with eventhub",
                     id="servicebus-beside-eventhub-in-slo-mode"),
        pytest.param(policy(target(sources=[{**SB_Q,
                                              "queueName": "q"}])),
                     "targets[0].sources[0].metricsResourceId is required for a servicebus source in mode 'slo'",
                     id="servicebus-slo-without-metrics"),
        pytest.param(policy(target(sources=[{**SB_Q,
                                              "topicName": "t", "subscriptionName": "s",
                                              "metricsResourceId": SB_NAMESPACE_ID}])),
                     "targets[0].sources[0].topicName cannot drive mode 'slo'", id="subscription-in-slo-mode"),
        pytest.param(policy(target(sources=[{**SB_Q,
                                              "queueName": "q", "metricsResourceId": "/subscriptions/x/resourceGroups/r"}])),
                     "targets[0].sources[0].metricsResourceId must be a Service Bus namespace resource id",
                     id="metrics-id-not-a-namespace"),
        pytest.param(policy(target(bounds={"min_instances": 5, "max_instances": 2})),
                     "targets[0].bounds.max_instances must not be lower than min_instances", id="bounds-inverted"),
        pytest.param(policy(target(bounds={"min_instances": 0})), "targets[0].bounds.min_instances must be at least 1",
                     id="min-zero"),
        pytest.param(policy(target(bounds={"balanced_counts": "yes"})), "targets[0].bounds.balanced_counts must be true or false",
                     id="bool-as-string"),
        pytest.param(policy(target(slo={"safety_seconds": 300, "max_event_age_seconds": 300})),
                     "targets[0].slo.safety_seconds must be lower than max_event_age_seconds", id="safety-too-big"),
        pytest.param(policy(target(slo={"max_event_age_seconds": 0})), "targets[0].slo.max_event_age_seconds must be greater than 0",
                     id="slo-zero"),
        pytest.param(policy(target(slo={"headroom": 11})), "targets[0].slo.headroom must be at most 10", id="headroom-big"),
        pytest.param(policy(target(slo={"max_actions_per_hour": 0})), "targets[0].slo.max_actions_per_hour must be greater than 0",
                     id="budget-zero"),
        pytest.param(policy(target(scale_up={"step": 2, "step_percent": 50})),
                     "targets[0].scale_up sets both step and step_percent", id="step-and-percent"),
        pytest.param(policy(target(scale_down={"step": 0})), "targets[0].scale_down.step must be at least 1", id="step-zero"),
        pytest.param(policy(target(scale_down={"step_percent": 0})), "targets[0].scale_down.step_percent must be greater than 0",
                     id="percent-zero"),
        pytest.param(policy(target(scale_down={"cooldown_seconds": -1})), "targets[0].scale_down.cooldown_seconds must be at least 0",
                     id="cooldown-negative"),
        pytest.param(policy(target(preset="aggressive")), "targets[0].preset must be one of", id="unknown-preset"),
        pytest.param(policy(target(preset="seed", rules=[rule()])), "targets[0].preset 'seed' fixes rules", id="preset-with-rules"),
        pytest.param(policy(target(preset="seed", seed={"scale_up_above": 50, "scale_down_below": 60})),
                     "targets[0].seed.scale_down_below must be lower than scale_up_above", id="seed-thresholds"),
        pytest.param(policy(target(), target()), "targets has duplicate name 'orders-consumers'", id="duplicate-target"),
        pytest.param(policy(target(), target(name="billing")),
                     f"targets[1] 'billing' resizes the same resource as targets[0] 'orders-consumers' ({PLAN})",
                     id="two-targets-one-plan"),
        pytest.param(policy(target(), target(name="billing", plan={"resource_id": PLAN.upper() + "/"})),
                     "targets[1] 'billing' resizes the same resource as targets[0] 'orders-consumers'",
                     id="two-targets-one-plan-spelled-otherwise"),
        pytest.param({"version": 2, "targets": [target()]}, "version 2 is not supported", id="version-2"),
        pytest.param({"version": 1, "targets": []}, "targets must list at least one target", id="no-targets"),
        pytest.param({"version": 1}, "targets is required", id="targets-missing"),
        pytest.param({"version": 1, "targets": ["x"]}, "targets[0] must be an object", id="target-not-object"),
        pytest.param([], "policy must be an object", id="not-an-object"),
        pytest.param(policy(target(), target(name="b", sources=[eventhub_source(eventHubName=None)])),
                     "targets[1].sources[0].eventHubName is required", id="second-target-path"),
    ],
)
def test_errors_name_the_field_path(document, message: str) -> None:
    assert message in error_of(document)


@pytest.mark.parametrize(
    ("document", "path"),
    [
        pytest.param({"version": 1, "targets": [target()], "extra": 1}, "extra", id="top-level"),
        pytest.param(policy(target(colour="blue")), "targets[0].colour", id="target"),
        pytest.param(policy(target(plan={"resource_id": PLAN, "sku": "P1v3"})), "targets[0].plan.sku", id="plan"),
        pytest.param(policy(target(sources=[eventhub_source(consumer="$Default")])), "targets[0].sources[0].consumer",
                     id="source"),
        pytest.param(policy(target(bounds={"maximum": 3})), "targets[0].bounds.maximum", id="bounds"),
        pytest.param(policy(target(slo={"max_age": 3})), "targets[0].slo.max_age", id="slo"),
        pytest.param(rules_policy(rule(threshold=3)), "targets[0].rules[0].threshold", id="rule"),
        pytest.param(rules_policy(rule(tiers=[{"min_capacity": 1, "max_capacity": 2, "scale_up_above": 5, "scale_down_below": 1,
                                               "cooldown": 5}])), "targets[0].rules[0].tiers[0].cooldown", id="tier"),
        pytest.param(policy(target(scale_up={"step": 1, "delay": 5})), "targets[0].scale_up.delay", id="step"),
        pytest.param(policy(target(preset="seed", seed={"upper": 5})), "targets[0].seed.upper", id="seed-block"),
    ],
)
def test_unknown_keys_are_rejected_naming_them(document, path: str) -> None:
    message = error_of(document)
    assert message.startswith(f"{path} is not a known setting")


def test_slo_block_rejected_with_seed_preset() -> None:
    """The seed preset has no SLO settings, so an slo block (and anything in it) is an error, not ignored."""
    message = error_of(policy(target(preset="seed", slo={"bogus": 1})))
    assert message.startswith("targets[0].preset") and "targets[0].slo" in message


def test_seed_block_without_seed_preset_is_rejected() -> None:
    error_of(policy(target(seed={"scale_up_above": 5000, "whatever": 1})))


def test_seed_preset_expands_to_the_seed_rule_exactly() -> None:
    parsed = policy_from_dict(policy(target(preset="seed", seed={"scale_up_above": 2000, "scale_down_below": 150})))
    seed = parsed.targets[0]
    assert seed.mode == "rules"
    assert seed.preset == "seed"
    assert seed.rules == (
        Rule(name="seed", metric="backlog", aggregate="average", window_seconds=600, min_samples=5,
             scale_up_above=2000, scale_down_below=150, scale_up_aggregate="average", scale_down_aggregate="maximum"),
    )
    assert seed.scale_up == Step(step=1, step_percent=None, cooldown_seconds=600)
    assert seed.scale_down == Step(step=1, step_percent=None, cooldown_seconds=600)
    assert seed.window_seconds == 600


def test_seed_preset_default_thresholds() -> None:
    seed_rule = policy_from_dict(policy(target(preset="seed"))).targets[0].rules[0]
    assert (seed_rule.scale_up_above, seed_rule.scale_down_below) == (1000.0, 100.0)


def test_keda_style_source_names_are_accepted() -> None:
    source = eventhub_source(consumerGroup="analytics", unprocessedEventThreshold=200, activationUnprocessedEventThreshold=10,
                             checkpointStrategy="azureFunction", blobContainer="checkpoints", connectionFromEnv="EH_CONN",
                             storageConnectionFromEnv="ST_CONN")
    parsed = policy_from_dict(policy(target(sources=[source]))).targets[0].sources[0]
    assert parsed.consumer_group == "analytics"
    assert parsed.unprocessed_event_threshold == 200
    assert parsed.activation_unprocessed_event_threshold == 10
    assert parsed.checkpoint_strategy == "azureFunction"
    assert parsed.blob_container == "checkpoints"
    assert parsed.connection_from_env == "EH_CONN"
    assert parsed.storage_connection_from_env == "ST_CONN"


def test_keda_defaults() -> None:
    parsed = policy_from_dict(policy()).targets[0].sources[0]
    assert (parsed.consumer_group, parsed.unprocessed_event_threshold, parsed.activation_unprocessed_event_threshold,
            parsed.checkpoint_strategy, parsed.blob_container) == ("$Default", 64, 0, "auto", "azure-webjobs-eventhub")


@pytest.mark.parametrize("spelling", ["metricsResourceId", "metrics_resource_id"])
def test_slo_mode_accepts_a_service_bus_queue_with_its_namespace_metrics(spelling: str) -> None:
    """A queue in mode slo passes validation under either spelling and keeps the namespace id."""
    source = {key: value for key, value in SB_SLO_QUEUE.items() if key != "metricsResourceId"}
    parsed = policy_from_dict(policy(target(sources=[{**source, spelling: SB_NAMESPACE_ID}]))).targets[0]
    assert (parsed.mode, parsed.sources[0].kind, parsed.sources[0].queue_name) == ("slo", "servicebus", "jobs")
    assert parsed.sources[0].metrics_resource_id == SB_NAMESPACE_ID


OTHER_NAMESPACE_ID = SB_NAMESPACE_ID.replace("jobs-ns", "other-ns")


def sb_rules_source(**changes) -> dict:
    """A topic subscription read with identity in mode rules: counts only, no peek."""
    source = {"kind": "servicebus", "name": "billing", "topicName": "events", "subscriptionName": "billing",
              "namespaceResourceId": SB_NAMESPACE_ID}
    source.update(changes)
    return {key: value for key, value in source.items() if value is not None}


@pytest.mark.parametrize(
    ("source", "message"),
    [
        pytest.param(sb_rules_source(namespaceResourceId=None, fullyQualifiedNamespace="jobs-ns.servicebus.windows.net"),
                     "targets[0].sources[0].namespaceResourceId is required for a servicebus source read with identity "
                     "(/subscriptions/SUB/resourceGroups/RG/providers/Microsoft.ServiceBus/namespaces/NAME: its counts are "
                     "read from the management plane); or connectionFromEnv (local use)", id="identity-without-namespace-id"),
        pytest.param(sb_rules_source(namespaceResourceId=None),
                     "targets[0].sources[0].fullyQualifiedNamespace or connectionFromEnv is required", id="nothing-at-all"),
        pytest.param(sb_rules_source(namespaceResourceId=SB_NAMESPACE_ID + "/queues/jobs"),
                     "targets[0].sources[0].namespaceResourceId must be a Service Bus namespace resource id", id="entity-id"),
        pytest.param(sb_rules_source(namespaceResourceId=SB_NAMESPACE_ID.replace("Microsoft.ServiceBus", "Microsoft.EventHub")),
                     "targets[0].sources[0].namespaceResourceId must be a Service Bus namespace resource id", id="event-hubs-id"),
        pytest.param(sb_rules_source(fullyQualifiedNamespace="other-ns.servicebus.windows.net"),
                     "targets[0].sources[0].namespaceResourceId names namespace 'jobs-ns', but fullyQualifiedNamespace is "
                     "'other-ns.servicebus.windows.net'", id="namespace-differs-from-fqns"),
        pytest.param(sb_rules_source(queueName="jobs", topicName=None, subscriptionName=None, metricsResourceId=OTHER_NAMESPACE_ID,
                                     fullyQualifiedNamespace="jobs-ns.servicebus.windows.net"),
                     "targets[0].sources[0].metricsResourceId must name the same namespace as namespaceResourceId",
                     id="metrics-id-differs"),
        pytest.param(sb_rules_source(queueName="jobs", topicName=None, subscriptionName=None, namespaceResourceId=None,
                                     metricsResourceId=SB_NAMESPACE_ID),
                     "targets[0].sources[0].fullyQualifiedNamespace is required to peek the queue's oldest message (with "
                     "metricsResourceId), or connectionFromEnv (local use)", id="peek-without-fqns"),
    ],
)
def test_service_bus_namespace_errors_name_the_field(source: dict, message: str) -> None:
    assert error_of(rules_policy(rule(), sources=[source])).startswith(message)


@pytest.mark.parametrize(
    ("source", "namespace"),
    [
        pytest.param(sb_rules_source(), ("00000000-0000-0000-0000-000000000000", "rg", "jobs-ns"), id="namespace-id"),
        pytest.param({**sb_rules_source(namespaceResourceId=None), "namespace_resource_id": SB_NAMESPACE_ID + "/"},
                     ("00000000-0000-0000-0000-000000000000", "rg", "jobs-ns"), id="snake-case-trailing-slash"),
        pytest.param({**SB_SLO_QUEUE, "name": "jobs"}, ("00000000-0000-0000-0000-000000000000", "rg", "jobs-ns"),
                     id="metrics-id-is-the-default"),
        pytest.param(sb_rules_source(namespaceResourceId=None, connectionFromEnv="JOBS_SB"), None, id="connection-string-only"),
    ],
)
def test_service_bus_counts_come_from_the_named_namespace(source: dict, namespace: tuple | None) -> None:
    parsed = policy_from_dict(rules_policy(rule(), sources=[source])).targets[0].sources[0]
    found = parsed.service_bus_namespace
    assert (None if found is None else (found.subscription_id, found.resource_group, found.name)) == namespace


def test_tiers_parse_in_order_and_pick_by_capacity() -> None:
    tiers = [{"min_capacity": 4, "max_capacity": 10, "scale_up_above": 800, "scale_down_below": 80},
             {"min_capacity": 1, "max_capacity": 3, "scale_up_above": 300, "scale_down_below": 30}]
    parsed = policy_from_dict(rules_policy(rule(scale_up_above=500, scale_down_below=50, tiers=tiers))).targets[0].rules[0]
    assert parsed.tiers == (Tier(4, 10, 800, 80), Tier(1, 3, 300, 30))
    assert [parsed.thresholds_for(c) for c in (1, 3, 4, 10, 11)] == [(300, 30), (300, 30), (800, 80), (800, 80), (500, 50)]


ROUND_TRIP = [
    pytest.param(policy(), id="slo-defaults"),
    pytest.param(policy(target(sources=[SB_SLO_QUEUE])), id="slo-servicebus-queue"),
    pytest.param(rules_policy(rule(), sources=[sb_rules_source()]), id="rules-servicebus-subscription"),
    pytest.param(policy(target(preset="seed", seed={"scale_up_above": 2000, "scale_down_below": 150},
                               bounds={"max_instances": 20, "balanced_counts": False})), id="seed-preset"),
    pytest.param(rules_policy(rule(metric="lag_seconds", aggregate="maximum", window_seconds=300, min_samples=3,
                                   scale_up_aggregate="latest", tiers=[{"min_capacity": 1, "max_capacity": 2,
                                                                        "scale_up_above": 30, "scale_down_below": 3}]),
                              scale_up={"step": 2, "cooldown_seconds": 0}, scale_down={"step": 1, "cooldown_seconds": 900}),
                 id="rules-with-steps"),
    pytest.param(policy(target(slo={"max_event_age_seconds": 120, "safety_seconds": 30, "events_per_instance_per_second": 50,
                                    "max_actions_per_hour": 6}, sources=[eventhub_source(consumerGroup="cg",
                                                                                         unprocessedEventThreshold=10)])),
                 id="slo-tuned"),
]


@pytest.mark.parametrize("document", ROUND_TRIP)
def test_policy_round_trip(document: dict) -> None:
    parsed = policy_from_dict(document)
    written = policy_to_dict(parsed)
    assert policy_from_dict(json.loads(json.dumps(written))) == parsed


def test_policy_with_step_percent_round_trips() -> None:
    parsed = policy_from_dict(rules_policy(rule(), scale_up={"step_percent": 50, "cooldown_seconds": 300}))
    assert policy_from_dict(policy_to_dict(parsed)) == parsed


def test_sample_policy_file_loads() -> None:
    parsed = load_policy(REPO / "policy.sample.json")
    names = [t.name for t in parsed.targets]
    assert names == ["orders-consumers", "billing-workers"]
    orders = parsed.target("orders-consumers")
    assert orders.mode == "slo"
    assert orders.bounds.max_instances == 30
    assert orders.plan.name == "asp-orders-consumers"
    assert orders.plan.resource_group == "rg-orders"
    billing = parsed.target("billing-workers")
    assert billing.mode == "rules"
    assert billing.scale_up == Step(step=1, step_percent=50, cooldown_seconds=300)


def test_sample_policy_file_round_trips() -> None:
    parsed = load_policy(REPO / "policy.sample.json")
    assert policy_from_dict(policy_to_dict(parsed)) == parsed


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("{", "orders.json is not valid JSON"), ("[]", "policy must be an object")],
)
def test_load_policy_text_errors(text: str, fragment: str) -> None:
    with pytest.raises(PolicyError, match=fragment.replace(".", r"\.")):
        load_policy_text(text, origin="orders.json")


def test_policy_documents_are_not_mutated_by_parsing() -> None:
    document = rules_policy(rule())
    before = copy.deepcopy(document)
    policy_from_dict(document)
    assert document == before
