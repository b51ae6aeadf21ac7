#!/bin/sh
# azd post-provision hook: writes local.settings.json so that `func start` runs the autoscaler
# locally with the settings azd just deployed (azd passes its environment values, i.e. the
# outputs of infra/main.bicep, to hooks as environment variables).
#
# Run by hand as well: outside a hook the values are read with `azd env get-values` ($AZD).
#
#   LOCAL_STORAGE=azurite (default)  host storage, queues and tables in Azurite
#                                    (AzureWebJobsStorage=UseDevelopmentStorage=true)
#   LOCAL_STORAGE=azure              the deployed storage account, identity-based, as the
#                                    signed-in developer (needs data roles on that account)
#   LOCAL_SCALER_DRY_RUN=true        (default) locally the autoscaler decides but never resizes
#   LOCAL_SETTINGS_PATH=...          output file (default: local.settings.json at the repo root)
#
# No key or connection string is written except Azurite's well-known development shortcut.
# An existing file is kept as <file>.bak.
set -eu

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
export LOCAL_SETTINGS_PATH="${LOCAL_SETTINGS_PATH:-$ROOT/local.settings.json}"

AZD="${AZD:-azd}"
AZD_VALUES=""
if [ -z "${AUTOSCALER_POLICY:-}" ] && command -v "$AZD" >/dev/null 2>&1; then
    AZD_VALUES="$("$AZD" env get-values --output json)"
fi
export AZD_VALUES

exec "$PYTHON" - <<'PY'
import json
import os
import shutil
import sys

values = dict(os.environ)
if os.environ.get("AZD_VALUES"):
    values.update(json.loads(os.environ["AZD_VALUES"]))


def fail(message: str) -> None:
    print(f"write-local-settings: {message}", file=sys.stderr)
    sys.exit(1)


def required(name: str) -> str:
    value = values.get(name, "")
    if not value:
        fail(f"{name} is not set: run `azd provision` first (it is an output of infra/main.bicep)")
    return value


policy = required("AUTOSCALER_POLICY")
try:
    json.loads(policy)
except ValueError as error:
    fail(f"AUTOSCALER_POLICY is not valid JSON: {error}")

mode = values.get("LOCAL_STORAGE", "azurite")
settings = {"FUNCTIONS_WORKER_RUNTIME": "python", "AzureWebJobsFeatureFlags": "EnableWorkerIndexing"}
if mode == "azurite":
    settings["AzureWebJobsStorage"] = "UseDevelopmentStorage=true"
elif mode == "azure":
    # Identity-based like in Azure, but as the developer (DefaultAzureCredential: az/azd login),
    # so no __credential/__clientId and no AZURE_CLIENT_ID (the managed identity only exists in Azure).
    settings["AzureWebJobsStorage__accountName"] = required("AZURE_STORAGE_ACCOUNT_NAME")
    settings["AzureWebJobsStorage__blobServiceUri"] = required("AZURE_STORAGE_BLOB_ENDPOINT")
    settings["AzureWebJobsStorage__queueServiceUri"] = required("AZURE_STORAGE_QUEUE_ENDPOINT")
    settings["AzureWebJobsStorage__tableServiceUri"] = required("AZURE_STORAGE_TABLE_ENDPOINT")
else:
    fail(f"LOCAL_STORAGE must be azurite or azure, got {mode!r}")

settings.update(
    {
        "AUTOSCALER_POLICY": policy,
        "COLLECT_SCHEDULE": values.get("COLLECT_SCHEDULE") or "0 */1 * * * *",
        "SCALER_DRY_RUN": values.get("LOCAL_SCALER_DRY_RUN") or "true",
        "HISTORY_RETENTION_DAYS": values.get("HISTORY_RETENTION_DAYS") or "30",
        "OWNERSHIP_EXPIRY_SECONDS": values.get("OWNERSHIP_EXPIRY_SECONDS") or "60",
    }
)

path = os.environ["LOCAL_SETTINGS_PATH"]
document = json.dumps({"IsEncrypted": False, "Values": settings}, indent=2) + "\n"
if os.path.exists(path):
    with open(path, encoding="utf-8") as existing:
        if existing.read() != document:
            shutil.copyfile(path, path + ".bak")
with open(path, "w", encoding="utf-8") as output:
    output.write(document)
dry_run = settings["SCALER_DRY_RUN"]
print(f"write-local-settings: wrote {path} (storage: {mode}, SCALER_DRY_RUN={dry_run})")
PY
