"""The SLO mode's arithmetic, written once, over a candidate dimension.

Every function here is pure numpy. Per-partition quantities are ``(partitions, candidates)``
arrays and per-candidate ones ``(candidates,)`` arrays (a ``partitions`` axis may hold rows that
stand for several partitions, see ``OwnerLoads``). The engine (``engine.py``, ``slo.py``) calls
it with a batch of one candidate, what it reads from the samples; the batched simulator
(``simulation/drivers/batched_slo.py``) and through it the tuning job call it with every candidate of a
sweep. So a rule changes in one place, and the sweep runs the code the live app runs.

What stays outside: reading the samples (de-duplication, ordering, the window, ownership by name),
profiles, pause, reconciliation, and the decision record and its reasons (the engine); the world
and the state arrays (the batched driver). Time is in seconds.

The rules, in the order an evaluation meets them:

- the engine's gates, every mode's (``bounds_correction``, ``cooldown_over``, the action budget:
  ``action_tokens``, ``budget_allows_scale_in``, ``tokens_after_action``), the learned
  per-instance throughput and its confirmation (``learned_throughput``), the learned checkpoint
  delay (``learned_checkpoint_delay``);
- rates and ages from the sequence-number history (``rate_since``, ``later_peaks``,
  ``trend``, ``oldest_event_ages``) and the fluid model's prediction (``predicted_age``);
- each partition's service rate at a count, by its owner's load (``OwnerLoads``, ``sizing.py``
  says why), and the counts: the scale-out that drains (``scale_out_counts``) and the scale-in
  that holds for the dwell (``scale_in_counts``, ``hold_seconds``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

NO_RATE = 1e-9
#: Weight of a new saturated observation in the learned per-instance throughput.
THROUGHPUT_LEARNING_RATE = 0.3
#: A saturated interval that measures the per-instance rate more than this fraction below the
#: learned one is held back until the next learning step confirms it. A lone low reading (an
#: instance dying part way through the interval, a rebalance pause, a partition that read busy
#: on a checkpoint's lag while nothing arrived) would otherwise pull the rate down, and a rate
#: learned too low never recovers: the engine over-provisions, so no interval is saturated again.
UNCONFIRMED_DROP = 0.2
#: How fast the learned checkpoint delay may creep up per evaluation (seconds), and its ceiling
#: as a fraction of the SLO: a delay is learned from the lowest ages seen, so it must not drift
#: far while consumers stay saturated.
CHECKPOINT_DELAY_DRIFT = 0.5
CHECKPOINT_DELAY_CEILING = 0.25
#: How much the processed rate may rise with more instances and still count as a stall (``stalled``).
STALL_TOLERANCE = 0.1
#: Events per partition, on average, over the checkpoint delay for an age reading to change the learned delay.
DENSE_EVENTS = 10.0
#: While the hub is steady (``learned_checkpoint_delay``), the learned delay follows an age that
#: stays above it by this fraction of the gap per evaluation, up to this fraction of the SLO.
CHECKPOINT_DELAY_FOLLOW = 0.1
CHECKPOINT_DELAY_STEADY_CEILING = 0.7
#: How little the backlog may change over the rate window, in intervals' arrivals, to count as flat.
FLAT_TOLERANCE = 0.1
#: How many standard errors of its slope a rise of the arrivals must clear to count as a trend:
#: a flat but noisy rate is no reason to hold capacity.
TREND_CONFIDENCE = 1.0
#: Where a scale-out sizes a newcomer's load between the expected draw (0: ``k`` partitions at the
#: hub's mean load) and the worst case (1: the ``k`` heaviest partitions).
NEWCOMER_MARGIN = 0.75


# --- a batch of one as plain numbers ---------------------------------------------------------------
# The per-candidate rules below are written with these four instead of their numpy names, so
# that one implementation serves both callers: the batched simulator passes arrays (numpy does
# the work), the engine passes a batch of one as plain Python numbers, and then the same
# selection and the same IEEE arithmetic run without numpy's overhead per call (a few
# microseconds each, most of such a rule's cost in a batch of one). NaN propagates as in numpy.

_PLAIN = frozenset((bool, int, float))


def where(condition, yes, no):
    """``np.where``; for plain numbers, the one chosen."""
    if type(condition) in _PLAIN and type(yes) in _PLAIN and type(no) in _PLAIN:
        return yes if condition else no
    return np.where(condition, yes, no)


def minimum(first, second):
    """``np.minimum``; for plain numbers, the smaller (NaN if either is, the first NaN first)."""
    if type(first) in _PLAIN and type(second) in _PLAIN:
        return first if first < second or first != first else second
    return np.minimum(first, second)


def maximum(first, second):
    """``np.maximum``; for plain numbers, the larger (NaN if either is, the first NaN first)."""
    if type(first) in _PLAIN and type(second) in _PLAIN:
        return first if first > second or first != first else second
    return np.maximum(first, second)


def negation(flags):
    """``~flags`` for boolean arrays; ``not flags`` for a plain bool (``~True`` is -2)."""
    return (not flags) if type(flags) is bool else ~flags


def is_nan(values):
    """``np.isnan``, as ``values != values`` (NaN is the one value unequal to itself), which
    plain numbers answer too."""
    return values != values


# --- who serves ---------------------------------------------------------------------------------------------


def serving_count(capacity, live_owners, partitions):
    """How many of ``capacity`` instances serve, as the collected ownership shows: all of them once
    the source has as many live owners (or every partition has one, when there are more instances
    than partitions), else its live owners."""
    return where(live_owners >= minimum(capacity, partitions), capacity, live_owners)


def ready_instances(expected, serving, just_due):
    """The instances ready now: those the owners show serving, unless fewer show while a scale-out
    is ``just_due`` (until an interval past its provisioning delay: the collection sees the new
    instances' claims up to an interval late); then the ``expected`` count."""
    return where((serving >= expected) | negation(just_due), serving, expected)


def pending_seconds(ready, capacity, due, interval, provisioning):
    """How long the instances not serving yet still need: until the scale-out is ``due`` (NaN:
    none in flight), or, late or lost, the next collection (``interval``); a provisioning delay
    when none serves at all (the restart); none when all serve."""
    waiting = where(due > 0, due, interval)  # (NaN: False)
    return where(ready < capacity, where(ready <= 0, maximum(waiting, provisioning), waiting), 0.0)


# --- the engine's gates: bounds, cooldowns, the action budget ------------------------------------
# (every mode's: the engine applies them to what the mode proposes, the batched simulators to
# every candidate's proposal)

#: Tokens a scale-in needs from the action budget: itself and the scale-out likely to follow.
SCALE_IN_TOKENS = 2.0


def bounds_correction(capacity, wanted, upward, downward, lowest, highest):
    """A capacity outside the bounds brought inside (someone resized the plan, or the bounds
    changed): below ``lowest``, up to it unless the proposal already goes up that far; above
    ``highest``, down to it unless the proposal already goes down that far. ``wanted`` is the
    proposal's count (any number where neither ``upward`` nor ``downward``). Returns the count
    wanted now, and whether it was raised or lowered (then ``upward`` or ``downward`` instead of
    the proposal's direction)."""
    raised = (capacity < lowest) & (negation(upward) | (wanted < lowest))
    lowered = (capacity > highest) & (negation(downward) | (wanted > highest))
    return where(raised, lowest, where(lowered, highest, wanted)), raised, lowered


def cooldown_over(elapsed_seconds, cooldown_seconds):
    """Whether a direction's cooldown has passed, ``elapsed_seconds`` after the last action
    (NaN: no action yet)."""
    return is_nan(elapsed_seconds) | (elapsed_seconds >= cooldown_seconds)


def action_tokens(budget, tokens, elapsed_seconds):
    """Tokens left in the action budget: refilled at ``budget`` per hour since the last action
    (``elapsed_seconds``), at most ``budget``; the whole budget when nothing was spent yet (NaN)."""
    refilled = minimum(budget, tokens + maximum(elapsed_seconds, 0.0) / 3600.0 * budget)
    return where(is_nan(tokens) | is_nan(elapsed_seconds), budget, refilled)


def budget_allows_scale_in(tokens):
    """Whether the tokens left (``action_tokens``) let a scale-in act (``SCALE_IN_TOKENS``)."""
    return tokens >= SCALE_IN_TOKENS


def tokens_after_action(tokens):
    """The tokens left once an action spends one of those there are now."""
    return maximum(tokens - 1.0, 0.0)


#: The gates' verdicts, in the order ``gates`` applies them: a candidate's verdict is the first
#: gate that holds it (``ACTS``: none does).
ACTS, NO_CHANGE, SOURCE_FAILED, AT_BOUND, PAUSED, COOLDOWN, ACTION_BUDGET = range(7)


def gates(capacity, proposed, upward, downward, snapped_up, snapped_down, lowest, highest, since_action, cooldown_up,
          cooldown_down, tokens, budgets_scale_in, failed=False, paused=False):
    """The engine's gates, every mode's, in their one order over a batch (plain numbers: the
    live evaluation's batch of one; arrays: a sweep's candidates). The engine, the batched SLO
    and rules simulators call this; what stays theirs is the proposal and the snapping.

    1. a capacity outside the bounds brought inside (``bounds_correction``: raised or lowered
       instead of the proposal's direction, to ``lowest`` or ``highest``);
    2. no direction left: ``NO_CHANGE`` (the proposal's own hold);
    3. a scale-in while a source ``failed``: ``SOURCE_FAILED``;
    4. the count wanted: the proposal snapped to an allowed count (the caller's ``snapped_up``,
       the proposal at least one above the capacity, or ``snapped_down``, at least one below),
       kept within the bounds; no change that way: ``AT_BOUND``;
    5. ``paused``: ``PAUSED`` (what it would do, cooldowns aside);
    6. the direction's cooldown since the last action (``since_action``, NaN: none yet):
       ``COOLDOWN``;
    7. where the mode ``budgets_scale_in``, a scale-in without the tokens it needs
       (``budget_allows_scale_in``): ``ACTION_BUDGET``.

    Returns the count wanted (the capacity where nothing moves), whether it goes up, whether the bounds raised or lowered it, and
    the verdict (``ACTS`` where it acts)."""
    _, raised, lowered = bounds_correction(capacity, proposed, upward, downward, lowest, highest)
    upward = (upward | raised) & negation(lowered)
    downward = (downward | lowered) & negation(raised)
    moving = upward | downward
    wanted = where(raised, lowest, where(lowered, highest, where(upward, snapped_up, snapped_down)))
    wanted = where(moving, maximum(lowest, minimum(highest, wanted)), capacity)
    unmoved = (wanted == capacity) | (upward & (wanted < capacity)) | (downward & (wanted > capacity))
    cooling = negation(cooldown_over(since_action, where(upward, cooldown_up, cooldown_down)))
    budget = budgets_scale_in & downward & negation(budget_allows_scale_in(tokens))
    verdict = where(budget, ACTION_BUDGET, ACTS)
    for held, code in ((cooling, COOLDOWN), (paused, PAUSED), (unmoved, AT_BOUND), (downward & failed, SOURCE_FAILED),
                       (negation(moving), NO_CHANGE)):
        verdict = where(held, code, verdict)
    return wanted, upward, raised, lowered, verdict


# --- what is learned -------------------------------------------------------------------------------


def observed_throughput(processed: np.ndarray, elapsed: float, serving: np.ndarray, done: np.ndarray, busy: np.ndarray,
                        unmeasured: np.ndarray, owners: Owners | None) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate, events per second per serving instance over the last interval, and whether
    it was saturated (only a saturated interval tells the real rate: a partition that ran dry
    left its owner idle part of the time).

    ``processed`` events over ``elapsed`` seconds, ``done`` per partition (partitions x
    candidates), ``busy`` where a partition held more than two intervals' arrivals at both ends,
    ``unmeasured`` where its processed events are unknown. Without ownership (``owners`` None)
    ``serving`` instances divide what was processed, saturated when every partition was busy.
    With it, each owner with a busy partition and every partition measured is a measurement of
    one instance (it shares its throughput by demand: a backlogged partition leaves it nothing to
    spare): their mean is the rate, so a hub with a few busy partitions still teaches it."""
    spread = processed / elapsed / serving
    if owners is None:
        return spread, busy.all(axis=0) & ~unmeasured.any(axis=0) & (processed > 0)
    # Only a candidate with a busy partition has an owner that measures: the sums by owner are
    # worked out for those alone (most candidates of a sweep have none in most intervals).
    some = np.flatnonzero(busy.any(axis=0))
    saturated = np.zeros(len(spread), dtype=bool)
    if not some.size:
        return spread, saturated
    whole = some.size == len(spread)
    part = owners if whole else owners.of_columns(some)
    done, busy, unmeasured = (values if whole else values[:, some] for values in (done, busy, unmeasured))
    owner_done = part.summed(done)
    measuring = ((part.partitions > 0) & (part.summed(busy) > 0) & (part.summed(unmeasured) == 0)
                 & (owner_done > 0))
    measured = measuring.sum(axis=0)
    saturated[some] = measured > 0
    by_owner = np.where(measuring, owner_done, 0.0).sum(axis=0) / elapsed / np.maximum(measured, 1)
    observed = spread.copy()
    observed[some] = np.where(measured > 0, by_owner, spread[some])
    return observed, saturated


def busy_partitions(start_backlog, end_backlog, arrived, lag_seconds, elapsed):
    """Where a partition was saturated over an interval of ``elapsed`` seconds in which
    ``arrived`` events came: it held, at both ends, more than two intervals' arrivals (room for
    checkpoints trailing by up to an interval), and, where the checkpoints trail by more than an
    interval (``lag_seconds``: the learned checkpoint delay), more by the arrivals over that lag.
    A consumer that keeps up shows a backlog of the arrivals over the lag: counted as busy,
    every partition of a hub whose checkpoints trail by 150 s or more reads saturated, and the
    rate is learned as arrivals / owners (issue 48: 3.5/s where the truth is 16.7/s)."""
    return minimum(start_backlog, end_backlog) > arrived * (2.0 + where(lag_seconds > elapsed, lag_seconds, 0.0) / elapsed)


def learned_throughput(throughput: np.ndarray, floor: np.ndarray, held_back: np.ndarray, observed: np.ndarray,
                       saturated: np.ndarray, learning: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fold an interval's per-instance rate into what is learned, where ``learning`` (NaN: none yet).

    A saturated interval moves the learned rate by ``THROUGHPUT_LEARNING_RATE`` (the first one sets
    it), unless it reads more than ``UNCONFIRMED_DROP`` below it and nothing waits to confirm it
    (``held_back``): then it waits one learning step, as the new ``unconfirmed``. An unsaturated
    interval only raises the lower bound (``floor``). Returns the throughput, the floor, what waits
    (NaN: nothing) and where a reading was learned."""
    rows = learning & saturated
    doubtful = rows & is_nan(held_back) & (observed < throughput * (1 - UNCONFIRMED_DROP))  # (NaN: False)
    rows = rows & negation(doubtful)
    blended = (1 - THROUGHPUT_LEARNING_RATE) * throughput + THROUGHPUT_LEARNING_RATE * observed
    throughput = where(rows, where(is_nan(throughput), observed, blended), throughput)
    raised = learning & negation(saturated) & (observed > where(is_nan(floor), 0.0, floor))
    # A saturated reading learned below the floor shows the instances no longer do what they did
    # (a slow-down): the floor is what they do now, not the best they ever did.
    lowered = rows & (observed < floor)  # (NaN: False)
    return throughput, where(raised | lowered, observed, floor), where(doubtful, observed, math.nan), rows


