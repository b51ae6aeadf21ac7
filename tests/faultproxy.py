"""A fault-injecting loopback proxy for tests: put it between a real client and Azurite (tables,
queues) or the local ARM endpoint, and make the storage or ARM fail the way production does:
the write happened but the answer was lost.

It listens on ``127.0.0.1:<free port>`` and forwards every connection to one upstream
``(host, port)``. Faults are switched at run time (thread-safe), one at a time; by default
everything passes through unchanged.

Faults (each optionally only for requests matching ``method=`` / ``path_contains=`` / ``when=``,
after letting ``skip`` matching ones pass, and only for the next ``times`` matching ones):

- ``applied_then_status(code)``: the request reaches the upstream, which applies it; its reply is
  discarded and the client gets ``code`` (500, 503, ...) with a storage-shaped error body;
- ``applied_then_reset()``: the upstream applies and answers, the client's connection is reset
  (SO_LINGER 0) without a reply;
- ``delay_reply(seconds)``: the upstream applies and answers, the answer is held ``seconds``
  (longer than the client's read timeout) before it is forwarded;
- ``down()`` / ``up()``: while down, open connections are dropped (reset) and new ones are
  accepted and reset at once, so every call fails fast ("storage down"; the test drives time);
- ``pass_through()``: clear the fault (``down`` is separate: ``up()`` ends it);
- ``retarget(port)``: send new connections elsewhere (Azurite restarted on other ports).

Two framings:

- ``FaultProxy(upstream)`` (plain HTTP, Azurite): requests and replies are framed by
  Content-Length or chunked encoding (a reply without either ends at close), so faults act per
  request and keep-alive connections work. An upstream closing an idle connection (Azurite does
  after 5 s) is mirrored to the client, and a request that meets an already-closed upstream is
  sent again once on a new connection, so the proxy adds no failure of its own;
- ``FaultProxy(upstream, tls=True)`` (the local ARM endpoint): bytes pass through untouched, so
  TLS is end to end and the client verifies the real server's certificate. The proxy only reads
  TLS record headers: a client application-data record longer than a TLS 1.3 Finished message is
  a request, the next bytes from the upstream are its reply. So ``applied_then_reset``,
  ``delay_reply``, ``down``, ``times`` and ``skip`` work; ``applied_then_status`` and matching on
  method or path cannot (the proxy cannot read or forge encrypted HTTP). It needs an upstream that
  sends nothing unasked: ``serve_local_arm`` turns TLS 1.3 session tickets off for that.

Restarting Azurite empty behind the same proxy port: ``Azurite.restart()`` (same ports, in-memory
data gone) or ``Azurite.restart(fresh_ports=True)`` then ``proxy.retarget(new_port)``.

Every socket has a timeout, every wait ends on ``stop()``; use the proxy as a context manager.

Usage::

    with FaultProxy(("127.0.0.1", azurite.table_port)) as tables_proxy:
        connection = proxied_connection_string(azurite, table=tables_proxy)
        storage = TableStorage.from_connection_string(connection, names)    # or QueueClient, TableClient
        tables_proxy.applied_then_status(503, method="POST", path_contains="$batch", times=1)
        ...                                       # the commit is applied, the client sees a 503
        assert tables_proxy.counts().faulted == {"applied_then_status": 1}

    with serve_local_arm() as arm, FaultProxy(arm.address, tls=True) as arm_proxy:
        plans = AppServicePlanAdapter(arm.credential, base_url=arm_proxy.url(), **arm.client_kwargs())
        arm_proxy.applied_then_reset(skip=1, times=1)   # set_capacity: the GET passes, the PUT's reply is lost
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

LOOPBACK = "127.0.0.1"
APPLIED_THEN_STATUS = "applied_then_status"
APPLIED_THEN_RESET = "applied_then_reset"
DELAY_REPLY = "delay_reply"
#: A TLS 1.3 client Finished is one application-data record of 53 (SHA-256) or 69 (SHA-384)
#: bytes; an HTTP request is longer. Record type 23 is application data.
TLS_APPLICATION_DATA = 23
TLS_FINISHED_MAX = 80
MAX_HEAD_BYTES = 64 * 1024
MAX_REQUESTS_PER_CONNECTION = 100_000


class _Closed(Exception):
    """The peer closed (or reset) its side."""


@dataclass(frozen=True, slots=True)
class RequestHead:
    """What a predicate sees of a request (TLS: method and path are empty, nothing is readable)."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...] = ()

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        return next((value for key, value in self.headers if key.lower() == lowered), None)


