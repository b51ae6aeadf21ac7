"""Thin blueprints, one per function; each holds its service in a ``ServiceSlot``.

The top of the deployed app: may import ``bootstrap`` (lazily, to build the service on first
use), ``settings`` and the services' types; only ``function_app.py`` and ``local`` import it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

Service = TypeVar("Service")


class ServiceSlot(Generic[Service]):
    """The service a blueprint's function calls: built on first use by the composition root
    (``scaling.bootstrap``) and kept for the life of the worker, so SDK clients are reused;
    ``set`` installs another one (tests, the local demo host)."""

    def __init__(self, build: Callable[[], Service]) -> None:
        self._build = build
        self._service: Service | None = None

    def get(self) -> Service:
        if self._service is None:
            self._service = self._build()
        return self._service

    def set(self, service: Service | None) -> Service | None:
        """Install ``service`` (``None``: rebuild on next use); returns the one installed before."""
        previous, self._service = self._service, service
        return previous


def handle_message(service: Any, msg: Any) -> Any:
    """``service.handle`` for one queue message; an exception is remembered for the poison
    handler (the host's poison copy carries no error) and raised, so the queue redelivers."""
    from scaling.services.dead_letters import LAST_ERRORS

    body = msg.get_body()
    try:
        return service.handle(body, dequeue_count=msg.dequeue_count or 1, message_id=msg.id)
    except Exception as error:
        LAST_ERRORS.remember(body, error)
        raise
