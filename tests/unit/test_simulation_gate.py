"""The benchmark's regression gate (scaling/benchmarks/gate.py and ``--gate``): each failing
condition named, on small synthetic rows; a run no dearer passes with exit code 0."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from scaling.benchmarks import family_cli, gate
from scaling.simulation.world.traces import PUBLIC_TRACES

MEMBERS = ("family/flash-seed1-noise02", "family/steps-seed2-noise05", "family/spikes-seed3-noise10")
PUBLIC = "worldcup98/per_minute.csv"
#: A trace file that exists (``--trace`` checks that it does).
TRACE = PUBLIC_TRACES / PUBLIC


def row(trace: str, cost: float, *, scenario: str = "standard", violations: int = 0, meets: bool = True,
        algorithm: str = "project-default", avoidable: int | None = None) -> dict:
    """A benchmark row (``avoidable``: its avoidable violation minutes, when some partition is unservable)."""
    return {"scenario": scenario, "trace": trace, "algorithm": algorithm, "knob": "default", "cost_ratio": cost,
            "slo_violation_minutes": violations, "meets_slo": meets, "minutes": 20160, "scale_actions": 400, "best": meets,
            **({} if avoidable is None else {"avoidable_violation_minutes": avoidable})}


BASE = [row(MEMBERS[0], 1.20), row(MEMBERS[1], 1.30), row(MEMBERS[2], 1.40), row(PUBLIC, 1.168),
        row(MEMBERS[0], 1.50, scenario="realistic"), row(MEMBERS[1], 1.60, scenario="realistic"),
        row(MEMBERS[2], 1.70, scenario="realistic", violations=30, meets=False)]


def changed(**changes: dict) -> list[dict]:
    """BASE with some rows changed, keyed by ``scenario|trace``."""
    out = []
    for original in BASE:
        key = f"{original['scenario']}|{original['trace']}"
        out.append({**original, **changes.get(key, {})})
    return out


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        pytest.param(changed(), [], id="same-passes"),
        pytest.param(changed(**{f"standard|{MEMBERS[2]}": {"cost_ratio": 1.40 * 1.029}}), [], id="member-2.9%-dearer-passes"),
        pytest.param(changed(**{f"standard|{m}": {"cost_ratio": 0.9} for m in MEMBERS}), [], id="cheaper-passes"),
        pytest.param(changed(**{f"standard|{MEMBERS[1]}": {"cost_ratio": 1.30 * 1.035}}),
                     [f"standard {MEMBERS[1]}: cost 1.3000 -> 1.3455 (+3.5%, more than 3% dearer)",
                      "standard family median: cost 1.3000 -> 1.3455 (+3.5%, more than 1% dearer)"],
                     id="member-3.5%-dearer-also-moves-the-median"),
        pytest.param(changed(**{f"standard|{m}": {"cost_ratio": row_cost * 1.02} for m, row_cost in zip(MEMBERS, (1.2, 1.3, 1.4), strict=True)}),
                     ["standard family median: cost 1.3000 -> 1.3260 (+2.0%, more than 1% dearer)"],
                     id="every-member-2%-dearer-fails-only-the-median"),
        pytest.param(changed(**{f"standard|{MEMBERS[0]}": {"cost_ratio": 1.20 * 1.05}}),
                     [f"standard {MEMBERS[0]}: cost 1.2000 -> 1.2600 (+5.0%, more than 3% dearer)"],
                     id="member-dearer-below-the-median-leaves-it"),
        pytest.param(changed(**{f"standard|{PUBLIC}": {"cost_ratio": 1.168 * 1.04}}),
                     [f"standard {PUBLIC}: cost 1.1680 -> 1.2147 (+4.0%, more than 3% dearer)"],
                     id="public-trace-dearer"),
        pytest.param(changed(**{f"realistic|{MEMBERS[0]}": {"slo_violation_minutes": 25, "meets_slo": False}}),
                     [f"realistic {MEMBERS[0]}: misses the SLO (25 avoidable violation minutes; baseline 0 avoidable)"],
                     id="member-starts-missing-the-slo"),
        # realistic is judged by the avoidable minutes (20 allowed in 20,160): whole-hub minutes no count avoids do not miss
        pytest.param(changed(**{f"realistic|{MEMBERS[0]}": {"slo_violation_minutes": 291, "meets_slo": False,
                                                          "avoidable_violation_minutes": 20}}), [],
                     id="realistic-unavoidable-minutes-do-not-miss"),
        pytest.param(changed(**{f"realistic|{MEMBERS[0]}": {"slo_violation_minutes": 291, "meets_slo": False,
                                                          "avoidable_violation_minutes": 21}}),
                     [f"realistic {MEMBERS[0]}: misses the SLO (21 avoidable violation minutes; baseline 0 avoidable)"],
                     id="realistic-avoidable-minutes-past-the-allowance-miss"),
        pytest.param(changed(**{f"standard|{MEMBERS[0]}": {"slo_violation_minutes": 25, "meets_slo": False,
                                                         "avoidable_violation_minutes": 0}}),
                     [f"standard {MEMBERS[0]}: misses the SLO (25 whole hub violation minutes; baseline 0 whole hub)"],
                     id="standard-is-judged-on-the-whole-hub"),
        pytest.param(changed(**{f"realistic|{MEMBERS[2]}": {"slo_violation_minutes": 40}}), [],
                     id="a-member-that-missed-before-is-not-new"),
        pytest.param([r for r in BASE if r["trace"] != PUBLIC], [f"standard {PUBLIC}: not in this run"], id="row-missing"),
        pytest.param(changed() + [row("family/growth-seed4-noise20", 9.0)], [], id="new-rows-are-not-judged"),
    ],
)
def test_failures_name_each_row(current: list[dict], expected: list[str]) -> None:
    baseline = gate.gated_rows(BASE)
    assert sorted(gate.failures(baseline, gate.gated_rows(current))) == sorted(expected)


def test_only_the_gated_algorithm_is_compared() -> None:
    others = [{**r, "algorithm": "keda-hpa", "cost_ratio": 99.0, "meets_slo": False} for r in BASE]
    assert gate.failures(gate.gated_rows(BASE), gate.gated_rows(BASE + others)) == []


@pytest.mark.parametrize(
    ("current", "code", "words"),
    [
        pytest.param(changed(), 0, ["passed", "standard family median 1.3000"], id="pass"),
        pytest.param(changed(**{f"standard|{MEMBERS[1]}": {"cost_ratio": 2.0}}), 1,
                     ["FAILED, 2 row(s)", MEMBERS[1], "family median"], id="fail"),
    ],
)
def test_the_report_and_exit_code(current: list[dict], code: int, words: list[str]) -> None:
    found_code, text = gate.gate_report(gate.gated_rows(BASE), gate.gated_rows(current), "base.json")
    assert found_code == code
    for word in words:
        assert word in text


def test_a_baseline_round_trips_through_its_file(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(gate.baseline_document(BASE + [row(PUBLIC, 3.0, algorithm="seed")])), encoding="utf-8")
    algorithm, rows = gate.read_baseline(path)
    assert algorithm == "project-default"
    assert sorted(rows, key=lambda r: r.key) == sorted(gate.gated_rows(BASE), key=lambda r: r.key)


def test_a_baseline_says_each_rows_judge_and_reads_a_version_1_file_as_whole_hub(tmp_path: Path) -> None:
    """Version 2 rows carry the judge and the minutes it counts; a version 1 row (no judge) kept
    its whole-hub ``meets_slo``, and is read so."""
    judged = row(MEMBERS[0], 1.5, scenario="realistic", violations=291, meets=False, avoidable=3)
    [written] = gate.baseline_document([judged])["rows"]
    assert (written["judge"], written["judged_violation_minutes"], written["meets_slo"]) == ("avoidable", 3, True)
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"version": 1, "algorithm": "project-default", "rows": [
        {"scenario": "realistic", "trace": MEMBERS[0], "cost_ratio": 1.5, "slo_violation_minutes": 291, "meets_slo": False}]}),
        encoding="utf-8")
    [old] = gate.read_baseline(path)[1]
    assert (old.judge, old.judged_minutes, old.meets_slo) == ("whole hub", 291, False)


@pytest.mark.parametrize("text", ["not json", "{}", '{"rows": [{"trace": "x"}]}'])
def test_a_file_that_is_no_baseline_fails_naming_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "broken.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="broken.json: not a benchmark baseline"):
        gate.read_baseline(path)


@pytest.mark.parametrize(("current", "code"), [pytest.param(changed(), 0, id="pass"),
                                               pytest.param(changed(**{f"standard|{PUBLIC}": {"meets_slo": False}}), 1,
                                                            id="fail")])
def test_after_a_full_run_the_gate_sets_the_exit_code(tmp_path: Path, current: list[dict], code: int, capsys) -> None:
    path = tmp_path / "baseline.json"
    written = tmp_path / "new.json"
    family_cli.write_baseline(str(path), BASE)
    args = argparse.Namespace(gate=str(path), write_baseline=str(written))
    assert family_cli.after_run(args, current) == code
    assert ("FAILED" in capsys.readouterr().out) == bool(code)
    assert gate.read_baseline(written)[1] == sorted(gate.gated_rows(current), key=lambda r: r.key)


@pytest.mark.parametrize(
    ("argv", "alone"),
    [(["--gate", "b.json"], True), (["--gate", "b.json", "--family", "--json", "o.json"], False),
     (["--gate", "b.json", "--trace", str(TRACE), "--json", "o.json"], False), (["--trace", str(TRACE), "--json", "o.json"], False)],
)
def test_the_gate_runs_alone_only_without_traces(argv: list[str], alone: bool) -> None:
    from scaling.__main__ import build_parser

    args = build_parser(["benchmark", *argv]).parse_args(["benchmark", *argv])
    assert family_cli.gate_alone(args) is alone


@pytest.mark.parametrize(("argv", "message"), [([], "give --trace"), (["--family"], "--json PATH is needed")])
def test_a_run_without_traces_or_output_fails_naming_what_is_missing(argv: list[str], message: str) -> None:
    from scaling.__main__ import build_parser

    args = build_parser(["benchmark", *argv]).parse_args(["benchmark", *argv])
    with pytest.raises(SystemExit, match=message):
        family_cli.check_arguments(args)


def test_the_gate_alone_finds_public_traces_under_the_traces_folder(tmp_path: Path) -> None:
    (tmp_path / "worldcup98").mkdir()
    (tmp_path / "worldcup98" / "per_minute.csv").write_text("0,1\n", encoding="utf-8")
    assert family_cli.baseline_trace_path(PUBLIC, str(tmp_path)) == str(tmp_path / PUBLIC)
    assert family_cli.baseline_trace_path(MEMBERS[0], str(tmp_path)) == MEMBERS[0]
    with pytest.raises(SystemExit, match="nasa_jul95/per_minute.csv is not under --traces-dir"):
        family_cli.baseline_trace_path("nasa_jul95/per_minute.csv", str(tmp_path))


def test_regenerating_the_markdown_keeps_the_baseline_log(tmp_path: Path) -> None:
    page = tmp_path / "benchmark.md"
    assert family_cli.kept_sections(str(page)) == family_cli.EMPTY_LOG
    log = family_cli.EMPTY_LOG + "| 2026-11-25 | abc123 | the peak hold went: cheaper on 24 of 30 members |\n"
    page.write_text("# old\n" + family_cli.markdown_text([], log) + "tail\n", encoding="utf-8")
    assert family_cli.kept_sections(str(page)) == log


@pytest.mark.parametrize(("cost", "code"), [(1.168, 0), (1.25, 1)])
def test_the_gate_alone_runs_the_baselines_traces_and_scenarios_only(tmp_path: Path, cost: float, code: int, capsys) -> None:
    (tmp_path / "worldcup98").mkdir()
    (tmp_path / "worldcup98" / "per_minute.csv").write_text("0,1\n", encoding="utf-8")
    path = tmp_path / "baseline.json"
    baseline = [row(PUBLIC, 1.168), row(MEMBERS[0], 1.2, scenario="realistic")]
    family_cli.write_baseline(str(path), baseline)
    asked = []

    def fake_runs(runs, algorithm, workers):
        asked.append((sorted(runs), algorithm))
        return [row(PUBLIC, cost), row(MEMBERS[0], 1.2, scenario="realistic")]

    args = argparse.Namespace(gate=str(path), traces_dir=str(tmp_path), workers=1, json=None, write_baseline=None)
    assert family_cli.run_gate_alone(args, fake_runs) == code
    assert asked == [(sorted([(str(tmp_path / PUBLIC), "standard"), (MEMBERS[0], "realistic")]), "project-default")]
    assert (f"standard {PUBLIC}: cost 1.1680 -> 1.2500" in capsys.readouterr().out) == bool(code)