def serving_throughput(throughput, floor):
    """The per-instance rate to size by: the learned one (NaN: none), never below the ``floor``
    the instances have shown since (an unsaturated interval can only raise it), less the
    ``UNCONFIRMED_DROP`` the learning itself doubts (one interval's checkpoints may overstate
    what was processed; where the two agree this close, the learned rate stands). A rate learned
    during a slow-down would otherwise stay low for good: an over-provisioned hub is never
    saturated again to correct it (issue 48: the 15% slow-down row at 32 instances for hours)."""
    bound = where(is_nan(floor), throughput, floor * (1 - UNCONFIRMED_DROP))
    return where(is_nan(throughput), throughput, maximum(throughput, bound))


def learned_checkpoint_delay(worst_age, previous, interval, ceiling, dense=True, steady=False, steady_ceiling=0.0):
    """The checkpoint delay learned from the worst oldest-event age now (NaN ``previous``: none yet).

    Checkpoints trail the consumers, so even idle ones show an oldest event as old as the delay:
    it is the floor of the ages seen. It may creep up by ``CHECKPOINT_DELAY_DRIFT`` only while the
    ages are as low as checkpoints alone explain (within ``interval`` of it), never past ``ceiling``.

    A reading that is not ``dense`` (``dense_arrivals``: too few arrivals for the oldest event to
    have waited as long as the delay, a quiet spell) changes nothing: NASA's outage read the ages
    near 0 and reset a 75 s delay to 0.5 s. And while the hub is ``steady`` (every instance the
    bounds allow serves and the backlog stays flat, ``backlog_flat``) an age that stays above the
    delay is the checkpoints' (more instances are not to be had, and the backlog does not grow),
    so the delay follows it by ``CHECKPOINT_DELAY_FOLLOW`` of the gap per evaluation, up to
    ``steady_ceiling`` (issue 48: checkpoints 180 s late read as a standing 105 s backlog)."""
    creep = where(worst_age <= previous + interval, CHECKPOINT_DELAY_DRIFT, 0.0)  # (NaN: 0)
    crept = minimum(minimum(worst_age, previous + creep), maximum(ceiling, previous))
    follows = steady & (worst_age > previous)  # (NaN: False)
    followed = minimum(previous + CHECKPOINT_DELAY_FOLLOW * (worst_age - previous), maximum(steady_ceiling, ceiling))
    kept = where(dense, where(follows, maximum(followed, crept), crept), previous)
    return where(is_nan(previous), minimum(worst_age, ceiling), kept)


