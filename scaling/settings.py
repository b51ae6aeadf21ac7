"""App settings -> typed configuration, in one place. Errors name the setting.

Read once at start-up (``Settings.from_environment``) so that a wrong value fails the host
before the first trigger instead of inside every invocation.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from scaling.domain.knobs import SETTING
from scaling.domain.policy import Policy, PolicyError, load_policy_text

METRICS_QUEUE = "metrics"
ACTIONS_QUEUE = "actions"
#: Where the Functions host moves a message after maxDequeueCount failed deliveries.
METRICS_POISON_QUEUE = "metrics-poison"
ACTIONS_POISON_QUEUE = "actions-poison"
HISTORY_TABLE = "metrichistory"
STATE_TABLE = "scalerstate"
DEAD_LETTER_TABLE = "deadletters"
APPLIED_TABLE = "appliedactions"
DEFAULT_SCHEDULE = "0 */1 * * * *"
STORAGE_SETTING = "AzureWebJobsStorage"
AZURITE_ACCOUNT = "devstoreaccount1"
#: Connection-string keys that carry a secret (compared lower-case, as the SDKs parse them).
SECRET_KEYS = ("accountkey", "sharedaccesssignature")


class SettingsError(ValueError):
    """An invalid or missing app setting; the message starts with the setting's name."""


def _boolean(environ: Mapping[str, str], name: str, default: bool) -> bool:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("0", "false", "no"):
        return False
    raise SettingsError(f"{name} must be true or false, got {raw!r}")


def _number(environ: Mapping[str, str], name: str, default: float, *, minimum: float = 0.0,
            maximum: float = float("inf")) -> float:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from None
    if not value >= minimum:  # also refuses NaN
        raise SettingsError(f"{name} must be at least {minimum:g}, got {raw!r}")
    if value > maximum:
        raise SettingsError(f"{name} must be at most {maximum:g}, got {raw!r}")
    return value


def _setting(environ: Mapping[str, str], name: str) -> float:
    """A number setting with its default and bounds from the registry (``domain/knobs.SETTINGS``)."""
    setting = SETTING[name]
    return _number(environ, name, float(setting.default), minimum=0.0 if setting.minimum is None else setting.minimum,
                   maximum=float("inf") if setting.maximum is None else setting.maximum)


def _whole(environ: Mapping[str, str], name: str, default: int, *, maximum: int) -> int:
    """A whole number from 0 to ``maximum`` (``3.5`` is an error naming the setting, not 3)."""
    value = _number(environ, name, default, maximum=maximum)
    if value != int(value):
        raise SettingsError(f"{name} must be a whole number, got {environ.get(name)!r}")
    return int(value)


def _schedule(environ: Mapping[str, str]) -> str:
    schedule = environ.get("COLLECT_SCHEDULE") or DEFAULT_SCHEDULE
    if len(schedule.split()) != 6:
        raise SettingsError(f"COLLECT_SCHEDULE must be a six-field NCRONTAB expression, got {schedule!r}")
    return schedule


def connection_string_parts(connection: str) -> dict[str, str]:
    """``Key=Value;...`` with lower-case keys: the SDKs match keys without regard to case."""
    parts: dict[str, str] = {}
    for segment in connection.split(";"):
        key, sep, value = segment.partition("=")
        if sep and key.strip():
            parts[key.strip().lower()] = value.strip()
    return parts


def _is_loopback_url(url: str) -> bool:
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_local_azurite(connection: str) -> bool:
    """True only for Azurite on this machine: ``UseDevelopmentStorage=true``, or the account
    ``devstoreaccount1`` with every endpoint given explicitly and on loopback (no suffix that would
    let an SDK build a cloud address for a service without an endpoint)."""
    parts = connection_string_parts(connection)
    if parts.get("usedevelopmentstorage", "").lower() == "true":
        return True
    endpoints = [value for key, value in parts.items() if key.endswith("endpoint")]
    return (parts.get("accountname") == AZURITE_ACCOUNT and "endpointsuffix" not in parts
            and bool(endpoints) and all(_is_loopback_url(url) for url in endpoints))


def check_secret_free(name: str, connection: str) -> None:
    """A connection string with an account key or a SAS is accepted for loopback Azurite only:
    in Azure the app authenticates with its managed identity, never with a stored secret."""
    secrets = [key for key in SECRET_KEYS if key in connection_string_parts(connection)]
    if secrets and not is_local_azurite(connection):
        kind = "an account key" if "accountkey" in secrets else "a shared access signature"
        raise SettingsError(f"{name} carries {kind} for something other than local Azurite (loopback endpoints and "
                            f"account {AZURITE_ACCOUNT}); use identity-based settings ({name}__accountName)")


