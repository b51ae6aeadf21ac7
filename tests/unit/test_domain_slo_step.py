"""The SLO step (``slo_kernel.slo_step``) at its boundaries: each test in its order decides a
batch of one as it should, and a batch of several candidates with different readings and
settings decides every column as that column alone does (the engine's batch of one and the
batched simulator's sweep are the same function)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from scaling.domain import slo_kernel as kernel
from scaling.domain.policy_rules import SloSettings

PARTITIONS = 4
INTERVAL = 60.0
TOP = 9


@dataclass(frozen=True)
class Case:
    """One candidate: its readings (per partition), its state and its settings. By default a
    calm hub of 4 partitions at 5/s each, served by 2 instances of 10/s (each owner holds 2
    partitions: 5/s each, as much as arrives), ages well within the SLO of 300 s."""

    arrival: tuple = (5.0, 5.0, 5.0, 5.0)
    recent: tuple | None = None
    ages: tuple = (30.0, 30.0, 30.0, 30.0)
    backlog: tuple = (100.0, 100.0, 100.0, 100.0)
    earlier: tuple | None = None
    owners: tuple = (0, 0, 1, 1)
    throughput: float = 10.0
    measured: bool = True
    capacity: int = 2
    ready: int | None = None
    delay: float = 0.0
    enough_history: bool = True
    unowned: int = 0
    stalling: bool = False
    #: ((serving before, serving now), (processed before, processed now)), or None: not known.
    stall: tuple | None = None
    backlog_total: float = 400.0
    previous_backlog_total: float = 400.0
    counts: tuple = (1, 2, 3, 4)
    #: Absorbing (``slo_kernel.absorb``): each partition's arrivals per interval over the history
    #: (events, oldest first; the backlog their last ones) and their measured noise; None: not read.
    bursts: tuple | None = None
    noise: float = 1.0
    #: The learned rebalance pause (NaN: none yet), and the moved partitions' stand-still this
    #: window shows (NaN: none measured).
    pause: float = math.nan
    stand_still: float = math.nan
    #: The learned checkpoint cadence (None: not read).
    cadence: float | None = None
    slo: SloSettings = field(default_factory=lambda: SloSettings(max_event_age_seconds=300.0, safety_seconds=30.0,
                                                                 headroom=0.0, provisioning_delay_seconds=120.0,
                                                                 min_dwell_seconds=600.0))


def _stack(cases: list[Case], pick) -> np.ndarray:
    return np.array([pick(case) for case in cases]).T  # (partitions, candidates)


def _bursts(cases: list[Case]):
    """What absorbing reads of each case's history (samples x partitions x candidates); None where
    no case gives one."""
    if all(case.bursts is None for case in cases):
        return None
    samples = max(len(case.bursts) for case in cases if case.bursts is not None) + 1
    times = np.arange(samples) * INTERVAL
    totals = np.array([np.concatenate([[0.0], np.cumsum(case.bursts)]) if case.bursts is not None else np.zeros(samples)
                       for case in cases]).T  # (samples, candidates): one partition's events enqueued so far
    positions = np.repeat(totals[:, None, :] - 1.0, PARTITIONS, axis=1)
    oldest = positions[-1] + 1.0 - _stack(cases, lambda c: c.backlog)
    ended = np.array([case.bursts is not None and kernel.bursts_ended(times, totals[:, index])
                      for index, case in enumerate(cases)])
    return lambda: kernel.BurstHistory(times, positions, oldest, np.array([case.noise for case in cases]), ended)


def step(cases: list[Case]) -> kernel.StepOutcome:
    """The step over ``cases`` as columns (the readings, state and settings stacked)."""
    count = len(cases)
    arrival = _stack(cases, lambda c: c.arrival)
    recent = _stack(cases, lambda c: c.recent or c.arrival)
    backlog = _stack(cases, lambda c: c.backlog)
    hub = kernel.HubReading(
        arrival_rate=arrival, recent_rate=recent, ages=_stack(cases, lambda c: c.ages), backlog=backlog,
        owners=kernel.Owners(_stack(cases, lambda c: c.owners).astype(np.int64)),
        per_instance=kernel.per_instance_table(PARTITIONS, TOP), checkpoints=lambda: None,
        scale_in_rates=lambda: (np.maximum(arrival, recent), 0.0, 0.0),
        earlier_backlog=_stack(cases, lambda c: c.earlier or c.backlog), bursts=_bursts(cases))
    width = max(len(case.counts) for case in cases)
    levels = np.array([[*case.counts, *[TOP + 1] * (width - len(case.counts))] for case in cases], dtype=np.int64)
    counts = kernel.StepCounts(levels, levels <= TOP, levels[:, 0].copy(),
                               np.array([case.counts[-1] for case in cases], dtype=np.int64), TOP)
    capacity = np.array([case.capacity for case in cases], dtype=np.int64)
    state = kernel.StepState(
        throughput=np.array([case.throughput for case in cases]), measured=np.array([case.measured for case in cases]),
        capacity=capacity, ready=np.array([case.capacity if case.ready is None else case.ready for case in cases]),
        pending_seconds=np.zeros(count), delay=np.array([case.delay for case in cases]),
        stalling=np.array([case.stalling for case in cases]), up_size=np.ones(count, dtype=np.int64),
        below=np.array([sum(1 for n in case.counts if n < case.capacity) for case in cases]),
        backlog_total=np.array([case.backlog_total for case in cases]),
        previous_backlog_total=np.array([case.previous_backlog_total for case in cases]),
        unowned=np.array([case.unowned for case in cases]), pause=np.array([case.pause for case in cases]),
        cadence=None if all(case.cadence is None for case in cases) else np.array(
            [math.nan if case.cadence is None else case.cadence for case in cases]))

    def stall_readings():
        if any(case.stall is None for case in cases):
            return None
        return tuple(tuple(np.array([case.stall[pair][index] for case in cases]) for index in range(2)) for pair in range(2))

    stand_still = np.array([case.stand_still for case in cases])
    return kernel.slo_step([hub], state, kernel.StepKnobs.of([case.slo for case in cases]), counts, interval=INTERVAL,
                           since_latest=0.0, enough_history=np.array([case.enough_history for case in cases]),
                           stall_readings=stall_readings, explain=True,
                           stand_still=(lambda: stand_still) if not np.isnan(stand_still).all() else None)


GROWING_BACKLOG = {"backlog": (2000.0,) * 4, "earlier": (0.0,) * 4}
CASES = {
    # the throughput unknown: wait for new instances; one step up while the backlog grows; else hold
    "unknown, waiting": (Case(throughput=np.nan, ready=1), kernel.UNKNOWN_WAITING, kernel.HOLD, 2),
    "unknown, backlog grows": (Case(throughput=np.nan, backlog_total=401.0), kernel.UNKNOWN_GROWING, kernel.UP, 3),
    "unknown, backlog flat": (Case(throughput=np.nan), kernel.UNKNOWN, kernel.HOLD, 2),
    # at risk: served as fast as it arrives, the age stays where it is: at the limit (270 s) or past it
    "at the limit": (Case(ages=(270.0,) * 4), kernel.STEADY, kernel.HOLD, 2),
    "past the limit": (Case(ages=(270.5,) * 4), kernel.AT_RISK, kernel.UP, 4),
    # partitions without a live owner hold, before the risk
    "unowned": (Case(ages=(270.5,) * 4, unowned=1), kernel.UNOWNED, kernel.HOLD, 2),
    # a stall: more instances, the processed rate no higher (within 10%), the backlog growing
    "stall": (Case(**GROWING_BACKLOG, stall=((1, 2), (5.0, 5.5))), kernel.STALL, kernel.HOLD, 2),
    "no stall: processed rose": (Case(**GROWING_BACKLOG, stall=((1, 2), (5.0, 5.6))), kernel.GROWING, kernel.HOLD, 2),
    # a stall that goes on: held, raised to the count that serves the arrivals (4/s) and drains the
    # backlog (4,800 events) within the SLO (300 s) at 10/s per instance: 2.0 holds, a hair more takes 3
    "stall goes on, the count held drains": (Case(arrival=(1.0,) * 4, backlog=(1200.0,) * 4, earlier=(0.0,) * 4,
                                                  stall=((2, 2), (5.0, 5.0)), stalling=True), kernel.STALL, kernel.HOLD, 2),
    "stall goes on, the recovery needs 3": (Case(arrival=(1.0,) * 4, backlog=(1200.1,) * 4, earlier=(0.0,) * 4,
                                                 stall=((2, 2), (5.0, 5.0)), stalling=True), kernel.STALL, kernel.UP, 3),
    "stall goes on, at most the highest": (Case(**GROWING_BACKLOG, stall=((2, 2), (5.0, 5.0)), stalling=True), kernel.STALL,
                                           kernel.UP, 4),
    "stall recognised now: held, not raised": (Case(**GROWING_BACKLOG, stall=((1, 2), (5.0, 5.0))), kernel.STALL,
                                               kernel.HOLD, 2),
    "stall to the minimum": (Case(**GROWING_BACKLOG, stall=((1, 2), (5.0, 5.0)), slo=SloSettings(
        max_event_age_seconds=300.0, safety_seconds=30.0, headroom=0.0, stall_scale_to_minimum=True)),
        kernel.STALL, kernel.DOWN, 1),
    # no scale-in without the history, nor while the backlog grows (by more than an interval's arrivals)
    "too few samples": (Case(arrival=(0.5,) * 4, enough_history=False), kernel.TOO_FEW_SAMPLES, kernel.HOLD, 2),
    "backlog grows": (Case(arrival=(0.5,) * 4, backlog=(130.1,) * 4, earlier=(100.0,) * 4), kernel.GROWING,
                      kernel.HOLD, 2),
    "backlog grows by an interval's arrivals": (Case(arrival=(0.5,) * 4, backlog=(130.0,) * 4, earlier=(100.0,) * 4),
                                                kernel.SURPLUS, kernel.DOWN, 1),
    # the scale-in: a surplus, or no smaller count that holds for the dwell
    "surplus": (Case(arrival=(1.0,) * 4, capacity=4, owners=(0, 1, 2, 3)), kernel.SURPLUS, kernel.DOWN, 1),
    "steady": (Case(), kernel.STEADY, kernel.HOLD, 2),
    "steady, a partition set aside": (Case(arrival=(12.0, 1.0, 1.0, 1.0), capacity=4, owners=(0, 1, 2, 3),
                                           counts=(4,)), kernel.STEADY_HOT, kernel.HOLD, 4),
    # a learned rebalance pause (120 s, at least half the 60 s interval): the scale-out waits only
    # for the SLO less the pause (180 s), and no scale-in whose own pause passes the limit (270 s)
    "a pause learned: past the SLO less the pause": (Case(ages=(180.5,) * 4, pause=120.0), kernel.AT_RISK, kernel.UP, 4),
    "a pause learned: at the SLO less the pause": (Case(ages=(180.0,) * 4, pause=120.0), kernel.STEADY, kernel.HOLD, 2),
    "no pause learned: the same ages": (Case(ages=(180.5,) * 4), kernel.STEADY, kernel.HOLD, 2),
    "a pause under half an interval: none allowed for": (Case(ages=(180.5,) * 4, pause=29.9), kernel.STEADY, kernel.HOLD, 2),
    "a pause learned from this window's moves": (Case(ages=(180.5,) * 4, stand_still=120.0), kernel.AT_RISK, kernel.UP, 4),
    "a move without a pause lowers it (84 s)": (Case(ages=(216.5,) * 4, pause=120.0, stand_still=0.0), kernel.AT_RISK,
                                                kernel.UP, 4),
    "a move without a pause lowers it, within": (Case(ages=(216.0,) * 4, pause=120.0, stand_still=0.0), kernel.STEADY,
                                                 kernel.HOLD, 2),
    "surplus, its own pause within the limit": (Case(arrival=(1.0,) * 4, capacity=4, owners=(0, 1, 2, 3), ages=(150.0,) * 4,
                                                     pause=120.0), kernel.SURPLUS, kernel.DOWN, 1),
    "surplus, its own pause past the limit": (Case(arrival=(1.0,) * 4, capacity=4, owners=(0, 1, 2, 3), ages=(150.1,) * 4,
                                                   pause=120.0), kernel.STEADY, kernel.HOLD, 4),
    "surplus, no pause: the same ages": (Case(arrival=(1.0,) * 4, capacity=4, owners=(0, 1, 2, 3), ages=(150.1,) * 4),
                                         kernel.SURPLUS, kernel.DOWN, 1),
    "surplus held from the ages after the pause": (Case(arrival=(2.6,) * 4, capacity=4, owners=(0, 1, 2, 3),
                                                        ages=(130.0,) * 4, pause=120.0), kernel.SURPLUS, kernel.DOWN, 2),
    "surplus, no pause: from the ages now": (Case(arrival=(2.6,) * 4, capacity=4, owners=(0, 1, 2, 3), ages=(130.0,) * 4),
                                             kernel.SURPLUS, kernel.DOWN, 1),
    # an oldest event past the SLO (300 s): no count that leaves it past the SLO after an interval
    # (one instance drains 2.5/s of the 1/s arriving per partition: 90 s younger; two: 240 s)
    "surplus, the oldest back within the SLO after an interval": (
        Case(arrival=(1.0,) * 4, capacity=4, owners=(0, 1, 2, 3), ages=(390.0,) * 4), kernel.SURPLUS, kernel.DOWN, 1),
    "surplus, the oldest still past the SLO after an interval at one": (
        Case(arrival=(1.0,) * 4, capacity=4, owners=(0, 1, 2, 3), ages=(390.1,) * 4), kernel.SURPLUS, kernel.DOWN, 2),
    # ... not under a learned cadence (its wait is in the ages): the limit after a reaction alone
    "surplus, the oldest past the SLO, checkpoints every 602 s": (
        Case(arrival=(1.0,) * 4, capacity=4, owners=(0, 1, 2, 3), ages=(390.1,) * 4, cadence=602.0), kernel.SURPLUS,
        kernel.DOWN, 1),
}


@pytest.mark.parametrize(("case", "reason", "direction", "wanted"), CASES.values(), ids=CASES.keys())
def test_a_batch_of_one_decides_at_the_boundary(case: Case, reason: int, direction: int, wanted: int) -> None:
    outcome = step([case])
    assert (kernel.REASONS[int(outcome.reason[0])], int(outcome.direction[0]), int(outcome.wanted[0])) == \
        (kernel.REASONS[reason], direction, wanted)


def _column(outcome: kernel.StepOutcome, index: int) -> tuple:
    """A column's decision, and where the throughput is known the numbers its reasons quote."""
    decision = (int(outcome.reason[index]), int(outcome.direction[index]), int(outcome.wanted[index]),
                float(outcome.delay[index]))
    if decision[0] in (kernel.UNKNOWN_WAITING, kernel.UNKNOWN_GROWING, kernel.UNKNOWN):
        return decision
    numbers = (outcome.predicted_age, outcome.react, outcome.busiest_now, outcome.oldest_in_view, outcome.drain_seconds,
               outcome.hold_seconds, outcome.busiest_wanted, outcome.pause)
    # (the pause allowed for and the blocked scale-in: None in a batch where no column has them)
    allowance = 0.0 if outcome.allowance is None else float(outcome.allowance[index])
    blocked = outcome.pause_blocked is not None and bool(outcome.pause_blocked[index])
    return (*decision, allowance, blocked,
            *(None if values is None or np.isnan(values[index]) else float(values[index]) for values in numbers))


