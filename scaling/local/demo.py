"""``python -m scaling demo``: the whole autoscaler running locally, end to end, on real storage.

What runs (docs/demo.md):

- **Azurite** (queues, tables, blobs) on free ports, started here and stopped on exit or Ctrl-C.
- **The three functions of function_app.py** (collect, evaluate, scale), their blueprint bodies
  invoked by ``scaling.local.host.LocalFunctionsHost``: the timer on the demo's accelerated
  clock, queue triggers served from the real ``metrics`` and ``actions`` queues with host.json's
  semantics. Their services are the production ones built by the real factories from app
  settings, installed through each blueprint's ``set_service`` hook.
- **A simulated Event Hub** (``scaling.local.simhub``) replaying a real trace through the
  benchmark's ``World``; its consumers process at the plan's capacity and write real checkpoint
  blobs that ``collect`` reads with its real checkpoint reader.
- **A simulated App Service Plan** behind a local TLS endpoint speaking ARM
  (``scaling.plans.local_arm``), resized by ``scale`` through the real azure-mgmt-web client.
  Each simulated minute the demo reads the plan's capacity and the world starts new instances
  after the scenario's provisioning delay.

Each simulated minute: advance the world one minute, write checkpoints, fire the timer, drain
the queues until idle, apply the plan's capacity to the world. At the end the run is scored like
the benchmark, cross-checked against ``python -m scaling simulate`` on the same window (the same
engine without storage), and the plot and the decision log (read back from the decision table)
are written to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import math
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "worldcup98" / "per_minute.csv"
#: WC98 1998-06-10 from 10:00 UTC to midnight: the morning rise, the opening match's surge to about
#: ten times the night's rate (peak 17:26), the evening matches and the decline. Three to four
#: minutes on a 2-core machine; ``--start 0 --minutes 1440`` runs the whole day.
DEFAULT_START = 600
DEFAULT_MINUTES = 840
TARGET_NAME = "demo"
SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
PLAN_ID = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/demo/providers/Microsoft.Web/serverfarms/demo-consumers"
#: IsolatedV2 allows 100 instances, so the SKU never clamps below the policy's 32.
PLAN_TIER = "IsolatedV2"
EVENTHUB_SETTING = "DEMO_EVENTHUB_CONNECTION"
CHECKPOINT_SETTING = "DEMO_CHECKPOINT_STORAGE"


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How close the demo's summary must be to ``simulate``'s on the same window."""

    cost_ratio_relative: float = 0.02
    slo_violation_minutes: int = 2
    scale_actions: int = 2

    def describe(self) -> str:
        return (f"cost ratio within {self.cost_ratio_relative:.0%}, SLO-violation minutes within "
                f"{self.slo_violation_minutes}, scale actions within {self.scale_actions}")


TOLERANCE = Tolerance()


@dataclass(frozen=True, slots=True)
class DemoOptions:
    trace: Path = DEFAULT_TRACE
    minutes: int | None = DEFAULT_MINUTES
    start: int = DEFAULT_START
    speed: float = 0.0
    policy: Path | None = None
    out: Path = Path("out")
    live: bool = True


@dataclass
class DemoResult:
    summary: dict[str, Any]
    simulated: dict[str, Any]
    differences: list[str]
    decisions: list[Any]
    files: dict[str, Path]
    invocations: dict[str, int]
    failures: dict[str, int]
    poison: dict[str, int]
    plan_writes: int
    checkpoint_writes: int
    capacity: Any = field(repr=False, default=None)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0
    azurite_ports: tuple[int, ...] = ()

    @property
    def agrees(self) -> bool:
        return not self.differences

    def milliseconds_per_minute(self) -> dict[str, float]:
        """Wall time per simulated minute, by phase of the loop."""
        minutes = max(int(self.summary.get("minutes", 0)), 1)
        return {phase: round(seconds * 1000 / minutes, 1) for phase, seconds in self.phase_seconds.items()}


