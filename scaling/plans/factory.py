"""Builds the plan adapter and the scale service from settings.

``DefaultAzureCredential`` (user-assigned identity via ``AZURE_CLIENT_ID``) unless a credential
is passed; ARM at ``settings.arm_endpoint`` (``ARM_ENDPOINT``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from scaling.plans.appservice import AppServicePlanAdapter
from scaling.services.scale import ScaleService
from scaling.settings import Settings
from scaling.storage.base import TableNames
from scaling.storage.records import utc_now


def build_plan_adapter(settings: Settings, credential: Any = None, **client_kwargs: Any) -> AppServicePlanAdapter:
    """The ARM adapter; also the collector's ``CapacityReader`` (``current_capacity``)."""
    if credential is None:
        from scaling.storage.factory import build_credential

        credential = build_credential(settings)
    return AppServicePlanAdapter(credential, base_url=settings.arm_endpoint, **client_kwargs)


def build_scale_service(
    settings: Settings,
    credential: Any = None,
    *,
    store: Any = None,
    plans: Any = None,
    clock: Callable[[], datetime] = utc_now,
    names: TableNames = TableNames(),
) -> ScaleService:
    """The production scale service: Table storage, the ARM adapter, ``SCALER_DRY_RUN``."""
    from scaling.storage.factory import build_table_storage

    return ScaleService(
        store if store is not None else build_table_storage(settings, credential, names=names),
        plans if plans is not None else build_plan_adapter(settings, credential),
        settings.policy,
        dry_run=settings.dry_run,
        clock=clock,
    )
