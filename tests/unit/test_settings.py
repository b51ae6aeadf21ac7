"""The storage-key guard: a connection string may carry an account key or a SAS only for Azurite on
loopback; anything else must use identity-based settings, and the error names the setting."""

from __future__ import annotations

import pytest

from scaling.local.azurite import DEV_KEY
from scaling.settings import SettingsError, StorageSettings, is_local_azurite

LOCAL = "http://127.0.0.1:10002/devstoreaccount1"
AZURITE = (f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={DEV_KEY};"
           f"BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;"
           f"TableEndpoint={LOCAL};")
SAS = "sv=2022-11-02&ss=bqt&srt=sco&sp=rwdlacu&se=2030-01-01T00:00:00Z&sig=abc%3D"


@pytest.mark.parametrize(
    "connection",
    [
        "UseDevelopmentStorage=true",
        "usedevelopmentstorage=TRUE",
        AZURITE,
        AZURITE.replace("127.0.0.1", "localhost"),
        AZURITE.replace("127.0.0.1", "127.8.9.10"),
        AZURITE.replace("127.0.0.1", "[::1]"),
        f"AccountName=devstoreaccount1;SharedAccessSignature={SAS};TableEndpoint={LOCAL}",
        f"accountname=devstoreaccount1;accountkey={DEV_KEY};tableendpoint={LOCAL}",
        "TableEndpoint=https://acct.table.core.windows.net/",  # no secret: nothing to guard
    ],
    ids=["dev-storage", "dev-storage-lower", "azurite", "localhost", "loopback-8", "ipv6-loopback", "azurite-sas",
         "azurite-lower-case-keys", "no-secret"],
)
def test_accepts_loopback_azurite_and_secret_free_strings(connection: str) -> None:
    assert StorageSettings.from_environment({"AzureWebJobsStorage": connection}).connection_string == connection


@pytest.mark.parametrize(
    ("connection", "kind"),
    [
        ("DefaultEndpointsProtocol=https;AccountName=prod;AccountKey=c2VjcmV0;EndpointSuffix=core.windows.net", "account key"),
        ("DefaultEndpointsProtocol=https;AccountName=prod;accountkey=c2VjcmV0;EndpointSuffix=core.windows.net", "account key"),
        ("DefaultEndpointsProtocol=https;AccountName=prod;ACCOUNTKEY=c2VjcmV0", "account key"),
        (f"TableEndpoint=https://prod.table.core.windows.net/;SharedAccessSignature={SAS}", "shared access signature"),
        (f"tableendpoint=https://prod.table.core.windows.net/;sharedaccesssignature={SAS}", "shared access signature"),
        # a string that merely mentions devstoreaccount1 is not local Azurite
        ("AccountName=prod;AccountKey=c2VjcmV0;TableEndpoint=https://prod.table.core.windows.net/devstoreaccount1", "account key"),
        (f"AccountName=devstoreaccount1;AccountKey={DEV_KEY};EndpointSuffix=core.windows.net", "account key"),
        (f"AccountName=devstoreaccount1;AccountKey={DEV_KEY}", "account key"),
        (f"AccountName=devstoreaccount1;AccountKey={DEV_KEY};TableEndpoint=http://10.0.0.5:10002/devstoreaccount1", "account key"),
        (f"AccountName=devstoreaccount1;AccountKey={DEV_KEY};TableEndpoint=http://localhost.evil.example/devstoreaccount1",
         "account key"),
        (f"AccountName=devstoreaccount1;AccountKey={DEV_KEY};TableEndpoint={LOCAL};"
         "QueueEndpoint=https://prod.queue.core.windows.net/", "account key"),
        (f"AccountName=devstoreaccount1;AccountKey={DEV_KEY};TableEndpoint={LOCAL};EndpointSuffix=core.windows.net",
         "account key"),
        (f"AccountName=prod;AccountKey=c2VjcmV0;TableEndpoint={LOCAL}", "account key"),
        (f"AccountName=devstoreaccount1;AccountKey={DEV_KEY};TableEndpoint=not a url", "account key"),
        (f"AccountName=devstoreaccount1;AccountKey={DEV_KEY};TableEndpoint=http://[::1", "account key"),
    ],
    ids=["cloud-key", "lower-case-key", "upper-case-key", "cloud-sas", "lower-case-sas", "mentions-devstoreaccount1",
         "azurite-account-in-cloud", "azurite-account-no-endpoints", "private-address", "localhost-prefix",
         "one-cloud-endpoint", "suffix-with-endpoint", "other-account-on-loopback", "garbage-endpoint", "broken-ipv6"],
)
def test_rejects_secrets_for_anything_but_loopback_azurite_naming_the_setting(connection: str, kind: str) -> None:
    with pytest.raises(SettingsError, match=rf"^AzureWebJobsStorage carries an? {kind} .*AzureWebJobsStorage__accountName"):
        StorageSettings.from_environment({"AzureWebJobsStorage": connection})


def test_the_error_names_the_setting_it_was_read_from() -> None:
    with pytest.raises(SettingsError, match=r"^CHECKPOINTS carries an account key"):
        StorageSettings.from_environment({"CHECKPOINTS": "AccountName=prod;AccountKey=c2VjcmV0"}, prefix="CHECKPOINTS")


@pytest.mark.parametrize(
    ("connection", "local"),
    [("UseDevelopmentStorage=false", False), ("AccountName=devstoreaccount1", False),
     (f"AccountName=devstoreaccount1;BlobEndpoint={LOCAL}", True), ("", False)],
)
def test_what_counts_as_local_azurite(connection: str, local: bool) -> None:
    assert is_local_azurite(connection) is local


def test_a_command_connection_string_is_guarded_like_the_app_setting() -> None:
    from scaling.settings import command_storage

    with pytest.raises(SettingsError, match="AzureWebJobsStorage"):
        command_storage("DefaultEndpointsProtocol=https;AccountName=prod;AccountKey=c2VjcmV0;EndpointSuffix=core.windows.net")
    local = ("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;"
             "BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;QueueEndpoint=http://127.0.0.1:2/devstoreaccount1;"
             "TableEndpoint=http://127.0.0.1:3/devstoreaccount1;")
    assert command_storage(local).connection_string == local
    assert command_storage(None, {"AzureWebJobsStorage__accountName": "prod"}).account_name == "prod"
