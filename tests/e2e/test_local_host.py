"""The local Functions host: bindings from function.json, the timer schedule, and the queue
semantics host.json configures, on a real Azurite (the session fixture of tests/conftest.py)."""

from __future__ import annotations

import asyncio
import json
import time
import typing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import azure.functions as func
import pytest
from azure.storage.queue import QueueClient

from scaling.local.bindings import QueueOptions, index_functions
from scaling.local.host import POISON_SUFFIX, LocalFunctionsHost
from scaling.local.schedule import Schedule

T0 = datetime(2026, 1, 1, tzinfo=UTC)


# --- pure parts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("expression", "after", "until", "expected"), [
    ("0 */1 * * * *", T0, T0 + timedelta(minutes=1), 1),
    ("0 */1 * * * *", T0, T0 + timedelta(seconds=59), 0),
    ("0 */1 * * * *", T0, T0 + timedelta(minutes=3), 3),
    ("*/30 * * * * *", T0, T0 + timedelta(minutes=1), 2),
    ("0 0 9-17 * * mon-fri", T0, T0 + timedelta(days=7), 5 * 9),  # 2026-01-01 is a Thursday
    ("0 15 2 1 jan *", T0, T0 + timedelta(days=1), 1),
])
def test_ncrontab_occurrences(expression, after, until, expected):
    assert Schedule.parse(expression).occurrences(after, until) == expected


def test_a_schedule_needs_six_fields():
    with pytest.raises(ValueError, match="six fields"):
        Schedule.parse("*/5 * * * *")


def test_queue_options_follow_the_repository_host_json():
    queues = json.loads(Path("host.json").read_text(encoding="utf-8"))["extensions"]["queues"]
    options = QueueOptions.from_host_json("host.json")
    assert options.max_dequeue_count == queues["maxDequeueCount"]
    assert options.visibility_timeout_seconds == 30 and queues["visibilityTimeout"] == "00:00:30"
    assert options.batch_size == queues["batchSize"]
    assert options.message_encoding == queues.get("messageEncoding", "base64")


def test_queue_options_defaults_and_errors(tmp_path):
    (tmp_path / "host.json").write_text('{"version": "2.0"}', encoding="utf-8")
    assert QueueOptions.from_host_json(tmp_path / "host.json") == QueueOptions()
    (tmp_path / "host.json").write_text('{"extensions": {"queues": {"messageEncoding": "utf8"}}}', encoding="utf-8")
    with pytest.raises(ValueError, match="messageEncoding"):
        QueueOptions.from_host_json(tmp_path / "host.json")


def test_the_function_app_indexes_its_functions_with_their_bindings():
    import function_app

    specs = {spec.name: spec for spec in index_functions(function_app.app)}
    assert set(specs) == {"collect", "evaluate", "scale", "evaluate_poison", "scale_poison"}
    assert specs["evaluate_poison"].trigger["queueName"] == "metrics-poison"
    assert specs["scale_poison"].trigger["queueName"] == "actions-poison"
    assert specs["collect"].trigger["type"] == "timerTrigger" and specs["collect"].is_async
    assert [o["queueName"] for o in specs["collect"].outputs] == ["metrics"]
    assert specs["evaluate"].trigger["queueName"] == "metrics"
    assert [o["queueName"] for o in specs["evaluate"].outputs] == ["actions"]
    assert specs["scale"].trigger["queueName"] == "actions" and not specs["scale"].outputs
    # Indexing twice on the same app works (get_functions() alone refuses a second call).
    assert len(index_functions(function_app.app)) == 5


# --- against Azurite ----------------------------------------------------------------------------


def small_app(source: str, sink: str, calls: list, fail_times: dict) -> func.FunctionApp:
    """tick (timer) -> queue source -> relay (queue trigger, fails on demand) -> queue sink."""
    app = func.FunctionApp()

    @app.function_name("tick")
    @app.timer_trigger(schedule="%TICK_SCHEDULE%", arg_name="timer", run_on_startup=False)
    @app.queue_output(arg_name="out", queue_name=source, connection="AzureWebJobsStorage")
    async def tick(timer: func.TimerRequest, out: func.Out[typing.List[str]]) -> None:  # noqa: UP006
        calls.append(("tick", timer.past_due))
        out.set([json.dumps({"n": len(calls)}), "second"])

    @app.function_name("relay")
    @app.queue_trigger(arg_name="msg", queue_name=source, connection="AzureWebJobsStorage")
    @app.queue_output(arg_name="out", queue_name=sink, connection="AzureWebJobsStorage")
    def relay(msg: func.QueueMessage, out: func.Out[str]) -> None:
        body = msg.get_body().decode()
        calls.append(("relay", body, msg.dequeue_count, msg.id is not None, msg.insertion_time is not None))
        if fail_times.get(body, 0) >= msg.dequeue_count:
            raise RuntimeError(f"scripted failure of {body}")
        out.set(f"relayed {body}")

    return app


