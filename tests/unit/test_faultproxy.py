"""The fault proxy's pure parts: how it tells a request in a TLS byte stream, how it frames HTTP
bodies, what a forged error looks like, and the argument checks."""

from __future__ import annotations

import json
import socket

import pytest

from tests.faultproxy import FaultProxy, Match, RequestHead, _read_body, _Reader, error_reply


def record(kind: int, length: int) -> bytes:
    return bytes([kind, 3, 3]) + length.to_bytes(2, "big") + b"\x00" * length


@pytest.mark.parametrize(
    ("stream", "is_request", "left"),
    [
        (record(22, 512), False, 0),                         # ClientHello
        (record(20, 1) + record(23, 53), False, 0),          # TLS 1.3 ChangeCipherSpec + Finished (SHA-256)
        (record(23, 69), False, 0),                          # Finished (SHA-384)
        (record(23, 81), True, 0),                           # the smallest record taken for a request
        (record(20, 1) + record(23, 53) + record(23, 300), True, 0),  # Finished and the request coalesced
        (record(21, 2), False, 0),                           # an alert (close_notify)
        (record(23, 300)[:100], False, 100),                 # half a record: wait for the rest
        (record(23, 300)[:4], False, 4),                     # not even a header yet
    ],
    ids=["client-hello", "finished-256", "finished-384", "request", "coalesced", "alert", "partial", "header-only"],
)
def test_tls_request_records(stream: bytes, is_request: bool, left: int) -> None:
    buffer = bytearray(stream)
    assert FaultProxy._request_record_in(buffer) is is_request
    assert len(buffer) == left


def body_of(raw: bytes, headers: list[tuple[str, str]], *, until_close: bool = False) -> bytes:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(raw)
        theirs.shutdown(socket.SHUT_WR)
        ours.settimeout(2)
        return _read_body(_Reader(ours), headers, until_close=until_close)


@pytest.mark.parametrize(
    ("raw", "headers", "until_close", "body"),
    [
        (b"hello!extra", [("Content-Length", "6")], False, b"hello!"),
        (b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\nNEXT", [("Transfer-Encoding", "chunked")], False,
         b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n"),
        (b"0\r\nTrailer: x\r\n\r\n", [("transfer-encoding", "gzip, chunked")], False, b"0\r\nTrailer: x\r\n\r\n"),
        (b"to the end", [], True, b"to the end"),
        (b"ignored", [], False, b""),
    ],
    ids=["content-length", "chunked", "chunked-trailer", "until-close", "no-body"],
)
def test_http_bodies_are_framed_as_sent(raw: bytes, headers, until_close: bool, body: bytes) -> None:
    assert body_of(raw, headers, until_close=until_close) == body


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [("application/json;odata=minimalmetadata", "application/json"), ("application/xml", "application/xml"), (None, "application/xml")],
)
def test_forged_errors_are_shaped_like_storage_errors(accept: str | None, content_type: str) -> None:
    head = RequestHead("POST", "/t", (("Accept", accept),) if accept else ())
    reply = error_reply(503, head)
    status_line, _, rest = reply.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert status_line == b"HTTP/1.1 503 Service Unavailable"
    assert f"Content-Type: {content_type}".encode() in headers
    assert f"Content-Length: {len(body)}".encode() in headers
    if content_type == "application/json":
        assert json.loads(body)["odata.error"]["code"] == "ServerBusy"


@pytest.mark.parametrize(
    ("match", "head", "matches"),
    [
        (Match(), RequestHead("GET", "/x"), True),
        (Match(method="put"), RequestHead("PUT", "/x"), True),
        (Match(method="PUT"), RequestHead("POST", "/x"), False),
        (Match(path_contains="$batch"), RequestHead("POST", "/devstoreaccount1/$batch"), True),
        (Match(method="POST", path_contains="$batch"), RequestHead("POST", "/t()"), False),
        (Match(when=lambda head: head.header("x-ms-client-request-id") == "a"),
         RequestHead("GET", "/", (("X-Ms-Client-Request-Id", "a"),)), True),
    ],
)
def test_request_predicates(match: Match, head: RequestHead, matches: bool) -> None:
    assert match(head) is matches


@pytest.mark.parametrize(
    ("configure", "message"),
    [
        (lambda proxy: proxy.applied_then_status(99), "status"),
        (lambda proxy: proxy.applied_then_reset(times=0), "times"),
        (lambda proxy: proxy.applied_then_reset(skip=-1), "skip"),
        (lambda proxy: proxy.delay_reply(-1), "seconds"),
        (lambda proxy: proxy.delay_reply(7200), "seconds"),
    ],
)
def test_fault_arguments_are_checked(configure, message: str) -> None:
    proxy = FaultProxy(9)
    with pytest.raises(ValueError, match=message):
        configure(proxy)
    assert proxy.fault is None