@dataclass(frozen=True, slots=True)
class Match:
    """A request predicate: every given part must match (method case-insensitively)."""

    method: str | None = None
    path_contains: str | None = None
    when: Callable[[RequestHead], bool] | None = None

    def __call__(self, head: RequestHead) -> bool:
        return ((self.method is None or head.method.upper() == self.method.upper())
                and (self.path_contains is None or self.path_contains in head.path)
                and (self.when is None or bool(self.when(head))))

    @property
    def reads_http(self) -> bool:
        return self.method is not None or self.path_contains is not None or self.when is not None


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault mode with its parameter and the requests it applies to."""

    mode: str
    match: Match = Match()
    status: int = 503
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class ProxyCounts:
    """What the proxy has seen: connections, refused ones (while down), requests, and per mode the
    requests it faulted."""

    connections: int
    refused: int
    requests: int
    passed: int
    faulted: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Connection:
    client: socket.socket
    upstream: socket.socket | None = None


class _Reader:
    """Buffered reads from a socket: lines, exact lengths, up to close."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.received = 0

    def _fill(self) -> None:
        try:
            chunk = self.sock.recv(65536)
        except (ConnectionError, OSError) as error:
            raise _Closed(str(error)) from error
        if not chunk:
            raise _Closed("closed")
        self.received += len(chunk)
        self.buffer += chunk

    def until(self, marker: bytes, limit: int = MAX_HEAD_BYTES) -> bytes:
        while (end := self.buffer.find(marker)) < 0:
            if len(self.buffer) > limit:
                raise _Closed(f"no {marker!r} within {limit} bytes")
            self._fill()
        end += len(marker)
        data = bytes(self.buffer[:end])
        del self.buffer[:end]
        return data

    def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._fill()
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def to_close(self) -> bytes:
        try:
            while True:
                self._fill()
        except _Closed:
            pass
        data = bytes(self.buffer)
        self.buffer.clear()
        return data

    def at_start(self) -> bool:
        """Waits for the next message's first byte; False when the peer closed in between."""
        if self.buffer:
            return True
        try:
            self._fill()
        except _Closed:
            return False
        return True


def _parse_head(raw: bytes) -> tuple[str, list[tuple[str, str]]]:
    lines = raw.decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers.append((name.strip(), value.strip()))
    return lines[0], headers


