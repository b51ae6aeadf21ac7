"""Start-up validation: in a Functions host, a bad app setting fails the import of function_app,
naming the setting; outside a host (tests, tools) importing needs no settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scaling.bootstrap import running_in_functions_host, validate_at_startup
from scaling.settings import SettingsError

REPO = Path(__file__).resolve().parents[2]
POLICY = (REPO / "policy.sample.json").read_text(encoding="utf-8")
AZURITE = "UseDevelopmentStorage=true"


def import_function_app(environ: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {key: value for key, value in os.environ.items()
             if key not in ("AUTOSCALER_POLICY", "AUTOSCALER_POLICY_FILE", "AzureWebJobsStorage", "FUNCTIONS_WORKER_RUNTIME",
                            "AZURE_FUNCTIONS_ENVIRONMENT", "WEBSITE_INSTANCE_ID", "COLLECT_SCHEDULE")}
    return subprocess.run([sys.executable, "-c", "import function_app"], cwd=REPO, env={**clean, **environ},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("environ", "setting"),
    [
        ({"FUNCTIONS_WORKER_RUNTIME": "python", "AzureWebJobsStorage": AZURITE}, "AUTOSCALER_POLICY"),
        ({"AZURE_FUNCTIONS_ENVIRONMENT": "Production", "AUTOSCALER_POLICY": POLICY}, "AzureWebJobsStorage"),
        ({"WEBSITE_INSTANCE_ID": "abc", "AUTOSCALER_POLICY": POLICY, "AzureWebJobsStorage": AZURITE,
          "COLLECT_SCHEDULE": "every minute"}, "COLLECT_SCHEDULE"),
        ({"FUNCTIONS_WORKER_RUNTIME": "python", "AzureWebJobsStorage": AZURITE,
          "AUTOSCALER_POLICY": json.dumps({"version": 1, "targets": [{"name": "x"}]})}, "AUTOSCALER_POLICY: targets[0].plan.resource_id"),
    ],
    ids=["no-policy", "no-storage", "bad-schedule", "invalid-policy"],
)
def test_host_start_up_fails_naming_the_setting(environ, setting) -> None:
    completed = import_function_app(environ)
    assert completed.returncode != 0
    assert "SettingsError" in completed.stderr
    assert setting in completed.stderr


def test_host_start_up_succeeds_with_valid_settings() -> None:
    completed = import_function_app({"FUNCTIONS_WORKER_RUNTIME": "python", "AzureWebJobsStorage": AZURITE, "AUTOSCALER_POLICY": POLICY})
    assert completed.returncode == 0, completed.stderr


def test_outside_a_host_nothing_is_validated() -> None:
    assert not running_in_functions_host({})
    assert validate_at_startup({}) is None
    with pytest.raises(SettingsError, match="AUTOSCALER_POLICY"):
        validate_at_startup({"FUNCTIONS_WORKER_RUNTIME": "python", "AzureWebJobsStorage": AZURITE})


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, 3), ("0", 0), ("5", 5), ("60", 60), ("61", "at most 60"), ("-1", "at least 0"), ("2.5", "whole number"),
     ("three", "must be a number")],
)
def test_external_changes_per_hour_is_validated_naming_the_setting(value, expected) -> None:
    from scaling.settings import Settings

    environ = {"AzureWebJobsStorage": AZURITE, "AUTOSCALER_POLICY": POLICY}
    if value is not None:
        environ["EXTERNAL_CHANGES_PER_HOUR"] = value
    if isinstance(expected, int):
        assert Settings.from_environment(environ).external_changes_per_hour == expected
    else:
        with pytest.raises(SettingsError, match=f"EXTERNAL_CHANGES_PER_HOUR must be .*{expected}|EXTERNAL_CHANGES_PER_HOUR {expected}"):
            Settings.from_environment(environ)


NAMESPACE_POLICY = json.dumps({**json.loads(POLICY), "namespaces": [{
    "name": "orders-ns", "resource_id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/orders",
    "consumer_targets": [json.loads(POLICY)["targets"][0]["name"]]}]})


def test_host_start_up_names_a_bad_namespace_setting() -> None:
    bad = json.loads(NAMESPACE_POLICY)
    bad["namespaces"][0]["max_tus"] = 41
    completed = import_function_app({"FUNCTIONS_WORKER_RUNTIME": "python", "AzureWebJobsStorage": AZURITE,
                                     "AUTOSCALER_POLICY": json.dumps(bad)})
    assert completed.returncode != 0 and "AUTOSCALER_POLICY: namespaces[0].max_tus" in completed.stderr


def test_a_policy_with_namespaces_wires_their_evaluate_collect_and_write() -> None:
    """The composition root: namespace samples go to the namespace service, scale writes through
    the router (plans to azure-mgmt-web, namespaces to azure-mgmt-eventhub), collect reads both."""
    import asyncio

    from scaling.bootstrap import evaluate_service_for, namespace_collector_for, scale_service_for
    from scaling.plans.local_arm import StaticTokenCredential
    from scaling.plans.namespace.arm import RoutingPlanAdapter
    from scaling.services.namespace import NamespaceCollector, NamespaceEvaluateService
    from scaling.settings import Settings
    from scaling.storage.memory import MemoryStorage

    settings = Settings.from_environment({"AzureWebJobsStorage": AZURITE, "AUTOSCALER_POLICY": NAMESPACE_POLICY})
    store = MemoryStorage()
    assert isinstance(evaluate_service_for(settings, store=store).namespaces, NamespaceEvaluateService)
    scale = scale_service_for(settings, StaticTokenCredential(), store=store)
    assert isinstance(scale.plans, RoutingPlanAdapter)
    scale.plans.close()

    class NoMetrics:
        async def close(self) -> None:
            pass

    collector = namespace_collector_for(settings, StaticTokenCredential(), metrics_client=NoMetrics())
    assert isinstance(collector, NamespaceCollector)
    asyncio.run(collector.aclose())
    plain = Settings.from_environment({"AzureWebJobsStorage": AZURITE, "AUTOSCALER_POLICY": POLICY})
    assert evaluate_service_for(plain, store=store).namespaces is None


def test_host_start_up_leaves_numpy_to_the_first_evaluation() -> None:
    """The cold start (issue 31: under 0.6 s and 60 MB) does not pay for numpy: the SLO kernel
    loads it on the first evaluation."""
    environ = {"FUNCTIONS_WORKER_RUNTIME": "python", "AzureWebJobsStorage": AZURITE, "AUTOSCALER_POLICY": POLICY}
    clean = {key: value for key, value in os.environ.items() if key not in ("AUTOSCALER_POLICY_FILE", "COLLECT_SCHEDULE")}
    completed = subprocess.run([sys.executable, "-c", "import sys, function_app; print('numpy' in sys.modules)"], cwd=REPO,
                               env={**clean, **environ}, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "False"
