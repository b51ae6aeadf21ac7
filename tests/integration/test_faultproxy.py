"""The fault proxy (tests/faultproxy.py) does what each mode promises: in front of Azurite's table
and queue endpoints with the real azure-data-tables / azure-storage-queue clients, in front of a
tiny local HTTP server, and in front of the local ARM endpoint over TLS with the real
azure-mgmt-web client. "Applied" is always checked behind the proxy's back (directly upstream)."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from azure.core.exceptions import AzureError, HttpResponseError, ResourceNotFoundError
from azure.data.tables import TableClient
from azure.storage.queue import QueueClient

from scaling.local.azurite import Azurite
from scaling.plans.appservice import AppServicePlanAdapter
from scaling.plans.base import PlanError
from scaling.plans.local_arm import serve_local_arm
from scaling.storage.base import TableNames
from scaling.storage.synthetic import plan_id, queue_sample
from scaling.storage.tables import TableStorage
from tests.faultproxy import APPLIED_THEN_RESET, APPLIED_THEN_STATUS, DELAY_REPLY, FaultProxy, proxied_connection_string

NO_RETRY = {"retry_total": 0}
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


# --- a tiny local HTTP server ----------------------------------------------------------------------


class Recorder(BaseHTTPRequestHandler):
    """Records every request it applied; answers with Content-Length, or chunked under /chunked."""

    protocol_version = "HTTP/1.1"
    applied: list[tuple[str, str, bytes]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        type(self).applied.append((self.command, self.path, body))
        payload = f"{self.command} {self.path} {len(body)}".encode()
        self.send_response(200)
        if self.path.startswith("/chunked"):
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (payload[:3], payload[3:]):
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    do_GET = do_PUT = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[ThreadingHTTPServer]:
    Recorder.applied = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture
def http_proxy(http_server) -> Iterator[FaultProxy]:
    with FaultProxy(http_server.server_address[1]) as proxy:
        yield proxy


def call(proxy: FaultProxy, method: str, path: str, body: bytes = b"", timeout: float = 5.0,
         connection: http.client.HTTPConnection | None = None) -> tuple[int, bytes]:
    connection = connection or http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)
    connection.request(method, path, body=body)
    response = connection.getresponse()
    return response.status, response.read()


@pytest.mark.parametrize("path", ["/plain", "/chunked"])
def test_passes_through_by_default_on_one_keep_alive_connection(http_proxy: FaultProxy, path: str) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", http_proxy.port, timeout=5)
    answers = [call(http_proxy, "PUT", f"{path}/{n}", b"x" * n, connection=connection) for n in range(3)]
    assert answers == [(200, f"PUT {path}/{n} {n}".encode()) for n in range(3)]
    counts = http_proxy.counts()
    assert (counts.connections, counts.requests, counts.passed, counts.faulted) == (1, 3, 3, {})


@pytest.mark.parametrize("status", [500, 503])
def test_applied_then_status_only_for_matching_requests_and_only_n_times(http_proxy: FaultProxy, status: int) -> None:
    http_proxy.applied_then_status(status, method="PUT", path_contains="$batch", times=2)
    results = [call(http_proxy, method, path)[0] for method, path in
               [("GET", "/t/$batch"), ("PUT", "/t/other"), ("PUT", "/t/$batch"), ("PUT", "/t/$batch"), ("PUT", "/t/$batch")]]
    assert results == [200, 200, status, status, 200]
    assert [(method, path) for method, path, _ in Recorder.applied][2:] == [("PUT", "/t/$batch")] * 3  # all applied
    assert http_proxy.counts().faulted == {APPLIED_THEN_STATUS: 2}
    assert http_proxy.fault is None  # used up: back to pass-through


def test_skip_lets_matching_requests_pass_first(http_proxy: FaultProxy) -> None:
    http_proxy.applied_then_status(503, method="POST", skip=2, times=1)
    assert [call(http_proxy, "POST", f"/{n}")[0] for n in range(4)] == [200, 200, 503, 200]


def test_applied_then_reset_resets_after_the_upstream_applied(http_proxy: FaultProxy) -> None:
    http_proxy.applied_then_reset(path_contains="/write")
    with pytest.raises((ConnectionResetError, http.client.RemoteDisconnected)):
        call(http_proxy, "POST", "/write", b"body")
    assert Recorder.applied == [("POST", "/write", b"body")]
    assert call(http_proxy, "GET", "/read")[0] == 200


def test_delay_reply_holds_the_answer_past_the_client_timeout(http_proxy: FaultProxy) -> None:
    http_proxy.delay_reply(1.5, times=1)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        call(http_proxy, "PUT", "/slow", timeout=0.3)
    assert time.monotonic() - started < 1.4
    assert Recorder.applied == [("PUT", "/slow", b"")]
    assert http_proxy.counts().faulted == {DELAY_REPLY: 1}
    http_proxy.delay_reply(0.2, times=1)
    assert call(http_proxy, "GET", "/patient", timeout=5) == (200, b"GET /patient 0")


def test_down_drops_open_connections_and_refuses_new_ones_until_up(http_proxy: FaultProxy) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", http_proxy.port, timeout=5)
    assert call(http_proxy, "GET", "/a", connection=connection)[0] == 200
    http_proxy.down()
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        call(http_proxy, "GET", "/b", connection=connection)
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        call(http_proxy, "GET", "/c")
    assert http_proxy.counts().refused >= 1
    http_proxy.up()
    assert call(http_proxy, "GET", "/d")[0] == 200
    assert [path for _, path, _ in Recorder.applied] == ["/a", "/d"]


def test_modes_are_switched_safely_while_requests_run(http_proxy: FaultProxy) -> None:
    statuses: list[int] = []

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", http_proxy.port, timeout=5)
        statuses.extend(call(http_proxy, "GET", "/x", connection=connection)[0] for _ in range(20))

    threads = [threading.Thread(target=client) for _ in range(4)]
    http_proxy.applied_then_status(503, times=10)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(statuses).count(503) == 10 and len(statuses) == 80
    assert http_proxy.counts().requests == 80


class IdleClosing(Recorder):
    """Closes a keep-alive connection idle for 0.3 s, as Azurite does after 5 s."""

    timeout = 0.3


def test_an_upstream_closing_an_idle_connection_is_mirrored_to_the_client() -> None:
    import requests

    Recorder.applied = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), IdleClosing)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        with FaultProxy(server.server_address[1]) as proxy, requests.Session() as session:
            assert session.get(proxy.url("/first"), timeout=5).status_code == 200
            time.sleep(0.8)  # the upstream has closed its side; a pooled client must not reuse a dead one
            assert session.get(proxy.url("/second"), timeout=5).status_code == 200
            assert [path for _, path, _ in Recorder.applied] == ["/first", "/second"]
            assert proxy.counts().connections == 2
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_tls_framing_refuses_what_it_cannot_do() -> None:
    with FaultProxy(9, tls=True) as proxy:
        with pytest.raises(ValueError, match="TLS"):
            proxy.applied_then_status(503)
        with pytest.raises(ValueError, match="TLS"):
            proxy.applied_then_reset(method="PUT")


# --- Azurite: tables and queues ---------------------------------------------------------------------


@pytest.fixture
def table_proxy(azurite) -> Iterator[FaultProxy]:
    with FaultProxy(azurite.table_port) as proxy:
        yield proxy


@pytest.fixture
def tables(azurite, table_proxy, unique_name) -> tuple[TableClient, TableClient]:
    """The table through the proxy (no retries, so every fault shows) and directly."""
    direct = TableClient.from_connection_string(azurite.connection_string, table_name=unique_name)
    direct.create_table()
    proxied = TableClient.from_connection_string(proxied_connection_string(azurite, table=table_proxy),
                                                 table_name=unique_name, **NO_RETRY)
    return proxied, direct


def entity(row: str) -> dict[str, str]:
    return {"PartitionKey": "p", "RowKey": row, "value": row}


@pytest.mark.parametrize("status", [500, 503])
def test_table_batch_applied_then_status(tables, table_proxy: FaultProxy, status: int) -> None:
    proxied, direct = tables
    table_proxy.applied_then_status(status, method="POST", path_contains="$batch", times=1)
    with pytest.raises(HttpResponseError) as raised:
        proxied.submit_transaction([("upsert", entity("a")), ("upsert", entity("b"))])
    assert raised.value.status_code == status
    assert sorted(row["RowKey"] for row in direct.list_entities()) == ["a", "b"]
    proxied.submit_transaction([("upsert", entity("c"))])
    assert table_proxy.counts().faulted == {APPLIED_THEN_STATUS: 1}


def test_table_write_applied_then_reset(tables, table_proxy: FaultProxy) -> None:
    proxied, direct = tables
    table_proxy.applied_then_reset(method="POST", times=1)
    with pytest.raises(AzureError):
        proxied.create_entity(entity("a"))
    assert direct.get_entity("p", "a")["value"] == "a"
    with pytest.raises(HttpResponseError):  # what a client's retry would meet: the write is there
        proxied.create_entity(entity("a"))


def test_table_reply_after_the_read_timeout(tables, table_proxy: FaultProxy) -> None:
    proxied, direct = tables
    table_proxy.delay_reply(2.0, method="POST", times=1)
    started = time.monotonic()
    with pytest.raises(AzureError):
        proxied.create_entity(entity("a"), read_timeout=0.5)
    assert time.monotonic() - started < 1.9
    assert direct.get_entity("p", "a")["value"] == "a"


def test_table_down_then_up(tables, table_proxy: FaultProxy) -> None:
    proxied, direct = tables
    proxied.create_entity(entity("a"))
    table_proxy.down()
    started = time.monotonic()
    for row in ("b", "c"):
        with pytest.raises(AzureError):
            proxied.create_entity(entity(row))
    assert time.monotonic() - started < 5
    table_proxy.up()
    proxied.create_entity(entity("d"))
    assert sorted(row["RowKey"] for row in direct.list_entities()) == ["a", "d"]


def test_table_storage_behind_the_proxy_with_the_sdk_retrying(azurite, table_proxy: FaultProxy, unique_name) -> None:
    """The wiring the reliability tests use: ``TableStorage`` on a proxied connection string, the
    SDK's own retries on. The first write is applied, its 503 makes the SDK retry; either way
    the sample is stored exactly once."""
    names = TableNames.with_prefix(unique_name)
    storage = TableStorage.from_connection_string(proxied_connection_string(azurite, table=table_proxy), names,
                                                  retry_backoff_factor=0.01)
    direct = TableStorage.from_connection_string(azurite.connection_string, names)
    storage.ensure_tables()
    sample = queue_sample("orders", T0, 120, capacity=2)
    table_proxy.applied_then_status(503, method="POST", path_contains=names.history, times=1)
    storage.add_sample(sample)
    assert [stored.sample_id for stored in direct.load_window("orders", T0 - timedelta(minutes=1), T0)] == [sample.sample_id]
    counts = table_proxy.counts()
    assert counts.faulted == {APPLIED_THEN_STATUS: 1}
    assert counts.requests >= 4 + 2  # four tables ensured, the write and the SDK's retry of it


def test_queue_send_applied_then_status(azurite, unique_name) -> None:
    direct = QueueClient.from_connection_string(azurite.connection_string, unique_name)
    direct.create_queue()
    with FaultProxy(azurite.queue_port) as queue_proxy:
        proxied = QueueClient.from_connection_string(proxied_connection_string(azurite, queue=queue_proxy), unique_name,
                                                     **NO_RETRY)
        queue_proxy.applied_then_status(503, method="POST", path_contains="/messages", times=1)
        with pytest.raises(HttpResponseError) as raised:
            proxied.send_message("hello")
        assert raised.value.status_code == 503
        assert [message.content for message in direct.peek_messages(max_messages=5)] == ["hello"]


@pytest.mark.slow
def test_restart_empty_behind_the_same_proxy_port(unique_name) -> None:
    server = Azurite()
    endpoints = server.start()
    try:
        with FaultProxy(endpoints.table_port) as table_proxy:
            connection = proxied_connection_string(endpoints, table=table_proxy)
            table = TableClient.from_connection_string(connection, table_name=unique_name)
            table.create_table()
            table.create_entity(entity("a"))
            assert server.restart() == endpoints  # same ports, no data
            with pytest.raises(ResourceNotFoundError):
                table.get_entity("p", "a")
            table.create_table()
            moved = server.restart(fresh_ports=True)
            assert moved.table_port != endpoints.table_port
            table_proxy.retarget(moved.table_port)
            with pytest.raises(ResourceNotFoundError):  # the same client, through the same proxy port
                table.get_entity("p", "a")
            table.create_table()
            table.create_entity(entity("b"))
            direct = TableClient.from_connection_string(moved.connection_string, table_name=unique_name)
            assert [row["RowKey"] for row in direct.list_entities()] == ["b"]
    finally:
        server.stop()


# --- the local ARM endpoint over TLS, bytes only -----------------------------------------------------

PLAN = plan_id("plan-behind-proxy")


@pytest.fixture
def arm_endpoint():
    with serve_local_arm() as served:
        served.arm.add_plan(PLAN, capacity=2)
        yield served


@pytest.fixture
def arm_proxy(arm_endpoint) -> Iterator[FaultProxy]:
    with FaultProxy(arm_endpoint.address, tls=True) as proxy:
        yield proxy


def plans_through(proxy: FaultProxy, endpoint, **kwargs) -> AppServicePlanAdapter:
    return AppServicePlanAdapter(endpoint.credential, base_url=proxy.url(), retry_total=0, polling_interval=0,
                                 **endpoint.client_kwargs(), **kwargs)


def test_arm_passes_through_with_end_to_end_tls(arm_endpoint, arm_proxy: FaultProxy) -> None:
    plans = plans_through(arm_proxy, arm_endpoint)
    try:
        assert plans.get_plan(PLAN).capacity == 2
        assert plans.set_capacity(PLAN, 4).capacity == 4
    finally:
        plans.close()
    counts = arm_proxy.counts()
    assert (counts.requests, counts.passed) == (3, 3)  # GET, GET, PUT


def test_arm_put_applied_then_reset(arm_endpoint, arm_proxy: FaultProxy) -> None:
    plans = plans_through(arm_proxy, arm_endpoint)
    arm_proxy.applied_then_reset(skip=1, times=1)  # set_capacity: the GET passes, the PUT's reply is lost
    try:
        with pytest.raises(PlanError):
            plans.set_capacity(PLAN, 5)
        assert arm_endpoint.arm.capacity(PLAN) == 5
        assert [write.method for write in arm_endpoint.arm.writes] == ["PUT"]
        assert plans.get_plan(PLAN).capacity == 5  # the next call goes through again
    finally:
        plans.close()
    assert arm_proxy.counts().faulted == {APPLIED_THEN_RESET: 1}


def test_arm_put_answered_after_the_read_timeout(arm_endpoint, arm_proxy: FaultProxy) -> None:
    plans = plans_through(arm_proxy, arm_endpoint, read_timeout=0.5)
    arm_proxy.delay_reply(2.0, skip=1, times=1)
    try:
        with pytest.raises(PlanError):
            plans.set_capacity(PLAN, 6)
        assert arm_endpoint.arm.capacity(PLAN) == 6
    finally:
        plans.close()


def test_a_late_put_reply_with_client_retries_on_is_one_put_and_a_confirming_read(arm_endpoint, arm_proxy: FaultProxy) -> None:
    """The local ARM endpoint behind the fault proxy stands in for ARM: the PUT lands, its reply
    comes after the client's read timeout. The adapter's retries are on (4, the default), yet it
    sends the PUT once and reads the plan back instead of repeating the write."""
    plans = AppServicePlanAdapter(arm_endpoint.credential, base_url=arm_proxy.url(), polling_interval=0,
                                  read_timeout=0.5, sleep=lambda seconds: None, **arm_endpoint.client_kwargs())
    arm_proxy.delay_reply(2.0, skip=1, times=1)  # the GET passes; the PUT lands, its reply comes late
    try:
        assert plans.set_capacity(PLAN, 7).capacity == 7
    finally:
        plans.close()
    assert [write.method for write in arm_endpoint.arm.writes] == ["PUT"]
    assert [method for method, _ in arm_endpoint.arm.requests] == ["GET", "PUT", "GET"]


def test_a_put_refused_with_a_transient_status_is_sent_again_after_reading_back(arm_endpoint, arm_proxy: FaultProxy) -> None:
    """A 503 before the upstream applied it (the local ARM endpoint scripts it): the read-back
    shows the old capacity, so the PUT goes again, once, and lands."""
    waits: list[float] = []
    plans = AppServicePlanAdapter(arm_endpoint.credential, base_url=arm_proxy.url(), polling_interval=0,
                                  sleep=waits.append, **arm_endpoint.client_kwargs())
    arm_endpoint.arm.fail(503, method="PUT", times=1)
    try:
        assert plans.set_capacity(PLAN, 3).capacity == 3
    finally:
        plans.close()
    assert [method for method, _ in arm_endpoint.arm.requests] == ["GET", "PUT", "GET", "PUT"]
    assert len(waits) == 1


def test_arm_down_then_up(arm_endpoint, arm_proxy: FaultProxy) -> None:
    plans = plans_through(arm_proxy, arm_endpoint)
    try:
        assert plans.get_plan(PLAN).capacity == 2
        arm_proxy.down()
        with pytest.raises(PlanError):
            plans.get_plan(PLAN)
        arm_proxy.up()
        assert plans.get_plan(PLAN).capacity == 2
    finally:
        plans.close()
