#!/usr/bin/env bash
# Policy-check the Bicep under infra/ with checkov (offline: no Bicep CLI needed).
#
# checkov pins an older pycep-parser than the one the test virtualenv uses, so it lives in its
# own virtualenv, .venv-checkov, created here on first use.
#
# Usage: scripts/checkov.sh [extra checkov arguments...]
# Exit status: 0 when no check failed, non-zero when a check failed, a file could not be parsed,
# or checkov could not run.
set -euo pipefail

CHECKOV_VERSION="3.3.30"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CHECKOV_VENV:-$ROOT/.venv-checkov}"
PYTHON="${PYTHON:-python3}"

cd "$ROOT"

if ! "$VENV/bin/checkov" --version 2>/dev/null | grep -qx "$CHECKOV_VERSION"; then
    echo "Creating $VENV with checkov==$CHECKOV_VERSION ..." >&2
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
    "$VENV/bin/python" -m pip install --quiet "checkov==$CHECKOV_VERSION" >&2
fi

# checkov would otherwise phone home (version check, Prisma Cloud guidelines, telemetry).
export BC_SKIP_MAPPING=TRUE
export CHECKOV_RUN_SCA_PACKAGE_SCAN_V2=false
export LOG_LEVEL="${LOG_LEVEL:-WARNING}"

# --framework and --directory come from .checkov.yaml; the exit code is checkov's own
# (1 when any check failed; soft-fail is off).
exec "$VENV/bin/checkov" --config-file "$ROOT/.checkov.yaml" "$@"
