"""The benchmark's plan: which jobs a trace gets (each peer's sweep, the project's pair), the
world each runs in, a run's row, and how the jobs group into work units for the pool."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from scaling.benchmarks.cold import COLD
from scaling.simulation.peers.flink import FLINK_DEFAULTS
from scaling.simulation.peers.flink import sweep as flink_sweep
from scaling.simulation.world.judges import judged_numbers

#: Knob sweeps (each at least 8 values over a factor of 100 or more).
SEED_UPPER = (250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000)
KEDA_THRESHOLDS = (64, 100, 200, 400, 700, 1000, 1500, 2500, 4000, 10000)
FUNCTIONS_TARGETS = (64, 100, 200, 400, 700, 1000, 1500, 2500, 4000, 10000)
MONITOR_THRESHOLDS = (50, 100, 200, 400, 700, 1000, 2000, 5000)
MONITOR_STEPS = (1, 4)
CLAIRVOYANT_HORIZONS = (1, 3, 5)
#: The Flink peer's settings (flink.sweep: utilization target, metrics window, catch-up, scale-down
#: interval; the documented defaults among them); a job's ``value`` is its index here.
FLINK_SWEEP = tuple(flink_sweep())
#: Each peer's setting at its documented defaults (docs/peers.md), as its knob reads.
DOCUMENTED_DEFAULTS = {"project-default": "default", "keda-hpa": "unprocessedEventThreshold=64",
                       "functions-target": "target=100", "flink": FLINK_DEFAULTS.label}
TRAIN_FRACTION = 0.3
#: The candidates project-tuned searches: the tuning job's default grid (``tune --grid``).
TUNING_GRID = "large"


@dataclass(frozen=True, slots=True)
class Job:
    trace: str
    algorithm: str
    knob: str
    value: float = 0.0
    step: int = 1
    weight: float = 1.0  # rough cost, for scheduling the long jobs first
    scenario: str = "standard"
    #: Scenario fields set on top of the named scenario (as (field, value) pairs: jobs are pickled).
    overrides: tuple = ()


#: Opt-in rows, run only when asked for by name (``--algorithm``): the default policy with
#: ``forecast: on`` and its learned look-ahead, and the same with a perfect one (the true future
#: arrivals: the reference for the share of its saving the forecast captures) over 15 minutes and
#: over the learned outlook's own horizon, 30 (the hold reads the dwell's minutes, which 15 do not cover).
LOOK_AHEAD = {"project-forecast": "forecast=on", "perfect-lookahead": "perfect h=15", "perfect-lookahead-30": "perfect h=30"}


def jobs_for(trace: str, scenario: str = "standard", overrides: tuple = ()) -> list[Job]:
    jobs = [Job(trace, "project-tuned", "tuned on first 30%", weight=6.0), Job(trace, "project-default", "default", weight=3.0)]
    jobs += [Job(trace, "seed", f"upper={value}", value, weight=2.0) for value in SEED_UPPER]
    jobs += [Job(trace, "keda-hpa", f"unprocessedEventThreshold={value}", value) for value in KEDA_THRESHOLDS]
    jobs += [Job(trace, "functions-target", f"target={value}", value) for value in FUNCTIONS_TARGETS]
    jobs += [Job(trace, "azure-monitor", f"per-instance>{value} step={step}", value, step)
             for value in MONITOR_THRESHOLDS for step in MONITOR_STEPS]
    jobs += [Job(trace, "clairvoyant", f"h={value}", value, weight=0.5) for value in CLAIRVOYANT_HORIZONS]
    jobs += [Job(trace, "flink", settings.label, index) for index, settings in enumerate(FLINK_SWEEP)]
    if scenario == COLD:  # nothing learned: no history to tune on
        jobs = [job for job in jobs if job.algorithm != "project-tuned"]
    return [replace(job, scenario=scenario, overrides=overrides) for job in jobs]


def result_row(trace: str, result, scenario, name: str) -> dict:
    """A run's row: its summary, judged, not yet marked best (the contract's columns)."""
    numbers = result.summary(scenario)
    del numbers["cost"], numbers["fluid_lower_bound"]
    return {"scenario": name, "trace": trace, "algorithm": result.algorithm, "knob": result.knob, **numbers,
            **judged_numbers(numbers, scenario), "best": False}


def job_scenario(job: Job):
    """The world a job runs in: its named scenario with its overrides (``cold``: the standard world)."""
    from scaling.simulation.world.loop import Scenario

    return Scenario.named("standard" if job.scenario == COLD else job.scenario, **dict(job.overrides))


#: The project's two rows of one trace and scenario run as one work unit (``run_project_pair``).
PROJECT_PAIR = ("project-tuned", "project-default")


#: Peers whose whole sweep runs as columns of one ``Physics`` (peers/batched.py): one work unit per
#: trace and scenario, since a step of the world costs nearly as much for one column as for many.
PEER_UNITS = (("keda-hpa", "functions-target", "azure-monitor", "clairvoyant", "flink"),)
#: Rough relative cost per minute of trace of each kind of work unit (for scheduling the longest first).
UNIT_WEIGHTS = {"project-tuned": 10.0, "project-default": 3.0, "seed": 1.0, "keda-hpa": 8.0}
#: How much dearer the stressed scenarios' worlds are (the load balancer's draws on every change).
SCENARIO_WEIGHTS = {"standard": 1.0, COLD: 0.05}


#: Traces of one length whose ``PEER_UNITS`` or seed sweeps, project pairs (tuned together:
#: ``run_project_pair``) or lone project-default runs (a run limited to it: ``--algorithm``)
#: run as columns of one step (the family's members): a step costs about the same for a few
#: columns as for a few hundred, so ten members' peers (180 settings) take about what two or three
#: take one by one (``Physics``'s ``trace_of``).
TRACES_PER_UNIT = 10


def work_units(jobs: Sequence[Job], minutes: dict[str, int] | None = None) -> list[tuple[Job, ...]]:
    """The jobs grouped as they run: project-tuned and project-default of a trace together
    (``PROJECT_PAIR``; either alone when the other is not asked for), each seed sweep as one rules
    batch, the other peers' sweeps as ``PEER_UNITS`` batches; the sweeps, pairs and lone
    project-default runs of up to ``TRACES_PER_UNIT`` traces of one length (``minutes``) in one
    scenario together (not ``cold``, whose windows start at each trace's own minutes); longest
    (estimated) first."""
    groups: dict[tuple, list[Job]] = {}
    for job in jobs:
        unit = next((units[0] for units in (*PEER_UNITS, PROJECT_PAIR) if job.algorithm in units), job.algorithm)
        key = (job.scenario, job.overrides, job.trace, unit)
        groups.setdefault(key, []).append(job)
    if minutes:
        together: dict[tuple, list[tuple]] = {}
        for key, group in groups.items():
            kinds = tuple(sorted({job.algorithm for job in group}))  # (a pair apart from a lone default)
            if key[0] != COLD and (key[3] in (PEER_UNITS[0][0], "seed") or kinds in (("project-default",), tuple(sorted(PROJECT_PAIR)))):
                together.setdefault((key[0], key[1], minutes.get(key[2]), key[3], kinds), []).append(key)
        for keys in together.values():
            for start in range(0, len(keys), TRACES_PER_UNIT):
                chunk = keys[start:start + TRACES_PER_UNIT]
                groups[chunk[0]] = [job for key in chunk for job in groups.pop(key)]

    def cost(unit: tuple[Job, ...]) -> float:
        first = unit[0]
        kind = next((units[0] for units in (*PEER_UNITS, PROJECT_PAIR) if first.algorithm in units), first.algorithm)
        length = (minutes or {}).get(first.trace, 1)
        traces = len({job.trace for job in unit})
        return UNIT_WEIGHTS.get(kind, first.weight) * length * SCENARIO_WEIGHTS.get(first.scenario, 2.5) * (1 + traces) / 2

    return sorted((tuple(group) for group in groups.values()), key=lambda unit: -cost(unit))



#: The algorithms ``run_unit`` runs as batches (even a sweep of one setting).
SWEPT_IN_BATCHES = ("seed", "keda-hpa", "functions-target", "azure-monitor", "clairvoyant", "flink")
