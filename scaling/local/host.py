"""A small local Functions host: runs the functions of ``function_app.py`` in-process on Azurite.

(What it reads first, host.json and the function bindings, is in ``bindings.py``; the timer
schedules in ``schedule.py``.)

Azure Functions Core Tools cannot be installed here, so this host plays the part the real
Functions host plays in Azure or under ``func start``, for the trigger and binding kinds the app
uses, with the semantics ``host.json`` configures:

- It indexes the app once (``FunctionApp.get_functions()``) and reads every function's bindings
  from its ``function.json`` document, resolving ``%SETTING%`` and ``connection`` names from
  the app settings it is given.
- **Timer triggers** fire on the clock the caller drives (``tick(now)``; the demo's clock runs
  accelerated, one simulated minute per step): a function fires once when its NCRONTAB schedule
  had an occurrence since the previous tick, with ``past_due`` set when it had more than one.
- **Queue triggers** are served from the real Azurite queues: messages are received in batches
  of ``batchSize`` with the ``visibilityTimeout``, and each is handed to the function as an
  ``azure.functions.QueueMessage`` with its id, body, dequeue count, insertion/expiry times and
  pop receipt. On success the outputs are sent and then the message is deleted; on an exception
  the message is left alone, so it becomes visible again when its visibility timeout ends and is
  redelivered with a higher dequeue count; after ``maxDequeueCount`` failed deliveries it is moved
  to ``<queue>-poison``. Bodies are encoded as ``messageEncoding`` says (base64 by default, as
  in the Functions queue extension; ``none``: plain text).
- **Queue outputs** (``func.Out``) are collected during the invocation and sent to their queue
  with azure-storage-queue after it returns (nothing is sent when it raises).

Sync functions run in a worker thread and async ones on the host's event loop, like the Python
worker does. Messages are processed one at a time, in order (the real host runs a batch
concurrently; with one message per target per minute it makes no difference here).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from scaling.local.bindings import FunctionSpec, QueueOptions, host_out_class, index_functions
from scaling.local.schedule import Schedule

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
POISON_SUFFIX = "-poison"


# --- the host -----------------------------------------------------------------------------------


@dataclass
class HostStats:
    invocations: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)
    sent: Counter = field(default_factory=Counter)
    poisoned: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)


class LocalFunctionsHost:
    """Runs ``app``'s timer and queue-triggered functions against real Azurite queues.

    ``app_settings`` plays the Function App's application settings (``local.settings.json``
    ``Values``): binding expressions ``%NAME%`` and ``connection`` names resolve against it.
    Use ``start(now)``, then ``tick(now)`` and ``drain()`` as the clock moves, then ``close()``.
    """

    SUPPORTED_TRIGGERS = ("timerTrigger", "queueTrigger")

    def __init__(self, app: Any, app_settings: Mapping[str, str], *, host_json: str | Path = ROOT / "host.json",
                 queue_options: QueueOptions | None = None) -> None:
        self.app_settings = dict(app_settings)
        self.options = queue_options or QueueOptions.from_host_json(host_json)
        self.functions = index_functions(app)
        unsupported = [f"{spec.name} ({spec.trigger_type})" for spec in self.functions
                       if spec.trigger_type not in self.SUPPORTED_TRIGGERS]
        if unsupported:
            raise ValueError(f"the local host runs timer and queue triggers only; unsupported: {', '.join(unsupported)}")
        for spec in self.functions:
            for output in spec.outputs:
                if output.get("type") != "queue":
                    raise ValueError(f"function {spec.name}: output binding type {output.get('type')!r} is not supported")
        self.timers = {spec.name: Schedule.parse(self.resolve(spec.trigger["schedule"], f"{spec.name}.schedule"))
                       for spec in self.functions if spec.trigger_type == "timerTrigger"}
        self.queue_triggered = [spec for spec in self.functions if spec.trigger_type == "queueTrigger"]
        self.stats = HostStats()
        self._out = host_out_class()
        self._clients: dict[tuple[str, str], Any] = {}
        self._last_tick: datetime | None = None
        self._dirty: set[str] = set()  # queues sent to since they were last polled

    # --- settings and clients ---------------------------------------------------------------------

    def resolve(self, value: str, what: str) -> str:
        """Replace ``%NAME%`` with the app setting ``NAME`` (a missing setting is an error, as in Azure)."""
        def setting(match: re.Match) -> str:
            name = match.group(1)
            if name not in self.app_settings:
                raise ValueError(f"{what}: app setting {name!r} (referenced as %{name}%) is not set")
            return self.app_settings[name]

        return re.sub(r"%([^%]+)%", setting, value)

    def _connection_string(self, binding: Mapping[str, Any], what: str) -> str:
        name = binding.get("connection") or "AzureWebJobsStorage"
        value = self.app_settings.get(name)
        if not value:
            raise ValueError(f"{what}: app setting {name!r} (the binding's connection) is not set; the local host "
                             "needs a connection string (Azurite)")
        return value

    def _queue(self, binding: Mapping[str, Any], what: str, *, suffix: str = "") -> Any:
        from azure.storage.queue import QueueClient, TextBase64DecodePolicy, TextBase64EncodePolicy

        connection = self._connection_string(binding, what)
        name = self.resolve(str(binding["queueName"]), f"{what}.queueName").lower() + suffix
        key = (connection, name)
        client = self._clients.get(key)
        if client is None:
            codecs = ({"message_encode_policy": TextBase64EncodePolicy(), "message_decode_policy": TextBase64DecodePolicy()}
                      if self.options.message_encoding == "base64" else {})
            client = QueueClient.from_connection_string(connection, name, **codecs)
            self._create(client)
            self._clients[key] = client
        return client

    @staticmethod
    def _create(client: Any) -> None:
        from azure.core.exceptions import ResourceExistsError

        with contextlib.suppress(ResourceExistsError):
            client.create_queue()

    # --- lifecycle ----------------------------------------------------------------------------------

    async def start(self, now: datetime) -> None:
        """Create the trigger queues (as the host's listeners do) and fire ``runOnStartup`` timers."""
        for spec in self.queue_triggered:
            await asyncio.to_thread(self._queue, spec.trigger, spec.name)
        self._last_tick = now
        for spec in self.functions:
            if spec.trigger_type == "timerTrigger" and spec.trigger.get("runOnStartup"):
                await self._fire_timer(spec, past_due=False)

    def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    # --- timers -----------------------------------------------------------------------------------

    async def tick(self, now: datetime) -> list[str]:
        """Fire every timer function whose schedule fell due in ``(previous tick, now]``; returns their names."""
        if self._last_tick is None:
            raise RuntimeError("LocalFunctionsHost.start() was not awaited")
        previous, self._last_tick = self._last_tick, now
        fired = []
        for spec in self.functions:
            if spec.trigger_type != "timerTrigger":
                continue
            due = self.timers[spec.name].occurrences(previous, now, limit=2)
            if due:
                await self._fire_timer(spec, past_due=due > 1)
                fired.append(spec.name)
        return fired

    async def _fire_timer(self, spec: FunctionSpec, *, past_due: bool) -> bool:
        from azure.functions.timer import TimerRequest

        try:
            outputs = await self._invoke(spec, TimerRequest(past_due=past_due))
            await self._send_outputs(spec, outputs)
        except Exception as error:  # the real host logs a failed timer run; the next occurrence runs anyway
            self._failed(spec, error)
            return False
        return True

    # --- queues -------------------------------------------------------------------------------------

    async def drain(self, max_passes: int = 10_000) -> int:
        """Deliver visible messages until the trigger queues are idle; returns the deliveries.

        Every trigger queue is polled at least once per call; after that, only queues that may
        hold more are polled again: ones that returned a full batch, or that this host sent
        output to after polling them. (The real host keeps polling every queue, backing off to
        ``maxPollingInterval`` when idle; here the clock only moves when the queues are idle.)
        Messages whose delivery failed stay invisible for the visibility timeout, so they do not
        keep the loop busy; they come back on a later ``drain``.
        """
        delivered = 0
        pending = [spec.name for spec in self.queue_triggered]
        for _ in range(max_passes):
            if not pending:
                return delivered
            self._dirty.clear()
            again: list[str] = []
            for spec in self.queue_triggered:
                if spec.name not in pending:
                    continue
                client = self._queue(spec.trigger, spec.name)
                self._dirty.discard(client.queue_name)
                messages = await asyncio.to_thread(self._receive, client)
                for message in messages:
                    await self._deliver(spec, client, message)
                delivered += len(messages)
                if len(messages) >= self.options.batch_size:
                    again.append(spec.name)
            again.extend(spec.name for spec in self.queue_triggered
                         if spec.name not in again and self._trigger_queue_name(spec) in self._dirty)
            pending = again
        raise RuntimeError(f"the queues did not drain within {max_passes} passes")

    def _trigger_queue_name(self, spec: FunctionSpec) -> str:
        return self.resolve(str(spec.trigger["queueName"]), f"{spec.name}.queueName").lower()

    def _receive(self, client: Any) -> list[Any]:
        batch = self.options.batch_size
        visibility = max(int(round(self.options.visibility_timeout_seconds)), 1)
        return list(client.receive_messages(messages_per_page=batch, max_messages=batch, visibility_timeout=visibility))

    async def _deliver(self, spec: FunctionSpec, client: Any, message: Any) -> None:
        from azure.functions.queue import QueueMessage

        if message.dequeue_count > self.options.max_dequeue_count:
            # Delivered more often than allowed without being settled (a worker died mid-way).
            await self._poison(spec, client, message)
            return
        trigger = QueueMessage(
            id=message.id, body=message.content, dequeue_count=message.dequeue_count,
            expiration_time=message.expires_on, insertion_time=message.inserted_on,
            time_next_visible=message.next_visible_on, pop_receipt=message.pop_receipt,
        )
        try:
            outputs = await self._invoke(spec, trigger)
            await self._send_outputs(spec, outputs)  # a failed output binding fails the invocation
        except Exception as error:
            self._failed(spec, error, message)
            if message.dequeue_count >= self.options.max_dequeue_count:
                await self._poison(spec, client, message)
            # Otherwise left as it is: visible again when the visibility timeout ends.
            return
        try:
            await asyncio.to_thread(client.delete_message, message.id, message.pop_receipt)
        except Exception as error:  # e.g. the pop receipt expired: the message comes back (at least once)
            logger.warning("function %s: message %s was processed but could not be deleted: %s", spec.name,
                           message.id, error)

    async def _poison(self, spec: FunctionSpec, client: Any, message: Any) -> None:
        poison = await asyncio.to_thread(self._queue, spec.trigger, spec.name, suffix=POISON_SUFFIX)
        await asyncio.to_thread(poison.send_message, message.content)
        await asyncio.to_thread(client.delete_message, message.id, message.pop_receipt)
        self.stats.poisoned[poison.queue_name] += 1
        logger.error("function %s: message %s moved to %s after %d deliveries", spec.name, message.id,
                     poison.queue_name, message.dequeue_count)

    def poison_counts(self) -> dict[str, int]:
        """Messages waiting in each trigger queue's poison queue (0 when it does not exist)."""
        from azure.core.exceptions import ResourceNotFoundError

        counts = {}
        for spec in self.queue_triggered:
            name = self.resolve(str(spec.trigger["queueName"]), spec.name).lower() + POISON_SUFFIX
            client = self._clients.get((self._connection_string(spec.trigger, spec.name), name))
            if client is None:
                from azure.storage.queue import QueueClient

                client = QueueClient.from_connection_string(self._connection_string(spec.trigger, spec.name), name)
            try:
                counts[name] = len(client.peek_messages(max_messages=32))
            except ResourceNotFoundError:
                counts[name] = 0
        return counts

    # --- invocation -------------------------------------------------------------------------------

    async def _invoke(self, spec: FunctionSpec, trigger_value: Any) -> dict[str, Any]:
        outputs = {str(binding["name"]): self._out() for binding in spec.outputs}
        arguments = {str(spec.trigger["name"]): trigger_value, **outputs}
        self.stats.invocations[spec.name] += 1
        if spec.is_async:
            await spec.user_function(**arguments)
        else:
            await asyncio.to_thread(spec.user_function, **arguments)
        return {name: out.get() for name, out in outputs.items()}

    async def _send_outputs(self, spec: FunctionSpec, outputs: Mapping[str, Any]) -> None:
        for binding in spec.outputs:
            value = outputs.get(str(binding["name"]))
            if value is None:
                continue
            items = value if isinstance(value, list | tuple) else [value]
            client = await asyncio.to_thread(self._queue, binding, f"{spec.name}.{binding['name']}")
            for item in items:
                text = item.decode("utf-8") if isinstance(item, bytes) else item if isinstance(item, str) else json.dumps(item)
                await asyncio.to_thread(client.send_message, text)
                self.stats.sent[client.queue_name] += 1
                self._dirty.add(client.queue_name)

    def _failed(self, spec: FunctionSpec, error: BaseException, message: Any = None) -> None:
        self.stats.failures[spec.name] += 1
        where = f" (message {message.id}, dequeue count {message.dequeue_count})" if message is not None else ""
        text = f"{spec.name}{where}: {type(error).__name__}: {error}"
        self.stats.errors.append(text)
        logger.error("function %s failed%s", spec.name, where, exc_info=error)
