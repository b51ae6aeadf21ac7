"""The demo's orchestration: start Azurite and the local ARM endpoint, wire the production services
to the simulated hub and plan, run the minute loop through the in-process Functions host, score
the run and stop everything, whatever happens.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TextIO

from scaling.local.demo.config import PLAN_ID, PLAN_TIER, ROOT, DemoError, DemoOptions, DemoResult, app_settings_for, demo_target
from scaling.local.demo.display import LiveDisplay
from scaling.local.demo.files import write_outputs
from scaling.local.demo.reference import TOLERANCE, Tolerance, compare, simulate_summary, summarize


@contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """SIGTERM (and SIGHUP) end the run like Ctrl-C, so the ``finally`` blocks stop everything."""
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)
        if number is not None:
            with suppress(ValueError):  # not the main thread: leave the handlers alone
                previous[number] = signal.signal(number, interrupt)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def run_demo(options: DemoOptions, *, stream: TextIO | None = None, tolerance: Tolerance = TOLERANCE,
             azurite_factory: Callable[[], Any] | None = None) -> DemoResult:
    """Run the demo; Azurite and the local ARM endpoint are always stopped before it returns."""
    import logging

    from scaling.local.azurite import Azurite
    from scaling.local.simhub import load_arrivals
    from scaling.plans.local_arm import LocalArm, serve_local_arm
    from scaling.simulation.world.loop import Scenario

    stream = stream or sys.stdout
    # The local ARM endpoint's access log (one line per request) is not the demo's output.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    scenario = options.scenario or Scenario()
    if not Path(options.trace).is_file():
        raise DemoError(f"--trace {options.trace}: no such file (the public traces ship in data/traces)")
    try:
        arrivals = load_arrivals(options.trace, start=options.start, minutes=options.minutes, scenario=scenario)
    except ValueError as error:
        raise DemoError(f"--trace {options.trace}: {error}") from error
    target = demo_target(options.policy, partitions=scenario.partitions, source=options.source)
    simulated = simulate_summary(options.trace, start=options.start, minutes=options.minutes, target=target,
                                 scenario=scenario, source=options.source)

    started = time.monotonic()
    azurite = (azurite_factory or Azurite)()
    with _stop_on_sigterm():
        try:
            endpoints = azurite.start()
            ports = (endpoints.blob_port, endpoints.queue_port, endpoints.table_port)
            if options.live:
                stream.write(f"Azurite on 127.0.0.1 ports {ports[0]} (blob), {ports[1]} (queue), {ports[2]} (table); "
                             f"{len(arrivals)} simulated minutes of {options.trace} from minute {options.start}\n")
            with serve_local_arm(LocalArm()) as arm:
                run = _DemoRun(options, scenario, arrivals, target, endpoints.connection_string, arm, stream)
                result = asyncio.run(run.main())
        finally:
            azurite.stop()
    result.simulated = simulated
    result.differences = compare(result.summary, simulated, tolerance)
    result.wall_seconds = time.monotonic() - started
    result.azurite_ports = ports
    summary_path = Path(options.out) / "summary.json"
    summary_path.write_text(json.dumps({
        "trace": str(options.trace), "start": options.start, "minutes": len(arrivals), "target": target.name,
        "mode": target.mode, "source": options.source, "demo": result.summary, "simulate": simulated, "tolerance": tolerance.describe(),
        "agrees": result.agrees, "differences": result.differences, "wall_seconds": round(result.wall_seconds, 1),
        "invocations": result.invocations, "failures": result.failures, "poison": result.poison,
        "plan_writes": result.plan_writes, "checkpoint_writes": result.checkpoint_writes,
        "milliseconds_per_simulated_minute": result.milliseconds_per_minute(),
    }, indent=1), encoding="utf-8")
    result.files["summary"] = summary_path
    return result


class _DemoRun:
    """One run's wiring and loop (everything async runs on one event loop)."""

    def __init__(self, options: DemoOptions, scenario: Any, arrivals: Any, target: Any, connection_string: str,
                 arm: Any, stream: TextIO) -> None:
        self.options = options
        self.scenario = scenario
        self.arrivals = arrivals
        self.target = target
        self.connection_string = connection_string
        self.arm = arm
        self.stream = stream
        self.display = LiveDisplay(stream, len(arrivals), enabled=options.live)
        self.phase_seconds: dict[str, float] = {}

    async def main(self) -> DemoResult:
        """Wire the production services to the simulated world, run every minute, then restore
        the Functions modules and close every client whatever happened. One function because the
        wiring's closers and the modules' services are undone in its one ``finally``."""
        import logging

        from scaling.functions import collect as collect_module
        from scaling.functions import evaluate as evaluate_module
        from scaling.functions import poison as poison_module
        from scaling.functions import scale as scale_module
        from scaling.local.host import LocalFunctionsHost
        from scaling.local.simhub import SimulatedClock, SimulatedConsumers, SimulatedHub
        from scaling.local.simqueue import NAMESPACE_ID as QUEUE_NAMESPACE_ID
        from scaling.local.simqueue import QUEUE_NAME, SimulatedQueue
        from scaling.plans.local_arm import EntityCounts
        from scaling.settings import Settings
        from scaling.simulation.peers.looped import EPOCH
        from scaling.simulation.queue.world import QueueWorld
        from scaling.simulation.world.loop import World

        arm = self.arm
        arm.arm.add_plan(PLAN_ID, capacity=self.scenario.initial_capacity, tier=PLAN_TIER)
        app_settings = app_settings_for(self.target, self.connection_string, arm.base_url)
        settings = Settings.from_environment(app_settings)
        # Minute 0 of the window is EPOCH plus --start minutes, so a trace that starts at midnight
        # (WC98, NASA) shows its own time of day in the decision log.
        clock = SimulatedClock(EPOCH + _minutes(self.options.start))
        on_queue = self.options.source == "servicebus"
        # The queue demo swaps the hub for a simulated queue (no Service Bus emulator either):
        # competing consumers, no checkpoints.
        world = QueueWorld(self.arrivals, self.scenario) if on_queue else World(self.arrivals, self.scenario)
        hub = None if on_queue else SimulatedHub(world)
        queue = SimulatedQueue(world, clock.epoch) if on_queue else None
        consumers = None if on_queue else SimulatedConsumers(world, self.connection_string)
        modules = (collect_module, evaluate_module, scale_module, poison_module)
        previous = tuple(module.set_service(None) for module in modules)
        closers: list[Any] = [consumers.close] if consumers else []
        host = None
        try:
            if consumers:
                await consumers.open()
            if queue:
                arm.arm.service_bus.add_queue(QUEUE_NAMESPACE_ID, QUEUE_NAME,
                                              EntityCounts(active_from=lambda: world.observe().active_messages))
            tables = self._install_services(settings, app_settings, clock, hub, queue, modules, closers)
            app = _function_app(app_settings)
            logging.disable(logging.WARNING)  # azure.functions warns that auth levels do not apply to non-HTTP functions
            try:
                host = LocalFunctionsHost(app, app_settings)
            finally:
                logging.disable(logging.NOTSET)
            await host.start(clock())
            await self._run_minutes(world, clock, consumers, host, tables)
            records = await asyncio.to_thread(tables.decisions, self.target.name)
            poison = await asyncio.to_thread(host.poison_counts)
        finally:
            self.display.done()
            for module, service in zip(modules, previous, strict=True):
                module.set_service(service)
            if host is not None:
                host.close()
            for close in reversed(closers):
                await _quietly(close)
        run_result = world.result(algorithm=f"demo:{self.target.name}", knob=self.target.mode)
        files = write_outputs(Path(self.options.out), run_result, records, clock, self.scenario, self.target,
                              trace=self.options.trace, start=self.options.start)
        return DemoResult(
            summary=summarize(run_result, self.scenario), simulated={}, differences=[], decisions=records, files=files,
            invocations=dict(host.stats.invocations), failures=dict(host.stats.failures), poison=poison,
            plan_writes=len(arm.arm.writes), checkpoint_writes=consumers.writes if consumers else 0, capacity=run_result.capacity,
            phase_seconds=dict(self.phase_seconds), count_reads=len(arm.arm.service_bus.requests),
        )

    def _install_services(self, settings: Any, app_settings: dict, clock: Any, hub: Any, queue: Any,
                          modules: tuple, closers: list[Any]) -> Any:
        """The production services, built by the real factories from the app settings, on the
        demo's clock, set on the Functions modules; each client's close goes on ``closers``.
        Only the Event Hubs partition source (or the queue's peek and Azure Monitor rates) is
        simulated; the queue's count goes through the real Service Bus management client to the
        local ARM endpoint, as in Azure. Returns the tables that read the decision log back."""
        from scaling.bootstrap import collector_for, evaluate_service_for, scale_service_for
        from scaling.plans.factory import build_plan_adapter
        from scaling.plans.local_arm import AsyncStaticTokenCredential
        from scaling.services.dead_letters import DeadLetterService
        from scaling.storage.factory import build_table_storage

        arm = self.arm

        def plan_adapter() -> Any:
            adapter = build_plan_adapter(settings, arm.credential, polling_interval=0, **arm.client_kwargs())
            closers.append(adapter.close)
            return adapter

        collector = collector_for(settings, AsyncStaticTokenCredential() if queue else None,
                                  capacity_reader=plan_adapter(), environ=app_settings, clock=clock,
                                  partition_source_for=lambda source: hub,
                                  peek_and_rates_for=(lambda source: queue) if queue else None,
                                  arm_client_kwargs=arm.client_kwargs())
        closers.append(collector.aclose)
        evaluate_service = evaluate_service_for(settings, clock=clock)
        closers.append(evaluate_service.store.close)
        scale_service = scale_service_for(settings, plans=plan_adapter(), clock=clock)
        closers.append(scale_service.store.close)
        tables = build_table_storage(settings, ensure=False)
        closers.append(tables.close)
        dead_letters = DeadLetterService(evaluate_service.store, clock=clock)
        for module, service in zip(modules, (collector, evaluate_service, scale_service, dead_letters), strict=True):
            module.set_service(service)
        return tables

    async def _run_minutes(self, world: Any, clock: Any, consumers: Any, host: Any, tables: Any) -> None:
        """The minute loop: the world steps, the consumers checkpoint, the timer collects, the
        queues drain, the plan's count goes back to the world and new decisions are shown;
        paced to ``--speed`` simulated minutes a second (0: as fast as it goes)."""
        self.display.header()
        began = time.monotonic()
        phases = self.phase_seconds
        seen: set[str] = set()
        for _ in range(len(self.arrivals)):
            mark = time.perf_counter()
            world.advance()
            clock.minute = world.minute
            mark = _lap(phases, "world", mark)
            if consumers:
                await consumers.claim()
                await consumers.checkpoint()
                mark = _lap(phases, "checkpoints", mark)
            await host.tick(clock())
            mark = _lap(phases, "timer (collect)", mark)
            await host.drain()
            mark = _lap(phases, "queues (evaluate, scale)", mark)
            world.request(self.arm.arm.capacity(PLAN_ID))
            since = clock() - _minutes(1)
            for record in await asyncio.to_thread(tables.decisions, self.target.name, since):
                if record.row_key not in seen:
                    seen.add(record.row_key)
                    self.display.decision(record, clock, world)
            self.display.progress(world, clock)
            _lap(phases, "decision log, display", mark)
            if self.options.speed > 0:
                ahead = began + world.minute / self.options.speed - time.monotonic()
                if ahead > 0:
                    await asyncio.sleep(ahead)


def _lap(phases: dict[str, float], name: str, mark: float) -> float:
    now = time.perf_counter()
    phases[name] = phases.get(name, 0.0) + now - mark
    return now


def _function_app(app_settings: dict[str, str]) -> Any:
    """``function_app.app``, imported as a Functions host loads it: with the app settings in the
    environment, so its start-up validation (``scaling.bootstrap.validate_at_startup``) checks
    the demo's settings. The environment is restored afterwards."""
    import importlib
    import os

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    saved = {name: os.environ.get(name) for name in app_settings}
    os.environ.update(app_settings)
    try:
        return importlib.import_module("function_app").app
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _minutes(count: float) -> Any:
    from datetime import timedelta

    return timedelta(minutes=count)


async def _quietly(close: Callable[[], Any]) -> None:
    """Call a sync or async ``close``; closing must not hide the run's own error."""
    with suppress(Exception):
        result = close()
        if asyncio.iscoroutine(result):
            await result
