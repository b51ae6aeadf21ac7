"""Retry-After from ARM: seconds or an HTTP date, capped; anything else falls back to the default
back-off instead of escaping as ``ValueError`` out of the retry policy."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from scaling.plans.appservice import BoundedRetryPolicy, parse_retry_after

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
CAP = 60.0


@dataclass(frozen=True, slots=True)
class HeadersOnly:
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PipelineResponseStandIn:
    """What ``get_retry_after`` reads of a pipeline response: ``http_response.headers``."""

    http_response: HeadersOnly


def retry_after(headers: dict[str, str]) -> float | None:
    policy = BoundedRetryPolicy(max_retry_after=CAP, clock=lambda: NOW)
    return policy.get_retry_after(PipelineResponseStandIn(HeadersOnly(headers)))


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", CAP),
        ("60", 60.0),
        ("59", 59.0),
        ("0", 0.0),
        ("-5", 0.0),
        ("1.5", 1.5),
        (" 7 ", 7.0),
        ("Wed, 01 May 2024 12:00:30 GMT", 30.0),
        ("Wed, 01 May 2024 12:00:30 -0000", 30.0),
        ("Wed, 01 May 2024 14:00:00 +0200", 0.0),
        ("Wed, 01 May 2024 13:00:00 GMT", CAP),
        ("Wed, 01 May 2024 11:59:00 GMT", 0.0),
        ("9" * 400, CAP),
        ("1e400", CAP),
        ("-1e400", 0.0),
        ("soon", None),
        ("", None),
        ("   ", None),
        ("nan", None),
        ("Wed, 99 Foo 2024 99:99:99 GMT", None),
        ("30 seconds", None),
    ],
    ids=lambda value: repr(value)[:24],
)
def test_retry_after_values(value: str, seconds: float | None) -> None:
    assert retry_after({"Retry-After": value}) == seconds


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, None),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"x-ms-retry-after-ms": "250"}, 0.25),
        ({"x-ms-retry-after-ms": "soon"}, None),
        ({"x-ms-retry-after-ms": "99999999"}, CAP),
        ({"Retry-After": "2", "retry-after-ms": "9000"}, 2.0),
    ],
)
def test_retry_after_headers(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after(headers) == seconds


@pytest.mark.parametrize("value", ["soon", "Mon, 32 Jan 2024", "\x00", "1e", "inf-"])
def test_parse_never_raises(value: str) -> None:
    assert parse_retry_after(value, NOW) is None