def dense_arrivals(arrival_rate, recent_rate, delay, interval, row_of=None):
    """Per candidate, whether the partitions in view received, over the checkpoint ``delay`` (at
    least an ``interval``), ``DENSE_EVENTS`` events each on average, at the lower of the rate
    window's and the last interval's arrivals: enough for the oldest event's age to show the
    delay (a partition that received nothing since its checkpoint looks caught up)."""
    partitions = len(row_of) if row_of is not None else arrival_rate.shape[0]
    span = where(is_nan(delay), interval, maximum(delay, interval))
    rate = minimum(column_sums(_per_candidate(arrival_rate), row_of), column_sums(_per_candidate(recent_rate), row_of))
    return rate * span >= DENSE_EVENTS * partitions


# --- rates and ages from the sequence-number history ---------------------------------------------


def rate_since(times: np.ndarray, positions: np.ndarray, index: int) -> np.ndarray:
    """Each partition's arrival rate (events/s) from sample ``index`` to the last (``positions``:
    last-enqueued sequence numbers, samples x partitions, or samples x partitions x traces); 0
    over no time."""
    elapsed = times[-1] - times[index]
    if elapsed <= 0:
        return np.zeros(positions.shape[1:])
    return np.maximum(positions[-1] - positions[index], 0.0) / elapsed


