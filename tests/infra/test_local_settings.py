"""scripts/write-local-settings.sh (the azd post-provision hook): from azd environment values to a
local.settings.json that the app's own settings loader accepts, without any key."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from scaling.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "write-local-settings.sh"


@pytest.fixture
def azd_values() -> dict[str, str]:
    """What `azd provision` stores from infra/main.bicep's outputs, for the example parameters."""
    parameters = json.loads((ROOT / "infra" / "main.parameters.json").read_text(encoding="utf-8"))["parameters"]
    return {
        "AUTOSCALER_POLICY": json.dumps(parameters["autoscalerPolicy"]["value"], separators=(",", ":")),
        "COLLECT_SCHEDULE": "0 */2 * * * *",
        "SCALER_DRY_RUN": "false",
        "HISTORY_RETENTION_DAYS": "14",
        "OWNERSHIP_EXPIRY_SECONDS": "90",
        "AZURE_STORAGE_ACCOUNT_NAME": "stabc123",
        "AZURE_STORAGE_BLOB_ENDPOINT": "https://stabc123.blob.core.windows.net/",
        "AZURE_STORAGE_QUEUE_ENDPOINT": "https://stabc123.queue.core.windows.net/",
        "AZURE_STORAGE_TABLE_ENDPOINT": "https://stabc123.table.core.windows.net/",
        "AZURE_CLIENT_ID": "00000000-0000-0000-0000-0000000000aa",
    }


def write(tmp_path: Path, values: dict[str, str], **extra: str) -> subprocess.CompletedProcess[str]:
    # AZD points nowhere: the script must use the values given here, never a real azd environment.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "AZD": str(tmp_path / "no-azd"), **values, **extra}
    env["LOCAL_SETTINGS_PATH"] = str(tmp_path / "local.settings.json")
    return subprocess.run(["sh", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)


def read(tmp_path: Path) -> dict[str, str]:
    document = json.loads((tmp_path / "local.settings.json").read_text(encoding="utf-8"))
    assert document["IsEncrypted"] is False
    return document["Values"]


def test_azurite_settings_load_and_default_to_dry_run(tmp_path: Path, azd_values: dict[str, str]) -> None:
    result = write(tmp_path, azd_values)
    assert result.returncode == 0, result.stderr
    values = read(tmp_path)
    assert values["AzureWebJobsStorage"] == "UseDevelopmentStorage=true"
    assert values["SCALER_DRY_RUN"] == "true"
    assert "AZURE_CLIENT_ID" not in values  # the managed identity exists only in Azure
    settings = Settings.from_environment(values)
    assert settings.dry_run is True
    assert settings.schedule == "0 */2 * * * *"
    assert settings.history_retention_days == 14
    assert settings.ownership_expiry_seconds == 90
    assert [target.name for target in settings.policy.targets] == ["orders-consumers"]


def test_azure_storage_settings_are_identity_based(tmp_path: Path, azd_values: dict[str, str]) -> None:
    result = write(tmp_path, azd_values, LOCAL_STORAGE="azure", LOCAL_SCALER_DRY_RUN="false")
    assert result.returncode == 0, result.stderr
    values = read(tmp_path)
    assert "AzureWebJobsStorage" not in values
    assert values["AzureWebJobsStorage__accountName"] == "stabc123"
    assert not any("AccountKey" in value for value in values.values())
    settings = Settings.from_environment(values)
    assert settings.dry_run is False
    assert settings.storage.connection_string is None
    assert settings.storage.queue_service_uri == "https://stabc123.queue.core.windows.net/"


def test_existing_file_is_kept_as_backup(tmp_path: Path, azd_values: dict[str, str]) -> None:
    (tmp_path / "local.settings.json").write_text('{"Values": {"MINE": "1"}}', encoding="utf-8")
    assert write(tmp_path, azd_values).returncode == 0
    assert json.loads((tmp_path / "local.settings.json.bak").read_text(encoding="utf-8")) == {"Values": {"MINE": "1"}}


@pytest.mark.parametrize(
    ("drop", "extra", "message"),
    [
        ("AUTOSCALER_POLICY", {}, "AUTOSCALER_POLICY is not set"),
        (None, {"AUTOSCALER_POLICY": "{not json"}, "AUTOSCALER_POLICY is not valid JSON"),
        ("AZURE_STORAGE_ACCOUNT_NAME", {"LOCAL_STORAGE": "azure"}, "AZURE_STORAGE_ACCOUNT_NAME is not set"),
        (None, {"LOCAL_STORAGE": "cloud"}, "LOCAL_STORAGE must be azurite or azure"),
    ],
)
def test_missing_or_bad_values_fail_with_the_name(
    tmp_path: Path, azd_values: dict[str, str], drop: str | None, extra: dict[str, str], message: str
) -> None:
    values = {k: v for k, v in azd_values.items() if k != drop}
    result = write(tmp_path, {**values, **extra})
    assert result.returncode != 0
    assert message in result.stderr
    assert not (tmp_path / "local.settings.json").exists()
