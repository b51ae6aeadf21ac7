"""The public traces ship in the repository (data/traces): a clone alone runs the demo, the tests
and the benchmark, on exactly the bytes every committed figure was measured on."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scaling.local.demo.config import DEFAULT_TRACE
from scaling.simulation.world.traces import AZURE_LLM2023_CODE, NASA_JUL95, PUBLIC_TRACES, WORLDCUP98

REPOSITORY = Path(__file__).resolve().parents[2]


def checksums() -> dict[str, str]:
    lines = (PUBLIC_TRACES / "SHA256SUMS").read_text(encoding="utf-8").splitlines()
    return {name: digest for digest, name in (line.split() for line in lines if line.strip())}


@pytest.mark.parametrize("name", sorted(checksums()))
def test_every_trace_has_the_bytes_its_figures_were_measured_on(name: str) -> None:
    assert hashlib.sha256((PUBLIC_TRACES / name).read_bytes()).hexdigest() == checksums()[name]


def test_every_per_minute_trace_is_listed_in_the_checksums() -> None:
    shipped = {path.relative_to(PUBLIC_TRACES).as_posix() for path in PUBLIC_TRACES.glob("*/per_*.csv")}
    assert shipped == set(checksums())
    assert {WORLDCUP98, NASA_JUL95, AZURE_LLM2023_CODE} <= {PUBLIC_TRACES / name for name in shipped}


def test_the_terms_travel_with_the_traces() -> None:
    """The World Cup logs' terms ask for their notice to go with them; the LLM trace is CC-BY."""
    assert (PUBLIC_TRACES / "worldcup98" / "WorldCup.html").stat().st_size > 0
    assert "Attribution" in (PUBLIC_TRACES / "azure_llm2023_code" / "LICENSE").read_text(encoding="utf-8")
    readme = (PUBLIC_TRACES / "README.md").read_text(encoding="utf-8")
    for citation in ("Arlitt", "NASA-HTTP", "Splitwise"):
        assert citation in readme


def test_the_defaults_point_inside_the_repository() -> None:
    assert DEFAULT_TRACE == WORLDCUP98
    makefile = (REPOSITORY / "Makefile").read_text(encoding="utf-8")
    default = re.search(r"^TRACES \?= (\S+)$", makefile, re.MULTILINE)
    assert default is not None and (REPOSITORY / default.group(1)).resolve() == PUBLIC_TRACES


def test_nothing_in_the_repository_sends_a_reader_outside_it() -> None:
    """No code, Makefile, test, doc or help text names a folder beside the clone: a user has none."""
    outside = "../" + "shared"  # spelled in two parts so that this file passes its own test
    skipped = {".git", ".venv", ".venv-checkov", "node_modules", "out", "__pycache__", ".pytest_cache", ".ruff_cache"}
    texts = {".py", ".md", ".json", ".toml", ".txt", ".bicep", ".yaml", ".yml", ""}
    candidates = [path for path in REPOSITORY.rglob("*")
                  if path.is_file() and path.suffix in texts and not skipped & set(path.relative_to(REPOSITORY).parts)]
    naming = [str(path.relative_to(REPOSITORY)) for path in candidates
              if outside in path.read_text(encoding="utf-8", errors="ignore")]
    assert naming == []


@pytest.mark.parametrize("command", ["simulate", "benchmark", "stress", "optimum", "bench-engine"])
def test_a_missing_trace_on_the_command_line_is_a_usage_error_naming_it(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.csv"
    done = subprocess.run([sys.executable, "-m", "scaling", command, "--trace", str(missing), "--json", str(tmp_path / "x.json")],
                          capture_output=True, text=True, cwd=REPOSITORY, timeout=60)
    assert done.returncode == 2
    assert f"error: argument --trace: no such file: {missing}" in done.stderr
    assert "Traceback" not in done.stderr