def later_peaks(times: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Row ``j``: each partition's busiest interval rate among the intervals from ``j`` on
    (intervals x partitions[ x traces]); a scale-in holds against the one its peak window starts at."""
    steps = times[1:] - times[:-1]  # (np.diff, without its overhead: this runs at every evaluation)
    steps = np.where(steps > 0, steps, np.inf).reshape(-1, *[1] * (positions.ndim - 1))
    rates = np.maximum(positions[1:] - positions[:-1], 0.0) / steps
    return np.maximum.accumulate(rates[::-1], axis=0)[::-1]


def trend(times: np.ndarray, totals: np.ndarray) -> tuple[float, float]:
    """How fast the arrivals rise and how noisy they are, from one least-squares line through the
    intervals' rates (``totals``: events enqueued so far, all partitions, at ``times``); both
    ``(0, 0)`` with fewer than three intervals or a time that does not advance.

    - The rise, per second, as a fraction of the fitted rate at the last sample: the slope less
      ``TREND_CONFIDENCE`` standard errors, so that only a rise the history shows beyond its noise
      counts (0 when it shows none).
    - The noise: the standard deviation of the rates about the line, over their mean rate (0 with
      no rate). A scale-in held against the busiest recent interval pays for that interval's
      noise; this measures how much of it is noise at all (``calm_rates``).
    """
    steps = times[1:] - times[:-1]  # (np.diff and np.mean, without their overhead)
    if len(steps) < 3 or not (steps > 0).all():
        return 0.0, 0.0
    rates = (totals[1:] - totals[:-1]) / steps
    middles = (times[1:] + times[:-1]) / 2.0
    centred = middles - middles.sum() / len(middles)
    spread = float(np.dot(centred, centred))
    slope = float(np.dot(centred, rates)) / spread
    mean_rate = float(rates.sum() / len(rates))
    residuals = rates - (mean_rate + slope * centred)
    variance = float(np.dot(residuals, residuals)) / (len(residuals) - 2)
    rise = slope - TREND_CONFIDENCE * math.sqrt(variance / spread)
    fitted_now = mean_rate + slope * float(centred[-1])
    rising = rise / fitted_now if rise > 0 and fitted_now > NO_RATE else 0.0
    return rising, (math.sqrt(variance) / mean_rate if mean_rate > NO_RATE else 0.0)


def rising_factor(rise, dwell_seconds):
    """How much higher the arrivals are halfway through ``dwell_seconds`` if they go on rising by
    ``rise`` (a fraction of the rate per second)."""
    return 1.0 + rise * (dwell_seconds / 2.0)


def oldest_event_ages(times: np.ndarray, positions: np.ndarray, oldest: np.ndarray, arrival_rate: np.ndarray) -> np.ndarray:
    """Seconds each partition's oldest unprocessed event has waited at the last sample time.

    ``positions`` holds last-enqueued sequence numbers (samples x partitions, shared by the
    candidates; or samples x partitions x candidates, each its own: a batch of several traces),
    ``oldest`` the sequence number of each partition's oldest unprocessed event
    (checkpoint + 1; partitions, or partitions x candidates), ``arrival_rate`` each partition's
    rate (the same shapes). Its arrival time is read off the positions' history, interpolated
    between samples, or extrapolated at the arrival rate when it is older than the history.
    Without a measured rate (a single sample, or nothing enqueued over the history) it counts as
    arrived at the first sample: as old as the history, which is all that is known (dividing by a
    zero rate would call it billions of seconds old and scale out on the first sample after every
    start). Returns ``oldest``'s shape.
    """
    single = oldest.ndim == 1
    oldest = oldest[:, None] if single else oldest
    arrival_rate = arrival_rate[:, None] if arrival_rate.ndim == 1 else arrival_rate
    samples, shared = positions.shape[0], positions.ndim == 2
    waiting = (positions[-1][:, None] if shared else positions[-1]) >= oldest
    # The first sample that reached it: where the running highest position first does (the
    # positions never decrease but for a partition missing from a sample, read as the newest).
    running = np.maximum.accumulate(positions, axis=0)
    first = np.add.reduce((running[:, :, None] if shared else running) < oldest[None], axis=0,
                          dtype=np.int16)  # (.sum's wrapper costs more)
    first = np.where(first < samples, first, 0)
    previous_index = np.maximum(first - 1, 0)
    if shared:  # gathers from the flattened (partition, sample) history
        flat = np.ascontiguousarray(positions.T).ravel()
        offsets = (np.arange(positions.shape[1]) * samples)[:, None]
        position, previous = flat.take(offsets + first), flat.take(offsets + previous_index)
    else:
        position = np.take_along_axis(positions, first[None], axis=0)[0]
        previous = np.take_along_axis(positions, previous_index[None], axis=0)[0]
    span = np.maximum(position - previous, 1.0)
    start = times.take(previous_index)
    interpolated = start + (oldest - previous) / span * (times.take(first) - start)
    measured = arrival_rate > NO_RATE
    extrapolated = times[0] - np.where(measured, (position - oldest) / np.where(measured, arrival_rate, 1.0), 0.0)
    arrived = np.where(first == 0, extrapolated, interpolated)
    ages = np.where(waiting, np.maximum(times[-1] - arrived, 0.0), 0.0)
    return ages[:, 0] if single else ages


def predicted_age(age, backlog, forecast, service, seconds, came_in=None):
    """The oldest event's age after ``seconds`` at constant arrival (``forecast``) and service
    rates; ``age`` itself over no time. Broadcasts: per partition, per candidate, or both.

    One fluid model, first in first out: the head moves through the ``backlog`` that waited at
    the rate it came in (``came_in``, events per second of their arrival), then through new
    arrivals at ``forecast`` (``head_age``). ``came_in`` None is the Event Hubs reading: its
    backlog counts events behind the checkpoint, some of them processed, and its age has the
    learned checkpoint delay taken off, so backlog over age is no rate at all; the waiting events
    count as come in at the forecast, and the age grows by ``1 - service / arrivals`` per second
    (docs/architecture.md, "One fluid model"). A queue reads both directly (the active count and
    the peek), so it passes ``backlog / age``: an old backlog from a burst drains no faster
    because the arrivals are low now, and a short old backlog is gone in seconds."""
    if came_in is not None:
        served = minimum(service * seconds, backlog + forecast * seconds)  # (no more served than came)
        return where(seconds > 0, head_age(age, backlog, came_in, forecast, seconds, served), age)
    growth = 1.0 - service / np.maximum(forecast, NO_RATE)
    then = np.where((age <= 0) & (growth <= 0), 0.0, np.maximum(age + growth * seconds, 0.0))
    quiet = forecast <= NO_RATE
    if quiet.any():  # (no arrivals: the backlog drains at the service rate, or waits; worked out only then)
        then = np.where(quiet, np.where(service * seconds >= backlog, 0.0, age + seconds), then)
    if type(seconds) in _PLAIN and seconds > 0:  # (the engine's: a plain number of seconds)
        return then
    return np.where(seconds > 0, then, age)


def age_at_reaction(age, backlog, forecast, served_ready, served, first, react):
    """The oldest event's age ``react`` seconds on, when a scale-out decided at the next
    evaluation would serve: the instances ready now serve (``served_ready``) for ``first``
    seconds (until those in flight serve), then all asked for (``served``) the rest of the way
    (``predicted_age`` on each stretch). The Event Hubs mode's risk test, the engine's and the
    batched simulator's alike; the queue mode follows its per-scale-out schedule (``age_path``)."""
    then = predicted_age(age, backlog, forecast, served_ready, first)
    return predicted_age(then, backlog, forecast, served, react - first)


def backlog_came_in(backlog, age):
    """The rate a FIFO backlog read with its oldest age came in (events/s): ``backlog / age``;
    infinite where the oldest is new (all of it came at once), 0 where nothing waits."""
    return where(age > 0, backlog / maximum(age, NO_RATE), where(backlog > 0, math.inf, 0.0))


def head_age(age, backlog, came_in, forecast, elapsed, served):
    """The oldest event's age ``elapsed`` seconds on, once ``served`` events have been served since:
    within the ``backlog`` that waited, the head is ``served / came_in`` seconds of arrivals
    younger than it was; past it, it is the new arrival (at ``forecast``) served last; none
    waiting (no arrivals and all served): 0."""
    within = age + elapsed - served / maximum(came_in, NO_RATE)
    beyond = maximum(elapsed - (served - backlog) / maximum(forecast, NO_RATE), 0.0)
    return where(served < backlog, within, where(forecast > NO_RATE, beyond, 0.0))


def age_path(age: float, backlog: float, forecast: float, services: Sequence[tuple[float, float]],
             moments: Sequence[float]) -> list[tuple[float, float]]:
    """The oldest event's age along the way (plain numbers: a queue's one head), the service
    changing as ``services`` has it ((from seconds on, events/s), ascending; the first from 0 or
    before): (seconds on, age) at ``moments`` and wherever the path bends between them (a
    change of service, the waiting events all served), so that its highest point is among them.
    The head model is ``head_age``'s, the service so far added stretch by stretch."""
    came_in = float(backlog_came_in(backlog, age))
    end = max(moments)
    stops = sorted({0.0, *(at for at, _ in services if 0 < at < end), *moments})

    def service_at(moment: float) -> float:
        rate = 0.0
        for at, level in services:
            if at <= moment:
                rate = level
        return rate

    served, points = 0.0, [(0.0, age)]
    for start, stop in zip(stops, stops[1:], strict=False):
        service = service_at(start)
        if service > NO_RATE and served < backlog < served + service * (stop - start):
            through = start + (backlog - served) / service
            points.append((through, float(head_age(age, backlog, came_in, forecast, through, backlog))))
        # (no more is served than has arrived: an empty queue waits for the next event)
        served = min(served + service * (stop - start), backlog + forecast * stop)
        points.append((stop, float(head_age(age, backlog, came_in, forecast, stop, served))))
    return points


def keeps_age(age: float, backlog: float, forecast: float, services: Sequence[tuple[float, float]],
              serving_from: float, limit: float, within: float) -> bool:
    """Whether the service of ``services`` keeps the oldest event under ``limit`` from
    ``serving_from`` (when the last change serves) over the next ``within`` seconds; where it is
    past the limit by then already, whether it brings it back under within that time."""
    path = age_path(age, backlog, forecast, services, [serving_from, serving_from + within])
    at_start = next(then for moment, then in path if moment >= serving_from)
    if at_start > limit:
        return path[-1][1] <= limit
    return all(then <= limit for moment, then in path if moment >= serving_from)


def fifo_hold_seconds(age: float, backlog: float, calm: float, service: float, limit: float, reaction: float,
                      dwell: float) -> float:
    """``hold_seconds``' rule for one FIFO head (a queue, plain numbers): how long ``service``
    keeps the oldest event under ``limit`` at the ``calm`` rate with a scale-out ``reaction``
    seconds away (infinite when the age stops growing, 0 when it does not hold at all). The age
    is ``predicted_age``'s with the backlog's own rate (``backlog_came_in``), checked a reaction
    on, a dwell and a reaction on, and where the waiting events are all served between: an old
    backlog that drains slowly is no surplus. Where the backlog came in at ``calm`` it is
    ``hold_seconds``' number: ``(limit - age) / growth - reaction``."""
    came_in = float(backlog_came_in(backlog, age))
    through = backlog / service if backlog > 0 and service > NO_RATE else (math.inf if backlog > 0 else 0.0)
    checks = [reaction, dwell + reaction] + ([through] if 0 < through < dwell + reaction else [])
    if any(float(predicted_age(age, backlog, calm, service, moment, came_in)) > limit for moment in checks):
        return 0.0
    growth = 1.0 - service / calm if calm > NO_RATE else -1.0
    if growth <= 0 and through < math.inf:
        return math.inf
    then = float(predicted_age(age, backlog, calm, service, dwell + reaction, came_in))
    return dwell + (limit - then) / max(growth, NO_RATE)


def forecast_rates(arrival_rate: np.ndarray, recent_rate: np.ndarray, headroom_factor: np.ndarray) -> np.ndarray:
    """Each partition's forecast per candidate (partitions x candidates): the higher of its rate over
    the rate window and over the last interval (per partition, or per partition and candidate),
    raised by the headroom."""
    return _per_candidate(np.maximum(arrival_rate, recent_rate)) * headroom_factor


def hot_partitions(arrival_rate: np.ndarray, recent_rate: np.ndarray, throughput: np.ndarray,
                   measured: np.ndarray, most_instances: np.ndarray | None = None,
                   row_of: np.ndarray | None = None) -> np.ndarray:
    """The partitions (x candidates) that receive more than one instance serves over the rate
    window and the last interval alike, against a ``measured`` (learned or configured, not a
    lower bound) throughput: they fall behind at any count, so they are set aside.

    Only while the hub as a whole can be served (``hub_servable``: its arrivals within what
    ``most_instances``, the instances' worth the highest allowed count serves, can do): when
    every instance is slower than a partition's arrivals (a slow downstream) or the traffic is
    beyond the maximum, no count keeps up, and setting the partitions aside would leave nothing
    in view and the hub sized for none (issue 48: 32 -> 1 instance with millions waiting)."""
    steady = _per_candidate(np.minimum(arrival_rate, recent_rate))
    hot = (steady > throughput[None, :]) & measured[None, :]
    if most_instances is None:
        return hot
    return hot & hub_servable(steady, throughput, most_instances, row_of)[None, :]


def column_sums(values: np.ndarray, row_of: np.ndarray | None = None) -> np.ndarray:
    """Per candidate, the sum of ``values`` (partitions x candidates; rows standing for several
    partitions counted once per partition, ``row_of``), added row after row in partition order
    (``np.cumsum``'s order, whatever the number of columns: the engine's batch of one and a
    sweep's columns add alike, bit for bit)."""
    rows = values if row_of is None else values[row_of]
    return np.cumsum(rows, axis=0)[-1]


def most_instances(partitions: int, highest: np.ndarray | int, per_instance: np.ndarray) -> np.ndarray:
    """How many instances' worth the ``highest`` count serves on ``partitions`` partitions (an
    instance owning two serves each at half speed): ``partitions / ceil(partitions / highest)``
    (``per_instance``: a ``per_instance_table``)."""
    return partitions / per_instance[highest]


def hub_servable(steady: np.ndarray, throughput: np.ndarray, most: np.ndarray,
                 row_of: np.ndarray | None = None) -> np.ndarray:
    """Per candidate, whether the hub's steady arrivals (per partition x candidate: the lower of
    the rate window's and the last interval's) are within what ``most`` instances serve at
    ``throughput``: the hub as a whole can be served."""
    return column_sums(steady, row_of) <= throughput * most


def backlog_growing(backlog: np.ndarray, earlier: np.ndarray, arrival_rate: np.ndarray, tolerance_seconds,
                    row_of: np.ndarray | None = None) -> np.ndarray:
    """Per candidate, whether the backlog (partitions x candidates, set-aside partitions at 0)
    grew since an ``earlier`` reading by more than ``tolerance_seconds`` of the arrivals
    (``arrival_rate``, the same shape): the processed rate was below the arrival rate, beyond
    what checkpoints written now and then explain. No scale-in then: fewer instances serve less."""
    grown = column_sums(backlog - earlier, row_of)
    return grown > column_sums(arrival_rate, row_of) * tolerance_seconds


def backlog_flat(backlog: np.ndarray, earlier: np.ndarray, arrival_rate: np.ndarray, tolerance_seconds,
                 row_of: np.ndarray | None = None) -> np.ndarray:
    """Per candidate, whether the backlog (as ``backlog_growing`` reads it) neither grew nor
    shrank since the ``earlier`` reading by more than ``tolerance_seconds`` of the arrivals: the
    consumers process what arrives (a backlog that drains is no evidence: its ages are real)."""
    grown = column_sums(backlog - earlier, row_of)
    return np.abs(grown) <= column_sums(arrival_rate, row_of) * tolerance_seconds


def stalled(serving_before, serving_now, processed_before, processed_now, growing, continuing, arrivals, most):
    """Per candidate, whether the consumers stalled: the backlog grows, and either a stall was
    recognised before (``continuing``) or now: more instances serve than at the start of the
    history (``serving_before``, ``serving_now``), the processed rate (events/s over the
    history's first interval and its last) did not rise by more than ``STALL_TOLERANCE`` with
    them, and at what each serving instance processes now even ``most`` instances (the highest
    count's worth, ``most_instances``) would not keep up with the ``arrivals``. More instances
    do not help then (a downstream that stopped, a poison message): more still would only cost,
    and fewer would leave the recovery short. (A slow-down that more instances do serve, or a
    rebalance pause, is no stall.)"""
    recognised = ((serving_now > serving_before) & (processed_now <= processed_before * (1.0 + STALL_TOLERANCE))
                  & (processed_now / maximum(serving_now, 1) * most < arrivals))
    return growing & (continuing | recognised)


def checkpoints_keep_pace(checkpoint: np.ndarray, before: np.ndarray, backlog: np.ndarray) -> np.ndarray:
    """Per candidate, whether every partition holding a ``backlog`` (partitions x candidates) moved
    its ``checkpoint`` since the reading ``before``: the
    checkpoints are written at every collection. Where they are written less often, an age
    that stays old is (part of) the wait between them, which the delay must not learn: a delay
    learned from checkpoints every 470 s hid a real backlog (148 violation minutes)."""
    return ((backlog <= 0) | (checkpoint > before)).all(axis=0)


def _per_candidate(rates: np.ndarray) -> np.ndarray:
    """Rates per partition (shared by the candidates) as a column; per partition and candidate as they are."""
    return rates[:, None] if rates.ndim == 1 else rates


def drain_seconds(dwell, max_age, measured, predicted_age):
    """Over how many seconds a scale-out plans to drain the backlog: half the ``dwell`` or the
    SLO (``max_age``), whichever is longer; within the SLO itself while the throughput is only a
    lower bound (nothing measured: a cold start) and the oldest event is predicted past the SLO,
    not only past its safety margin: the count is a guess from a bound then, and the SLO is
    already at stake."""
    drain = maximum(dwell / 2, max_age)
    return where(measured | (predicted_age <= max_age), drain, minimum(drain, max_age))


def scale_out_need(forecast, backlog, provisioning, since, safety, drain):
    """What each partition must be served to serve its forecast and drain, over ``drain``
    seconds, what will have piled up (less the safety margin's worth) by the time new instances
    serve (``provisioning`` after ``since``)."""
    return forecast + np.maximum(backlog + forecast * (provisioning + since) - forecast * safety, 0.0) / drain


def calm_rates(forecast, peak, headroom_factor, rise, dwell, noise=0.0, full_noise=0.0):
    """The rates a scale-in must hold at: the forecast or, on noisy traffic, the busiest recent
    interval (with the headroom), whichever is higher, raised to the rate halfway through the dwell
    while the arrivals clearly rise.

    How much the busiest interval counts follows the arrivals' measured ``noise``
    (``trend``): not at all up to half of ``full_noise`` (per candidate), wholly from
    ``full_noise`` on, in proportion between (0: always wholly). On noisy traffic a lull is no
    reason to scale in and out again at the next burst; on quiet traffic a busier interval a few
    minutes ago is a trend that has passed, and holding at it only pays for capacity (on issue
    32's trace family up to 17% dearer at 10% noise). The ramp keeps a noise estimate from ten
    intervals, which wanders, from switching the hold on and off (docs/policy-experiments.md)."""
    weight = np.clip(np.where(full_noise > 0, 2.0 * noise / np.where(full_noise > 0, full_noise, 1.0) - 1.0, 1.0), 0.0, 1.0)
    held = forecast + weight * (peak * headroom_factor - forecast)
    return np.maximum(forecast, held) * rising_factor(rise, dwell)


def distinct_shares(forecast: np.ndarray) -> np.ndarray:
    """Per candidate, whether its forecasts (partitions x candidates) are spread enough for a
    scale-out to size its newcomers by the draw (``NEWCOMER_MARGIN``): at least half of them
    distinct. Partitions with equal shares see equal sequence numbers, so then the draw and the
    bound differ only by the backlogs, and the bound stays."""
    ranked = np.sort(forecast, axis=0)
    return 2 * ((ranked[1:] - ranked[:-1] != 0).sum(axis=0) + 1) >= forecast.shape[0]  # (np.diff, without its overhead)


# --- sizing by owner load ---------------------------------------------------------------------


class Owners:
    """Who owns which partition, per candidate (column), as the sizing reads it: whether any
    partition has a live owner, the count whose load is exact (as many live owners, every
    partition owned; -1: none), how many partitions each owner holds (owners x candidates), the
    fewest and the most one holds, and (when a load sums by owner) each partition's slot
    (``owner * candidates + column``, ``size`` for none). ``owners`` holds each partition's owner
    as an index (-1: no live owner); ``live``: how many distinct live owners each candidate has."""

    #: What is worked out per candidate (one value per column).
    PER_CANDIDATE = ("ownership", "exact_count", "live")

    def __init__(self, owners: np.ndarray) -> None:
        self._owners = owners
        self.count = count = owners.shape[1]
        self._slots: np.ndarray | None = None
        self._spread: tuple | None = None  # (None: not worked out yet; (None,): no spread, see ``spread``)
        owned = owners >= 0
        self.ownership = owned.any(axis=0)
        self.size = (int(owners.max(initial=0)) + 1) * count
        self.partitions = np.bincount(self.slots, minlength=self.size + 1)[:-1].reshape(-1, count)
        #: Distinct live owners per candidate: those that hold a partition.
        self.live = (self.partitions > 0).sum(axis=0)
        self.exact_count = np.where(self.ownership & owned.all(axis=0), self.live, -1)

    @classmethod
    def of(cls, owners: tuple[str | None, ...] | None, partitions: int) -> Owners:
        """One candidate's owners from the names a sample collects (``None``: no live owner; no
        names at all: the source collects no ownership), numbered in order of first appearance.
        (An evaluation reads the latest sample's owners twice: for the throughput and for the
        sizing; nothing changes an ``Owners`` once made, so the last few are kept.)"""
        return _owners_of(owners, partitions)

    @classmethod
    def read(cls, owners: np.ndarray, before: Owners | None) -> Owners:
        """The owners now (the live ones counted), worked out again only for the candidates whose
        owners changed since ``before`` (the previous collection's; most candidates keep theirs from
        one to the next)."""
        if before is None or before.count != owners.shape[1]:
            return cls(owners)
        changed = np.flatnonzero((owners != before._owners).any(axis=0))
        if 4 * changed.size > before.count:
            return cls(owners)
        now = cls._blank(owners, {name: getattr(before, name).copy() for name in cls.PER_CANDIDATE})
        held = before.partitions
        if changed.size:
            part = cls(owners[:, changed])
            rows = max(held.shape[0], part.partitions.shape[0])
            held = np.concatenate((held, np.zeros((rows - held.shape[0], now.count), dtype=held.dtype))) if rows > held.shape[0] \
                else held.copy()
            held[:, changed] = 0
            held[:part.partitions.shape[0], changed] = part.partitions
            for name in cls.PER_CANDIDATE:
                getattr(now, name)[changed] = getattr(part, name)
        now.partitions = held
        now.size = held.shape[0] * now.count
        return now

    @classmethod
    def _blank(cls, owners: np.ndarray, per_candidate: dict) -> Owners:
        """One whose per-candidate values are given (the caller sets ``partitions`` and ``size``)."""
        made = cls.__new__(cls)
        made._owners, made.count, made._slots, made._spread = owners, owners.shape[1], None, None
        for name, value in per_candidate.items():
            setattr(made, name, value)
        return made

    @property
    def slots(self) -> np.ndarray:
        """Each partition's slot, flattened (partitions x candidates)."""
        if self._slots is None:
            owners, count = self._owners, self.count
            self._slots = np.where(owners >= 0, owners * count + np.arange(count)[None, :], self.size).ravel()
        return self._slots

    def of_columns(self, columns: np.ndarray) -> Owners:
        """The same for the chosen candidates only (owners that hold nothing there weigh nothing)."""
        part = Owners._blank(self._owners[:, columns], {name: getattr(self, name)[columns] for name in self.PER_CANDIDATE})
        part.partitions = self.partitions[:, columns]
        part.size = part.partitions.shape[0] * part.count
        if self._spread is not None and self._spread[0] is not None:  # (what held for all holds for some)
            part._spread = (tuple(extreme[columns] for extreme in self._spread[0]),)
        return part

    def summed(self, values: np.ndarray) -> np.ndarray:
        """``values`` (partitions x candidates) summed by owner (owners x candidates), in partition
        order; partitions without a live owner count for none."""
        return np.bincount(self.slots, weights=values.ravel(), minlength=self.size + 1)[:-1].reshape(-1, self.count)

    @property
    def spread(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The fewest and the most partitions an owner holds, per candidate (0 for a candidate
        without owners), when no owner of any candidate holds another number of them (as a
        balancer leaves them); else None."""
        if self._spread is None:  # (worked out once: an evaluation sizes several times on the same owners)
            held = self.partitions
            most = held.max(axis=0)
            fewest = np.where(held > 0, held, most[None, :]).min(axis=0)
            self._spread = ((fewest, most) if ((held == fewest) | (held == most) | (held == 0)).all() else None,)
        return self._spread[0]


@functools.lru_cache(maxsize=8)
def _owners_of(owners: tuple[str | None, ...] | None, partitions: int) -> Owners:
    seen: dict[str, int] = {}
    index = [-1] * partitions if owners is None else [-1 if owner is None else seen.setdefault(owner, len(seen))
                                                     for owner in owners]
    return Owners(np.asarray(index, dtype=np.int64)[:, None])


@functools.lru_cache(maxsize=64)
def per_instance_table(partitions: int, top: int) -> np.ndarray:
    """Partitions the busiest instance owns at 0..``top`` + 1 instances (as the float the
    division uses). Made once per (partitions, top) and read-only: the engine asks for the same
    table at every evaluation."""
    table = np.array([float(-(-partitions // max(instances, 1))) for instances in range(top + 2)])
    table.flags.writeable = False
    return table


#: Up to this many columns ``_running_sums`` lets numpy accumulate (measured: 1.4 us against
#: 15 us for one column of 32 rows; even at 64 columns of 8 rows, beyond which the loop wins).
NARROW_COLUMNS = 64


def _running_sums(rows: np.ndarray, count: int = 0) -> np.ndarray:
    """The running sums down ``rows`` (rows x candidates; or one row, added to itself until there
    are ``count``), added row after row as ``np.cumsum(axis=0)`` adds them, bit for bit: a loop
    over the few rows runs about three times faster than numpy's accumulation down the first axis
    of a sweep's hundreds of columns; on a few columns (the engine's batch of one) numpy's
    accumulation, which adds in the same order, is the faster by ten times."""
    one = rows.ndim == 1
    count = count if one else len(rows)
    if rows.shape[-1] <= NARROW_COLUMNS:
        return np.cumsum(np.repeat(rows[None, :], count, axis=0) if one else rows, axis=0)
    sums = np.empty((count, rows.shape[-1]))
    sums[0] = rows if one else rows[0]
    for index in range(1, count):
        np.add(sums[index - 1], rows if one else rows[index], out=sums[index])
    return sums


@functools.lru_cache(maxsize=16)
def _columns(count: int) -> np.ndarray:
    """0..``count`` - 1, read-only (each candidate's column), made once per batch size."""
    columns = np.arange(count)
    columns.flags.writeable = False
    return columns


class OwnerLoads:
    """The busiest owner's load of ``values`` (the forecasts, partitions x candidates, set-aside
    partitions at 0) at any count, per candidate (``sizing.py`` says why each case sizes as it
    does): exact where the candidate's live owners are that many and own every partition, else
    the ``k`` heaviest partitions' sum, less where the owners tell more (fewer instances: the
    survivors keep theirs and take the moving ones at the others' mean; more instances, with
    ``by_draw``: newcomers ``NEWCOMER_MARGIN`` of the way from the mean to the bound).

    A set-aside (``hot``) partition weighs as much as the heaviest other one. ``rate`` is each
    candidate's per-instance throughput, ``per_instance`` a ``per_instance_table``.

    Rows may stand for several partitions (``row_of``: each partition's row; the batched
    simulator's equal shares, ``simulation/share_rows.py``). With one group of equal shares
    (``equal_shares``) every partition weighs the first row's value ``v``: sorted they stay as
    they are, the ``k`` heaviest sum to the running sum ``S(k)`` of ``v``, and an owner of ``c``
    partitions (summed in partition order from 0) to ``S(c)``, bit for bit; so owners that hold
    as many partitions have the same load, and (``Owners.spread``) only the fewest and the most
    held need working out."""

    def __init__(self, values: np.ndarray, hot: np.ndarray | None, owners: Owners, rate: np.ndarray,
                 per_instance: np.ndarray, by_draw: np.ndarray, *, row_of: np.ndarray | None = None,
                 equal_shares: bool = False) -> None:
        if hot is not None:  # a set-aside partition weighs as much as the heaviest other one
            values = np.where(hot, values.max(axis=0), values)
        self.partitions = partitions = len(row_of) if row_of is not None else values.shape[0]
        self.count = count = values.shape[1]
        self.ownership, self.exact_count = owners.ownership, owners.exact_count
        self.rate, self.per_instance = rate, per_instance
        self._per_owner = per_instance.astype(np.int64)
        self.index = _columns(count)
        self._owners = owners
        self._spread: tuple[np.ndarray, np.ndarray] | None = None
        self._kept_by: list | None = None
        self._others: np.ndarray | None = None
        self.varied = np.zeros(count, dtype=bool)  # the partitions' loads differ (worth sizing newcomers by the draw)
        self._some_exact = bool((self.exact_count >= 0).any())  # (else no count is sized by the owners now)
        self._some_varied = False
        if equal_shares:
            value = values[0]
            # S(k), added one at a time as the running sum does
            self.heaviest = heaviest = _running_sums(value, partitions)
            self.total = heaviest[-1]
            self.largest = value
            self._spread = spread = owners.spread
            if spread is not None:
                most = spread[1]
                self.exact = np.where(most > 0, self._running(np.maximum(most - 1, 0) * count + self.index), 0.0)
                return
            held = owners.partitions
            self.owner_load = np.where(held > 0, self._running(np.maximum(held - 1, 0) * count + self.index), 0.0)
        else:
            by_partition = values if row_of is None else values[row_of]  # (partitions, candidates)
            ranked = np.sort(by_partition, axis=0)
            self.varied = by_draw & (ranked[0] < ranked[-1])
            self.heaviest = _running_sums(ranked[::-1])
            self.total = self.heaviest[-1]
            self.largest = ranked[-1]
            self.owner_load = owners.summed(by_partition)
        self.exact = self.owner_load.max(axis=0)
        self._some_varied = bool(self.varied.any())

    def _running(self, flat: np.ndarray) -> np.ndarray:
        """The running sums at flat (rank * candidates + column) positions."""
        return self.heaviest.take(flat)

    def _held(self, held: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Equal shares: an owner of ``held`` partitions (one count per column): ``held``, its
        load, the mean load of the partitions it does not own."""
        load = self._running(np.maximum(held - 1, 0) * self.count + self.index)
        return held, load, (self.total - load) / np.maximum(self.partitions - held, 1)

    def load(self, counts: np.ndarray, columns: np.ndarray | slice = slice(None)) -> np.ndarray:
        """The busiest owner's load at ``counts`` (one per chosen column), where owners are known."""
        live = self.exact_count[columns]
        exact = live == counts
        if exact.all():  # (the engine's usual case: its owners at the count asked about)
            return self.exact[columns].copy()
        per_owner = self._per_owner[counts]
        index = self.index[columns]
        bound = self._running((np.minimum(per_owner, self.partitions) - 1) * self.count + index)
        fewer = np.flatnonzero(live > counts) if self._some_exact else ()
        if len(fewer):  # the survivors keep theirs and take the moving ones at the others' mean
            at = index[fewer]
            room = per_owner[fewer]
            if self._spread is not None:  # equal shares: the owners of the fewest and of the most
                if self._kept_by is None:
                    self._kept_by = [self._held(held) for held in self._spread]
                kept = np.maximum(*(load[at] + np.minimum(np.maximum(room - held[at], 0), self.partitions) * others[at]
                                    for held, load, others in self._kept_by))
            else:
                if self._others is None:
                    self._others = (self.total[None, :] - self.owner_load) / np.maximum(
                        self.partitions - self._owners.partitions, 1)
                owners = self._owners.partitions[:, at]
                gained = np.minimum(np.maximum(room[None, :] - owners, 0), self.partitions) * self._others[:, at]
                kept = np.where(owners > 0, self.owner_load[:, at] + gained, -np.inf).max(axis=0)
            bound[fewer] = np.minimum(bound[fewer], kept)
        more = np.flatnonzero((live > 0) & (live < counts) & self.varied[columns]) if self._some_varied else ()
        if len(more):  # the owners keep k of theirs (k / c of their load), newcomers most of the way to the k heaviest
            at, room = index[more], per_owner[more]
            owners = self._owners.partitions[:, at]
            kept = np.where(owners > 0, self.owner_load[:, at] * np.minimum(owners, room[None, :])
                            / np.maximum(owners, 1), -np.inf).max(axis=0)
            mean = room * (self.total[at] / self.partitions)
            newcomer = mean + NEWCOMER_MARGIN * (bound[more] - mean)
            bound[more] = np.minimum(bound[more], np.maximum(kept, newcomer))
        return np.where(exact, self.exact[columns], bound)

    def busiest(self, counts: np.ndarray, columns: np.ndarray | slice = slice(None)) -> np.ndarray:
        """The busiest owner's load at ``counts``; without ownership ``k`` times the heaviest
        partition (as if the heaviest shared one owner)."""
        owned = self.ownership[columns]
        if owned.all():  # (the engine's usual case)
            return self.load(counts, columns)
        worst = self.per_instance[counts] * np.maximum(self.largest[columns], 0.0)
        return np.where(owned, self.load(counts, columns), worst)

    def service(self, values: np.ndarray, counts: np.ndarray, columns: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Each row's service rate at ``counts`` (one per chosen column) for ``values`` of those
        columns: the busiest owner's ratio ``rate / load`` of its own value, never below an equal
        share ``rate / k`` (only that without ownership); none at no instance."""
        rate = self.rate[columns]
        equal = rate / self.per_instance[counts]
        load = self.load(counts, columns)
        sized = self.ownership[columns] & (load > 0)
        ratio = rate / np.where(sized, load, 1.0)
        served = np.where(sized[None, :], np.maximum(values * ratio[None, :], equal[None, :]), equal[None, :])
        return np.where(counts[None, :] > 0, served, 0.0)  # no instance serves nothing


# --- the counts ------------------------------------------------------------------------------------


def scale_out_counts(levels: np.ndarray, valid: np.ndarray, capacity: np.ndarray, highest: np.ndarray, top: int,
                     needs: Sequence[tuple[OwnerLoads, np.ndarray]]) -> np.ndarray:
    """Per candidate, the smallest allowed count above ``capacity`` at which every partition of
    every source is served its need (``needs``: each source's loads and needs, partitions x
    candidates), else the ``highest`` allowed. ``levels`` holds each candidate's allowed counts
    ascending (candidates x counts; ``valid`` marks the real ones), looked up up to ``top`` + 1."""
    width = levels.shape[1]
    fits = valid & (levels > capacity[:, None])
    pairs = np.flatnonzero(fits)
    if pairs.size:  # every (candidate, count) pair at once
        column = pairs // width
        counts = np.minimum(levels.ravel()[pairs], top + 1)
        served = np.ones(pairs.size, dtype=bool)
        for loads, need in needs:
            served &= (loads.service(need[:, column], counts, column) >= need[:, column]).all(axis=0)
        fits.ravel()[pairs] = served
    return np.where(fits.any(axis=1), levels[np.arange(len(levels)), fits.argmax(axis=1)], highest)


def hold_seconds(loads: OwnerLoads, calm: np.ndarray, age: np.ndarray, counts: np.ndarray, limit: np.ndarray,
                 reaction: np.ndarray, columns: np.ndarray | slice = slice(None)) -> np.ndarray:
    """How long ``counts`` (one per chosen column) keep every partition's oldest event under
    ``limit``, at the ``calm`` rates from ``age`` now, a scale-out ``reaction`` seconds away
    (infinite where no partition fills). Not at all where a partition's oldest event is past the
    limit and still would be after ``reaction`` seconds of draining at that count: an old backlog
    that drains slowly is no surplus (scaled in on it, the SLO was missed until the next scale-out)."""
    calm = calm[:, columns]
    serve = loads.service(calm, counts, columns)
    growth = np.where(calm > NO_RATE, 1.0 - serve / np.maximum(calm, NO_RATE), -1.0)
    filling = growth > 0
    margin = limit - growth * reaction - age[:, columns]
    return np.where(margin > 0, np.where(filling, margin / np.where(filling, growth, 1.0), np.inf), 0.0).min(axis=0)


#: Up to this many (candidate, count) pairs, ``scale_in_counts`` tries every count below the
#: capacity at once (a batch of one: the engine); above, it tries where the fluid model points.
EVERY_COUNT_PAIRS = 64


def scale_in_counts(levels: np.ndarray, below: np.ndarray, capacity: np.ndarray, top: int, limit: np.ndarray,
                    dwell: np.ndarray, reaction: np.ndarray,
                    sources: Sequence[tuple[OwnerLoads, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate, the smallest allowed count below ``capacity`` expected to hold for ``dwell``
    (``hold_seconds`` over every source: its loads, calm rates and ages), -1 where none does, and
    how long it holds (seconds; NaN where none does). ``levels`` holds the allowed counts ascending
    (candidates x counts), ``below`` how many lie under the capacity.

    The counts are tried ascending and the first that holds is taken: all at once when there are
    few (``EVERY_COUNT_PAIRS``). With many, since how long a count holds never shrinks as the
    count grows (more service: slower growth, fewer filling partitions), a candidate whose
    highest count below the capacity does not hold has none; for the others the first that holds is
    found by checking where the fluid model says it should be and the count below; only when
    those disagree with the estimate are all counts tried in turn (and always where a count below
    the capacity is sized by exact owner loads, which may hold where the bound of the count above
    does not).
    """
    count = len(capacity)
    columns = np.arange(count)
    counts = np.minimum(levels, top + 1)
    width = levels.shape[1]

    def hold(level: np.ndarray, chosen: np.ndarray | slice = slice(None)) -> np.ndarray:
        at = counts[columns[chosen], level]
        shortest = None  # (the first source's, then the shortest: as from infinity, one np.minimum fewer)
        for loads, calm, age in sources:
            seconds = hold_seconds(loads, calm, age, at, limit[chosen], reaction[chosen], chosen)
            shortest = seconds if shortest is None else np.minimum(shortest, seconds)
        return np.full(len(at), np.inf) if shortest is None else shortest

    if int(below.sum()) <= EVERY_COUNT_PAIRS:
        pairs = np.flatnonzero(np.arange(width)[None, :] < below[:, None])  # (candidate, level) below the capacity
        held = np.zeros(levels.shape, dtype=bool)
        seconds = np.full(levels.shape, np.nan)
        if pairs.size:
            at = pairs // width
            seconds.ravel()[pairs] = lasting = hold(pairs % width, at)
            held.ravel()[pairs] = lasting >= dwell[at]
        first = held.argmax(axis=1)
        found = held[columns, first]
        return np.where(found, levels[columns, first], -1), np.where(found, seconds[columns, first], np.nan)

    def holds(level: np.ndarray, chosen: np.ndarray | slice = slice(None)) -> np.ndarray:
        lasting = hold(level, chosen)
        return lasting >= dwell[chosen], lasting

    exact_below = np.zeros(count, dtype=bool)
    for loads, _, _ in sources:
        exact_below |= (loads.exact_count > 0) & (loads.exact_count < capacity)
    chosen = np.full(count, -1)
    chosen_hold = np.full(count, np.nan)
    # The highest count below the capacity first: where it does not hold, no lower count does
    # (exact owner loads aside), so most candidates are settled by that one check.
    at_highest, highest_lasting = holds(np.maximum(below - 1, 0))
    rest = np.flatnonzero((at_highest | exact_below) & (below > 0))
    if not rest.size:
        return chosen, chosen_hold
    # Where it should be: growth at most (limit - age) / (reaction + dwell) on every partition,
    # i.e. a service of at least (1 - that) of each forecast, at the equal share or the owner-load ratio.
    rest_counts, rest_below = counts[rest], below[rest]
    short = np.zeros((rest.size, width), dtype=bool)
    for loads, calm, age in sources:
        calm, age = calm[:, rest], age[:, rest]
        flowing = calm > NO_RATE
        allowed_growth = (limit[rest] - age) / (reaction[rest] + dwell[rest])
        required = np.where(flowing, calm * (1.0 - allowed_growth), -np.inf).max(axis=0)
        fraction = np.maximum(np.where(flowing, 1.0 - allowed_growth, 0.0).max(axis=0), 0.0)
        lacking = loads.rate[rest, None] / loads.per_instance[rest_counts] < required[:, None]  # at the equal share
        # ... unless the owner-load ratio serves enough: worked out only for those (all at once).
        pairs = np.flatnonzero(lacking & loads.ownership[rest, None])
        if pairs.size:
            row = pairs // width
            load = loads.load(rest_counts.ravel()[pairs], rest[row])
            by_load = (load > 0) & (loads.rate[rest[row]] >= fraction[row] * load)
            lacking.ravel()[pairs[by_load]] = False
        short |= lacking
    guess = np.clip(short.sum(axis=1), 0, rest_below - 1)
    at_guess, lasting = at_highest[rest], highest_lasting[rest]  # (the guess is often the highest count)
    elsewhere = np.flatnonzero(guess != rest_below - 1)
    if elsewhere.size:
        at_guess[elsewhere], lasting[elsewhere] = holds(guess[elsewhere], rest[elsewhere])
    # The count under the guess matters only where the guess holds (elsewhere the guess is not
    # taken, and whether to try every count depends on the guess alone).
    lower = np.flatnonzero(at_guess & (guess > 0))
    under_guess = np.zeros(rest.size, dtype=bool)
    if lower.size:
        under_guess[lower] = holds(guess[lower] - 1, rest[lower])[0]
    found = at_guess & ~under_guess & ~exact_below[rest]
    unsure = rest[~found & (exact_below[rest] | ~(~at_guess & (guess == rest_below - 1)))]
    chosen[rest[found]] = guess[found]
    chosen_hold[rest[found]] = lasting[found]
    for level in range(width):  # (rarely needed) every count in turn, ascending
        trying = unsure[level < below[unsure]]
        if not trying.size:
            break
        holding, lasting = holds(np.full(len(trying), level), trying)
        chosen[trying[holding]] = level
        chosen_hold[trying[holding]] = lasting[holding]
        unsure = np.setdiff1d(unsure, trying[holding], assume_unique=True)
    return np.where(chosen >= 0, levels[columns, np.maximum(chosen, 0)], -1), np.where(chosen >= 0, chosen_hold, np.nan)