def host_for(app, connection_string: str, *, visibility: float = 1.0) -> LocalFunctionsHost:
    options = QueueOptions(visibility_timeout_seconds=visibility, batch_size=16, max_dequeue_count=3, message_encoding="none")
    return LocalFunctionsHost(app, {"AzureWebJobsStorage": connection_string, "TICK_SCHEDULE": "0 */1 * * * *"},
                              queue_options=options)


def peek_all(connection_string: str, name: str) -> list[str]:
    client = QueueClient.from_connection_string(connection_string, name)
    try:
        return [message.content for message in client.peek_messages(max_messages=32)]
    finally:
        client.close()


def test_timer_outputs_flow_through_real_queues_and_successes_are_deleted(storage_connection_string, unique_name):
    source, sink = f"{unique_name}-in", f"{unique_name}-out"
    calls: list = []
    host = host_for(small_app(source, sink, calls, {}), storage_connection_string)

    async def scenario() -> int:
        await host.start(T0)
        assert await host.tick(T0 + timedelta(seconds=30)) == []  # not due yet
        assert await host.tick(T0 + timedelta(minutes=1)) == ["tick"]
        assert await host.tick(T0 + timedelta(minutes=4)) == ["tick"]  # three missed: fires once, past due
        return await host.drain()

    try:
        delivered = asyncio.run(scenario())
    finally:
        host.close()
    assert [c for c in calls if c[0] == "tick"] == [("tick", False), ("tick", True)]
    assert delivered == 4
    relays = [c for c in calls if c[0] == "relay"]
    assert all(dequeue == 1 and has_id and inserted for _, _, dequeue, has_id, inserted in relays)
    assert peek_all(storage_connection_string, source) == []  # deleted after success
    assert sorted(peek_all(storage_connection_string, sink)) == sorted(f"relayed {c[1]}" for c in relays)
    assert host.stats.sent[source] == 4 and host.stats.sent[sink] == 4


def test_a_failing_message_is_redelivered_then_moved_to_poison(storage_connection_string, unique_name):
    source, sink = f"{unique_name}-in", f"{unique_name}-out"
    calls: list = []
    # "flaky" fails on its first delivery only; "broken" always fails.
    host = host_for(small_app(source, sink, calls, {"flaky": 1, "broken": 99}), storage_connection_string)
    feeder = QueueClient.from_connection_string(storage_connection_string, source)

    async def scenario() -> None:
        await host.start(T0)
        feeder.send_message("flaky")
        feeder.send_message("broken")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            await host.drain()
            if host.stats.poisoned:
                return
            await asyncio.sleep(0.3)  # failed messages come back after the 1 s visibility timeout

    try:
        asyncio.run(scenario())
    finally:
        host.close()
        feeder.close()
    deliveries = {body: [d for kind, b, d, *_ in calls if kind == "relay" and b == body] for body in ("flaky", "broken")}
    assert deliveries["flaky"] == [1, 2]
    assert deliveries["broken"] == [1, 2, 3]  # maxDequeueCount 3
    assert peek_all(storage_connection_string, source + POISON_SUFFIX) == ["broken"]
    assert peek_all(storage_connection_string, source) == []
    assert peek_all(storage_connection_string, sink) == ["relayed flaky"]  # no output from failed runs
    assert host.stats.failures["relay"] == 4
    assert host.poison_counts() == {source + POISON_SUFFIX: 1}


def test_a_missing_app_setting_is_named():
    app = small_app("a-in", "a-out", [], {})
    with pytest.raises(ValueError, match="TICK_SCHEDULE"):
        LocalFunctionsHost(app, {"AzureWebJobsStorage": "UseDevelopmentStorage=true"},
                           queue_options=QueueOptions(message_encoding="none"))


def test_base64_encoding_as_the_functions_queue_extension_default(storage_connection_string, unique_name):
    import base64

    source, sink = f"{unique_name}-in", f"{unique_name}-out"
    calls: list = []
    options = QueueOptions(visibility_timeout_seconds=1, max_dequeue_count=3, message_encoding="base64")
    host = LocalFunctionsHost(small_app(source, sink, calls, {}),
                              {"AzureWebJobsStorage": storage_connection_string, "TICK_SCHEDULE": "0 */1 * * * *"},
                              queue_options=options)

    async def scenario() -> None:
        await host.start(T0)
        await host.tick(T0 + timedelta(minutes=1))
        raw = peek_all(storage_connection_string, source)  # no decode policy: the stored text
        assert sorted(base64.b64decode(text).decode() for text in raw) == sorted([json.dumps({"n": 1}), "second"])
        await host.drain()

    try:
        asyncio.run(scenario())
    finally:
        host.close()
    assert sorted(c[1] for c in calls if c[0] == "relay") == sorted([json.dumps({"n": 1}), "second"])
    assert sorted(base64.b64decode(text).decode() for text in peek_all(storage_connection_string, sink)) == \
        sorted(["relayed second", f"relayed {json.dumps({'n': 1})}"])