def test_a_sweep_decides_every_column_as_a_batch_of_one() -> None:
    # every case above, and each again with other settings (SLO, headroom, counts), as one batch
    others = [replace(case, slo=replace(case.slo, max_event_age_seconds=420.0, headroom=0.1), counts=(1, 2, 3, 4, 6, 8))
              for case, *_ in CASES.values() if case.stall is None]
    cases = [case for case, *_ in CASES.values() if case.stall is None] + others
    together = step(cases)
    for index, case in enumerate(cases):
        assert _column(together, index) == _column(step([case]), 0), index
    assert {int(code) for code in together.reason} >= {kernel.UNKNOWN, kernel.AT_RISK, kernel.UNOWNED, kernel.GROWING,
                                                       kernel.TOO_FEW_SAMPLES, kernel.SURPLUS, kernel.STEADY}


def test_a_sweep_with_stalls_decides_every_column_as_a_batch_of_one() -> None:
    # the stall's readings are the hub's (all columns read them), so these run together
    cases = [case for case, *_ in CASES.values() if case.stall is not None]
    cases += [replace(case, capacity=3, counts=(1, 2, 3, 4, 5)) for case in cases]
    together = step(cases)
    for index, case in enumerate(cases):
        assert _column(together, index) == _column(step([case]), 0), index


