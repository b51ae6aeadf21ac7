"""``python -m scaling``: help for every subcommand, validate-policy and simulate, run as a user
would (a subprocess with this interpreter, from the repository root)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from scaling.__main__ import COMMANDS

REPO = Path(__file__).resolve().parents[2]
PLAN = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Web/serverfarms/asp"


def scaling(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scaling", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name.partition(":")[0]) is not None  # "module:suffix": a module's second command
    except ModuleNotFoundError:
        return False


def test_top_level_help_lists_every_subcommand() -> None:
    done = scaling("--help")
    assert done.returncode == 0, done.stderr
    for name in COMMANDS:
        assert name in done.stdout


def test_no_subcommand_is_a_usage_error() -> None:
    done = scaling()
    assert done.returncode == 2
    assert "usage:" in done.stderr


@pytest.mark.parametrize(("command", "module"), [(name, module) for name, (module, _) in COMMANDS.items()])
def test_each_subcommand_has_help(command: str, module: str) -> None:
    if not _module_exists(module):
        pytest.skip(f"{module} (subcommand {command!r}) does not exist yet")
    done = scaling(command, "--help")
    assert done.returncode == 0, done.stderr
    assert f"usage: python -m scaling {command}" in done.stdout


# --- validate-policy --------------------------------------------------------------------------------------------


def test_validate_policy_accepts_the_sample_policy() -> None:
    done = scaling("validate-policy", "policy.sample.json")
    assert done.returncode == 0, done.stderr
    assert "policy.sample.json: valid (2 target(s))" in done.stdout
    assert "orders-consumers: slo" in done.stdout
    assert "billing-workers: rules" in done.stdout


def _policy_file(tmp_path: Path, rule: dict) -> Path:
    document = {"version": 1, "targets": [{
        "name": "orders", "plan": {"resource_id": PLAN}, "mode": "rules",
        "sources": [{"kind": "servicebus", "name": "q", "fullyQualifiedNamespace": "ns.servicebus.windows.net", "queueName": "q",
                     "namespaceResourceId": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/ns"}],
        "rules": [{"name": "ok", "scale_up_above": 10, "scale_down_below": 1}, rule],
    }]}
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"name": "bad", "scale_up_above": 100, "scale_down_below": 200},
         "targets[0].rules[1].scale_down_below must be lower than scale_up_above"),
        ({"name": "bad", "scale_up_above": 100, "thresold": 5}, "targets[0].rules[1].thresold is not a known setting"),
        ({"name": "bad", "metric": "cpu", "scale_up_above": 100}, "targets[0].rules[1].metric must be one of"),
    ],
)
def test_validate_policy_names_the_field_and_exits_1(tmp_path: Path, rule: dict, message: str) -> None:
    path = _policy_file(tmp_path, rule)
    done = scaling("validate-policy", str(path))
    assert done.returncode == 1
    assert message in done.stderr
    assert str(path) in done.stderr
    assert "valid" not in done.stdout


def test_validate_policy_lists_every_problem_one_line_each(tmp_path: Path) -> None:
    path = _policy_file(tmp_path, {"name": "bad", "metric": "cpu", "window_seconds": 10**9, "scale_up_above": 100})
    done = scaling("validate-policy", str(path))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"{path}: targets[0].rules[1].metric must be one of backlog, backlog_per_instance, lag_seconds, got 'cpu'",
        f"{path}: targets[0].rules[1].window_seconds must be at most 86400, got 1000000000",
    ]


def test_validate_policy_invalid_json_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{", encoding="utf-8")
    done = scaling("validate-policy", str(path))
    assert done.returncode == 1
    assert "is not valid JSON" in done.stderr


def test_validate_policy_missing_file_exits_2(tmp_path: Path) -> None:
    done = scaling("validate-policy", str(tmp_path / "absent.json"))
    assert done.returncode == 2
    assert "cannot be read" in done.stderr


# --- simulate ------------------------------------------------------------------------------------------------------


@pytest.fixture
def small_trace(tmp_path: Path) -> Path:
    counts = [100] * 20 + [600] * 20 + [150] * 20
    path = tmp_path / "small.csv"
    path.write_text("minute,count\n" + "".join(f"{i},{c}\n" for i, c in enumerate(counts)), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("extra", "target", "mode", "minutes"),
    [
        ((), "default", "slo", 60),
        (("--policy", "policy.sample.json"), "orders-consumers", "slo", 60),
        (("--policy", "policy.sample.json", "--target", "billing-workers", "--minutes", "30"), "billing-workers", "rules", 30),
    ],
)
def test_simulate_writes_a_summary_with_cost_ratio(tmp_path: Path, small_trace: Path, extra, target, mode, minutes) -> None:
    out = tmp_path / "out" / "run.json"
    done = scaling("simulate", "--trace", str(small_trace), "--json", str(out), *extra)
    assert done.returncode == 0, done.stderr
    summary = json.loads(out.read_text(encoding="utf-8"))
    assert (summary["target"], summary["mode"], summary["minutes"]) == (target, mode, minutes)
    assert summary["cost_ratio"] == pytest.approx(summary["cost"] / summary["fluid_lower_bound"], rel=1e-3)
    assert summary["cost_ratio"] > 0
    for key in ("slo_violation_minutes", "scale_actions", "p99_age_minutes", "max_age_minutes", "final_backlog", "meets_slo"):
        assert key in summary
    assert "series" not in summary
    assert f"cost_ratio={summary['cost_ratio']}" in done.stdout


def test_simulate_series_has_one_value_per_minute(tmp_path: Path, small_trace: Path) -> None:
    out = tmp_path / "run.json"
    done = scaling("simulate", "--trace", str(small_trace), "--json", str(out), "--series")
    assert done.returncode == 0, done.stderr
    series = json.loads(out.read_text(encoding="utf-8"))["series"]
    assert {key: len(values) for key, values in series.items()} == {
        "arrivals": 60, "capacity": 60, "serving": 60, "backlog": 60, "oldest_age_minutes": 60}
    assert max(series["arrivals"]) == pytest.approx(24_000)


def test_simulate_start_maps_minute_zero_to_a_moment_so_profiles_cost_what_they_cost(tmp_path: Path, small_trace: Path) -> None:
    """orders-consumers in policy.sample.json holds at least 4 instances in Berlin business hours:
    from minute 3 on a Monday morning it never runs fewer, on a Sunday morning it does (the quiet
    minutes need 2: with the cold start sized from the backlog, small_trace's need 4 anyway)."""
    quiet = tmp_path / "quiet.csv"
    counts = [40] * 20 + [600] * 20 + [40] * 20
    quiet.write_text("minute,count\n" + "".join(f"{i},{c}\n" for i, c in enumerate(counts)), encoding="utf-8")
    lowest = {}
    for label, start in (("monday", "2026-03-30T10:00:00+02:00"), ("sunday", "2026-03-29T10:00:00+02:00")):
        out = tmp_path / f"{label}.json"
        done = scaling("simulate", "--trace", str(quiet), "--json", str(out), "--policy", "policy.sample.json",
                       "--start", start, "--series")
        assert done.returncode == 0, done.stderr
        lowest[label] = min(json.loads(out.read_text(encoding="utf-8"))["series"]["capacity"][3:])
    assert lowest["monday"] >= 4 > lowest["sunday"]
    skipped = tmp_path / "skipped.json"
    done = scaling("simulate", "--trace", str(small_trace), "--json", str(skipped), "--start", "10")
    assert done.returncode == 0, done.stderr
    assert json.loads(skipped.read_text(encoding="utf-8"))["minutes"] == 50  # a whole number still skips minutes
    done = scaling("simulate", "--trace", str(small_trace), "--json", str(skipped), "--start", "monday")
    assert done.returncode == 2 and "--start is not an ISO-8601 time" in done.stderr


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (("--policy", "policy.sample.json", "--target", "nope"), "--target 'nope' is not in policy.sample.json"),
        (("--policy", "absent.json"), "error:"),
        (("--skip", "60"), "error: nothing left to simulate: the trace has 60 minutes and the first 60 are skipped"),
        (("--start", "500"), "error: nothing left to simulate: the trace has 60 minutes and the first 500 are skipped"),
    ],
)
def test_simulate_bad_policy_or_target_exits_2(tmp_path: Path, small_trace: Path, extra, fragment) -> None:
    done = scaling("simulate", "--trace", str(small_trace), "--json", str(tmp_path / "run.json"), *extra)
    assert done.returncode == 2
    assert fragment in done.stderr
    assert not (tmp_path / "run.json").exists()


