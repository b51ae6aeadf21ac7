"""``make demo`` end to end, short: the three functions of function_app.py scale a simulated plan
through a surge, on a real Azurite (started and stopped by the demo itself), through the real
azure-mgmt-web client against the local ARM endpoint, and agree with ``simulate``.

The trace is synthetic (flat low, a surge, low again) so that the run is short: 75 simulated
minutes, about 20-40 s, run once per session (tests/e2e/shared_demo.py) and shared with the report
page's browser test.
"""

from __future__ import annotations

import csv
import io
import socket

import pytest

from scaling.__main__ import build_parser
from scaling.local.demo import TOLERANCE, DemoOptions, compare, demo_target, run_demo, simulate_summary
from tests.e2e.shared_demo import AFTER, BEFORE, SURGE, RecordingAzurite, write_trace

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().split(")")[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def demo(demo_run):
    """The session's one demo run (tests/e2e/shared_demo.py), as (options, result, terminal output)."""
    return demo_run.options, demo_run.result, demo_run.output


def test_the_functions_recorded_decisions_in_the_decision_table(demo):
    options, result, _ = demo
    assert result.invocations["collect"] == BEFORE + SURGE + AFTER  # the timer fired once per simulated minute
    assert result.invocations["evaluate"] == result.invocations["collect"]  # every sample went through the queue
    assert result.decisions, "no decision-log rows were read back from the table"
    actions = [record for record in result.decisions if record.acts]
    assert actions and result.invocations["scale"] == len(actions)
    assert all(record.outcome == "applied" for record in actions)
    assert result.plan_writes == len(actions)  # every action reached ARM as one PUT
    assert not result.failures


def test_capacity_rose_during_the_surge_and_fell_after_it(demo):
    _, result, _ = demo
    capacity = list(result.capacity)
    before = max(capacity[:BEFORE])
    during = max(capacity[BEFORE:BEFORE + SURGE])
    assert during > before
    assert capacity[-1] < during
    ups = [record for record in result.decisions if record.acts and record.direction == "up"]
    downs = [record for record in result.decisions if record.acts and record.direction == "down"]
    assert ups and downs


def test_no_message_ended_in_a_poison_queue(demo):
    _, result, _ = demo
    # every queue trigger has a poison queue, the poison drains' own included (metrics-poison-poison, ...)
    assert {"metrics-poison", "actions-poison"} <= set(result.poison)
    assert not any(result.poison.values()), result.poison


def test_the_plot_is_a_png_and_the_decision_csv_is_what_the_table_holds(demo):
    _, result, _ = demo
    assert result.files["plot"].read_bytes()[:8] == PNG_MAGIC
    with result.files["decisions"].open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(result.decisions) > 0
    assert {row["decision_id"] for row in rows} == {record.decision_id for record in result.decisions}
    assert sum(row["acts"] == "True" for row in rows) == result.summary["scale_actions"]
    assert result.files["summary"].is_file()


def test_the_terminal_showed_progress_and_the_live_table(demo):
    _, _, output = demo
    assert "arrivals/s" in output and "reason" in output
    assert "100%" in output
    assert " up " in output and " down " in output


def test_azurite_was_stopped_afterwards(demo):
    _, result, _ = demo
    [server] = RecordingAzurite.started
    assert not server.running
    assert not process_alive(server.pid)
    assert not any(port_open(port) for port in server.ports)
    assert result.azurite_ports == server.ports


def test_the_summary_agrees_with_simulate_on_the_same_window(demo):
    options, result, _ = demo
    simulated = simulate_summary(options.trace, start=options.start, minutes=options.minutes, target=demo_target())
    assert result.simulated == simulated
    assert compare(result.summary, simulated, TOLERANCE) == []
    assert result.agrees
    # With one simulated clock and the queues drained every minute, the decisions are the same.
    assert result.summary["scale_actions"] == simulated["scale_actions"]
    assert result.summary["cost"] == simulated["cost"]


def test_compare_reports_what_is_outside_the_tolerance():
    simulated = {"minutes": 100, "cost_ratio": 1.20, "slo_violation_minutes": 0, "scale_actions": 10}
    assert compare(dict(simulated), simulated) == []
    off = {"minutes": 100, "cost_ratio": 1.30, "slo_violation_minutes": 5, "scale_actions": 14}
    problems = compare(off, simulated)
    assert len(problems) == 3 and "cost ratio" in problems[0]


def test_demo_help_lists_its_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser(["demo", "--help"]).parse_args(["demo", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in ("--trace", "--minutes", "--start", "--speed", "--policy", "--out"):
        assert option in text


# --- --source servicebus -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def queue_demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("queue-demo")
    trace = write_trace(folder / "surge.csv")
    options = DemoOptions(trace=trace, minutes=None, start=0, out=folder / "out", live=False, source="servicebus")
    return options, run_demo(options, stream=io.StringIO())


def test_the_queue_demo_scales_a_service_bus_target_in_slo_mode_and_agrees_with_simulate(queue_demo):
    """No Service Bus data plane or Azure Monitor emulator exists: ``SimulatedQueue`` stands in
    behind the Service Bus source's peek and metrics interfaces; the count is read by the real
    management client from the local ARM endpoint (one GET of the queue per collection), and the
    functions, Azurite and the plan's ARM client are the real ones. The decisions carry the
    queue's age and rates, and the run equals ``simulate`` on the queue world."""
    options, result = queue_demo
    target = demo_target(source="servicebus")
    assert (target.mode, target.sources[0].kind) == ("slo", "servicebus")
    simulated = simulate_summary(options.trace, start=0, minutes=None, target=target, source="servicebus")
    assert result.simulated == simulated and result.agrees
    assert result.summary["cost"] == simulated["cost"]
    assert result.poison == {} or not any(result.poison.values())
    assert max(result.capacity) > min(result.capacity)
    acted = [record for record in result.decisions if record.acts]
    assert acted and all(record.metrics.get("partitions") == 0 for record in acted)
    assert {"slo_at_risk", "throughput_unknown_queue_aging"} & {record.reason_code for record in acted}
    assert any(record.metrics.get("arrival_rate") for record in result.decisions)
    assert result.checkpoint_writes == 0
    assert result.count_reads == result.invocations["collect"] == len(result.capacity)


def test_demo_source_option(capsys):
    args = build_parser(["demo"]).parse_args(["demo", "--source", "servicebus"])
    assert args.source == "servicebus"
    with pytest.raises(SystemExit):
        build_parser(["demo"]).parse_args(["demo", "--source", "kafka"])
