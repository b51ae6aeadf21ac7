"""scale: queue ``actions`` -> the App Service Plan's capacity through ARM (azure-mgmt-web).

A thin blueprint: the work is ``scaling.services.scale.ScaleService`` (idempotent per
decision id, skips stale actions, clamps to policy and SKU limits, honours ``SCALER_DRY_RUN``).
Built lazily at the first invocation and cached; ``set_service`` installs another one (tests,
the local demo host). A final ARM failure is recorded and the invocation succeeds (the next
evaluation decides again); a storage failure raises so that the queue redelivers.
"""

import logging
from typing import Protocol

import azure.functions as func

from scaling.functions import ServiceSlot, handle_message
from scaling.settings import ACTIONS_QUEUE, STORAGE_SETTING

logger = logging.getLogger(__name__)

blueprint = func.Blueprint()


class ScaleOutcomeLike(Protocol):
    status: str


class ScaleServiceLike(Protocol):
    def handle(self, body: str | bytes, *, dequeue_count: int = 1, message_id: str | None = None) -> ScaleOutcomeLike: ...


def build_service() -> ScaleServiceLike:
    """The production service from the app settings (raises ``SettingsError`` naming the setting)."""
    from scaling import bootstrap

    return bootstrap.build_scale_service()


_slot: ServiceSlot[ScaleServiceLike] = ServiceSlot(build_service)
get_service = _slot.get
set_service = _slot.set


@blueprint.function_name("scale")
@blueprint.queue_trigger(arg_name="msg", queue_name=ACTIONS_QUEUE, connection=STORAGE_SETTING)
def scale(msg: func.QueueMessage) -> None:
    outcome = handle_message(get_service(), msg)
    logger.info("scale: message %s -> %s", msg.id, outcome.status)
