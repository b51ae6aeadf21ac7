"""Candidate policies for tuning, and running them on a trace (batched where a batched simulator
reproduces the engine).

Shared by the benchmark's ``project-tuned`` row and the Spark tuning job, so that both search
the same space and measure with the same simulator; which one to pick is ``robust.select``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from scaling.domain.policy import Rule, Step, TargetPolicy
from scaling.simulation.drivers import batched, batched_slo
from scaling.simulation.peers.looped import EngineAutoscaler
from scaling.simulation.world.loop import RunResult, Scenario, simulate

#: The rule knobs: the scale-in's peak hold (0: none), the action budget and a short
#: dwell, around the default's margins. On the trace family no one setting of them is cheapest
#: everywhere (docs/policy-experiments.md, "The tuner's rule knobs"): the hold pays on smooth
#: noisy traffic and costs on bursty traffic, so the tuner chooses them from the target's history.
RULE_KNOBS = {"safety_seconds": (90.0, 120.0), "headroom": (0.0, 0.05), "min_dwell_seconds": (1200.0,),
              "scale_in_peak_seconds": (0.0, 480.0), "max_actions_per_hour": (4.0, 8.0)}
#: The default's scale-in peak hold off or halved, at the default's own safety, headroom and dwell
#: and their neighbours: a margin one target does not need shows as the default minus that
#: margin, which ``RULE_KNOBS`` did not hold: it paired no hold with a 1200 s dwell only.
PEAK_HOLD_KNOBS = {"scale_in_peak_seconds": (0.0, 240.0), "safety_seconds": (60.0, 90.0, 120.0), "headroom": (0.0, 0.05),
                   "min_dwell_seconds": (1800.0, 2400.0)}
#: More margin than the default: a longer safety and more headroom at the default's dwell. A
#: target whose own history shows bursts the default does not catch needs them; the products
#: above stop at safety 150 s and headroom 0.2, which did not catch them.
MORE_MARGIN_KNOBS = {"safety_seconds": (180.0, 300.0), "headroom": (0.05, 0.3), "min_dwell_seconds": (2400.0,)}
#: Grid sizes: how many values each SLO-mode parameter takes (a tuple of grids: their union).
GRIDS = {
    "small": {"safety_seconds": (60.0, 90.0, 120.0), "headroom": (0.05,), "min_dwell_seconds": (1200.0, 2400.0)},
    "medium": {"safety_seconds": (60.0, 90.0, 120.0), "headroom": (0.0, 0.05, 0.1), "min_dwell_seconds": (1200.0, 2400.0, 3600.0)},
    "large": ({"safety_seconds": (45.0, 60.0, 90.0, 120.0, 150.0), "headroom": (0.0, 0.05, 0.1, 0.2),
               "min_dwell_seconds": (900.0, 1800.0, 2400.0, 3600.0)}, RULE_KNOBS, PEAK_HOLD_KNOBS,
              MORE_MARGIN_KNOBS),
}
#: Threshold-rule candidates: backlog-per-instance thresholds (events) and windows (seconds).
RULE_GRIDS = {
    "small": {"scale_up_above": (500.0, 2000.0), "window_seconds": (300,)},
    "medium": {"scale_up_above": (250.0, 1000.0, 4000.0), "window_seconds": (300, 600)},
    "large": {"scale_up_above": (125.0, 250.0, 500.0, 1000.0, 2000.0, 4000.0), "window_seconds": (120, 300, 600)},
}


@dataclass(frozen=True, slots=True)
class Candidate:
    label: str
    target: TargetPolicy


def slo_candidates(base: TargetPolicy, grid: str | dict | Sequence[dict] = "small") -> list[Candidate]:
    """SLO-mode candidates over a grid: a name in ``GRIDS``, or the values of ``SloSettings``
    fields to combine, or several such products (their union, each setting once, in order)."""
    values = GRIDS[grid] if isinstance(grid, str) else grid
    products = (values,) if isinstance(values, dict) else tuple(values)
    candidates, seen = [], set()
    for product in products:
        names = list(product)
        for combination in itertools.product(*(product[name] for name in names)):
            changes = dict(zip(names, combination, strict=True))
            slo = replace(base.slo, **changes)
            if slo in seen:
                continue
            seen.add(slo)
            label = "slo " + " ".join(f"{name}={value:g}" for name, value in changes.items())
            candidates.append(Candidate(label, replace(base, mode="slo", rules=(), slo=slo)))
    return candidates


def rule_candidates(base: TargetPolicy, grid: str = "small") -> list[Candidate]:
    values = RULE_GRIDS[grid]
    candidates = []
    for up, window in itertools.product(values["scale_up_above"], values["window_seconds"]):
        rule = Rule(name="per-instance", metric="backlog_per_instance", aggregate="average", window_seconds=window,
                    min_samples=max(window // 120, 1), scale_up_above=up, scale_down_below=up / 4,
                    scale_up_aggregate="latest", scale_down_aggregate="maximum")
        target = replace(base, mode="rules", rules=(rule,), preset=None,
                         scale_up=Step(step_percent=50.0, cooldown_seconds=0), scale_down=Step(step=1, cooldown_seconds=600))
        candidates.append(Candidate(f"rules backlog_per_instance>{up:g} window={window}s", target))
    return candidates


def all_candidates(base: TargetPolicy, grid: str = "small") -> list[Candidate]:
    return slo_candidates(base, grid) + rule_candidates(base, grid)


def run_candidate(candidate: Candidate, arrivals: np.ndarray, scenario: Scenario, *, score_from: int = 0) -> RunResult:
    return simulate(arrivals, EngineAutoscaler(candidate.target), scenario, algorithm="candidate",
                    knob=candidate.label, score_from=score_from)


def batch_group(target: TargetPolicy) -> tuple | None:
    """Which batched simulation reproduces the engine for this target (targets of one group run
    together), or ``None`` when only the engine in the loop does."""
    if batched.supports(target):
        return ("rules",)
    if batched_slo.supports(target):
        return ("slo", *batched_slo.batch_key(target))
    return None


def simulate_group(group: tuple, arrivals: np.ndarray, candidates: Sequence[Candidate], scenario: Scenario, *,
                   score_from: int = 0, trace_of: Sequence[int] | None = None) -> list[RunResult]:
    """Candidates of one ``batch_group`` in one batched simulation (the engine's results exactly;
    ``arrivals`` (minutes, traces) and ``trace_of``: each candidate on its own trace)."""
    simulate_many = batched.simulate_batch if group == ("rules",) else batched_slo.simulate_slo_batch
    return simulate_many(arrivals, [candidate.target for candidate in candidates], scenario, score_from=score_from,
                         knobs=[candidate.label for candidate in candidates], trace_of=trace_of)


def run_candidates(candidates: Sequence[Candidate], arrivals: np.ndarray, scenario: Scenario, *,
                   score_from: int = 0, trace_of: Sequence[int] | None = None) -> list[RunResult]:
    """Every candidate's run, in order: batched where a batched simulator reproduces the engine,
    through the engine otherwise. ``arrivals`` (minutes, traces) and ``trace_of``: each candidate
    on its own trace (several histories' candidates in the same steps)."""
    groups: dict[tuple | None, list[int]] = {}
    for index, candidate in enumerate(candidates):
        groups.setdefault(batch_group(candidate.target), []).append(index)
    results: list[RunResult | None] = [None] * len(candidates)
    for group, members in groups.items():
        if group is None:
            runs = [run_candidate(candidates[index], arrivals if trace_of is None else arrivals[:, trace_of[index]], scenario,
                                  score_from=score_from) for index in members]
        else:
            runs = simulate_group(group, arrivals, [candidates[index] for index in members], scenario, score_from=score_from,
                                  trace_of=None if trace_of is None else [trace_of[index] for index in members])
        for index, run in zip(members, runs, strict=True):
            results[index] = run
    return results