# --- command line ----------------------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE,
                        help="per-minute trace CSV (default: ../shared/traces/worldcup98/per_minute.csv beside the repo)")
    parser.add_argument("--minutes", type=int, default=DEFAULT_MINUTES,
                        help=f"simulated minutes to run (default {DEFAULT_MINUTES}: to midnight, through the day's surge)")
    parser.add_argument("--start", type=int, default=DEFAULT_START,
                        help=f"minute offset into the trace (default {DEFAULT_START}: WC98 1998-06-10 10:00 UTC)")
    parser.add_argument("--speed", type=float, default=0.0,
                        help="simulated minutes per real second (default 0: as fast as possible)")
    parser.add_argument("--policy", type=Path,
                        help="a policy file whose first target's settings (mode, slo, rules, bounds, steps) replace "
                             "the default policy's; plan and source stay the demo's local ones")
    parser.add_argument("--out", type=Path, default=Path("out"), help="where the plot and CSV files go (default out/)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or live table, only the summary")


def run(args: argparse.Namespace) -> int:
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.minutes is not None and args.minutes < 1:
        print("error: --minutes must be at least 1", file=sys.stderr)
        return 2
    if args.speed < 0:
        print("error: --speed must not be negative", file=sys.stderr)
        return 2
    options = DemoOptions(trace=args.trace, minutes=args.minutes, start=args.start, speed=args.speed,
                          policy=args.policy, out=args.out, live=not args.quiet)
    try:
        result = run_demo(options)
    except DemoError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: Azurite and the local ARM endpoint were stopped", file=sys.stderr)
        return 130
    print_summary(result, options, sys.stdout)
    problems = result.differences or [f"{name}: {count} poison message(s)" for name, count in result.poison.items() if count]
    return 1 if problems else 0


class DemoError(ValueError):
    """A problem with the demo's options (trace, window, policy file)."""


# --- the policy and the app settings ---------------------------------------------------------------


def default_policy_document(partitions: int = 32) -> dict[str, Any]:
    """The default policy: one target in SLO mode, bounds shaped like the hub (as ``simulated_target``)."""
    from scaling.local.simhub import CHECKPOINT_CONTAINER, EVENT_HUB

    return {"version": 1, "targets": [{
        "name": TARGET_NAME,
        "plan": {"resource_id": PLAN_ID},
        "sources": [{"kind": "eventhub", "name": "hub", "eventHubName": EVENT_HUB, "consumerGroup": "$Default",
                     "connectionFromEnv": EVENTHUB_SETTING, "storageConnectionFromEnv": CHECKPOINT_SETTING,
                     "checkpointStrategy": "blobMetadata", "blobContainer": CHECKPOINT_CONTAINER}],
        "bounds": {"min_instances": 1, "max_instances": partitions, "balanced_counts": True},
        "mode": "slo",
    }]}


def demo_target(policy_file: Path | None = None, *, partitions: int = 32) -> Any:
    """The demo's target: the default one, or the policy file's first target on the demo's plan and hub."""
    from scaling.domain.policy import PolicyError, load_policy, policy_from_dict

    default = policy_from_dict(default_policy_document(partitions)).targets[0]
    if policy_file is None:
        return default
    try:
        chosen = load_policy(policy_file).targets[0]
    except (OSError, PolicyError) as error:
        raise DemoError(f"--policy {policy_file}: {error}") from error
    names = {source.name for source in chosen.sources}
    rules = tuple(replace(rule, source=None) if rule.source in names else rule for rule in chosen.rules)
    return replace(chosen, plan=default.plan, sources=default.sources, rules=rules)


def fake_eventhub_connection() -> str:
    """The connection-string setting the source names: its namespace names the checkpoint blobs.
    No Event Hubs client is built from it: the simulated hub is the partition source (no Event
    Hubs emulator runs here), passed to ``collector_for`` as ``partition_source_for``."""
    from scaling.local.simhub import EVENT_HUB, NAMESPACE

    return f"Endpoint=sb://{NAMESPACE}/;SharedAccessKeyName=demo;SharedAccessKey=local-demo-placeholder;EntityPath={EVENT_HUB}"


