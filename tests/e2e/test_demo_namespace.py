"""``make demo DEMO_ARGS="--source namespace"`` end to end, short: the production collect,
evaluate and scale services size a namespace's throughput units and the consumers' plan together,
on a real Azurite (started and stopped by the demo), through the real azure-mgmt-eventhub,
azure-mgmt-web and azure-monitor-query clients against the local ARM endpoint (there is no Event
Hubs, ARM or Azure Monitor emulator: a local stand-in behind the same HTTP interface). A
synthetic surge keeps it to 40 simulated minutes."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from scaling.local.demo.config import DemoOptions
from scaling.local.demo.namespace import CONSUMERS, NAMESPACE_TARGET, run_namespace_demo

pytestmark = pytest.mark.slow


def write_surge(path: Path) -> Path:
    """5 quiet minutes, a 30-minute rise of 8% a minute (a surge TUs can follow: headroom 20%,
    a TU change serves a minute later), 5 minutes at the top."""
    counts = [500] * 5 + [round(500 * 1.08 ** step) for step in range(1, 31)] + [round(500 * 1.08 ** 30)] * 5
    path.write_text("minute,arrivals\n" + "".join(f"{index},{count}\n" for index, count in enumerate(counts)), encoding="utf-8")
    return path


def test_tus_and_consumers_scale_together_and_the_report_shows_both(tmp_path: Path) -> None:
    trace = write_surge(tmp_path / "surge.csv")
    out = tmp_path / "out"
    out.mkdir()
    summary = run_namespace_demo(DemoOptions(trace=trace, minutes=None, start=0, out=out, live=False, source="namespace"))
    assert summary["minutes"] == 40 and summary["rejected_events"] == 0
    assert summary["plan_writes"] > 0 and summary["tu_writes"] > 0
    with open(out / "minutes.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert max(int(row["throughput_units"]) for row in rows) > int(rows[0]["throughput_units"])
    assert max(int(row["capacity"]) for row in rows) > int(rows[0]["capacity"])
    page = Path(summary["report"]).read_text(encoding="utf-8")
    assert "namespace TUs" in page and CONSUMERS in page and NAMESPACE_TARGET in page
