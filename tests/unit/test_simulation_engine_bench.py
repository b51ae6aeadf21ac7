"""``bench-engine``: the worker replays a trace through the engine in this tree and reports."""

from __future__ import annotations

import argparse
import json
import math

from scaling.benchmarks import engine_speed as engine_bench


def test_bench_engine_replays_this_tree_and_reports_the_rate(tmp_path, capsys) -> None:
    trace = tmp_path / "per_minute.csv"
    trace.write_text("minute,count\n" + "".join(f"{minute},{1000 + 400 * math.sin(minute / 20):.0f}\n"
                                                for minute in range(180)), encoding="utf-8")
    parser = argparse.ArgumentParser()
    engine_bench.configure(parser)
    written = tmp_path / "bench.json"
    args = parser.parse_args(["--trace", str(trace), "--days", str(120 / 1440), "--rounds", "2", "--json", str(written)])
    assert engine_bench.run(args) == 0
    printed = capsys.readouterr().out
    assert "simulated minutes per CPU-second" in printed and "this tree" in printed
    (rounds,) = json.loads(written.read_text(encoding="utf-8"))["trees"].values()
    assert len(rounds) == 2 and all(measured["minutes"] == 120 and measured["cpu_seconds"] > 0 for measured in rounds)
    assert rounds[0]["cost"] == rounds[1]["cost"]  # the same replay, the same decisions