def app_settings_for(target: Any, storage_connection: str, arm_endpoint: str) -> dict[str, str]:
    """The Function App's application settings for the demo (what local.settings.json would hold)."""
    from scaling.domain.policy import Policy, policy_to_dict
    from scaling.settings import DEFAULT_SCHEDULE, STORAGE_SETTING

    return {
        "FUNCTIONS_WORKER_RUNTIME": "python",
        STORAGE_SETTING: storage_connection,
        "AUTOSCALER_POLICY": json.dumps(policy_to_dict(Policy((target,)))),
        "COLLECT_SCHEDULE": DEFAULT_SCHEDULE,
        "ARM_ENDPOINT": arm_endpoint,
        "SCALER_DRY_RUN": "false",
        CHECKPOINT_SETTING: storage_connection,
        EVENTHUB_SETTING: fake_eventhub_connection(),
    }


# --- the simulate-only reference --------------------------------------------------------------------


def summarize(result: Any, scenario: Any) -> dict[str, Any]:
    """The run summary with the keys and rounding of ``python -m scaling simulate``."""
    return result.summary(scenario)


def simulate_summary(trace: str | Path, *, start: int = 0, minutes: int | None = None, target: Any = None,
                     scenario: Any = None) -> dict[str, Any]:
    """What ``python -m scaling simulate --trace T --start S --minutes M [--policy P]`` reports for
    the same window and target: the same engine and world, without functions or storage."""
    from scaling.local.simhub import load_arrivals
    from scaling.simulation.peers import EngineAutoscaler
    from scaling.simulation.world import Scenario, simulate

    scenario = scenario or Scenario()
    target = target or demo_target(partitions=scenario.partitions)
    arrivals = load_arrivals(trace, start=start, minutes=minutes, scenario=scenario)
    result = simulate(arrivals, EngineAutoscaler(target), scenario, algorithm=f"policy:{target.name}", knob=target.mode)
    return summarize(result, scenario)


def compare(demo: dict[str, Any], simulated: dict[str, Any], tolerance: Tolerance = TOLERANCE) -> list[str]:
    """Where the demo's summary is further from simulate's than the tolerance (empty: they agree)."""
    problems = []
    if demo["minutes"] != simulated["minutes"]:
        problems.append(f"minutes differ: demo {demo['minutes']}, simulate {simulated['minutes']}")
    base = simulated["cost_ratio"]
    if abs(demo["cost_ratio"] - base) > tolerance.cost_ratio_relative * base:
        problems.append(f"cost ratio: demo {demo['cost_ratio']:.4f}, simulate {base:.4f}")
    if abs(demo["slo_violation_minutes"] - simulated["slo_violation_minutes"]) > tolerance.slo_violation_minutes:
        problems.append(f"SLO-violation minutes: demo {demo['slo_violation_minutes']}, simulate {simulated['slo_violation_minutes']}")
    if abs(demo["scale_actions"] - simulated["scale_actions"]) > tolerance.scale_actions:
        problems.append(f"scale actions: demo {demo['scale_actions']}, simulate {simulated['scale_actions']}")
    return problems


