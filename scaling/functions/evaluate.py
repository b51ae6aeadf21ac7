"""evaluate: queue ``metrics`` -> history, rule engine, decision log -> queue ``actions``.

A thin blueprint: the work is ``scaling.services.evaluate.EvaluateService``. The service
is built lazily at the first invocation and cached for the life of the worker (its state cache
saves a read per sample); ``set_service`` installs another one (tests, the local demo host).
A malformed message is dead-lettered by the service and the invocation succeeds; a storage
failure raises, so the queue redelivers the message (and after maxDequeueCount moves it to
``metrics-poison``).
"""

import logging
import typing
from typing import Protocol

import azure.functions as func

from scaling.functions import ServiceSlot, handle_message
from scaling.settings import ACTIONS_QUEUE, METRICS_QUEUE, STORAGE_SETTING

logger = logging.getLogger(__name__)

blueprint = func.Blueprint()


class EvaluateOutcomeLike(Protocol):
    status: str
    messages: tuple[str, ...]


class EvaluateServiceLike(Protocol):
    def handle(self, body: str | bytes, *, dequeue_count: int = 1, message_id: str | None = None) -> EvaluateOutcomeLike: ...


def build_service() -> EvaluateServiceLike:
    """The production service from the app settings (raises ``SettingsError`` naming the setting)."""
    from scaling import bootstrap

    return bootstrap.build_evaluate_service()


_slot: ServiceSlot[EvaluateServiceLike] = ServiceSlot(build_service)
get_service = _slot.get
set_service = _slot.set


@blueprint.function_name("evaluate")
@blueprint.queue_trigger(arg_name="msg", queue_name=METRICS_QUEUE, connection=STORAGE_SETTING)
@blueprint.queue_output(arg_name="actions", queue_name=ACTIONS_QUEUE, connection=STORAGE_SETTING)
# typing.List, not list[...], and no `from __future__ import annotations`: the worker inspects the real types.
def evaluate(msg: func.QueueMessage, actions: func.Out[typing.List[str]]) -> None:  # noqa: UP006
    outcome = handle_message(get_service(), msg)
    if outcome.messages:
        actions.set(list(outcome.messages))
    logger.info("evaluate: message %s -> %s (%d action message(s))", msg.id, outcome.status, len(outcome.messages))
