"""checkov policy checks over infra/ (bicep framework), through scripts/checkov.sh, which keeps
checkov in its own virtualenv (.venv-checkov: checkov pins an older pycep-parser).

The first run creates that virtualenv from PyPI and takes a minute or two. Set SKIP_CHECKOV=1 to
skip these tests (and only then).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "checkov.sh"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("SKIP_CHECKOV") == "1", reason="SKIP_CHECKOV=1"),
]

SUMMARY = re.compile(r"Passed checks: (\d+), Failed checks: (\d+), Skipped checks: (\d+)(?:, Parsing errors: (\d+))?")


WEAK_STORAGE = """resource st 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: 'stweak'
  location: 'westeurope'
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    supportsHttpsTrafficOnly: false
    minimumTlsVersion: 'TLS1_0'
  }
}
"""
FINE_CONTAINER = ("resource c 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {\n"
                  "  name: 'st/default/c'\n  properties: {\n    publicAccess: 'None'\n  }\n}\n")
BROKEN = "param x string\nvar y = %%\n"


def start_checkov(config: Path | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ)
    if config is not None:
        env["CHECKOV_CONFIG"] = str(config)
    return subprocess.Popen(["bash", str(SCRIPT)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        stdout, stderr = process.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def config_for(directory: Path, tmp_path: Path) -> Path:
    config = tmp_path / "checkov.yaml"
    config.write_text(
        f"directory:\n  - {directory}\nframework:\n  - bicep\ncompact: true\nskip-download: true\n",
        encoding="utf-8",
    )
    return config


def infra_with(folder: Path, files: dict[str, str]) -> Path:
    """A config scanning ``folder/infra`` holding ``files`` (name: Bicep text)."""
    infra = folder / "infra"
    infra.mkdir()
    for name, text in files.items():
        (infra / name).write_text(text, encoding="utf-8")
    return config_for(infra, folder)


@pytest.fixture(scope="module")
def checkov_runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess[str]]:
    """The three runs of scripts/checkov.sh these tests look at, started together (each is one
    single-threaded checkov process, mostly start-up: side by side they take well under the
    sum of their times) and each waited for: over infra/ with .checkov.yaml, over a storage account that fails a
    check, and over a folder where one file does not parse."""
    weak = infra_with(tmp_path_factory.mktemp("checkov-weak"), {"weak.bicep": WEAK_STORAGE})
    broken = infra_with(tmp_path_factory.mktemp("checkov-broken"), {"fine.bicep": FINE_CONTAINER, "broken.bicep": BROKEN})
    infra = start_checkov()
    if not (Path(os.environ.get("CHECKOV_VENV", ROOT / ".venv-checkov")) / "bin" / "checkov").exists():
        infra = finish(infra)  # this run creates the virtualenv: the others wait for it (no flock everywhere)
    started = {"infra": infra, "weak": start_checkov(weak), "broken": start_checkov(broken)}
    return {name: run if isinstance(run, subprocess.CompletedProcess) else finish(run) for name, run in started.items()}


def test_infra_passes_checkov(checkov_runs) -> None:
    result = checkov_runs["infra"]
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    summary = SUMMARY.search(output)
    assert summary, output
    passed, failed, _, parsing_errors = summary.groups()
    assert "Failed checks: 0" in output
    assert int(failed) == 0
    assert int(parsing_errors or 0) == 0
    assert int(passed) >= 15, f"checkov ran too few checks, did it scan infra/? {summary.group(0)}"


def test_script_fails_on_a_failed_check(checkov_runs) -> None:
    result = checkov_runs["weak"]
    assert result.returncode != 0
    assert "CKV_AZURE_3" in result.stdout and "FAILED" in result.stdout


def test_script_fails_when_a_file_does_not_parse(checkov_runs) -> None:
    """checkov itself exits 0 when it cannot parse a file; the script must not."""
    result = checkov_runs["broken"]
    assert result.returncode != 0
    assert "could not be parsed" in result.stderr