# --- the run ------------------------------------------------------------------------------------------


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
    from scaling.simulation.world import Scenario

    stream = stream or sys.stdout
    # The local ARM endpoint's access log (one line per request) is not the demo's output.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    scenario = Scenario()
    if not Path(options.trace).is_file():
        raise DemoError(f"--trace {options.trace}: no such file (the traces live in ../shared/traces beside the repo)")
    try:
        arrivals = load_arrivals(options.trace, start=options.start, minutes=options.minutes, scenario=scenario)
    except ValueError as error:
        raise DemoError(f"--trace {options.trace}: {error}") from error
    target = demo_target(options.policy, partitions=scenario.partitions)
    simulated = simulate_summary(options.trace, start=options.start, minutes=options.minutes, target=target,
                                 scenario=scenario)

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
        "mode": target.mode, "demo": result.summary, "simulate": simulated, "tolerance": tolerance.describe(),
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
        import logging

        from scaling.bootstrap import collector_for, evaluate_service_for, scale_service_for
        from scaling.functions import collect as collect_module
        from scaling.functions import evaluate as evaluate_module
        from scaling.functions import scale as scale_module
        from scaling.local.host import LocalFunctionsHost
        from scaling.local.simhub import SimulatedClock, SimulatedConsumers, SimulatedHub
        from scaling.plans.factory import build_plan_adapter
        from scaling.settings import Settings
        from scaling.simulation.peers import EPOCH
        from scaling.simulation.world import World
        from scaling.storage.factory import build_table_storage

        arm = self.arm
        arm.arm.add_plan(PLAN_ID, capacity=self.scenario.initial_capacity, tier=PLAN_TIER)
        app_settings = app_settings_for(self.target, self.connection_string, arm.base_url)
        settings = Settings.from_environment(app_settings)
        # Minute 0 of the window is EPOCH plus --start minutes, so a trace that starts at midnight
        # (WC98, NASA) shows its own time of day in the decision log.
        clock = SimulatedClock(EPOCH + _minutes(self.options.start))
        world = World(self.arrivals, self.scenario)
        hub = SimulatedHub(world)
        consumers = SimulatedConsumers(world, self.connection_string)
        modules = (collect_module, evaluate_module, scale_module)
        previous = tuple(module.set_service(None) for module in modules)
        closers: list[Any] = [consumers.close]
        host = None
        seen: set[str] = set()

        def plan_adapter() -> Any:
            adapter = build_plan_adapter(settings, arm.credential, polling_interval=0, **arm.client_kwargs())
            closers.append(adapter.close)
            return adapter

        try:
            await consumers.open()
            # The production services, built by the real factories from the app settings, on the
            # demo's clock; only the Event Hubs partition source is the simulated hub.
            collector = collector_for(settings, capacity_reader=plan_adapter(), environ=app_settings, clock=clock,
                                      partition_source_for=lambda source: hub)
            closers.append(collector.aclose)
            evaluate_service = evaluate_service_for(settings, clock=clock)
            closers.append(evaluate_service.store.close)
            scale_service = scale_service_for(settings, plans=plan_adapter(), clock=clock)
            closers.append(scale_service.store.close)
            tables = build_table_storage(settings, ensure=False)  # reads the decision log back
            closers.append(tables.close)
            for module, service in zip(modules, (collector, evaluate_service, scale_service), strict=True):
                module.set_service(service)
            app = _function_app(app_settings)
            logging.disable(logging.WARNING)  # azure.functions warns that auth levels do not apply to non-HTTP functions
            try:
                host = LocalFunctionsHost(app, app_settings)
            finally:
                logging.disable(logging.NOTSET)
            await host.start(clock())
            self.display.header()
            began = time.monotonic()
            phases = self.phase_seconds
            for _ in range(len(self.arrivals)):
                mark = time.perf_counter()
                world.advance()
                clock.minute = world.minute
                mark = _lap(phases, "world", mark)
                await consumers.checkpoint()
                mark = _lap(phases, "checkpoints", mark)
                await host.tick(clock())
                mark = _lap(phases, "timer (collect)", mark)
                await host.drain()
                mark = _lap(phases, "queues (evaluate, scale)", mark)
                world.request(arm.arm.capacity(PLAN_ID))
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
            plan_writes=len(arm.arm.writes), checkpoint_writes=consumers.writes, capacity=run_result.capacity,
            phase_seconds=dict(self.phase_seconds),
        )


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


# --- output files ---------------------------------------------------------------------------------------


DECISION_COLUMNS = ("evaluated_at", "minute", "trace_minute", "direction", "acts", "capacity_before", "capacity_after",
                    "reason_code", "arrival_rate_per_second", "backlog", "oldest_age_seconds", "predicted_age_seconds",
                    "throughput_per_instance", "outcome", "outcome_detail", "reasons", "decision_id")


def decision_rows(records: list[Any], clock: Any, start: int) -> list[dict[str, Any]]:
    rows = []
    for record in records:
        metrics = record.metrics or {}
        minute = math.floor(clock.minute_of(record.evaluated_at) + 1e-9)
        rows.append({
            "evaluated_at": record.evaluated_at.isoformat(),
            "minute": minute,
            "trace_minute": start + minute,
            "direction": record.direction if record.acts else "hold",
            "acts": record.acts,
            "capacity_before": record.capacity_before,
            "capacity_after": record.capacity_after,
            "reason_code": record.reason_code,
            "arrival_rate_per_second": metrics.get("arrival_rate"),
            "backlog": metrics.get("backlog"),
            "oldest_age_seconds": metrics.get("oldest_age_seconds"),
            "predicted_age_seconds": metrics.get("predicted_age_seconds"),
            "throughput_per_instance": metrics.get("throughput_per_instance"),
            "outcome": record.outcome,
            "outcome_detail": record.outcome_detail,
            "reasons": " | ".join(record.reasons),
            "decision_id": record.decision_id,
        })
    return rows


