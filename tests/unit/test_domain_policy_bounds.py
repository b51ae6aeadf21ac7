"""Policy bounds (issue 11, item 7: nothing that validates may crash an evaluation or overflow a
Table entity or key) and the document conventions of the pydantic model: every limit is valid at
the limit and an error naming the field just past it; snake_case names with KEDA's camelCase as
aliases; ``$schema`` ignored; ``null`` means "not set"."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from scaling.domain.names import MAX_KEY_CHARS
from scaling.domain.policy import PolicyError, load_policy_text, policy_from_dict
from scaling.domain.policy_fields import KEDA_ALIASES, escaped_key_length
from scaling.storage.base import partition_key

PLAN = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Web/serverfarms/asp"


def hub(**changes: Any) -> dict:
    return {"name": "orders", "fully_qualified_namespace": "contoso.servicebus.windows.net", "event_hub_name": "orders",
            "checkpoint_account_url": "https://contoso.blob.core.windows.net", **changes}


SB_NAMESPACE = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/"


def subscription(namespace_length: int) -> dict:
    """A topic subscription counted with identity, its namespace id ``namespace_length`` characters long."""
    return {"kind": "servicebus", "name": "audit", "topic_name": "events", "subscription_name": "audit",
            "namespace_resource_id": SB_NAMESPACE + "n" * (namespace_length - len(SB_NAMESPACE))}


def rule(**changes: Any) -> dict:
    return {"name": "backlog", "scale_up_above": 1000, "scale_down_below": 100, **changes}


def profile(**changes: Any) -> dict:
    return {"name": "business", "min_instances": 2, **changes,
            "recurrence": {"days": ["monday"], "start": "09:00", "end": "18:00", "time_zone": "Europe/Berlin"}}


def document(**target_changes: Any) -> dict:
    target = {"name": "orders-consumers", "plan": {"resource_id": PLAN}, "sources": [hub()], **target_changes}
    return {"version": 1, "targets": [target]}


def _own_plan(index: int) -> dict:
    """Target ``t{index}`` on plan ``asp{index}`` (one target per plan)."""
    return document(name=f"t{index}", plan={"resource_id": f"{PLAN}{index}"})["targets"][0]


def rules_document(*rules: dict, **target_changes: Any) -> dict:
    return document(mode="rules", rules=list(rules) or [rule()], **target_changes)


def error_of(policy: Any) -> str:
    with pytest.raises(PolicyError) as caught:
        policy_from_dict(policy)
    return str(caught.value)


def tiers(count: int) -> list[dict]:
    return [{"min_capacity": index * 9 + 1, "max_capacity": index * 9 + 9, "scale_up_above": 50, "scale_down_below": 5}
            for index in range(count)]


# (field path, document at the limit, document just past it, the reason past it)
BOUNDARIES = [
    ("targets[0].bounds.min_instances", document(bounds={"min_instances": 1}), document(bounds={"min_instances": 0}),
     "must be at least 1"),
    ("targets[0].bounds.max_instances", document(bounds={"max_instances": 100}), document(bounds={"max_instances": 101}),
     "must be at most 100"),
    ("targets[0].bounds.min_instances", document(bounds={"min_instances": 100, "max_instances": 100}),
     document(bounds={"min_instances": 101, "max_instances": 100}), "must be at most 100"),
    ("targets[0].rules[0].window_seconds", rules_document(rule(window_seconds=86_400)),
     rules_document(rule(window_seconds=86_401)), "must be at most 86400"),
    ("targets[0].rules[0].window_seconds", rules_document(rule(window_seconds=60)), rules_document(rule(window_seconds=59)),
     "must be at least 60"),
    ("targets[0].rules[0].min_samples", rules_document(rule(min_samples=1440)), rules_document(rule(min_samples=1441)),
     "must be at most 1440"),
    ("targets[0].rules[0].scale_up_above", rules_document(rule(scale_up_above=1e12)),
     rules_document(rule(scale_up_above=1e12 + 1)), "must be at most 1000000000000"),
    ("targets[0].rules[0].scale_down_below", rules_document(rule(scale_down_below=0)),
     rules_document(rule(scale_down_below=-0.5)), "must be at least 0"),
    ("targets[0].rules[0].tiers[0].max_capacity",
     rules_document(rule(tiers=[{"max_capacity": 100, "scale_up_above": 5, "scale_down_below": 1}])),
     rules_document(rule(tiers=[{"max_capacity": 101, "scale_up_above": 5, "scale_down_below": 1}])), "must be at most 100"),
    ("targets[0].rules[0].tiers", rules_document(rule(tiers=tiers(10))), rules_document(rule(tiers=tiers(11))),
     "must list at most 10"),
    ("targets[0].rules", rules_document(*[rule(name=f"r{index}") for index in range(20)]),
     rules_document(*[rule(name=f"r{index}") for index in range(21)]), "must list at most 20"),
    ("targets[0].sources", document(sources=[hub(name=f"s{index}") for index in range(10)]),
     document(sources=[hub(name=f"s{index}") for index in range(11)]), "must list at most 10"),
    ("targets[0].scale_up.step", document(scale_up={"step": 100}), document(scale_up={"step": 101}), "must be at most 100"),
    ("targets[0].scale_up.step_percent", document(scale_up={"step_percent": 1000}),
     document(scale_up={"step_percent": 1000.5}), "must be at most 1000"),
    ("targets[0].scale_down.cooldown_seconds", document(scale_down={"cooldown_seconds": 86_400}),
     document(scale_down={"cooldown_seconds": 86_401}), "must be at most 86400"),
    ("targets[0].slo.max_event_age_seconds", document(slo={"max_event_age_seconds": 86_400}),
     document(slo={"max_event_age_seconds": 86_400.5}), "must be at most 86400"),
    ("targets[0].slo.safety_seconds", document(slo={"max_event_age_seconds": 86_400, "safety_seconds": 86_399}),
     document(slo={"max_event_age_seconds": 86_400, "safety_seconds": 86_400}), "must be lower than max_event_age_seconds"),
    ("targets[0].slo.events_per_instance_per_second", document(slo={"events_per_instance_per_second": 1e9}),
     document(slo={"events_per_instance_per_second": 1e9 + 1}), "must be at most 1000000000"),
    ("targets[0].slo.provisioning_delay_seconds", document(slo={"provisioning_delay_seconds": 3600}),
     document(slo={"provisioning_delay_seconds": 3601}), "must be at most 3600"),
    ("targets[0].slo.min_dwell_seconds", document(slo={"min_dwell_seconds": 86_400}),
     document(slo={"min_dwell_seconds": 86_401}), "must be at most 86400"),
    ("targets[0].slo.headroom", document(slo={"headroom": 10}), document(slo={"headroom": 10.01}), "must be at most 10"),
    ("targets[0].slo.max_actions_per_hour", document(slo={"max_actions_per_hour": 60}),
     document(slo={"max_actions_per_hour": 60.5}), "must be at most 60"),
    ("targets[0].slo.rate_window_seconds", document(slo={"rate_window_seconds": 86_400}),
     document(slo={"rate_window_seconds": 86_401}), "must be at most 86400"),
    ("targets[0].slo.history_seconds", document(slo={"history_seconds": 86_400}),
     document(slo={"history_seconds": 86_401}), "must be at most 86400"),
    ("targets[0].slo.scale_in_peak_seconds", document(slo={"scale_in_peak_seconds": 86_400}),
     document(slo={"scale_in_peak_seconds": 86_401}), "must be at most 86400"),
    ("targets[0].sources[0].unprocessed_event_threshold", document(sources=[hub(unprocessed_event_threshold=10**12)]),
     document(sources=[hub(unprocessed_event_threshold=10**12 + 1)]), "must be at most 1000000000000"),
    ("targets[0].sources[0].activation_unprocessed_event_threshold",
     document(sources=[hub(activation_unprocessed_event_threshold=10**12)]),
     document(sources=[hub(activation_unprocessed_event_threshold=10**12 + 1)]), "must be at most 1000000000000"),
    ("targets[0].name", document(name="a" * 128), document(name="a" * 129), "must be at most 128 characters"),
    ("targets[0].name", document(name="漢" * 56), document(name="漢" * 57), "is too long once escaped as a Table key"),
    ("targets[0].name", document(name="é" * 85), document(name="é" * 86), "is too long once escaped as a Table key"),
    ("targets[0].name", document(name="%" * 128), document(name="%" * 129), "must be at most 128 characters"),
    ("targets[0].sources[0].name", document(sources=[hub(name="s" * 128)]), document(sources=[hub(name="s" * 129)]),
     "must be at most 128 characters"),
    ("targets[0].sources[0].event_hub_name", document(sources=[hub(event_hub_name="h" * 256)]),
     document(sources=[hub(event_hub_name="h" * 257)]), "must be at most 256 characters"),
    ("targets[0].plan.resource_id", document(plan={"resource_id": PLAN + "x" * (1024 - len(PLAN))}),
     document(plan={"resource_id": PLAN + "x" * (1025 - len(PLAN))}), "must be at most 1024 characters"),
    ("targets[0].sources[0].namespace_resource_id", rules_document(sources=[subscription(1024)]),
     rules_document(sources=[subscription(1025)]), "must be at most 1024 characters"),
    ("targets[0].profiles[0].max_instances", document(bounds={"max_instances": 100}, profiles=[profile(max_instances=100)]),
     document(profiles=[profile(max_instances=101)]), "must be at most 100"),
    ("targets[0].profiles[0].min_instances", document(profiles=[profile(min_instances=1)]),
     document(profiles=[profile(min_instances=0)]), "must be at least 1"),
    ("targets[0].profiles[0].name", document(profiles=[profile(name="p" * 128)]),
     document(profiles=[profile(name="p" * 129)]), "must be at most 128 characters"),
    ("targets[0].profiles", document(profiles=[profile(name=f"p{index}") for index in range(20)]),
     document(profiles=[profile(name=f"p{index}") for index in range(21)]), "must list at most 20"),
    ("targets", {"version": 1, "targets": [_own_plan(index) for index in range(100)]},
     {"version": 1, "targets": [_own_plan(index) for index in range(101)]}, "must list at most 100"),
]


@pytest.mark.parametrize(("path", "at_limit", "past_limit", "reason"), BOUNDARIES,
                         ids=[f"{path}-{index}" for index, (path, *_rest) in enumerate(BOUNDARIES)])
def test_each_bound_holds_at_the_limit_and_names_the_field_past_it(path: str, at_limit: dict, past_limit: dict,
                                                                    reason: str) -> None:
    policy_from_dict(at_limit)
    assert f"{path} {reason}" in error_of(past_limit)


@pytest.mark.parametrize(
    ("policy", "path"),
    [
        pytest.param(document(bounds={"max_instances": 1e308}), "targets[0].bounds.max_instances", id="max-instances-1e308"),
        pytest.param(rules_document(rule(window_seconds=1e308)), "targets[0].rules[0].window_seconds", id="window-1e308"),
        pytest.param(document(slo={"max_event_age_seconds": 1e308}), "targets[0].slo.max_event_age_seconds", id="slo-1e308"),
        pytest.param(document(scale_down={"cooldown_seconds": 1e12}), "targets[0].scale_down.cooldown_seconds",
                     id="cooldown-1e12"),
        pytest.param(rules_document(*[rule(name=f"r{index}") for index in range(1000)]), "targets[0].rules", id="1000-rules"),
        pytest.param(document(name="漢" * 57), "targets[0].name", id="57-cjk-characters"),
        pytest.param(document(name="orders\ud800"), "targets[0].name", id="lone-surrogate"),
        pytest.param(document(name="orders\n"), "targets[0].name", id="control-character"),
        pytest.param(document(sources=[hub(name="hub\x00")]), "targets[0].sources[0].name", id="nul-in-source-name"),
    ],
)
def test_issue_11_values_that_crashed_evaluations_are_refused(policy: dict, path: str) -> None:
    assert error_of(policy).startswith(path)


def test_a_lone_surrogate_from_json_text_is_refused() -> None:
    text = json.dumps(document(name="orders-consumers")).replace("orders-consumers", "orders\\ud800")
    with pytest.raises(PolicyError, match=r"targets\[0\]\.name must hold printable characters"):
        load_policy_text(text)


@pytest.mark.parametrize("name", ["orders-consumers", "a/b#c?d\\e%f", "漢字 orders", "x" * 128, "漢" * 56, "naïve ü"])
def test_key_length_is_measured_as_storage_escapes_it(name: str) -> None:
    """The domain cannot import storage: its copy of the escaping must match storage's."""
    assert escaped_key_length(name) == len(partition_key(name))


