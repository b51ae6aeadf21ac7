"""The queue benchmark: the SLO mode on one Service Bus queue against the peers an operator of a
queue would pick, in the queue world (``queue/world.py``), standard and realistic, with Azure
Monitor's rates 1, 2 and 3 minutes late.

The peers, at their documented defaults and swept (docs/benchmark-queue.md cites the sources):

- ``keda-servicebus``: KEDA's azure-servicebus scaler feeding the HPA. The metric is the queue's
  active message count, read from the entity directly (no metrics lag); target ``messageCount``
  per replica (default 5); the HPA's tolerance, 5-minute scale-down stabilization and scale-up
  policies as ``peers.KedaHpa``; no partition cap (a queue has none), the plan's bound.
- ``functions-target``: Functions target-based scaling for Service Bus: desired =
  ceil(active messages / target executions per instance), the target ``maxConcurrentCalls``
  (default 16; ``maxMessageBatchSize`` 1,000 for batches), at most 4 instances added per vote,
  votes every ~10 s, a scale-in ignored within 180 s of the last scale-out.
- ``azure-monitor``: an App Service plan autoscale rule on the queue's ``ActiveMessages``
  platform metric divided per instance (as the portal's queue-length rules are), averaged over 5
  minutes, one shared 5-minute cooldown, the flapping check; the metric is Azure Monitor's, so it
  trails the queue by the metrics lag.
- ``seed``: the seed rule through the real engine on the active count.
- ``clairvoyant``: knows the arrivals ahead (a reference, not a peer).

Lag matters to the project (its rates) and to the Azure Monitor rule (its metric); KEDA,
Functions, the seed rule and the clairvoyant read the queue itself, so they run once per scenario.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scaling.simulation.peers.looped import HorizontalPodAutoscaler, ScaleController
from scaling.simulation.queue.world import (
    QueueEngineAutoscaler,
    QueueObservation,
    queue_seed_target,
    queue_target,
    simulate_queue,
)
from scaling.simulation.world.scenario import Scenario

MAX_INSTANCES = 32
LAGS = (1, 2, 3)
SCENARIOS = ("standard", "realistic")
#: KEDA's ``messageCount`` (default 5) and Functions' target executions per instance (default 16,
#: ``maxConcurrentCalls``; 1,000 with batches), swept over the range a queue of 1,000 messages a
#: minute per instance needs.
KEDA_MESSAGE_COUNTS = (5, 100, 300, 1000, 2000, 4000, 8000, 16000)
FUNCTIONS_TARGETS = (16, 100, 300, 1000, 2000, 4000, 8000, 16000)
MONITOR_THRESHOLDS = (100, 300, 1000, 2000, 4000, 8000)
MONITOR_STEPS = (1, 4)
SEED_UPPER = (1000, 4000, 16000)
CLAIRVOYANT_HORIZONS = (1, 3, 5)
#: The family members replayed as queues: one of each shape (seed 1), all 14 days.
FAMILY_SEED = 1
PEERS = ("keda-servicebus", "functions-target", "azure-monitor", "seed")


class QueueKeda:
    """KEDA's azure-servicebus scaler and the HPA: desired = ceil(active messages / messageCount)."""

    def __init__(self, message_count: float, maximum: int = MAX_INSTANCES, **hpa) -> None:
        self.target = message_count
        self.maximum = maximum
        self.hpa = HorizontalPodAutoscaler(message_count, maximum, **hpa)

    def decide(self, observation: QueueObservation) -> int | None:
        return self.hpa.desired(float(observation.active_messages), observation.capacity, observation.minute)


class QueueFunctions:
    """Functions target-based scaling for Service Bus: ceil(active messages / target), at most 4
    more per vote, no scale-in within 180 s of a scale-out."""

    def __init__(self, target_per_instance: float, maximum: int = MAX_INSTANCES, **controller) -> None:
        self.target = target_per_instance
        self.maximum = maximum
        self.controller = ScaleController(**controller)

    def decide(self, observation: QueueObservation) -> int | None:
        desired = min(max(math.ceil(observation.active_messages / self.target), 1), self.maximum)
        return self.controller.vote(desired, observation.capacity, observation.minute)