@dataclass(frozen=True, slots=True)
class StorageSettings:
    """How to reach the app's own storage: a connection string locally, identity in Azure."""

    connection_string: str | None
    account_name: str | None
    blob_service_uri: str | None
    queue_service_uri: str | None
    table_service_uri: str | None
    client_id: str | None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], prefix: str = STORAGE_SETTING) -> StorageSettings:
        connection = environ.get(prefix)
        account = environ.get(f"{prefix}__accountName")
        uris = {kind: environ.get(f"{prefix}__{kind}ServiceUri") for kind in ("blob", "queue", "table")}
        if account:
            for kind in uris:
                uris[kind] = uris[kind] or f"https://{account}.{kind}.core.windows.net"
        if not connection and not all(uris.values()):
            raise SettingsError(
                f"{prefix} is not configured: set {prefix}__accountName (identity-based, in Azure) "
                f"or {prefix} to an Azurite connection string (local only)"
            )
        if connection:
            check_secret_free(prefix, connection)
        return cls(connection, account, uris["blob"], uris["queue"], uris["table"],
                   environ.get(f"{prefix}__clientId") or environ.get("AZURE_CLIENT_ID"))


def command_storage(connection_string: str | None, environ: Mapping[str, str] | None = None) -> StorageSettings:
    """The storage an operator command uses: ``--connection-string`` (checked like the app
    setting: keys and SAS only for loopback Azurite) or else the app settings."""
    environ = os.environ if environ is None else environ
    if connection_string:
        return StorageSettings.from_environment({STORAGE_SETTING: connection_string})
    return StorageSettings.from_environment(environ)


@dataclass(frozen=True, slots=True)
class Settings:
    policy: Policy
    storage: StorageSettings
    schedule: str = DEFAULT_SCHEDULE
    # Defaults, bounds and why: the registry (``domain/knobs.SETTINGS``).
    dry_run: bool = SETTING["SCALER_DRY_RUN"].default  # type: ignore[assignment]
    history_retention_days: float = SETTING["HISTORY_RETENTION_DAYS"].default
    ownership_expiry_seconds: float = SETTING["OWNERSHIP_EXPIRY_SECONDS"].default
    collect_concurrency: int = SETTING["COLLECT_CONCURRENCY"].default  # type: ignore[assignment]
    collect_timeout_seconds: float = SETTING["COLLECT_TIMEOUT_SECONDS"].default
    arm_endpoint: str = "https://management.azure.com"
    client_id: str | None = None
    clock_skew_seconds: float = SETTING["CLOCK_SKEW_SECONDS"].default
    reconcile_grace_seconds: float = SETTING["RECONCILE_GRACE_SECONDS"].default
    #: More resizes from outside than this within an hour mean another controller: hold (0: off).
    external_changes_per_hour: int = SETTING["EXTERNAL_CHANGES_PER_HOUR"].default  # type: ignore[assignment]

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Settings:
        environ = os.environ if environ is None else environ
        return cls(
            policy=load_policy_setting(environ),
            storage=StorageSettings.from_environment(environ),
            schedule=_schedule(environ),
            dry_run=_boolean(environ, "SCALER_DRY_RUN", bool(SETTING["SCALER_DRY_RUN"].default)),
            history_retention_days=_setting(environ, "HISTORY_RETENTION_DAYS"),
            ownership_expiry_seconds=_setting(environ, "OWNERSHIP_EXPIRY_SECONDS"),
            collect_concurrency=int(_setting(environ, "COLLECT_CONCURRENCY")),
            collect_timeout_seconds=_setting(environ, "COLLECT_TIMEOUT_SECONDS"),
            arm_endpoint=environ.get("ARM_ENDPOINT") or "https://management.azure.com",
            client_id=environ.get("AZURE_CLIENT_ID") or None,
            clock_skew_seconds=_setting(environ, "CLOCK_SKEW_SECONDS"),
            reconcile_grace_seconds=_setting(environ, "RECONCILE_GRACE_SECONDS"),
            external_changes_per_hour=_whole(environ, "EXTERNAL_CHANGES_PER_HOUR",
                                             int(SETTING["EXTERNAL_CHANGES_PER_HOUR"].default),
                                             maximum=int(SETTING["EXTERNAL_CHANGES_PER_HOUR"].maximum or 0)),
        )


def load_policy_setting(environ: Mapping[str, str]) -> Policy:
    """The policy from ``AUTOSCALER_POLICY`` (inline JSON) or ``AUTOSCALER_POLICY_FILE`` (a path)."""
    inline = environ.get("AUTOSCALER_POLICY")
    path = environ.get("AUTOSCALER_POLICY_FILE")
    if inline:
        try:
            return load_policy_text(inline, origin="AUTOSCALER_POLICY")
        except PolicyError as error:
            raise SettingsError(f"AUTOSCALER_POLICY: {error}") from error
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise SettingsError(f"AUTOSCALER_POLICY_FILE cannot be read: {error}") from error
        try:
            return load_policy_text(text, origin=path)
        except PolicyError as error:
            raise SettingsError(f"AUTOSCALER_POLICY_FILE ({path}): {error}") from error
    raise SettingsError("AUTOSCALER_POLICY (inline JSON) or AUTOSCALER_POLICY_FILE (a path) must be set")
