"""``simulate --report``: the same page from a simulation, with the engine's decisions logged as
evaluate logs them."""

from __future__ import annotations

import json
import re
from pathlib import Path

from scaling.__main__ import main


def write_trace(path: Path) -> Path:
    """Flat low, a surge, low again: scale-outs and scale-ins in 75 minutes."""
    counts = [150] * 20 + [1000] * 25 + [150] * 30
    path.write_text("minute,arrivals\n" + "".join(f"{i},{c}\n" for i, c in enumerate(counts)), encoding="utf-8")
    return path


def test_simulate_writes_the_report_page(tmp_path: Path, capsys) -> None:
    trace = write_trace(tmp_path / "surge.csv")
    page, summary = tmp_path / "pages" / "sim.html", tmp_path / "sim.json"
    assert main(["simulate", "--trace", str(trace), "--json", str(summary), "--report", str(page)]) == 0
    capsys.readouterr()
    html = page.read_text(encoding="utf-8")
    rows = re.findall(r'data-direction="([^"]+)" data-reason="[^"]+" data-acts="(true|false)"', html)
    acting = [direction for direction, acts in rows if acts == "true"]
    # One row per scale action the simulation counted, and the holds between them.
    assert len(acting) == json.loads(summary.read_text())["scale_actions"] > 0
    assert {"up", "down"} <= set(acting) and "hold" in {direction for direction, _ in rows}
    assert f'<b id="acting-count">{len(acting)}</b>' in html
    assert "SLO: oldest event under 300 s" in html and "simulate --trace" in html


def test_simulate_without_report_writes_no_page(tmp_path: Path, capsys) -> None:
    trace = write_trace(tmp_path / "surge.csv")
    assert main(["simulate", "--trace", str(trace), "--json", str(tmp_path / "sim.json")]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sim.json", "surge.csv"]


def test_simulate_runs_a_policy_s_look_ahead_and_the_page_draws_what_it_expected(tmp_path: Path, capsys) -> None:
    """``forecast: shadow`` in the simulated policy: the engine is told the outlook learned from
    the arrivals so far (two days of history before it may trust a profile), its decisions log
    what it expected, and the report page draws those expectations beside the arrivals."""
    minutes = range(int(2.5 * 24 * 60))
    counts = [round(200 * (1 + 4 * 2.718281828 ** (-(minute % 60) / 4.0))) for minute in minutes]  # a jump every hour
    trace = tmp_path / "hourly.csv"
    trace.write_text("minute,arrivals\n" + "".join(f"{i},{c}\n" for i, c in enumerate(counts)), encoding="utf-8")
    document = json.loads((Path(__file__).parents[2] / "policy.sample.json").read_text(encoding="utf-8"))
    target = {**document["targets"][0], "forecast": "shadow", "profiles": []}
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({**document, "targets": [target]}), encoding="utf-8")
    page = tmp_path / "sim.html"
    assert main(["simulate", "--trace", str(trace), "--policy", str(policy), "--json", str(tmp_path / "sim.json"),
                 "--report", str(page)]) == 0
    capsys.readouterr()
    assert "expected by the look-ahead" in page.read_text(encoding="utf-8")
