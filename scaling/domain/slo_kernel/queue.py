"""A Service Bus queue in the SLO step: one FIFO head that every instance serves.

The queue's readings (``QueueReading``) go through ``slo_step``'s tests 1 and 2, the rest here
(``QueueReading.decide``), in the same order and with the same rules where a queue has them: the
fluid model (``age_path``: FIFO, the backlog drained at the rate it came in), the need and the
drain of a scale-out (``scale_out_need``, ``drain_seconds``), the scale-in's calm rate with its peak
and rising-edge guards (``calm_rates``) and the hold of a count (``fifo_hold_seconds``: an old
backlog that drains slowly is no surplus). What differs is what a queue reads: no owners (``n``
instances serve ``n`` times one's throughput), no checkpoints (the age is read directly), rates
from Azure Monitor that may be unknown, and a readiness schedule per scale-out instead of one
pending time (docs/architecture.md, "One SLO step, two source kinds").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scaling.domain.slo_kernel.ages import age_path, fifo_hold_seconds, keeps_age
from scaling.domain.slo_kernel.hub import calm_rates, drain_seconds, scale_out_need
from scaling.domain.slo_kernel.step import (
    AGE_OVER_LIMIT,
    AT_RISK,
    DOWN,
    IN_FLIGHT,
    RATES_UNKNOWN,
    SURPLUS,
    TOO_FEW_SAMPLES,
    UP,
    StepCounts,
    StepKnobs,
    StepOutcome,
    StepState,
)


def schedule_services(ready: int, steps: Sequence[tuple[float, int]], throughput: float) -> list[tuple[float, float]]:
    """A readiness schedule (``ready`` serving now, ``steps`` each (seconds on, instances serving
    from then)) as the service rate from each change on, as ``age_path`` takes it."""
    return [(-np.inf, ready * throughput), *((at, serving * throughput) for at, serving in steps)]


#: A rise (a fraction of the rate per second, ``trend``'s) above which a queue's scale-in holds the
#: dwell: level readings leave floating-point dust of about 1e-17, a rise the trend calls clear
#: (a message a minute on 35/s) about 1e-5.
CLEAR_RISE = 1e-9


def queue_scale_in_hold(dwell, max_actions_per_hour):
    """How long a queue's scale-in must be expected to hold: the dwell, or the action budget's
    spacing (one action's refill, ``3600 / max_actions_per_hour``) where that is shorter.

    The dwell is there for the hub, whose ages are inferred from checkpoints and whose busiest
    partition can hide behind the mean: a scale-in that fell short would show late. A queue's
    oldest message is peeked at every sample, so a count that falls behind shows within a minute
    and one scale-out undoes it, and the budget already bounds how often that happens. Holding
    the budget's spacing lets a count that serves a little less than the arrivals run the queue
    with a standing backlog within the limit, then give way to the next count up: the mode
    alternates two counts where the hub's dwell held the higher one (docs/policy-experiments.md,
    "The queue, fifth round"). While the arrivals clearly rise (``CLEAR_RISE``) the dwell stays:
    no scale-in into a rising edge."""
    spacing = np.where(np.asarray(max_actions_per_hour) > 0, 3600.0 / np.maximum(max_actions_per_hour, 1e-9), np.inf)
    return np.minimum(dwell, spacing)


def scale_in_dwell(dwell: float, scale_in_hold: float | None, rise: float) -> float:
    """The seconds a queue's scale-in must hold at this reading: ``scale_in_hold``
    (``queue_scale_in_hold``; None: none) where it is shorter than the ``dwell``, the dwell while
    the arrivals clearly rise (``CLEAR_RISE``: no scale-in into a rising edge). The step tests
    with it and the decision log quotes it."""
    return dwell if scale_in_hold is None or rise > CLEAR_RISE else min(dwell, scale_in_hold)


@dataclass(slots=True)
class QueueReading:
    """A queue (several queues of a target pooled) per column: the oldest message's age (s) and
    the active messages; Azure Monitor's arrival rate over the rate window and at the latest
    sample (NaN: not reported yet); ``signal``, the highest arrival rate any reading shows
    (Azure Monitor's, its level, the active count's growth; NaN: none), which the forecast rests
    on; the busiest recent minute, the rise and the noise (``calm_rates``); and per column the
    readiness schedule, ``(ready now, ((seconds on, instances serving from then), ...))``;
    ``scale_in_hold``, how long a scale-in must hold (``queue_scale_in_hold``; None: the dwell)."""

    age: np.ndarray
    backlog: np.ndarray
    arrival_rate: np.ndarray
    recent_rate: np.ndarray
    signal: np.ndarray
    peak: np.ndarray
    rise: np.ndarray
    noise: np.ndarray
    schedules: Sequence[tuple[int, tuple[tuple[float, int], ...]]]
    scale_in_hold: np.ndarray | None = None

    def decide(self, outcome: StepOutcome, known: np.ndarray, state: StepState, knobs: StepKnobs, counts: StepCounts, *,
               interval: float, since_latest: float, enough_history: bool | np.ndarray) -> StepOutcome:
        """``slo_step``'s tests 3 on for a queue, per column (plain numbers: a queue is one row):

        3. Azure Monitor's rates unknown: a step up where the oldest message is past the limit, else hold;
        4. the age predicted when a scale-out decided at the next evaluation would serve;
        5. at risk: hold while the scale-outs in flight serve the need and bring the age back under,
           else the smallest count that serves it and keeps the age (``keeps_age``);
        6. no scale-in without the latest minute's rate, the rate window's history, an age under the
           limit (a missed SLO is no surplus) and every instance asked for serving;
        7. the smallest count that holds at the calm rate (``fifo_hold_seconds``) for the dwell, or
           for ``scale_in_hold`` where that is shorter (``queue_scale_in_hold``)."""
        count = len(state.capacity)
        wanted, direction, reason = outcome.wanted, outcome.direction, outcome.reason
        predicted, react = np.full(count, np.nan), np.full(count, np.nan)
        drains, needs, holds, calms = (np.full(count, np.nan) for _ in range(4))
        outcome.predicted_age, outcome.react, outcome.drain_seconds, outcome.need = predicted, react, drains, needs
        outcome.hold_seconds, outcome.calm_rate = holds, calms
        enough = np.broadcast_to(np.asarray(enough_history, dtype=bool), (count,))
        for column in np.flatnonzero(known):
            capacity, throughput = int(state.capacity[column]), float(state.throughput[column])
            limit, provisioning = float(knobs.limit[column]), float(knobs.provisioning[column])
            age, backlog = float(self.age[column]), float(self.backlog[column])
            ready, steps = self.schedules[column]
            allowed = [int(level) for level in counts.levels[column][counts.valid[column]]]
            if np.isnan(self.arrival_rate[column]) and (np.isnan(self.signal[column]) or age > limit):
                if age > limit:  # (no complete minute from Azure Monitor yet: the age alone calls for capacity)
                    wanted[column], direction[column] = capacity + int(state.up_size[column]), UP
                reason[column] = AGE_OVER_LIMIT if age > limit else RATES_UNKNOWN
                continue
            forecast = float(self.signal[column]) * float(knobs.headroom_factor[column])
            react[column] = since_latest + interval + provisioning
            predicted[column] = then = age_path(age, backlog, forecast, schedule_services(ready, steps, throughput),
                                                [react[column]])[-1][1]
            if then > limit:
                drains[column] = drain = float(drain_seconds(knobs.dwell[column], knobs.max_age[column],
                                                             state.measured[column], then))
                needs[column] = need = float(scale_out_need(forecast, backlog, provisioning, since_latest,
                                                            float(knobs.safety[column]), drain))
                serving_from, within = since_latest + provisioning, float(knobs.max_age[column])
                if (ready < capacity and capacity * throughput >= need
                        and keeps_age(age, backlog, forecast, schedule_services(ready, steps, throughput),
                                      max([0.0, *(at for at, _ in steps)]), limit, within)):
                    reason[column] = IN_FLIGHT
                    continue
                # (the smallest count that serves the need and keeps the oldest message under the limit,
                # serving from when a scale-out asked for now would, after the scale-outs due before it)
                earlier = tuple(step for step in steps if step[0] < serving_from)
                wanted[column] = next((level for level in allowed if level > capacity and level * throughput >= need
                                       and keeps_age(age, backlog, forecast,
                                                     schedule_services(ready, (*earlier, (serving_from, level)), throughput),
                                                     serving_from, limit, within)), allowed[-1])
                direction[column], reason[column] = UP, AT_RISK
                continue
            if np.isnan(self.recent_rate[column]):
                reason[column] = RATES_UNKNOWN
            elif not enough[column]:
                reason[column] = TOO_FEW_SAMPLES
            elif age > limit:
                reason[column] = AGE_OVER_LIMIT
            elif ready < capacity:
                reason[column] = IN_FLIGHT
            else:
                # The hub's guards: at the busiest recent minute on noisy arrivals, at the rate halfway
                # through the dwell while they clearly rise (no scale-in into a rising edge).
                peak = 0.0 if np.isnan(self.peak[column]) else float(self.peak[column])
                calms[column] = calm = float(np.max(calm_rates(forecast, peak, knobs.headroom_factor[column],
                                                               float(self.rise[column]), knobs.dwell[column],
                                                               float(self.noise[column]), knobs.peak_full_noise[column])))
                reaction = interval + provisioning
                dwell = scale_in_dwell(float(knobs.dwell[column]), None if self.scale_in_hold is None
                                       else float(self.scale_in_hold[column]), float(self.rise[column]))
                for level in (level for level in allowed if level < capacity):
                    holds[column] = fifo_hold_seconds(age, backlog, calm, level * throughput, limit, reaction, dwell)
                    if holds[column] >= dwell:
                        wanted[column], direction[column], reason[column] = level, DOWN, SURPLUS
                        break
        return outcome
