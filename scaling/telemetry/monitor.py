"""Azure Monitor: configured once per worker process when the platform provides
``APPLICATIONINSIGHTS_CONNECTION_STRING``, authenticated with Entra ID (the user-assigned managed
identity named by ``AZURE_CLIENT_ID``); without the setting nothing is configured and the services
report to the no-op telemetry."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scaling.telemetry.otel import OpenTelemetry

logger = logging.getLogger(__name__)

CONNECTION_STRING_SETTING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
CLIENT_ID_SETTING = "AZURE_CLIENT_ID"

_lock = threading.Lock()
_configured: OpenTelemetry | None = None
_failed = False


def entra_credential(client_id: str | None) -> Any:
    """The identity Application Insights accepts the telemetry from (no instrumentation key)."""
    from azure.identity import DefaultAzureCredential, ManagedIdentityCredential

    return ManagedIdentityCredential(client_id=client_id) if client_id else DefaultAzureCredential()


def configure_distro(**options: Any) -> None:
    from azure.monitor.opentelemetry import configure_azure_monitor

    configure_azure_monitor(**options)


def telemetry_from_environment(
    environ: Mapping[str, str],
    *,
    configure: Callable[..., None] = configure_distro,
    credential_for: Callable[[str | None], Any] = entra_credential,
) -> OpenTelemetry | None:
    """The telemetry of this process: Azure Monitor when the connection string is set (configured
    on the first call only), ``None`` (nothing configured) otherwise."""
    global _configured
    connection_string = (environ.get(CONNECTION_STRING_SETTING) or "").strip()
    if not connection_string:
        return None
    global _failed
    with _lock:
        if _configured is None and not _failed:
            from scaling.telemetry.otel import OpenTelemetry

            try:
                configure(connection_string=connection_string,
                          credential=credential_for(environ.get(CLIENT_ID_SETTING) or None), logger_name="scaling")
            except Exception:  # scaling must go on without telemetry; say so once
                logger.exception("telemetry: configuring Azure Monitor failed; this worker reports no telemetry")
                _failed = True
                return None
            logger.info("telemetry: exporting to Azure Monitor with Entra ID authentication")
            _configured = OpenTelemetry()
        return _configured


def forget_configuration() -> None:
    """Tests only: the next call configures again."""
    global _configured, _failed
    with _lock:
        _configured, _failed = None, False