def test_the_longest_valid_name_fits_a_table_key() -> None:
    longest = policy_from_dict(document(name="漢" * 56)).targets[0].name
    assert len(partition_key(longest)) <= MAX_KEY_CHARS


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param(True, "must be a number, got True", id="bool"),
        pytest.param("5", "must be a number, got '5'", id="numeric-string"),
        pytest.param(2.5, "must be a whole number, got 2.5", id="fraction"),
        pytest.param(float("inf"), "must be a finite number", id="infinity"),
    ],
)
def test_numbers_are_json_numbers(value: Any, reason: str) -> None:
    assert f"targets[0].bounds.max_instances {reason}" in error_of(document(bounds={"max_instances": value}))


def test_nan_in_json_text_is_refused() -> None:
    text = json.dumps(document(slo={"headroom": 0.1})).replace("0.1", "NaN")
    with pytest.raises(PolicyError, match=r"targets\[0\]\.slo\.headroom must be a finite number"):
        load_policy_text(text)


def test_whole_floats_are_counts() -> None:
    assert policy_from_dict(document(bounds={"max_instances": 12.0})).targets[0].bounds.max_instances == 12


def test_schema_key_is_accepted_and_ignored_at_the_top_only() -> None:
    plain = policy_from_dict(document())
    assert policy_from_dict({"$schema": "./policy.schema.json", **document()}) == plain
    assert error_of(document(**{"$schema": "x"})).startswith("targets[0].$schema is not a known setting")


