"""The SLO decision, assembled once: ``slo_step`` from the readings and the state
to the wanted count, the direction and a reason code, per candidate (column).

The engine calls it with a batch of one, what it read from the samples (``slo.propose`` an Event
Hubs hub's partitions, ``slo_queue.propose`` a Service Bus queue: its section is at the end); the
batched simulator (``simulation/drivers/batched_slo.py``) with every candidate of a sweep, what
it read from the world. Each keeps what is its own: reading, the words of the reasons, the
state it carries from one evaluation to the next, and the gates after the proposal.

Where a source's arrivals come in short bursts (``absorb``), three marked sites move the risk
test, the scale-out's need and the scale-in's rates towards what the backlog's own arrival times
and an SLO-long window's arrivals ask (``absorb.SourceAbsorbing``, ``absorb.absorbed_risk``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from scaling.domain.slo_kernel.absorb import BurstHistory, SourceAbsorbing, absorbed_risk
from scaling.domain.slo_kernel.ages import age_at_reaction
from scaling.domain.slo_kernel.arrays import all_of, any_of, chosen_columns, plain
from scaling.domain.slo_kernel.cadence import cadence_allowance, cadence_readings, probed_rates
from scaling.domain.slo_kernel.counts import scale_in_counts, scale_out_counts
from scaling.domain.slo_kernel.hub import (
    FLAT_TOLERANCE,
    backlog_flat,
    backlog_growing,
    calm_rates,
    carried_age_limits,
    checkpoints_keep_pace,
    column_sums,
    distinct_shares,
    drain_seconds,
    forecast_rates,
    hot_partitions,
    most_instances,
    recovery_counts,
    scale_out_need,
    stalled,
)
from scaling.domain.slo_kernel.learning import (
    CHECKPOINT_DELAY_CEILING,
    CHECKPOINT_DELAY_STEADY_CEILING,
    dense_arrivals,
    keeping_up,
    learned_checkpoint_delay,
    steady_lags,
)
from scaling.domain.slo_kernel.owners import OwnerLoads, Owners
from scaling.domain.slo_kernel.rebalance import (
    learned_rebalance_pause,
    pause_allowance,
    pause_blocks_scale_in,
    paused_age_limit,
    paused_drain_seconds,
    scale_in_ages,
)

#: The step's reason codes, in the order the step meets them (``REASONS`` names them as the
#: decisions record them). ``STEADY_HOT``: no smaller count holds while partitions are set aside.
(UNKNOWN_WAITING, UNKNOWN_GROWING, UNKNOWN, NO_DATA, UNOWNED, STALL, AT_RISK, TOO_FEW_SAMPLES, GROWING, STEADY,
 STEADY_HOT, SURPLUS) = range(12)
REASONS = ("throughput_unknown_waiting", "throughput_unknown_backlog_growing", "throughput_unknown", "no_partition_data",
           "unowned_partitions", "stall", "slo_at_risk", "too_few_samples", "backlog_growing", "slo_steady",
           "hot_partition", "slo_surplus")
#: The direction per column: down, hold, up.
DOWN, HOLD, UP = -1, 0, 1


# (HubReading and StepState are made at every live evaluation: not frozen, which costs a few
# microseconds per instance; nothing changes them once made.)
@dataclass(slots=True)
class HubReading:
    """One source's readings over the candidates. Rows are partitions, or (``row_of``: each
    partition's row; ``equal_shares``: one group) rows standing for several (``share_rows.py``).

    ``arrival_rate`` and ``recent_rate`` are (rows,) shared by the candidates or (rows,
    candidates); ``ages`` (checkpoint delay included) and ``backlog`` (rows, candidates);
    ``partition_backlog`` and ``earlier_backlog`` (the rate window's base; ``None``: unknown)
    per partition, (partitions, candidates). Two readings are read only when a rule needs them:
    ``checkpoints()``, the events checkpointed (checkpoint + 1, 0: none) now and at the sample
    before (``None``: unknown), and
    ``scale_in_rates()``, the busiest recent interval's rates (rows, candidates), the rise and
    the noise of the arrivals (``calm_rates``). ``bursts`` reads what absorbing short bursts
    needs of the history (``absorb.BurstHistory``; None: not read, the rules as without it)."""

    arrival_rate: np.ndarray
    recent_rate: np.ndarray
    ages: np.ndarray
    backlog: np.ndarray
    owners: Owners
    per_instance: np.ndarray
    checkpoints: Callable[[], tuple[np.ndarray, np.ndarray] | None]
    scale_in_rates: Callable[[], tuple[np.ndarray, np.ndarray | float, np.ndarray | float]]
    partition_backlog: np.ndarray | None = None
    earlier_backlog: np.ndarray | None = None
    row_of: np.ndarray | None = None
    equal_shares: bool = False
    bursts: Callable[[], BurstHistory | None] | None = None
    #: The seconds since each checkpoint's last move, read when a cadence is known (``cadence.cadence_readings``).
    since_moved: Callable[[], tuple[np.ndarray, np.ndarray | None] | None] | None = None
    #: The arrivals' history: the sample times and the last-enqueued sequence numbers (samples x
    #: partitions, shared, or samples x partitions x candidates), read to learn the checkpoint
    #: delay (``dense_arrivals``; None: not read).
    arrivals: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None

    @property
    def partitions(self) -> int:
        return len(self.row_of) if self.row_of is not None else self.ages.shape[0]

    def by_partition(self, values: np.ndarray) -> np.ndarray:
        """Row values per partition."""
        return values if self.row_of is None else values[self.row_of]

    def loads(self, values: np.ndarray, columns: np.ndarray | slice, hot: np.ndarray | None, rate: np.ndarray,
              by_draw: np.ndarray) -> OwnerLoads:
        """The owner loads of ``values`` (the chosen columns only) on these rows."""
        chosen = isinstance(columns, np.ndarray)
        return OwnerLoads(values, None if hot is None else hot[:, columns], self.owners.of_columns(columns) if chosen
                          else self.owners, rate[columns], self.per_instance, by_draw[columns], row_of=self.row_of,
                          equal_shares=self.equal_shares)


@dataclass(frozen=True, slots=True)
class StepKnobs:
    """The SLO settings per candidate, as the step reads them."""

    limit: np.ndarray
    max_age: np.ndarray
    safety: np.ndarray
    dwell: np.ndarray
    headroom_factor: np.ndarray
    provisioning: np.ndarray
    peak_full_noise: np.ndarray
    stall_to_minimum: np.ndarray
    #: Over how long a scale-out drains with a measured rate: the horizon of ``carried_age_limits``.
    horizon: np.ndarray
    delay_ceiling: np.ndarray
    delay_steady_ceiling: np.ndarray

    @classmethod
    def of(cls, slos: Sequence) -> StepKnobs:
        """From each candidate's ``SloSettings``."""
        max_age = np.array([s.max_event_age_seconds for s in slos])
        safety = np.array([s.safety_seconds for s in slos])
        dwell = np.array([s.min_dwell_seconds for s in slos])
        return cls(limit=max_age - safety, max_age=max_age, safety=safety, dwell=dwell,
                   headroom_factor=np.array([1.0 + s.headroom for s in slos]),
                   provisioning=np.array([float(s.provisioning_delay_seconds) for s in slos]),
                   peak_full_noise=np.array([float(s.scale_in_peak_full_noise) for s in slos]),
                   stall_to_minimum=np.array([bool(s.stall_scale_to_minimum) for s in slos]),
                   horizon=drain_seconds(dwell, max_age, True, 0.0),
                   delay_ceiling=max_age * CHECKPOINT_DELAY_CEILING,
                   delay_steady_ceiling=max_age * CHECKPOINT_DELAY_STEADY_CEILING)

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def one(slo) -> StepKnobs:
        """A batch of one (the engine's; the same settings at every evaluation)."""
        return StepKnobs.of([slo])


@dataclass(frozen=True, slots=True)
class StepCounts:
    """The counts each candidate may choose: allowed counts ascending (candidates x counts,
    ``valid`` marks the real ones), the lowest and highest, looked up up to ``top`` + 1."""

    levels: np.ndarray
    valid: np.ndarray
    lowest: np.ndarray
    highest: np.ndarray
    top: int

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def one(counts: tuple[int, ...], top: int) -> StepCounts:
        """A batch of one from the engine's allowed counts."""
        levels = np.array([counts], dtype=np.int64)
        return StepCounts(levels, np.ones(levels.shape, dtype=bool), levels[:, 0].copy(), levels[:, -1].copy(), top)


@dataclass(slots=True)
class StepState:
    """Per candidate, what the evaluation knows besides the readings: the per-instance rate to
    plan with (NaN: unknown) and whether it is measured (learned or configured, not a lower
    bound), the capacity asked for and the part serving, how long the rest still need
    (``pending_seconds``), the learned checkpoint delay (NaN: none yet), whether the last decision
    was a stall's, the scale-up step's size at the capacity, how many allowed counts lie below
    the capacity, the hub's backlog now and at the sample before, how many partitions have
    no live owner while others have one, and the learned rebalance pause (``rebalance``; NaN:
    none yet)."""

    throughput: np.ndarray
    measured: np.ndarray
    capacity: np.ndarray
    ready: np.ndarray
    pending_seconds: np.ndarray
    delay: np.ndarray
    stalling: np.ndarray
    up_size: np.ndarray
    below: np.ndarray
    backlog_total: np.ndarray
    previous_backlog_total: np.ndarray
    unowned: np.ndarray
    pause: np.ndarray
    #: (queues) Where the throughput is unknown, whether the readings call for a step up: the
    #: source's own reading of "falling behind" (``None``: the hub's, its backlog total grew).
    falling_behind: np.ndarray | None = None
    #: (hubs) The learned checkpoint cadence (``cadence``; NaN: none yet; None: not read).
    cadence: np.ndarray | None = None


@dataclass(slots=True)
class StepOutcome:
    """Per column: the count wanted (the capacity where it holds), the direction (``UP``,
    ``HOLD``, ``DOWN``), the reason code (``REASONS``), the learned checkpoint delay, and the
    numbers the reasons quote (NaN where a column did not get that far)."""

    wanted: np.ndarray
    direction: np.ndarray
    reason: np.ndarray
    delay: np.ndarray
    #: The learned rebalance pause (NaN: none yet), and the seconds the decision allowed for it
    #: (``pause_allowance``; None: no column allowed any).
    pause: np.ndarray
    allowance: np.ndarray | None = None
    #: Where a scale-in's own rebalance pause would take a partition past the limit (None: nowhere).
    pause_blocked: np.ndarray | None = None
    predicted_age: np.ndarray | None = None
    react: np.ndarray | None = None
    #: Per source, the partitions set aside as hotter than one instance (rows x candidates); None: none.
    hot: list[np.ndarray] | None = None
    #: The serving counts and processed rates of the history's first interval and its last (``stalled``).
    stall_readings: tuple | None = None
    drain_seconds: np.ndarray | None = None
    hold_seconds: np.ndarray | None = None
    #: With ``explain``: whether every source collects ownership, the busiest owner's load now
    #: and at the count wanted, the oldest event in view (net of the delay).
    owned: np.ndarray | None = None
    busiest_now: np.ndarray | None = None
    busiest_wanted: np.ndarray | None = None
    oldest_in_view: np.ndarray | None = None
    #: (queues) The rate a scale-out serves (``scale_out_need``) and the rate a scale-in holds at
    #: (``calm_rates``), NaN where a column did not get that far.
    need: np.ndarray | None = None
    calm_rate: np.ndarray | None = None
    #: Where the risk test found the SLO at risk and absorbing bursts relieved it: a short burst
    #: the asked-for count carries within the limit (None: nowhere). The decision log says so.
    absorbed: np.ndarray | None = None
    #: The learned checkpoint cadence (``cadence.cadence_readings``; None: not read).
    cadence: np.ndarray | None = None


def slo_step(hubs: Sequence[HubReading], state: StepState, knobs: StepKnobs, counts: StepCounts, *, interval: float,
             since_latest: float, enough_history: bool | np.ndarray, stall_readings: Callable[[], tuple | None],
             stand_still: Callable[[], np.ndarray | None] | None = None, cadence=None, may_scale_in: np.ndarray | None = None,
             explain: bool = False, queue: SourceTests | None = None) -> StepOutcome:
    """The SLO mode's proposal per candidate, the tests in their one order:

    1. the throughput unknown: wait for new instances, or one step up while the backlog grows;
    2. no source with partitions: hold;
    3. partitions hotter than one instance set aside (``hot_partitions``);
    4. the checkpoints' cadence learned from ``cadence`` and taken off the ages (``cadence_readings``),
       the checkpoint delay learned (``learned_checkpoint_delay``) and the rebalance pause
       (``learned_rebalance_pause`` from ``stand_still``, the caller's reading of the moved
       partitions' stand-still per column, None or NaN: none measured), the forecasts, the ages
       net of the delay and the age predicted when a scale-out decided at the next evaluation
       would serve (with a pause allowed for, ``pause_allowance``: that much later, against
       ``paused_age_limit``);
    5. partitions without a live owner (``state.unowned``): hold;
    6. a stall (``stalled``): hold, or the minimum (``stall_scale_to_minimum``);
    7. at risk: the count that serves the need (``scale_out_counts``; a pause allowed for: its
       lead and ``paused_drain_seconds``);
    8. too little history, or a backlog that grows: hold;
    9. the smallest count that holds for the dwell (``scale_in_counts``; a pause allowed for:
       from ``scale_in_ages``, and none where ``pause_blocks_scale_in``), where ``may_scale_in``
       (the caller's: where the gates would let a scale-in act; default every column).

    A Service Bus ``queue`` (no hubs) takes tests 1 and 2 here and the rest itself (``queue.py``).

    Long because the order is the rule: each test reads what the ones before worked out, and a
    column leaves at the first that decides it. Work a later test needs runs only for the
    columns still undecided, and the readings read lazily only when one needs them. With
    ``explain`` it also works out the numbers only reasons quote."""
    capacity, throughput = state.capacity, state.throughput
    count = len(capacity)
    known = throughput > 0  # (NaN compares False: unknown)
    wanted = capacity.copy()
    direction = np.zeros(count, dtype=np.int64)
    reason = np.full(count, STEADY, dtype=np.int64)
    outcome = StepOutcome(wanted, direction, reason, state.delay.copy(), state.pause.copy())
    if not all_of(known):
        unknown = ~known
        rising = unknown & (state.ready >= capacity) & ((state.backlog_total > 0) & (
            state.backlog_total > state.previous_backlog_total) if state.falling_behind is None else state.falling_behind)
        reason[unknown] = np.where(state.ready[unknown] < capacity[unknown], UNKNOWN_WAITING,
                                   np.where(rising[unknown], UNKNOWN_GROWING, UNKNOWN))
        wanted[rising] = capacity[rising] + state.up_size[rising]
        direction[rising] = UP
    if not hubs:
        if queue is not None:  # (a queue: ``SourceTests``)
            return queue.decide(outcome, known, state, knobs, counts, interval=interval, since_latest=since_latest,
                                enough_history=enough_history)
        reason[known] = NO_DATA
        return outcome
    if not any_of(known):
        return outcome

    every_known = all_of(known)
    rate = throughput if every_known else np.where(known, throughput, 1.0)
    # 3. Partitions that receive more than one instance serves, over the rate window and the last
    # interval alike, fall behind at any count: sized for the rest of the hub (while the hub as a
    # whole can be served at the highest count).
    hot = [hot_partitions(hub.arrival_rate, hub.recent_rate, rate, state.measured,
                          most_instances(hub.partitions, counts.highest, hub.per_instance), hub.row_of) for hub in hubs]
    any_hot = any(mask.any() for mask in hot)
    if any_hot:
        outcome.hot = hot

    # What the rest of the step sees: the set-aside partitions idle and caught up.
    partition_backlogs = [hub.backlog if hub.partition_backlog is None else hub.partition_backlog for hub in hubs]
    arrivals, recents = [hub.arrival_rate for hub in hubs], [hub.recent_rate for hub in hubs]
    ages, waiting = [hub.ages for hub in hubs], [hub.backlog for hub in hubs]
    outcome.cadence, ages = cadence_readings(state.cadence, cadence, hubs, ages, interval, known)  # (checkpoints' cadence)
    backlogs_in_view, earlier = partition_backlogs, [hub.earlier_backlog for hub in hubs]
    if any_hot:
        def in_view(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
            return np.where(mask, 0.0, values[:, None] if values.ndim == 1 else values)

        hot_by_partition = [hub.by_partition(mask) for hub, mask in zip(hubs, hot, strict=True)]
        arrivals = [in_view(values, mask) for values, mask in zip(arrivals, hot, strict=True)]
        recents = [in_view(values, mask) for values, mask in zip(recents, hot, strict=True)]
        ages = [in_view(values, mask) for values, mask in zip(ages, hot, strict=True)]
        waiting = [in_view(values, mask) for values, mask in zip(waiting, hot, strict=True)]
        backlogs_in_view = [in_view(values, mask) for values, mask in zip(partition_backlogs, hot_by_partition, strict=True)]
        earlier = [None if values is None else in_view(values, mask) for values, mask in zip(earlier, hot_by_partition,
                                                                                              strict=True)]
    by_partition = [hub.by_partition(arrival)[:, None] if arrival.ndim == 1 else hub.by_partition(arrival)
                    for hub, arrival in zip(hubs, arrivals, strict=True)]  # (shared: one column for all)

    # 4. Checkpoints trail the consumers, so even idle consumers show an oldest event as old as
    # the checkpoint delay: learned as the floor of the ages (a quiet spell teaches nothing;
    # while every instance the bounds allow serves and the backlog stays flat it follows them).
    # (a batch of one runs these per-candidate rules on plain numbers, as ``arrays`` lets them)
    previous = plain(state.delay)
    worst = functools.reduce(np.maximum, [np.maximum.reduce(age, axis=0) for age in ages])
    dense = functools.reduce(np.logical_and, [dense_arrivals(arrival, recent, previous, interval, hub.row_of,
                                                             None if hub.arrivals is None else hub.arrivals())
                                              for hub, arrival, recent in zip(hubs, arrivals, recents, strict=True)])
    enough = enough_history if isinstance(enough_history, np.ndarray) else bool(enough_history)
    pace = (state.ready >= capacity) & enough  # (every serving instance ready, its checkpoints keeping pace)
    for hub, backlog in zip(hubs, backlogs_in_view, strict=True):
        if not any_of(pace):
            break
        read = hub.checkpoints()
        pace = pace & (checkpoints_keep_pace(read[0], read[1], backlog) if read is not None else False)
    steady = pace & (capacity >= counts.highest)
    for backlog, before, arrival in zip(backlogs_in_view, earlier, by_partition, strict=True):
        if before is not None and any_of(steady):
            steady = steady & backlog_flat(backlog, before, arrival, interval * FLAT_TOLERANCE)
    # Where an owner kept up, the youngest steady lag of its partitions (``keeping_up``, ``steady_lags``).
    youngest = math.nan
    if any_of(pace & known):
        lags = []
        for hub, arrival, mask in zip(hubs, by_partition, hot if any_hot else [None] * len(hubs), strict=True):
            read = hub.checkpoints()
            lags.append(np.inf if read is None else steady_lags(
                read, None if hub.arrivals is None else hub.arrivals(), arrival, interval, hub.row_of,
                None if mask is None else hub.by_partition(mask), keeping_up(read, hub.owners, rate, interval)).min(axis=0))
        youngest = functools.reduce(np.minimum, lags)
        youngest = plain(np.where(pace & known & np.isfinite(youngest), youngest, math.nan))
    delay = learned_checkpoint_delay(plain(worst), previous, interval, plain(knobs.delay_ceiling), plain(dense),
                                     plain(steady), plain(knobs.delay_steady_ceiling), youngest)
    delay = np.array([delay]) if count == 1 else delay
    outcome.delay = delay if every_known else np.where(known, delay, state.delay)
    since = since_latest + delay
    react = since + interval + knobs.provisioning
    # A rebalance pause (``rebalance``): learned from the moves the window shows; where one is
    # known, a scale-out acts that much earlier, counts the pause's arrivals and drains within
    # the SLO, and a scale-in holds the ages the pause adds. (Where none is allowed for, nothing
    # below changes: the rules then skip it.)
    measured_pause = None if stand_still is None else stand_still()
    if measured_pause is not None:
        pause = learned_rebalance_pause(state.pause, measured_pause)
        outcome.pause = pause if every_known else np.where(known, pause, state.pause)
    allowance = pause_allowance(outcome.pause, interval)
    paused = any_of(allowance > 0)
    risk_limit, lead = knobs.limit, knobs.provisioning
    if paused:
        outcome.allowance = allowance
        react = react + allowance
        risk_limit = paused_age_limit(knobs.limit, knobs.max_age, allowance)
        lead = knobs.provisioning + allowance
    forecasts = [forecast_rates(hub.arrival_rate, hub.recent_rate, knobs.headroom_factor) for hub in hubs]
    if any_hot:
        forecasts = [np.where(mask, 0.0, forecast) for forecast, mask in zip(forecasts, hot, strict=True)]
    ages = [np.maximum(age - delay, 0.0) for age in ages]
    first = np.minimum(state.pending_seconds, react)
    by_draw = [np.zeros(count, dtype=bool) if hub.row_of is not None else distinct_shares(forecast)
               for hub, forecast in zip(hubs, forecasts, strict=True)]
    every = slice(None)
    sizing_hot = hot if any_hot else [None] * len(hubs)
    loads = [hub.loads(forecast, every, mask, rate, draw)
             for hub, forecast, mask, draw in zip(hubs, forecasts, sizing_hot, by_draw, strict=True)]
    short_of = (state.ready != capacity).nonzero()[0]
    predicted = np.zeros(count)
    risk = np.zeros(count, dtype=bool)
    risks, absorbing = [], []  # absorb: each source's risk, and its absorbing rules (None: not read)
    for load, forecast, age, backlog, hub, mask in zip(loads, forecasts, ages, waiting, hubs, sizing_hot, strict=True):
        served = load.service(forecast, capacity)
        served_ready = served  # (the same where every instance asked for serves)
        if short_of.size:
            served_ready = served.copy()
            served_ready[:, short_of] = load.service(forecast[:, short_of], state.ready[short_of], short_of)
        then = age_at_reaction(age, backlog, forecast, served_ready, served, first, react)
        predicted = np.maximum(predicted, np.maximum.reduce(then, axis=0))
        hub_risk = np.logical_or.reduce(then > carried_age_limits(risk_limit, forecast, rate, knobs.horizon, hub.row_of), axis=0)
        risk |= hub_risk
        risks.append(hub_risk)  # absorb
        # absorb: the age limit counts from the event's arrival, so the learned checkpoint delay adds to it
        absorbing.append(None if hub.bursts is None else SourceAbsorbing(
            hub.bursts, forecast, served_ready, served, first, knobs.limit + delay, interval, knobs.headroom_factor,
            knobs.max_age, knobs.dwell, hub.row_of, mask))
    outcome.predicted_age, outcome.react = predicted, react
    if explain:
        outcome.owned = functools.reduce(np.logical_and, [load.ownership for load in loads])
        outcome.busiest_now = functools.reduce(np.maximum, [load.busiest(capacity) for load in loads])
        outcome.oldest_in_view = functools.reduce(np.maximum, [np.maximum.reduce(age, axis=0) for age in ages])

    # 5. Partitions without a live owner while others have one: a consumer that stalled or is
    # rebalancing, which no count fixes until they are claimed again.
    unowned = known & (state.unowned > 0)
    undecided = known
    if any_of(unowned):
        reason[unowned] = UNOWNED
        undecided = known & ~unowned

    # 6. A stall: more instances did not raise the processed rate while the backlog in view grows
    # (or one recognised before goes on); more instances do not help, fewer leave the recovery short.
    growing = functools.reduce(np.logical_or, [backlog_growing(backlog, before, arrival, interval) for backlog, before, arrival
                                               in zip(backlogs_in_view, earlier, by_partition, strict=True)
                                               if before is not None], np.zeros(count, dtype=bool))
    stall = np.zeros(count, dtype=bool)
    if any_of(growing & undecided):
        readings = stall_readings()
        if readings is not None:
            (serving_before, serving_now), (done_before, done_now) = readings
            arriving = functools.reduce(np.add, [column_sums(arrival[:, None] if arrival.ndim == 1 else arrival, hub.row_of)
                                                 for hub, arrival in zip(hubs, arrivals, strict=True)])
            most = functools.reduce(np.minimum, [most_instances(hub.partitions, counts.highest, hub.per_instance)
                                                 for hub in hubs])
            stall = undecided & stalled(serving_before, serving_now, done_before, done_now, growing, state.stalling,
                                        arriving, most)
            if any_of(stall):
                outcome.stall_readings = readings
                reason[stall] = STALL
                to_minimum = stall & knobs.stall_to_minimum
                wanted[to_minimum], direction[to_minimum] = counts.lowest[to_minimum], DOWN
                # A stall that goes on (recognised at the last decision too: a rebalance pause shows
                # for one) holds what serves, raised to the count the recovery needs to drain the
                # backlog in view within the SLO (``recovery_counts``): the recovery drains at once.
                going_on = stall & state.stalling & ~knobs.stall_to_minimum
                if any_of(going_on):
                    backlog = functools.reduce(np.add, [column_sums(backlog) for backlog in backlogs_in_view])
                    need = recovery_counts(arriving, backlog, rate, knobs.max_age, counts.highest)
                    raise_to = going_on & (need > capacity)
                    wanted[raise_to], direction[raise_to] = need[raise_to], UP
    if any_of(stall):
        undecided = undecided & ~stall

    # 7. At risk: serve the forecast and drain, over ``drain_seconds``, what will have piled up
    # by the time new instances serve: the smallest allowed count that serves every partition's need.
    risk = risk & undecided
    if any_of(risk) and any(absorbing):  # absorb: a burst the count carries within the limit is no reason to scale out
        relieved = absorbed_risk(risks, absorbing, risk, react)
        outcome.absorbed = risk & ~relieved
        risk = relieved
    if any_of(risk):
        rows = risk.nonzero()[0]
        columns = chosen_columns(rows, count)
        drain = drain_seconds(knobs.dwell[columns], knobs.max_age[columns], state.measured[columns], predicted[columns])
        if paused:
            drain = paused_drain_seconds(drain, knobs.max_age[columns], allowance[columns])
        needs = []
        for hub, forecast, backlog, partition_backlog, mask, draw, absorbs in zip(
                hubs, forecasts, waiting, partition_backlogs, sizing_hot, by_draw, absorbing, strict=True):
            if hub.row_of is None:
                need = scale_out_need(forecast[:, columns], backlog[:, columns], lead[columns], since[columns],
                                      knobs.safety[columns], drain)
                if absorbs is not None:  # absorb: sized for the SLO-long window's arrivals and the backlog's drain
                    need = absorbs.sized(need, rows, lead[rows] + since[rows], False)
                needs.append((hub.loads(need, columns, mask, rate, draw), need))
                continue
            # (the need holds each partition's own backlog: equal shares no longer mean equal rows)
            hot_partition = None if mask is None else mask[hub.row_of][:, columns]
            held = partition_backlog[:, columns]
            if hot_partition is not None:
                held = np.where(hot_partition, 0.0, held)
            need = scale_out_need(forecast[:, columns][hub.row_of], held, lead[columns], since[columns],
                                  knobs.safety[columns], drain)
            if absorbs is not None:  # absorb (each partition's own backlog)
                need = absorbs.sized(need, rows, lead[rows] + since[rows], True)
            owners = hub.owners if isinstance(columns, slice) else hub.owners.of_columns(columns)
            needs.append((OwnerLoads(need, hot_partition, owners, rate[columns], hub.per_instance, draw[columns]), need))
        chosen = scale_out_counts(counts.levels[columns], counts.valid[columns], capacity[columns], counts.highest[columns],
                                  counts.top, needs)
        wanted[rows], direction[rows], reason[rows] = chosen, UP, AT_RISK
        outcome.drain_seconds = np.full(count, np.nan)
        outcome.drain_seconds[rows] = drain
        if explain:
            outcome.busiest_wanted = np.full(count, np.nan)
            outcome.busiest_wanted[rows] = functools.reduce(np.maximum, [load.busiest(chosen, columns) for load in loads])
    if any_of(risk):
        undecided = undecided & ~risk

    # 8. No scale-in without the rate window's history, nor while the backlog in view grows (the
    # instances serve less than arrives, and fewer would serve less still).
    if isinstance(enough, np.ndarray):
        reason[undecided & ~enough] = TOO_FEW_SAMPLES
        undecided = undecided & enough
    elif not enough:
        reason[undecided] = TOO_FEW_SAMPLES
        return outcome
    if any_of(growing):
        reason[undecided & growing] = GROWING
        undecided = undecided & ~growing
    if any_hot:
        reason[undecided & functools.reduce(np.logical_or, [mask.any(axis=0) for mask in hot])] = STEADY_HOT

    # 9. The smallest count that holds for the dwell, at the forecast or the busiest recent
    # interval (on noisy arrivals), raised while the arrivals clearly rise (``calm_rates``).
    eligible = undecided if may_scale_in is None else undecided & may_scale_in
    if paused and any_of(eligible):  # (a moved partition drains nothing until its pause has passed)
        blocked = eligible & functools.reduce(np.logical_or, [pause_blocks_scale_in(age, allowance, knobs.limit)
                                                              for age in ages])
        if any_of(blocked):
            outcome.pause_blocked = blocked
            eligible = eligible & ~blocked
    if not any_of(eligible):
        return outcome
    rows = eligible.nonzero()[0]
    columns = chosen_columns(rows, count)
    sources, probed = [], probed_rates(rate, state.measured, outcome.cadence, interval)  # (a lower bound under a cadence)
    for hub, forecast, age, mask, draw, absorbs in zip(hubs, forecasts, ages, sizing_hot, by_draw, absorbing, strict=True):
        peak, rise, noise = hub.scale_in_rates()
        calm = calm_rates(forecast, peak, knobs.headroom_factor, rise, knobs.dwell, noise, knobs.peak_full_noise)
        if absorbs is not None:  # absorb: held at the busiest SLO-long window's arrivals, not the busiest interval's
            calm = absorbs.calm(calm, rows, rise)
        if mask is not None:
            calm = np.where(mask, 0.0, calm)
        calm = calm[:, columns]
        held_ages = scale_in_ages(age[:, columns], allowance[columns]) if paused else age[:, columns]
        sources.append((hub.loads(calm, columns, mask, probed, draw), calm, held_ages))
    # (an oldest event past the SLO holds a scale-in that leaves it there, ``hold_seconds``'s
    # ``breach``; not under a learned cadence, whose wait the ages read: checkpoints every 602 s read
    # 500 s all day and held 16 instances where 6 served)
    breach_slo = knobs.max_age if outcome.cadence is None else \
        np.where(cadence_allowance(outcome.cadence, interval) > 0, np.inf, knobs.max_age)
    chosen, held = scale_in_counts(counts.levels[columns], state.below[columns], capacity[columns], counts.top,
                                   knobs.limit[columns], knobs.dwell[columns], interval + knobs.provisioning[columns],
                                   sources, (breach_slo[columns], interval))
    down = rows[chosen >= 0]
    wanted[down], direction[down], reason[down] = chosen[chosen >= 0], DOWN, SURPLUS
    outcome.hold_seconds = np.full(count, np.nan)
    outcome.hold_seconds[rows] = held
    if explain and down.size:
        outcome.busiest_wanted = np.full(count, np.nan) if outcome.busiest_wanted is None else outcome.busiest_wanted
        found = chosen >= 0
        outcome.busiest_wanted[down] = functools.reduce(
            np.maximum, [load.busiest(chosen[found], found.nonzero()[0]) for load, _, _ in sources])
    return outcome


# --- Another source kind's tests after the second: a Service Bus queue (``slo_kernel/queue.py``) ---

#: The queue's reason codes, after the hub's: Azure Monitor's rates not reported (hold), the oldest
#: message past the limit (a step up without rates; no scale-in with them), a scale-out in flight
#: that serves the need (hold; no scale-in before it serves).
RATES_UNKNOWN, AGE_OVER_LIMIT, IN_FLIGHT = range(len(REASONS), len(REASONS) + 3)
REASONS = (*REASONS, "queue_rates_unknown", "queue_age_over_limit", "scale_out_in_flight")


class SourceTests(Protocol):
    """A source kind's readings that take the step's tests after the second themselves, in the
    same order and on the same kernel rules where they apply (``queue.QueueReading``): a queue
    has no partitions, owners or checkpoints for the hub's."""

    def decide(self, outcome: StepOutcome, known: np.ndarray, state: StepState, knobs: StepKnobs, counts: StepCounts, *,
               interval: float, since_latest: float, enough_history: bool | np.ndarray) -> StepOutcome:
        ...
