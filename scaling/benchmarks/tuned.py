"""``project-tuned``: the tuning job's own selection on the first part of a trace, and the
project's two rows of a trace run as one batch of the SLO driver."""

from __future__ import annotations

import time

from scaling.benchmarks.family import trace_label
from scaling.benchmarks.jobs import TRAIN_FRACTION, TUNING_GRID, Job, result_row


def tuned_choice(history, scenario):
    """What ``project-tuned`` runs: the tuning job's own selection (``robust.tune``: out-of-time
    folds, stress replays, the margin rule) over the job's default grid, the project's default
    policy being the current one; returns the chosen candidate (the default, labelled
    ``default (kept)``, when the selection keeps it) and the selection."""
    return tuned_choices([history], scenario)[0]


def tuned_choices(histories, scenario) -> list[tuple]:
    """``tuned_choice`` for several histories of one length, tuned together (``robust.tune_many``:
    each selection the one made alone, the runs columns of the same steps)."""
    from scaling.simulation.drivers.candidates import Candidate, all_candidates
    from scaling.simulation.peers import looped as peers
    from scaling.tuning import robust

    base = peers.simulated_target(scenario, name="tuned")
    candidates = [Candidate("default (kept)", base), *all_candidates(base, TUNING_GRID)]
    selections = robust.tune_many(histories, scenario, candidates, current_index=0)
    return [(candidates[selection.index], selection) for selection in selections]


def tuned_window(result, scenario, split: int) -> dict:
    """The default's numbers on the minutes ``project-tuned`` is scored on (from ``split``): the
    same run, scored from there, so that the two compare on the same traffic."""
    from scaling.simulation.world.scenario import scored_result

    tail = scored_result(scenario, algorithm=result.algorithm, knob=result.knob, score_from=split, arrivals=result.arrivals,
                         capacity=result.capacity, serving=result.serving, backlog=result.backlog, age=result.age,
                         scale_actions=result.scale_actions, final_backlog=result.final_backlog)
    return {"cost_ratio": round(tail.cost_ratio, 4), "slo_violation_minutes": tail.slo_violation_minutes,
            "max_age_minutes": round(tail.max_age_minutes, 3)}



def run_project_pair(unit: tuple[Job, ...], choose=None) -> list[dict]:
    """``project-default`` and ``project-tuned`` of one trace and scenario (or of several traces of
    one length: ``work_units``), rows as ``run_job`` gives them alone. The tuning first, on the
    history before the split (several histories tuned together: ``tuned_choices``); then both
    policies of every trace over the whole trace as one batch of the SLO driver
    (``simulate_slo_batch``, which gives what the engine in the loop gives:
    test_simulation_batched_slo.py), the default scored from the first minute and the tuned
    candidate from the split. A batch of two costs about what one run costs (the world's step is
    the same), and the engine in the loop is slower than either. Targets the batched driver
    cannot reproduce run through the engine. ``choose``: what picks one history's tuned candidate
    (``tuned_choice``)."""
    import numpy as np

    from scaling.benchmarks.family import load_arrivals
    from scaling.simulation.drivers.batched_slo import batch_key, simulate_slo_batch, supports
    from scaling.simulation.peers import looped as peers
    from scaling.simulation.world.loop import Scenario, scale_trace, simulate

    defaults = [job for job in unit if job.algorithm == "project-default"]
    tuned = {job.trace: job for job in unit if job.algorithm == "project-tuned"}
    scenario = Scenario.named(defaults[0].scenario, **dict(defaults[0].overrides))
    arrivals = [scale_trace(load_arrivals(job.trace), scenario) for job in defaults]
    split = int(len(arrivals[0]) * TRAIN_FRACTION)
    started = time.perf_counter()
    histories = [series[:split] for series in arrivals]
    chosen = [choose(history, scenario) for history in histories] if choose else tuned_choices(histories, scenario)
    tuning_seconds = (time.perf_counter() - started) / len(defaults)
    started = time.perf_counter()
    default_target = peers.simulated_target(scenario, name="default")
    targets = [target for candidate, _ in chosen for target in (default_target, candidate.target)]
    knobs = [knob for job, (candidate, _) in zip(defaults, chosen, strict=True) for knob in (job.knob, candidate.label)]
    if all(supports(target) for target in targets) and len({batch_key(target) for target in targets}) == 1:
        several = len(defaults) > 1
        results = simulate_slo_batch(np.column_stack(arrivals) if several else arrivals[0], targets, scenario,
                                     score_from=[0, split] * len(defaults), knobs=knobs,
                                     trace_of=np.repeat(np.arange(len(defaults)), 2) if several else None)
    else:
        results = [run for series, index in zip(arrivals, range(0, len(targets), 2), strict=True)
                   for run in (simulate(series, peers.EngineAutoscaler(targets[index]), scenario, knob=knobs[index]),
                               simulate(series, peers.EngineAutoscaler(targets[index + 1]), scenario, knob=knobs[index + 1],
                                        score_from=split))]
    run_seconds = (time.perf_counter() - started) / len(targets)
    rows = {}
    for number, job in enumerate(defaults):
        result, kept = results[2 * number], results[2 * number + 1]
        result.algorithm, kept.algorithm = "project-default", "project-tuned"
        label = trace_label(job.trace)
        selection = chosen[number][1]
        rows[job] = {**result_row(label, result, scenario, job.scenario), "tuned_window": tuned_window(result, scenario, split),
                     "seconds": round(run_seconds, 2)}
        rows[tuned[job.trace]] = {**result_row(label, kept, scenario, tuned[job.trace].scenario),
                                  "tuning": {"kept_default": selection.kept_current, "reason": selection.reason},
                                  "seconds": round(tuning_seconds + run_seconds, 2)}
    return [rows[job] for job in unit]
