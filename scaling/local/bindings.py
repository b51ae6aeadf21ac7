"""What the local Functions host (``host.py``) reads before it runs anything: the queue options of
``host.json`` and the app's functions with the bindings their ``function.json`` declares, and
the ``func.Out`` it hands to output bindings."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _timespan_seconds(value: Any, name: str) -> float:
    """``hh:mm:ss`` (or ``d.hh:mm:ss``) as in host.json, in seconds."""
    text = str(value)
    match = re.fullmatch(r"(?:(\d+)\.)?(\d+):(\d+):(\d+(?:\.\d+)?)", text)
    if not match:
        raise ValueError(f"host.json {name} must be a timespan hh:mm:ss, got {value!r}")
    days, hours, minutes, seconds = match.groups()
    return int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(seconds)


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """``extensions.queues`` of host.json (defaults as the Functions queue extension's)."""

    visibility_timeout_seconds: float = 0.0
    batch_size: int = 16
    max_dequeue_count: int = 5
    message_encoding: str = "base64"

    @classmethod
    def from_host_json(cls, path: str | Path) -> QueueOptions:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        queues = (document.get("extensions") or {}).get("queues") or {}
        encoding = str(queues.get("messageEncoding", "base64")).lower()
        if encoding not in ("base64", "none"):
            raise ValueError(f"host.json extensions.queues.messageEncoding must be base64 or none, got {encoding!r}")
        return cls(
            visibility_timeout_seconds=_timespan_seconds(queues.get("visibilityTimeout", "00:00:00"), "visibilityTimeout"),
            batch_size=int(queues.get("batchSize", 16)),
            max_dequeue_count=int(queues.get("maxDequeueCount", 5)),
            message_encoding=encoding,
        )


class OutValue:
    """The ``func.Out`` the host hands to a function for an output binding."""

    def __init__(self) -> None:
        self.value: Any = None

    def set(self, val: Any) -> None:
        self.value = val

    def get(self) -> Any:
        return self.value


def host_out_class() -> type:
    import azure.functions as func

    class HostOut(OutValue, func.Out):  # a real func.Out, so isinstance checks in user code hold
        pass

    return HostOut


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """One indexed function: its name, user code, trigger binding and output bindings."""

    name: str
    user_function: Callable[..., Any]
    trigger: Mapping[str, Any]
    outputs: tuple[Mapping[str, Any], ...]

    @property
    def trigger_type(self) -> str:
        return str(self.trigger["type"])

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.user_function)


def index_functions(app: Any) -> list[FunctionSpec]:
    """Every function of ``app`` with the bindings its ``function.json`` declares.

    ``FunctionApp.get_functions()`` may be called once per app (a second call raises a duplicate
    function name error), so the previous indexing is reset first.
    """
    app.functions_bindings = None
    specs = []
    for function in app.get_functions():
        document = json.loads(function.get_function_json())
        bindings = document.get("bindings") or []
        triggers = [b for b in bindings if str(b.get("type", "")).endswith("Trigger")]
        if len(triggers) != 1:
            raise ValueError(f"function {function.get_function_name()!r} must have exactly one trigger, has {len(triggers)}")
        outputs = tuple(b for b in bindings if str(b.get("direction", "")).upper() == "OUT")
        specs.append(FunctionSpec(function.get_function_name(), function.get_user_function(), triggers[0], outputs))
    return specs
