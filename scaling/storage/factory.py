"""Builds the real storage clients from settings (the services that use them are built in the
composition root, ``scaling.bootstrap``).

Locally ``AzureWebJobsStorage`` is an Azurite connection string; in Azure the identity-based
settings (``AzureWebJobsStorage__accountName`` or ``__tableServiceUri``/``__queueServiceUri``)
are used with ``DefaultAzureCredential`` (user-assigned identity via ``AZURE_CLIENT_ID`` or
``AzureWebJobsStorage__clientId``). Building does no I/O except ``ensure_tables``.
"""

from __future__ import annotations

from typing import Any

from scaling.settings import Settings, SettingsError, StorageSettings
from scaling.storage.base import TableNames
from scaling.storage.tables import TableStorage


def _storage(settings: Settings | StorageSettings) -> StorageSettings:
    return settings.storage if isinstance(settings, Settings) else settings


def build_credential(settings: Settings | StorageSettings) -> Any:
    """A sync ``DefaultAzureCredential``, with the user-assigned identity when one is named."""
    from azure.identity import DefaultAzureCredential

    client_id = settings.client_id if isinstance(settings, Settings) and settings.client_id else _storage(settings).client_id
    return DefaultAzureCredential(**({"managed_identity_client_id": client_id} if client_id else {}))


def build_table_storage(
    settings: Settings | StorageSettings,
    credential: Any = None,
    *,
    names: TableNames = TableNames(),
    ensure: bool = True,
    **client_kwargs: Any,
) -> TableStorage:
    """The Table storage adapter; ``ensure`` creates missing tables (one call per table, once)."""
    storage = _storage(settings)
    if storage.connection_string:
        tables = TableStorage.from_connection_string(storage.connection_string, names, **client_kwargs)
    else:
        if not storage.table_service_uri:
            raise SettingsError("AzureWebJobsStorage__tableServiceUri (or __accountName) is required for identity-based storage")
        tables = TableStorage.from_endpoint(storage.table_service_uri, credential or build_credential(settings), names,
                                            **client_kwargs)
    if ensure:
        tables.ensure_tables()
    return tables


def build_queue_client(settings: Settings | StorageSettings, queue_name: str, credential: Any = None, **client_kwargs: Any) -> Any:
    """A ``QueueClient`` whose messages are base64 text, as the Functions queue trigger expects."""
    from azure.storage.queue import QueueClient, TextBase64DecodePolicy, TextBase64EncodePolicy

    storage = _storage(settings)
    codecs = {"message_encode_policy": TextBase64EncodePolicy(), "message_decode_policy": TextBase64DecodePolicy()}
    if storage.connection_string:
        return QueueClient.from_connection_string(storage.connection_string, queue_name, **codecs, **client_kwargs)
    if not storage.queue_service_uri:
        raise SettingsError("AzureWebJobsStorage__queueServiceUri (or __accountName) is required for identity-based storage")
    return QueueClient(storage.queue_service_uri, queue_name, credential=credential or build_credential(settings),
                       **codecs, **client_kwargs)