def write_outputs(out: Path, result: Any, records: list[Any], clock: Any, scenario: Any, target: Any, *,
                  trace: Path, start: int) -> dict[str, Path]:
    from scaling.local.plot import plot_run

    out.mkdir(parents=True, exist_ok=True)
    rows = decision_rows(records, clock, start)
    decisions_path = out / "decisions.csv"
    with decisions_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=DECISION_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    minutes_path = out / "minutes.csv"
    with minutes_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(("minute", "trace_minute", "arrivals", "backlog", "oldest_age_minutes", "capacity", "serving"))
        for minute in range(result.minutes):
            writer.writerow((minute, start + minute, round(float(result.arrivals[minute]), 1),
                             round(float(result.backlog[minute]), 1), round(float(result.age[minute]), 3),
                             int(result.capacity[minute]), int(result.serving[minute])))
    actions = [(row["minute"], row["direction"]) for row in rows if row["acts"]]
    title = (f"{Path(trace).parent.name}/{Path(trace).name} from minute {start}, {result.minutes} min, target {target.name} "
             f"({target.mode}): cost {result.cost_ratio:.3f}x fluid bound, {result.slo_violation_minutes} SLO-violation min, "
             f"{result.scale_actions} scale actions")
    plot_path = plot_run(out / "demo.png", arrivals=result.arrivals, backlog=result.backlog, capacity=result.capacity,
                         serving=result.serving, age_minutes=result.age,
                         events_per_instance_per_minute=scenario.events_per_instance_per_minute,
                         slo_minutes=scenario.slo_minutes, actions=actions, title=title, first_minute=start)
    return {"plot": plot_path, "decisions": decisions_path, "minutes": minutes_path}


# --- the terminal ---------------------------------------------------------------------------------------


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


