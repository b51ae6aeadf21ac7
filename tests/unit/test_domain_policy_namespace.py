"""The ``eventhubs_namespace`` target kind in the policy document: defaults, bounds at and past
their limits, and cross-field errors that name the setting."""

from __future__ import annotations

from typing import Any

import pytest

from scaling.domain.policy import PolicyError, policy_from_dict, policy_to_dict

PLAN = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Web/serverfarms/asp"
NAMESPACE = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/contoso"


def document(**namespace: Any) -> dict:
    target = {"name": "orders", "plan": {"resource_id": PLAN},
              "sources": [{"fully_qualified_namespace": "contoso.servicebus.windows.net", "event_hub_name": "orders",
                           "checkpoint_account_url": "https://contoso.blob.core.windows.net"}]}
    return {"version": 1, "targets": [target],
            "namespaces": [{"name": "orders-ns", "resource_id": NAMESPACE, "consumer_targets": ["orders"], **namespace}]}


def test_defaults_and_the_consumer_link() -> None:
    policy = policy_from_dict(document())
    namespace = policy.namespace("orders-ns")
    assert (namespace.kind, namespace.min_tus, namespace.max_tus, namespace.headroom, namespace.scale_down_hold_seconds) == \
        ("eventhubs_namespace", 1, 20, 0.2, 3600)
    assert policy.namespace_of("orders") is namespace and policy.scale_target("orders-ns") is namespace
    assert policy.scale_target("orders").name == "orders"
    assert (namespace.bounds.min_instances, namespace.bounds.max_instances) == (1, 20)


@pytest.mark.parametrize(("changes", "settings_hold", "lookback"), [
    ({}, 0.0, 3_600.0),                                   # off: the scale-down hold's hour is read
    ({"ingress_hold_seconds": 21_600}, 21_600.0, 21_600.0),  # the ingress hold reads its six hours
    ({"ingress_hold_seconds": 1_800}, 1_800.0, 3_600.0),     # shorter than the scale-down hold: the hour
])
def test_the_ingress_hold_reaches_the_sizing_and_how_much_history_collect_reads(changes, settings_hold, lookback) -> None:
    settings = policy_from_dict(document(**changes)).namespace("orders-ns").tu_settings
    assert (settings.ingress_hold_seconds, settings.lookback_seconds) == (settings_hold, lookback)


def test_a_policy_without_namespaces_is_unchanged() -> None:
    bare = document()
    del bare["namespaces"]
    policy = policy_from_dict(bare)
    assert policy.namespaces == () and policy.namespace_of("orders") is None
    assert "namespaces" not in policy_to_dict(policy)


def test_round_trip() -> None:
    policy = policy_from_dict(document(max_tus=8))
    assert policy_from_dict(policy_to_dict(policy)) == policy


@pytest.mark.parametrize(("changes", "message"), [
    ({"min_tus": 40, "max_tus": 40}, None),
    ({"max_tus": 41}, "namespaces[0].max_tus"),
    ({"min_tus": 0}, "namespaces[0].min_tus"),
    ({"min_tus": 5, "max_tus": 4}, "namespaces[0].max_tus must not be lower than min_tus"),
    ({"headroom": 4}, None),
    ({"headroom": 4.5}, "namespaces[0].headroom"),
    ({"headroom": -0.1}, "namespaces[0].headroom"),
    ({"scale_down_hold_seconds": 600}, None),
    ({"scale_down_hold_seconds": 599}, "namespaces[0].scale_down_hold_seconds"),
    ({"scale_down_from_minute": 59}, None),
    ({"spare_tus": 0}, None),
    ({"spare_tus": 10}, None),
    ({"spare_tus": 11}, "namespaces[0].spare_tus"),
    ({"ingress_step": 4}, None),
    ({"ingress_step": 0.5}, "namespaces[0].ingress_step"),
    ({"ingress_hold_seconds": 0}, None),
    ({"ingress_hold_seconds": 86_400}, None),
    ({"ingress_hold_seconds": 86_401}, "namespaces[0].ingress_hold_seconds"),
    ({"ingress_hold_seconds": -1}, "namespaces[0].ingress_hold_seconds"),
    ({"scale_down_from_minute": 60}, "namespaces[0].scale_down_from_minute"),
    ({"resource_id": PLAN}, "namespaces[0].resource_id must be an Event Hubs namespace resource id"),
    ({"kind": "servicebus_namespace"}, "namespaces[0].kind"),
    ({"consumer_targets": ["nobody"]}, "namespaces[0].consumer_targets[0] names no target of this policy"),
    ({"consumer_targets": ["orders", "orders"]}, "namespaces[0].consumer_targets has duplicate names"),
    ({"name": "orders"}, "namespaces[0].name 'orders' is already a target's name"),
    ({"tu": 3}, "namespaces[0].tu is not a known setting"),
])
def test_bounds_and_errors_name_the_setting(changes: dict, message: str | None) -> None:
    if message is None:
        policy_from_dict(document(**changes))
        return
    with pytest.raises(PolicyError, match=message.replace("[", r"\[").replace("]", r"\]")):
        policy_from_dict(document(**changes))


def test_two_namespace_targets_on_one_namespace_are_refused_naming_both() -> None:
    doc = document()
    doc["namespaces"].append({"name": "other-ns", "resource_id": NAMESPACE.replace("Microsoft.EventHub", "microsoft.eventhub"),
                              "consumer_targets": []})
    with pytest.raises(PolicyError, match=r"namespaces\[1\] 'other-ns' resizes the same resource as "
                                          r"namespaces\[0\] 'orders-ns'"):
        policy_from_dict(doc)
    doc["namespaces"][1]["resource_id"] = NAMESPACE + "2"  # another namespace: accepted
    policy_from_dict(doc)


def test_a_consumer_reads_one_namespace() -> None:
    doc = document()
    doc["namespaces"].append({"name": "other-ns", "resource_id": NAMESPACE + "2", "consumer_targets": ["orders"]})
    with pytest.raises(PolicyError, match=r"namespaces\[1\]\.consumer_targets\[0\] 'orders' is already a consumer"):
        policy_from_dict(doc)
