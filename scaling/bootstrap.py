"""The composition root: the one place that turns app settings into services and SDK clients.

The blueprints ask for their service here on first use and cache it for the life of the worker;
tests and the local demo install their own through each blueprint's ``set_service``. Settings
are validated when the Functions host loads the app (``validate_at_startup``), so a wrong value
fails the start-up with a message naming the setting rather than every invocation later.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from scaling.settings import Settings

#: Variables the Functions host (Azure or Core Tools) sets; their presence means "running in a host".
HOST_MARKERS = ("AZURE_FUNCTIONS_ENVIRONMENT", "WEBSITE_INSTANCE_ID", "FUNCTIONS_WORKER_RUNTIME")


def running_in_functions_host(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return any(environ.get(name) for name in HOST_MARKERS)


def validate_at_startup(environ: Mapping[str, str] | None = None) -> Settings | None:
    """Parse every setting now when a Functions host is loading the app (raises ``SettingsError``
    naming the setting); outside a host (tests, tools) do nothing."""
    if not running_in_functions_host(environ):
        return None
    return Settings.from_environment(environ)


def _settings_and_credential() -> tuple[Settings, Any]:
    """The settings now, and a synchronous credential for Table/Queue storage and ARM (the
    user-assigned managed identity in Azure). Each blueprint caches the service built from them."""
    from scaling.storage.factory import build_credential

    settings = Settings.from_environment()
    return settings, build_credential(settings)


def build_collect_service() -> Any:
    from scaling.plans.factory import build_plan_adapter
    from scaling.sources.factory import build_collector

    settings, credential = _settings_and_credential()
    return build_collector(settings, capacity_reader=build_plan_adapter(settings, credential))


def build_evaluate_service() -> Any:
    from scaling.storage.factory import build_evaluate_service as build

    return build(*_settings_and_credential())


def build_dead_letter_service() -> Any:
    from scaling.services.dead_letters import DeadLetterService
    from scaling.storage.factory import build_table_storage

    settings, credential = _settings_and_credential()
    return DeadLetterService(build_table_storage(settings, credential))


def build_scale_service() -> Any:
    from scaling.plans.factory import build_scale_service as build

    return build(*_settings_and_credential())