class LiveDisplay:
    """A progress bar and a live table of decisions, plain text (``\\r`` on a terminal, lines otherwise)."""

    COLUMNS = (("time", 11), ("arrivals/s", 10), ("backlog", 9), ("age s", 6), ("capacity", 9), ("decision", 8))

    def __init__(self, stream: TextIO, total: int, *, enabled: bool = True, width: int = 28) -> None:
        self.stream = stream
        self.total = max(total, 1)
        self.enabled = enabled
        self.width = width
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        # On a terminal, lines fit its width (a wrapped progress line cannot be redrawn with \r).
        self.columns = shutil.get_terminal_size((160, 24)).columns if self.tty else 200
        self.started = time.monotonic()
        self._bar_shown = False
        self._next_report = 0.0

    def _clear_bar(self) -> None:
        if self.tty and self._bar_shown:
            self.stream.write("\r\033[K")
            self._bar_shown = False

    def header(self) -> None:
        if not self.enabled:
            return
        cells = "  ".join(name.rjust(width) if index else name.ljust(width)
                          for index, (name, width) in enumerate(self.COLUMNS))
        self.stream.write(f"{cells}  reason\n")
        self.stream.write("  ".join("-" * width for _, width in self.COLUMNS) + "  " + "-" * 30 + "\n")

    def decision(self, record: Any, clock: Any, world: Any) -> None:
        if not self.enabled:
            return
        metrics = record.metrics or {}
        capacity = (f"{record.capacity_before} -> {record.capacity_after}" if record.acts
                    else _fmt(record.capacity_before))
        reason = record.reason_code + (f": {record.reasons[0]}" if record.reasons else "")
        if record.outcome and record.acts:
            reason += f" [{record.outcome}]"
        cells = (record.evaluated_at.strftime("%m-%d %H:%M"), _fmt(metrics.get("arrival_rate"), 1),
                 _fmt(metrics.get("backlog")), _fmt(metrics.get("oldest_age_seconds"), 0), capacity,
                 record.direction if record.acts else "hold")
        line = "  ".join(cell.rjust(width) if index else cell.ljust(width)
                         for index, (cell, (_, width)) in enumerate(zip(cells, self.COLUMNS, strict=True)))
        self._clear_bar()
        room = max(self.columns - len(line) - 3, 30)
        self.stream.write(f"{line}  {reason if len(reason) <= room else reason[:room - 1] + '…'}\n")

    def progress(self, world: Any, clock: Any) -> None:
        if not self.enabled:
            return
        done = world.minute
        fraction = done / self.total
        if not self.tty and fraction < self._next_report and done < self.total:
            return
        self._next_report = math.floor(fraction * 10 + 1e-9) / 10 + 0.1
        elapsed = time.monotonic() - self.started
        remaining = elapsed / fraction - elapsed if fraction > 0 else 0.0
        filled = int(round(fraction * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        minute = min(done, self.total) - 1
        line = (f"[{bar}] {fraction:4.0%} {done}/{self.total} min  {clock().strftime('%m-%d %H:%M')}  "
                f"capacity {world.requested} (serving {world.serving_series[minute]})  "
                f"backlog {world.backlog_series[minute]:,.0f}  {elapsed:.0f}s elapsed, ~{remaining:.0f}s left")
        if self.tty:
            self.stream.write("\r\033[K" + line[: self.columns - 1])
            self._bar_shown = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.enabled and self.tty and self._bar_shown:
            self.stream.write("\n")
            self._bar_shown = False
        self.stream.flush()


def print_summary(result: DemoResult, options: DemoOptions, out: TextIO) -> None:
    demo, simulated = result.summary, result.simulated
    rows = [
        ("cost (instance-minutes)", _fmt(demo["cost"], 0), _fmt(simulated["cost"], 0)),
        ("fluid lower bound", _fmt(demo["fluid_lower_bound"], 1), _fmt(simulated["fluid_lower_bound"], 1)),
        ("cost / fluid lower bound", f"{demo['cost_ratio']:.4f}", f"{simulated['cost_ratio']:.4f}"),
        ("SLO-violation minutes", str(demo["slo_violation_minutes"]), str(simulated["slo_violation_minutes"])),
        ("scale actions", str(demo["scale_actions"]), str(simulated["scale_actions"])),
        ("p99 / max oldest age (min)", f"{demo['p99_age_minutes']:.2f} / {demo['max_age_minutes']:.2f}",
         f"{simulated['p99_age_minutes']:.2f} / {simulated['max_age_minutes']:.2f}"),
        ("final backlog (events)", _fmt(demo["final_backlog"], 0), _fmt(simulated["final_backlog"], 0)),
    ]
    out.write(f"\nsummary: {demo['minutes']} simulated minutes of {options.trace} from minute {options.start}, "
              f"{result.wall_seconds:.0f} s wall time\n")
    out.write(f"  {'':28}{'demo (functions + Azurite)':>28}{'simulate (no storage)':>24}\n")
    for name, left, right in rows:
        out.write(f"  {name:28}{left:>28}{right:>24}\n")
    verdict = "agree" if result.agrees else "DISAGREE: " + "; ".join(result.differences)
    out.write(f"  cross-check with `python -m scaling simulate`: {verdict} ({TOLERANCE.describe()})\n")
    invocations = ", ".join(f"{name} {count}" for name, count in sorted(result.invocations.items()))
    failures = sum(result.failures.values())
    poisoned = sum(result.poison.values())
    out.write(f"  function invocations: {invocations}; failures {failures}; "
              f"poison messages {poisoned}\n")
    actions = sum(1 for record in result.decisions if record.acts)
    out.write(f"  decision log: {len(result.decisions)} rows ({actions} actions); plan writes through ARM: "
              f"{result.plan_writes}; checkpoint blob writes: {result.checkpoint_writes:,}\n")
    phases = ", ".join(f"{phase} {ms:.0f}" for phase, ms in result.milliseconds_per_minute().items() if phase != "world")
    out.write(f"  wall time per simulated minute (ms): {phases}\n")
    out.write("  files: " + ", ".join(str(path) for path in result.files.values()) + "\n")