def _header(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    return next((value for key, value in headers if key.lower() == name), None)


def _read_body(reader: _Reader, headers: list[tuple[str, str]], *, until_close: bool) -> bytes:
    """The body as sent (chunked stays chunked), framed by Transfer-Encoding or Content-Length."""
    if "chunked" in (_header(headers, "transfer-encoding") or "").lower():
        parts = []
        for _ in range(MAX_REQUESTS_PER_CONNECTION):
            size_line = reader.until(b"\r\n")
            parts.append(size_line)
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                for _ in range(1000):  # trailers, then the empty line
                    trailer = reader.until(b"\r\n")
                    parts.append(trailer)
                    if trailer == b"\r\n":
                        return b"".join(parts)
                raise _Closed("too many trailers")
            parts.append(reader.exactly(size + 2))
        raise _Closed("too many chunks")
    length = _header(headers, "content-length")
    if length is not None:
        return reader.exactly(int(length))
    return reader.to_close() if until_close else b""


def _reset(sock: socket.socket) -> None:
    """Close with RST instead of FIN: the client sees "connection reset by peer"."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def _close(sock: socket.socket | None) -> None:
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


def error_reply(status: int, head: RequestHead) -> bytes:
    """A storage-shaped error: JSON for the Table service (it asks for JSON), XML otherwise."""
    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Injected"
    code = "ServerBusy" if status == 503 else "InternalError"
    message = f"{reason} (injected by FaultProxy after the request was applied)"
    if "json" in (head.header("accept") or "").lower():
        body = json.dumps({"odata.error": {"code": code, "message": {"lang": "en-US", "value": message}}}).encode()
        content_type = "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"
    else:
        body = (f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code>'
                f"<Message>{message}</Message></Error>").encode()
        content_type = "application/xml"
    head_text = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                 f"x-ms-error-code: {code}\r\nConnection: keep-alive\r\n\r\n")
    return head_text.encode("latin-1") + body


class FaultProxy:
    """A loopback TCP proxy to one upstream that injects faults on request (see the module)."""

    def __init__(self, upstream: tuple[str, int] | int, *, tls: bool = False, io_timeout: float = 30.0,
                 connect_timeout: float = 5.0, port: int = 0) -> None:
        self.upstream = (LOOPBACK, upstream) if isinstance(upstream, int) else (upstream[0], int(upstream[1]))
        self.tls = tls
        self.io_timeout = io_timeout
        self.connect_timeout = connect_timeout
        self._requested_port = port
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._handlers: list[threading.Thread] = []
        self._open: set[int] = set()
        self._connections: dict[int, _Connection] = {}
        self._fault: Fault | None = None
        self._remaining: int | None = None
        self._skip = 0
        self._down = False
        self._counts = {"connections": 0, "refused": 0, "requests": 0, "passed": 0}
        self._faulted: dict[str, int] = {}

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK, self._requested_port))
        listener.listen(128)
        listener.settimeout(0.2)
        self._listener = listener
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"faultproxy-{self.port}", daemon=True)
        self._acceptor.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        if self._acceptor is not None:
            self._acceptor.join(timeout)
        if self._listener is not None:
            _close(self._listener)
        self._drop_all(reset=False)
        deadline = time.monotonic() + timeout
        for handler in list(self._handlers):
            handler.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError("the proxy is not started")
        return self._listener.getsockname()[1]

    @property
    def address(self) -> tuple[str, int]:
        return (LOOPBACK, self.port)

    def url(self, path: str = "") -> str:
        """``http(s)://127.0.0.1:<port><path>``: https for a TLS upstream (its certificate names 127.0.0.1)."""
        return f"{'https' if self.tls else 'http'}://{LOOPBACK}:{self.port}{path}"

    # --- faults -------------------------------------------------------------------------------

    def applied_then_status(self, status: int = 503, *, method: str | None = None, path_contains: str | None = None,
                            when: Callable[[RequestHead], bool] | None = None, times: int | None = None,
                            skip: int = 0) -> None:
        if self.tls:
            raise ValueError("applied_then_status needs plain HTTP: a TLS reply cannot be forged")
        if not 100 <= status <= 599:
            raise ValueError(f"status must be an HTTP status, got {status}")
        self._set(Fault(APPLIED_THEN_STATUS, Match(method, path_contains, when), status=status), times, skip)

    def applied_then_reset(self, *, method: str | None = None, path_contains: str | None = None,
                           when: Callable[[RequestHead], bool] | None = None, times: int | None = None,
                           skip: int = 0) -> None:
        self._set(Fault(APPLIED_THEN_RESET, Match(method, path_contains, when)), times, skip)

    def delay_reply(self, seconds: float, *, method: str | None = None, path_contains: str | None = None,
                    when: Callable[[RequestHead], bool] | None = None, times: int | None = None, skip: int = 0) -> None:
        if not 0 <= seconds <= 3600:
            raise ValueError(f"seconds must be within [0, 3600], got {seconds}")
        self._set(Fault(DELAY_REPLY, Match(method, path_contains, when), seconds=seconds), times, skip)

    def pass_through(self) -> None:
        with self._lock:
            self._fault, self._remaining, self._skip = None, None, 0

    def down(self) -> None:
        """Every open connection is reset and every new one is reset on accept until ``up()``."""
        with self._lock:
            self._down = True
        self._drop_all(reset=True)

    def up(self) -> None:
        with self._lock:
            self._down = False

    @property
    def is_down(self) -> bool:
        with self._lock:
            return self._down

    def retarget(self, port: int, host: str = LOOPBACK, *, drop_open: bool = True) -> None:
        """New connections go to ``(host, port)``; open ones (to the old upstream) are closed."""
        with self._lock:
            self.upstream = (host, int(port))
        if drop_open:
            self._drop_all(reset=False)

    def counts(self) -> ProxyCounts:
        with self._lock:
            return ProxyCounts(self._counts["connections"], self._counts["refused"], self._counts["requests"],
                               self._counts["passed"], dict(self._faulted))

    @property
    def fault(self) -> Fault | None:
        with self._lock:
            return self._fault

    def _set(self, fault: Fault, times: int | None, skip: int) -> None:
        if times is not None and times < 1:
            raise ValueError(f"times must be at least 1 (or None for every request), got {times}")
        if skip < 0:
            raise ValueError(f"skip must be at least 0, got {skip}")
        if self.tls and fault.match.reads_http:
            raise ValueError("a TLS upstream's requests are encrypted: use times/skip, not method/path/when")
        with self._lock:
            self._fault, self._remaining, self._skip = fault, times, skip

    def _take(self, head: RequestHead) -> Fault | None:
        """Counts one request and returns the fault it gets, if any (consuming ``skip``/``times``)."""
        with self._lock:
            self._counts["requests"] += 1
            fault = self._fault
            if fault is None or not fault.match(head):
                self._counts["passed"] += 1
                return None
            if self._skip > 0:
                self._skip -= 1
                self._counts["passed"] += 1
                return None
            if self._remaining is not None:
                self._remaining -= 1
                if self._remaining <= 0:
                    self._fault, self._remaining = None, None
            self._faulted[fault.mode] = self._faulted.get(fault.mode, 0) + 1
            return fault

    # --- connections --------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                down = self._down
                self._counts["connections"] += 1
                if down:
                    self._counts["refused"] += 1
                upstream = self.upstream
            if down:
                _reset(client)
                continue
            client.settimeout(self.io_timeout)
            handler = threading.Thread(target=self._handle, args=(client, upstream), daemon=True,
                                       name=f"faultproxy-{self.port}-conn")
            self._handlers = [thread for thread in self._handlers if thread.is_alive()] + [handler]
            handler.start()

    def _handle(self, client: socket.socket, upstream_address: tuple[str, int]) -> None:
        connection = _Connection(client)
        key = id(connection)
        with self._lock:
            self._connections[key] = connection
        try:
            try:
                connection.upstream = socket.create_connection(upstream_address, timeout=self.connect_timeout)
            except OSError:
                _reset(client)  # upstream down: the client sees its connection fail, as without a proxy
                return
            connection.upstream.settimeout(self.io_timeout)
            if self._stopping.is_set() or self.is_down:
                _reset(client)
                return
            if self.tls:
                self._pump_tls(client, connection.upstream)
            else:
                self._relay_http(connection)
        except _Closed:
            _reset(client)
        except OSError:
            pass
        finally:
            with self._lock:
                self._connections.pop(key, None)
                down = self._down
            _close(connection.upstream)
            if down:
                _reset(client)
            else:
                _close(client)

    def _drop_all(self, *, reset: bool) -> None:
        with self._lock:
            connections = list(self._connections.values())
        for connection in connections:  # the handler closes them (with RST while down)
            _wake(connection.client, socket.SHUT_RD if reset else socket.SHUT_RDWR)
            _wake(connection.upstream, socket.SHUT_RDWR)

    # --- plain HTTP -----------------------------------------------------------------------------

    def _relay_http(self, connection: _Connection) -> None:
        client = connection.client
        from_client = _Reader(client)
        for _ in range(MAX_REQUESTS_PER_CONNECTION):
            if self._stopping.is_set() or not self._next_request_arrives(connection, from_client):
                return
            raw_head = from_client.until(b"\r\n\r\n")
            request_line, headers = _parse_head(raw_head)
            method, _, rest = request_line.partition(" ")
            path = rest.rsplit(" ", 1)[0]
            request = raw_head + _read_body(from_client, headers, until_close=False)
            head = RequestHead(method, path, tuple(headers))
            fault = self._take(head)
            reply, closes = self._exchange(connection, request, method)
            if fault is None:
                client.sendall(reply)
            elif fault.mode == APPLIED_THEN_STATUS:
                client.sendall(error_reply(fault.status, head))
            elif fault.mode == APPLIED_THEN_RESET:
                _reset(client)
                return
            else:  # DELAY_REPLY
                if self._stopping.wait(fault.seconds):
                    return
                client.sendall(reply)
            if closes:
                return

    def _next_request_arrives(self, connection: _Connection, from_client: _Reader) -> bool:
        """Waits for the client's next request; False when the client leaves, or when the upstream
        closes the idle keep-alive connection first (Azurite does after 5 s): the client's
        connection is then closed too, so its pool opens a new one instead of reusing a dead one."""
        import selectors

        if from_client.buffer:
            return True
        deadline = time.monotonic() + self.io_timeout
        with selectors.DefaultSelector() as selector:
            selector.register(connection.client, selectors.EVENT_READ, "client")
            if connection.upstream is not None:
                selector.register(connection.upstream, selectors.EVENT_READ, "upstream")
            while not self._stopping.is_set() and time.monotonic() < deadline:
                ready = {key.data for key, _ in selector.select(timeout=0.2)}
                if "client" in ready:
                    return from_client.at_start()
                if ready:
                    return False
        return False

    def _exchange(self, connection: _Connection, request: bytes, method: str) -> tuple[bytes, bool]:
        """Sends the request upstream and reads the reply. If the upstream had closed the idle
        connection (nothing of a reply came back), the request never reached it: send it again,
        once, on a new connection, as an HTTP client would."""
        for attempt in range(2):
            upstream = connection.upstream
            assert upstream is not None
            from_upstream = _Reader(upstream)
            try:
                upstream.sendall(request)
                return self._read_reply(from_upstream, method)
            except (_Closed, OSError):
                if attempt or from_upstream.received or self._stopping.is_set() or self.is_down:
                    raise _Closed("upstream closed during the exchange") from None
            _close(upstream)
            with self._lock:
                address = self.upstream
            connection.upstream = socket.create_connection(address, timeout=self.connect_timeout)
            connection.upstream.settimeout(self.io_timeout)
        raise _Closed("unreachable")

    @staticmethod
    def _read_reply(reader: _Reader, method: str) -> tuple[bytes, bool]:
        """One complete reply (interim 1xx included) and whether the upstream closes after it."""
        parts = []
        for _ in range(10):
            raw_head = reader.until(b"\r\n\r\n")
            status_line, headers = _parse_head(raw_head)
            status = int(status_line.split(" ", 2)[1])
            parts.append(raw_head)
            if 100 <= status < 200 and status != 101:
                continue
            closes = (_header(headers, "connection") or "").lower() == "close"
            if method.upper() == "HEAD" or status in (204, 304):
                return b"".join(parts), closes
            framed = _header(headers, "content-length") is not None or _header(headers, "transfer-encoding") is not None
            parts.append(_read_body(reader, headers, until_close=True))
            return b"".join(parts), closes or not framed
        raise _Closed("too many interim replies")

    # --- TLS (bytes only) ---------------------------------------------------------------------

    def _pump_tls(self, client: socket.socket, upstream: socket.socket) -> None:
        import selectors

        records = bytearray()  # client bytes not yet split into TLS records
        awaiting_reply, pending = False, None
        with selectors.DefaultSelector() as selector:
            selector.register(client, selectors.EVENT_READ, "client")
            selector.register(upstream, selectors.EVENT_READ, "upstream")
            idle_since = time.monotonic()
            while not self._stopping.is_set():
                events = selector.select(timeout=0.2)
                if not events:
                    if time.monotonic() - idle_since > self.io_timeout:
                        return
                    continue
                idle_since = time.monotonic()
                for selected, _ in events:
                    source = selected.fileobj
                    data = source.recv(65536)
                    if not data:
                        return
                    if selected.data == "client":
                        upstream.sendall(data)
                        records += data
                        if self._request_record_in(records) and not awaiting_reply:
                            awaiting_reply, pending = True, self._take(RequestHead("", ""))
                        continue
                    if awaiting_reply:
                        awaiting_reply, fault, pending = False, pending, None
                        if fault is not None and fault.mode == APPLIED_THEN_RESET:
                            _reset(client)
                            self._drain(upstream)
                            return
                        if fault is not None and fault.mode == DELAY_REPLY and self._stopping.wait(fault.seconds):
                            return
                    client.sendall(data)

    @staticmethod
    def _request_record_in(records: bytearray) -> bool:
        """Consumes the complete TLS records in ``records``; True if one was application data
        longer than a handshake Finished (a request)."""
        found = False
        while len(records) >= 5:
            length = int.from_bytes(records[3:5], "big")
            if len(records) < 5 + length:
                break
            found = found or (records[0] == TLS_APPLICATION_DATA and length > TLS_FINISHED_MAX)
            del records[:5 + length]
        return found

    def _drain(self, upstream: socket.socket, quiet: float = 0.3, limit: float = 5.0) -> None:
        """Reads what the upstream still sends so that it finishes its reply (the request counts as
        applied) before the connection is closed."""
        deadline = time.monotonic() + limit
        upstream.settimeout(quiet)
        while time.monotonic() < deadline:
            try:
                if not upstream.recv(65536):
                    return
            except OSError:
                return


def _wake(sock: socket.socket | None, how: int = socket.SHUT_RD) -> None:
    """Wakes the handler blocked on ``sock`` (its recv returns): closing a socket another thread
    is reading does not; shutting down its read side does, without sending anything."""
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.shutdown(how)


def proxied_connection_string(endpoints: Any, *, table: FaultProxy | None = None, queue: FaultProxy | None = None,
                              blob: FaultProxy | None = None) -> str:
    """Azurite's connection string (``AzuriteEndpoints``) with the given services behind proxies."""
    from scaling.local.azurite import ACCOUNT, DEV_KEY

    def endpoint(proxy: FaultProxy | None, url: str) -> str:
        return url if proxy is None else f"http://{LOOPBACK}:{proxy.port}/{ACCOUNT}"

    return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={DEV_KEY};"
            f"BlobEndpoint={endpoint(blob, endpoints.blob_url)};QueueEndpoint={endpoint(queue, endpoints.queue_url)};"
            f"TableEndpoint={endpoint(table, endpoints.table_url)};")