class QueueAzureMonitor:
    """An autoscale rule on ``ActiveMessages`` per instance (Azure Monitor's, ``lag`` minutes
    late): average over 5 minutes above the threshold adds ``step``, below a quarter of it
    removes ``step``, one 5-minute cooldown, no scale-in that would trigger a scale-out."""

    def __init__(self, scale_out_above: float, *, step: int = 1, lag: int = 1, window_minutes: int = 5,
                 cooldown_minutes: int = 5, maximum: int = MAX_INSTANCES) -> None:
        self.upper = scale_out_above
        self.lower = scale_out_above / 4
        self.step = step
        self.lag = lag
        self.seen: deque[float] = deque(maxlen=window_minutes + lag)
        self.window = window_minutes
        self.cooldown = cooldown_minutes
        self.maximum = maximum
        self.last_action = -math.inf

    def decide(self, observation: QueueObservation) -> int | None:
        self.seen.append(float(observation.active_messages))
        current = observation.capacity
        reported = list(self.seen)[: len(self.seen) - self.lag] if self.lag else list(self.seen)
        if len(reported) < self.window or observation.minute - self.last_action < self.cooldown:
            return None
        average_total = sum(reported[-self.window:]) / self.window
        if average_total / current > self.upper and current < self.maximum:
            self.last_action = observation.minute
            return min(current + self.step, self.maximum)
        if average_total / current < self.lower and current > 1:
            target = max(current - self.step, 1)
            if average_total / target >= self.upper:
                return None
            self.last_action = observation.minute
            return target
        return None


class QueueClairvoyant:
    """Knows the arrivals ahead: the count that serves the mean rate over the next ``horizon``
    minutes after a provisioning delay (or until then, whichever is higher) and drains the
    backlog within the SLO less a minute."""

    def __init__(self, arrivals: np.ndarray, scenario: Scenario, horizon: int, maximum: int = MAX_INSTANCES) -> None:
        self.cumulative = np.concatenate(([0.0], np.cumsum(arrivals))).tolist()
        self.minutes = len(arrivals)
        self.scenario = scenario
        self.horizon = horizon
        self.maximum = maximum

    def _mean(self, start: int, end: int) -> float:
        start, end = min(start, self.minutes), min(end, self.minutes)
        return (self.cumulative[end] - self.cumulative[start]) / (end - start) if end > start else 0.0

    def decide(self, observation: QueueObservation) -> int | None:
        minute, delay = observation.minute, self.scenario.delay_range[1]
        drain = observation.true_backlog / max(self.scenario.slo_minutes - 1, 1)
        need = max(self._mean(minute + delay, minute + delay + self.horizon), self._mean(minute, minute + delay + 1)) + drain
        return min(max(math.ceil(need / self.scenario.events_per_instance_per_minute - 1e-9), 1), self.maximum)


@dataclass(frozen=True, slots=True)
class QueueJob:
    """One trace in one scenario: every algorithm and knob, every lag where it matters."""

    trace: str
    scenario: str
    #: Only the first minutes of the trace (``None``: all of it).
    minutes: int | None = None


def trace_arrivals(trace: str, scenario: Scenario) -> np.ndarray:
    """A public trace's per-minute counts (a CSV path) or a family member (``family/NAME``),
    scaled so its busiest minute needs the scenario's peak."""
    from scaling.simulation.world import trace_family
    from scaling.simulation.world.loop import load_trace, scale_trace

    counts = trace_family.arrivals(trace) if trace_family.is_member(trace) else load_trace(trace)
    return scale_trace(counts, scenario)


