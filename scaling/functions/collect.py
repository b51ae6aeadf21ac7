"""collect: every minute (``COLLECT_SCHEDULE``), one metric sample per target to queue ``metrics``.

A thin blueprint: the work is ``scaling.services.collect.Collector``. The service is built
lazily at the first invocation and cached for the life of the worker, so importing
function_app.py needs no settings, SDK clients are reused across invocations, and a
configuration error fails the first invocation with ``SettingsError`` naming the setting.
"""

import logging
import typing
from typing import Protocol

import azure.functions as func

from scaling.functions import ServiceSlot
from scaling.settings import METRICS_QUEUE, STORAGE_SETTING

logger = logging.getLogger(__name__)

blueprint = func.Blueprint()


class CollectService(Protocol):
    async def collect_messages(self) -> list[str]: ...

    async def aclose(self) -> None: ...


def build_service() -> CollectService:
    """The production service from the app settings (raises ``SettingsError`` naming the setting)."""
    from scaling import bootstrap

    return bootstrap.build_collect_service()


_slot: ServiceSlot[CollectService] = ServiceSlot(build_service)
get_service = _slot.get
set_service = _slot.set


@blueprint.function_name("collect")
@blueprint.timer_trigger(schedule="%COLLECT_SCHEDULE%", arg_name="timer", run_on_startup=False)
@blueprint.queue_output(arg_name="metrics", queue_name=METRICS_QUEUE, connection=STORAGE_SETTING)
# typing.List, not list[...]: the binding's type check (azure.functions.meta) only accepts typing
# generics; and no `from __future__ import annotations` here, the worker inspects the real types.
async def collect(timer: func.TimerRequest, metrics: func.Out[typing.List[str]]) -> None:  # noqa: UP006
    if timer.past_due:
        logger.info("collect is running late (timer past due)")
    messages = await get_service().collect_messages()
    metrics.set(messages)
    logger.info("collect emitted %d samples", len(messages))