@pytest.mark.parametrize("index", range(5))
def test_one_later_peak_is_that_row_of_later_peaks(index: int) -> None:
    times = np.array([0.0, 60.0, 120.0, 120.0, 200.0, 260.0])  # (a step of no time counts for none)
    positions = np.cumsum(np.random.default_rng(index).random((6, 3)) * 1000.0, axis=0)
    assert np.array_equal(kernel.later_peak(times, positions, index), kernel.later_peaks(times, positions)[index])


def burst_case(*, throughput: float, burst: float = 3000.0, bursts: tuple | None = None, noise: float = 1.0) -> Case:
    """A burst of ``burst`` events per partition in the last interval on 300 (5/s), one like it
    seven intervals back that ended; waiting: the burst and the two intervals before it (the
    oldest event 180 s old). Counts up to 8."""
    history = bursts or (300.0, 300.0, burst, 300.0, 300.0, 300.0, 300.0, 300.0, burst)
    arrival = sum(history[-5:]) / 300.0
    return Case(arrival=(arrival,) * 4, recent=(history[-1] / 60.0,) * 4, backlog=(history[-1] + 600.0,) * 4,
                ages=(180.0,) * 4, throughput=throughput, bursts=history, noise=noise, counts=(1, 2, 3, 4, 6, 8))