def test_keda_camel_case_and_snake_case_are_the_same_policy() -> None:
    camel = document(sources=[{KEDA_ALIASES.get(key, key): value for key, value in hub(consumer_group="cg").items()}])
    assert "consumerGroup" in camel["targets"][0]["sources"][0]
    assert policy_from_dict(camel) == policy_from_dict(document(sources=[hub(consumer_group="cg")]))


@pytest.mark.parametrize(
    ("source", "message"),
    [
        pytest.param(hub(event_hub_name=None), "targets[0].sources[0].event_hub_name is required", id="snake-missing"),
        pytest.param({**hub(), "fully_qualified_namespace": None},
                     "targets[0].sources[0].fully_qualified_namespace or connection_from_env is required", id="snake-pair"),
        pytest.param(hub(checkpoint_strategy="dapr"), "targets[0].sources[0].checkpoint_strategy must be one of auto,",
                     id="snake-value"),
        pytest.param({"name": "orders", "fullyQualifiedNamespace": "n", "checkpointAccountUrl": "https://a"},
                     "targets[0].sources[0].eventHubName is required", id="camel-missing"),
    ],
)
def test_errors_spell_fields_as_the_source_does(source: dict, message: str) -> None:
    assert message in error_of(document(sources=[source]))


def test_null_means_not_set() -> None:
    parsed = policy_from_dict(document(sources=[hub(consumer_group=None)], bounds={"max_instances": None}, mode=None))
    target = parsed.targets[0]
    assert (target.sources[0].consumer_group, target.bounds.max_instances, target.mode) == ("$Default", 10, "slo")


