"""The short demo run that tests/e2e/test_demo.py and tests/e2e/test_report_browser.py share
(one per session: the ``demo_run`` fixture in tests/e2e/conftest.py).

The demo starts and stops its own Azurite. Just before the demo stops it, the report command
reads the decision table from it, so both sets of tests see the same run and the demo's own
``stop()`` still stops Azurite for real (test_demo checks that).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from scaling.local.azurite import Azurite
from scaling.local.demo import DemoOptions, run_demo

LOW, HIGH = 150, 1000
BEFORE, SURGE, AFTER = 20, 25, 30
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "out"
REPORT = ARTIFACTS / "report-browser.html"


def write_trace(path: Path) -> Path:
    counts = [LOW] * BEFORE + [HIGH] * SURGE + [LOW] * AFTER
    path.write_text("minute_index,arrivals\n" + "".join(f"{i},{c}\n" for i, c in enumerate(counts)), encoding="utf-8")
    return path


class RecordingAzurite(Azurite):
    """The demo's own Azurite, remembered so the tests can check it was stopped; ``before_stop``
    runs with its endpoints when the demo stops it (the tables are still there then)."""

    started: list[RecordingAzurite] = []

    def __init__(self, before_stop=None) -> None:
        super().__init__()
        self.before_stop = before_stop

    def start(self, timeout: float = 30.0):
        endpoints = super().start(timeout)
        self.pid = self.process.pid
        self.ports = (endpoints.blob_port, endpoints.queue_port, endpoints.table_port)
        RecordingAzurite.started.append(self)
        return endpoints

    def stop(self) -> None:
        try:
            if self.before_stop is not None and self.running:
                self.before_stop(self.endpoints)
        finally:
            super().stop()


@dataclass(frozen=True, slots=True)
class DemoRun:
    """What the shared demo produced: its options, result and terminal output, and the report
    command's exit code (or its exception) and page, built from the demo's tables."""

    options: DemoOptions
    result: Any
    output: str
    report_code: int | None
    report_error: BaseException | None
    report: Path


def run_shared_demo(folder: Path) -> DemoRun:
    """The demo over the surge trace, live output on, and the report page built from its tables."""
    from scaling.__main__ import main as scaling_main
    from scaling.simulation.peers.looped import EPOCH

    options = DemoOptions(trace=write_trace(folder / "surge.csv"), minutes=None, start=0, out=folder / "out", live=True)
    report: dict[str, Any] = {"code": None, "error": None}

    def build_report(endpoints) -> None:
        try:
            ARTIFACTS.mkdir(exist_ok=True)
            report["code"] = scaling_main([
                "report", "--target", "demo", "--connection-string", endpoints.connection_string,
                "--since", (EPOCH - timedelta(minutes=5)).isoformat(),
                "--until", (EPOCH + timedelta(hours=3)).isoformat(), "--slo-seconds", "300", "--out", str(REPORT)])
        except Exception as error:  # reported by the tests that need the page, not by every demo test
            report["error"] = error

    stream = io.StringIO()
    RecordingAzurite.started.clear()
    result = run_demo(options, stream=stream, azurite_factory=lambda: RecordingAzurite(before_stop=build_report))
    return DemoRun(options, result, stream.getvalue(), report["code"], report["error"], REPORT)