def settings(arrivals: np.ndarray, scenario: Scenario) -> Iterator[tuple[str, str, object, tuple[int, ...]]]:
    """(algorithm, knob, autoscaler factory, the lags it runs at) of every run on one trace."""
    yield "project-default", "default", lambda: QueueEngineAutoscaler(queue_target(scenario, max_instances=MAX_INSTANCES)), LAGS
    for upper in SEED_UPPER:
        yield "seed", f"upper={upper:g}", (lambda upper=upper: QueueEngineAutoscaler(
            queue_seed_target(scenario, upper, upper / 10, max_instances=MAX_INSTANCES))), (1,)
    for count in KEDA_MESSAGE_COUNTS:
        yield "keda-servicebus", f"messageCount={count:g}", (lambda count=count: QueueKeda(count)), (1,)
    for target in FUNCTIONS_TARGETS:
        yield "functions-target", f"target={target:g}", (lambda target=target: QueueFunctions(target)), (1,)
    for horizon in CLAIRVOYANT_HORIZONS:
        yield "clairvoyant", f"horizon={horizon}", (lambda horizon=horizon: QueueClairvoyant(arrivals, scenario, horizon)), (1,)
    for threshold in MONITOR_THRESHOLDS:
        for step in MONITOR_STEPS:
            for lag in LAGS:
                yield ("azure-monitor", f"above={threshold:g},step={step}",
                       (lambda threshold=threshold, step=step, lag=lag: QueueAzureMonitor(threshold, step=step, lag=lag)), (lag,))


def run_job(job: QueueJob) -> list[dict]:
    """Every run of one trace in one scenario, as rows (lag-free algorithms repeated at each lag)."""
    scenario = Scenario.named(job.scenario)
    arrivals = trace_arrivals(job.trace, scenario)[: job.minutes]
    rows = []
    for algorithm, knob, make, lags in settings(arrivals, scenario):
        for lag in lags:
            result = simulate_queue(arrivals, make(), scenario, algorithm=algorithm, knob=knob, metrics_lag_minutes=lag)
            row = {"trace": _label(job.trace), "scenario": job.scenario, "algorithm": algorithm, "knob": knob,
                   **result.summary(scenario)}
            for seen_at in (LAGS if len(lags) == 1 and algorithm != "azure-monitor" else (lag,)):
                rows.append({**row, "metrics_lag_minutes": seen_at})
    return rows


def _label(trace: str) -> str:
    from scaling.simulation.world import trace_family

    return trace if trace_family.is_member(trace) else "/".join(Path(trace).parts[-2:])