def test_every_problem_is_listed_one_line_each() -> None:
    policy = rules_document(rule(window_seconds=30), rule(name="b", metric="cpu"), bounds={"max_instances": 0})
    lines = error_of(policy).splitlines()
    assert lines == [
        "targets[0].bounds.max_instances must be at least 1, got 0",
        "targets[0].rules[0].window_seconds must be at least 60, got 30",
        "targets[0].rules[1].metric must be one of backlog, backlog_per_instance, lag_seconds, got 'cpu'",
    ]


@pytest.mark.parametrize(("value", "expected"), [(None, "adopt"), ("adopt", "adopt"), ("revert", "revert")])
def test_on_external_change(value: str | None, expected: str) -> None:
    assert policy_from_dict(document(on_external_change=value)).targets[0].on_external_change == expected


def test_on_external_change_unknown_value_names_the_field() -> None:
    assert "targets[0].on_external_change must be one of adopt, revert, got 'ignore'" in error_of(
        document(on_external_change="ignore"))


@pytest.mark.parametrize("strategy", ["auto", "blobMetadata", "azureFunction"])
def test_checkpoint_strategies(strategy: str) -> None:
    assert policy_from_dict(document(sources=[hub(checkpoint_strategy=strategy)])).targets[0].sources[0].checkpoint_strategy \
        == strategy


def test_seed_preset_thresholds_are_checked_with_their_defaults() -> None:
    """``seed: {scale_up_above: 50}`` would pair with the default lower threshold 100: refused."""
    assert "targets[0].seed.scale_down_below must be lower than scale_up_above" in error_of(
        document(preset="seed", seed={"scale_up_above": 50}))


def test_validation_does_not_mutate_the_document() -> None:
    policy = document(preset="seed", sources=[hub(name=None)], scale_up=None)
    before = copy.deepcopy(policy)
    policy_from_dict(policy)
    assert policy == before


def test_limits_are_written_as_people_write_them() -> None:
    assert error_of(rules_document(rule(scale_up_above=2e12))).splitlines() == [
        "targets[0].rules[0].scale_up_above must be at most 1000000000000, got 2000000000000.0"]
