"""Where the public traces live: ``data/traces`` in the repository, so that a clone alone runs the
demo, the tests and the benchmark (``data/traces/README.md`` gives each trace's source, terms and
citation, and ``SHA256SUMS`` the bytes every committed figure was measured on)."""

from __future__ import annotations

import argparse
from pathlib import Path

#: The folder of the public per-minute traces, one subfolder each.
PUBLIC_TRACES = Path(__file__).resolve().parents[3] / "data" / "traces"
WORLDCUP98 = PUBLIC_TRACES / "worldcup98" / "per_minute.csv"
NASA_JUL95 = PUBLIC_TRACES / "nasa_jul95" / "per_minute.csv"
AZURE_LLM2023_CODE = PUBLIC_TRACES / "azure_llm2023_code" / "per_minute.csv"


def existing_trace(value: str) -> str:
    """An argparse ``type`` for ``--trace``: a path that is not a file is a usage error (``error:``
    naming it, exit 2) before any work starts, not a traceback minutes into a run."""
    if not Path(value).is_file():
        raise argparse.ArgumentTypeError(f"no such file: {value} (the public traces ship in data/traces)")
    return value