BURST_CASES = {
    # the asked-for count carries the burst within the limit: no reason to scale out
    "carried": (burst_case(throughput=40.0), (kernel.AT_RISK, 8), (kernel.STEADY, 2)),
    # not carried: the scale-out sized for the backlog's drain within the limit, not the burst's rate
    "sized": (burst_case(throughput=20.0), (kernel.AT_RISK, 8), (kernel.AT_RISK, 4)),
    # the scale-in held at the busiest SLO-long window, not the busiest interval (the burst's)
    "calm": (burst_case(throughput=80.0), (kernel.STEADY, 2), (kernel.SURPLUS, 1)),
    # no burst that ended (the first interval of a step): as without absorbing
    "a step": (burst_case(throughput=40.0, bursts=(300.0,) * 8 + (3000.0,)), (kernel.AT_RISK, 8), (kernel.AT_RISK, 8)),
    # noise at half of ABSORB_FULL_NOISE: weight 0, as without absorbing
    "steady noise": (burst_case(throughput=40.0, noise=0.5), (kernel.AT_RISK, 8), (kernel.AT_RISK, 8)),
}


@pytest.mark.parametrize(("case", "plain", "absorbed"), BURST_CASES.values(), ids=BURST_CASES.keys())
def test_absorbing_moves_the_three_sites_where_a_short_burst_ended(case: Case, plain: tuple, absorbed: tuple) -> None:
    def decided(outcome: kernel.StepOutcome) -> tuple:
        return kernel.REASONS[int(outcome.reason[0])], int(outcome.wanted[0])

    without, outcome = step([replace(case, bursts=None)]), step([case])
    assert decided(without) == (kernel.REASONS[plain[0]], plain[1])
    assert decided(outcome) == (kernel.REASONS[absorbed[0]], absorbed[1])
    # The decision log says where absorbing relieved a risk (``absorbed``), and nowhere else.
    relieved = plain[0] == kernel.AT_RISK and absorbed[0] != kernel.AT_RISK
    assert without.absorbed is None
    assert (outcome.absorbed is not None and bool(outcome.absorbed[0])) == relieved


def test_a_sweep_with_bursts_decides_every_column_as_a_batch_of_one() -> None:
    # the burst cases, others without a history to read, and the burst cases at a longer SLO
    cases = [case for case, *_ in BURST_CASES.values()] + [case for case, *_ in CASES.values() if case.stall is None]
    cases += [replace(case, slo=replace(case.slo, max_event_age_seconds=420.0)) for case, *_ in BURST_CASES.values()]
    together = step(cases)
    for index, case in enumerate(cases):
        assert _column(together, index) == _column(step([case]), 0), index