# --- benchmark ------------------------------------------------------------------------------------------------------

CONTRACT = {"trace", "algorithm", "knob", "cost_ratio", "slo_violation_minutes", "minutes", "scale_actions",
            "p99_age_minutes", "max_age_minutes", "final_backlog", "best"}


def test_benchmark_writes_contract_rows_and_flags_the_cheapest_meeting_setting(tmp_path: Path) -> None:
    trace = tmp_path / "traces" / "ramp.csv"
    trace.parent.mkdir()
    counts = [200] * 30 + [200 + 20 * i for i in range(40)] + [300] * 30
    trace.write_text("minute,count\n" + "".join(f"{i},{c}\n" for i, c in enumerate(counts)), encoding="utf-8")
    out = tmp_path / "bench.json"
    done = scaling("benchmark", "--trace", str(trace), "--json", str(out), "--workers", "2", timeout=120)
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text(encoding="utf-8"))
    assert {r["algorithm"] for r in rows} == {"project-default", "project-tuned", "clairvoyant", "keda-hpa",
                                              "functions-target", "azure-monitor", "flink", "seed"}
    for row in rows:
        assert set(row) >= CONTRACT
        assert row["trace"] == "traces/ramp.csv"
    for algorithm in {r["algorithm"] for r in rows}:
        group = [r for r in rows if r["algorithm"] == algorithm]
        best = [r for r in group if r["best"]]
        meeting = [r for r in group if r["slo_violation_minutes"] <= 0.001 * r["minutes"]]
        if not meeting:
            assert best == []
            continue
        assert len(best) == 1
        assert best[0]["cost_ratio"] == min(r["cost_ratio"] for r in meeting)
    assert "### traces/ramp.csv" in done.stdout