def run_benchmark(traces: Sequence[str], scenarios: Sequence[str] = SCENARIOS, workers: int = 1,
                  minutes: int | None = None) -> list[dict]:
    jobs = [QueueJob(trace, scenario, minutes) for trace in traces for scenario in scenarios]
    if workers <= 1:
        return [row for job in jobs for row in run_job(job)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return [row for rows in pool.map(run_job, jobs) for row in rows]


# --- judging ----------------------------------------------------------------------------------------


def cheapest(rows: Sequence[dict], algorithm: str) -> dict | None:
    """The algorithm's cheapest setting that meets the SLO among ``rows`` (one trace, scenario, lag)."""
    meeting = [row for row in rows if row["algorithm"] == algorithm and row["meets_slo"]]
    return min(meeting, key=lambda row: row["cost"]) if meeting else None


def groups(rows: Sequence[dict]) -> dict[tuple[str, int, str], list[dict]]:
    grouped: dict[tuple[str, int, str], list[dict]] = {}
    for row in rows:
        grouped.setdefault((row["scenario"], row["metrics_lag_minutes"], row["trace"]), []).append(row)
    return grouped


def judged(rows: Sequence[dict]) -> list[dict]:
    """Per scenario, lag and trace: project-default against each peer's cheapest SLO-meeting setting
    and the clairvoyant's, and the acceptance's tests."""
    out = []
    for (scenario, lag, trace), members in sorted(groups(rows).items()):
        project = next(row for row in members if row["algorithm"] == "project-default")
        clairvoyant = cheapest(members, "clairvoyant")
        peers = {peer: cheapest(members, peer) for peer in PEERS}
        meeting = {peer: row for peer, row in peers.items() if row is not None}
        out.append({
            "scenario": scenario, "metrics_lag_minutes": lag, "trace": trace,
            "project_cost": project["cost"], "project_meets_slo": project["meets_slo"],
            "project_violation_minutes": project["slo_violation_minutes"], "project_max_age": project["max_age_minutes"],
            "project_actions": project["scale_actions"],
            "clairvoyant_cost": clairvoyant["cost"] if clairvoyant else None,
            "vs_clairvoyant": round(project["cost"] / clairvoyant["cost"], 3) if clairvoyant else None,
            "peers": {peer: (None if row is None else {"knob": row["knob"], "cost": row["cost"]}) for peer, row in peers.items()},
            "meets_where_a_peer_does": project["meets_slo"] or not meeting,
            "cheaper_than_every_peer": project["meets_slo"] and all(project["cost"] < row["cost"] for row in meeting.values()),
        })
    return out


def acceptance(verdicts: Sequence[dict]) -> dict:
    """The issue's acceptance over the verdicts: per scenario and lag, whether the project meets
    the SLO wherever a peer does, the family's median cost over the clairvoyant's, and the traces
    where a peer's cheapest SLO-meeting setting is not dearer."""
    summary = {}
    for key in sorted({(v["scenario"], v["metrics_lag_minutes"]) for v in verdicts}):
        members = [v for v in verdicts if (v["scenario"], v["metrics_lag_minutes"]) == key]
        family = [v["vs_clairvoyant"] for v in members if v["trace"].startswith("family/") and v["vs_clairvoyant"]]
        summary[f"{key[0]} lag {key[1]}"] = {
            "misses_where_a_peer_meets": [v["trace"] for v in members if not v["meets_where_a_peer_does"]],
            "family_median_vs_clairvoyant": round(statistics.median(family), 3) if family else None,
            "not_cheaper_than_a_peer": [v["trace"] for v in members if not v["cheaper_than_every_peer"]],
        }
    return summary


def markdown(verdicts: Sequence[dict], summary: dict) -> str:
    lines = ["| scenario | lag | trace | project-default: cost, violation min, max age | / clairvoyant | "
             + " | ".join(f"{peer}: cheapest meeting the SLO" for peer in PEERS) + " |",
             "| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in PEERS) + " |"]
    for v in verdicts:
        peers = " | ".join("misses at every setting" if v["peers"][peer] is None
                           else f"{v['peers'][peer]['cost']:,.0f} ({v['peers'][peer]['knob']})" for peer in PEERS)
        lines.append(f"| {v['scenario']} | {v['metrics_lag_minutes']} | {v['trace']} | {v['project_cost']:,.0f}, "
                     f"{v['project_violation_minutes']}, {v['project_max_age']:.2f} | {v['vs_clairvoyant']} | {peers} |")
    lines += ["", "| scenario, lag | project misses where a peer meets the SLO | family median / clairvoyant | "
              "traces where a peer's cheapest SLO-meeting setting is not dearer |", "| --- | --- | --- | --- |"]
    for key, value in summary.items():
        lines.append(f"| {key} | {', '.join(value['misses_where_a_peer_meets']) or 'none'} | "
                     f"{value['family_median_vs_clairvoyant']} | {', '.join(value['not_cheaper_than_a_peer']) or 'none'} |")
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- queue-benchmark:begin -->", "<!-- queue-benchmark:end -->"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", action="append", default=[], help="a per-minute trace CSV (repeatable)")
    parser.add_argument("--family", action="store_true", help="also one member of each family shape (seed 1)")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="default: standard and realistic")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--minutes", type=int, help="only the first N minutes of each trace (a quick look)")
    parser.add_argument("--json", required=True, help="every row and the verdicts")
    parser.add_argument("--markdown", help="rewrite the results block of this page")


def run(args: argparse.Namespace) -> int:
    from scaling.simulation.world import trace_family

    traces = list(args.trace)
    if args.family:
        traces += [f"{trace_family.FAMILY_PREFIX}{name}" for name in
                   (trace_family.member_name(shape, FAMILY_SEED) for shape in trace_family.SHAPES)]
    if not traces:
        print("error: no trace: give --trace or --family", file=sys.stderr)
        return 2
    rows = run_benchmark(traces, args.scenario or SCENARIOS, args.workers, args.minutes)
    verdicts = judged(rows)
    summary = acceptance(verdicts)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"rows": rows, "verdicts": verdicts, "acceptance": summary}, indent=1),
                               encoding="utf-8")
    if args.markdown:
        page = Path(args.markdown)
        text = page.read_text(encoding="utf-8")
        start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
        page.write_text(text[:start] + "\n" + markdown(verdicts, summary) + text[end:], encoding="utf-8")
    for key, value in summary.items():
        print(key, json.dumps(value))
    return 0
