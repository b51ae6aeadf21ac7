#!/usr/bin/env bash
# Policy-check the Bicep under infra/ with checkov (offline: no Bicep CLI needed).
#
# checkov pins an older pycep-parser than the one the test virtualenv uses, so it lives in its
# own virtualenv, .venv-checkov, created here on first use (PyPI must be reachable then).
# Settings, including every skipped check and its reason, are in .checkov.yaml (CHECKOV_CONFIG
# overrides the path; the tests use it to prove that a failure is reported).
#
# Usage: scripts/checkov.sh [extra checkov arguments...]
# Exit status: 0 only when checkov ran, scanned at least one resource, no check failed and every
# file parsed; non-zero otherwise (checkov skips files it cannot parse without failing).
set -euo pipefail

CHECKOV_VERSION="3.3.30"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CHECKOV_VENV:-$ROOT/.venv-checkov}"
PYTHON="${PYTHON:-python3}"
CONFIG="${CHECKOV_CONFIG:-$ROOT/.checkov.yaml}"

cd "$ROOT"

# The installed version from the package metadata (`checkov --version` imports all of checkov:
# seconds per run).
installed_version() {
    [ -x "$VENV/bin/checkov" ] || return 0
    "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("checkov"))' 2>/dev/null || true
}

if [ "$(installed_version)" != "$CHECKOV_VERSION" ]; then
    # Runs started together (tests/infra/test_checkov.py starts three) install it once.
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$VENV.lock"
        flock 9
    fi
    if [ "$(installed_version)" != "$CHECKOV_VERSION" ]; then
        echo "Creating $VENV with checkov==$CHECKOV_VERSION ..." >&2
        "$PYTHON" -m venv "$VENV"
        "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
        "$VENV/bin/python" -m pip install --quiet "checkov==$CHECKOV_VERSION" >&2
    fi
    exec 9>&-
fi

# No calls to the Prisma Cloud platform (guidelines mapping, policy download, result upload).
export BC_SKIP_MAPPING=TRUE
export LOG_LEVEL="${LOG_LEVEL:-WARNING}"

output="$(mktemp)"
trap 'rm -f "$output"' EXIT

status=0
"$VENV/bin/checkov" --config-file "$CONFIG" "$@" >"$output" 2>&1 || status=$?
cat "$output"

summary="$(grep -E '^Passed checks: [0-9]+, Failed checks: [0-9]+' "$output" || true)"
if [ -z "$summary" ]; then
    echo "checkov.sh: no bicep scan summary in checkov's output (exit status $status)" >&2
    exit $(( status == 0 ? 1 : status ))
fi
if [ "$status" -ne 0 ]; then
    echo "checkov.sh: checkov failed ($summary)" >&2
    exit "$status"
fi
if grep -qE 'Parsing errors: [1-9]' <<<"$summary"; then
    echo "checkov.sh: some Bicep files could not be parsed ($summary)" >&2
    exit 1
fi
if grep -qE '^Passed checks: 0, Failed checks: 0' <<<"$summary"; then
    echo "checkov.sh: checkov scanned nothing ($summary)" >&2
    exit 1
fi
echo "checkov.sh: OK ($summary)"
