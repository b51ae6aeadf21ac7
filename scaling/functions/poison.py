"""evaluate_poison / scale_poison: drain ``metrics-poison`` and ``actions-poison`` into the
dead-letter table, so nothing is left in a poison queue unread.

A thin blueprint: the work is ``scaling.services.dead_letters.DeadLetterService``. Each poison
message is recorded once (with its body, dequeue count and the last error this worker saw for
it) and acknowledged; ``python -m scaling dead-letters`` lists and replays them.
"""

import logging

import azure.functions as func

from scaling.functions import ServiceSlot
from scaling.settings import ACTIONS_POISON_QUEUE, METRICS_POISON_QUEUE, STORAGE_SETTING

logger = logging.getLogger(__name__)

blueprint = func.Blueprint()


def build_service():  # -> DeadLetterService (imported lazily: no settings needed to index the app)
    from scaling import bootstrap

    return bootstrap.build_dead_letter_service()


_slot: ServiceSlot = ServiceSlot(build_service)
get_service = _slot.get
set_service = _slot.set


def _record(function: str, msg: func.QueueMessage) -> None:
    outcome = get_service().record_poison(function, msg.get_body(), dequeue_count=msg.dequeue_count or 1,
                                          message_id=msg.id)
    logger.info("%s poison message %s -> %s (%s)", function, msg.id, outcome.status, outcome.letter.letter_id)


@blueprint.function_name("evaluate_poison")
@blueprint.queue_trigger(arg_name="msg", queue_name=METRICS_POISON_QUEUE, connection=STORAGE_SETTING)
def evaluate_poison(msg: func.QueueMessage) -> None:
    _record("evaluate", msg)


@blueprint.function_name("scale_poison")
@blueprint.queue_trigger(arg_name="msg", queue_name=ACTIONS_POISON_QUEUE, connection=STORAGE_SETTING)
def scale_poison(msg: func.QueueMessage) -> None:
    _record("scale", msg)
