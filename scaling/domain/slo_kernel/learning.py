"""What is learned from the readings: the per-instance throughput, the checkpoint delay, and
which intervals can vouch for them."""

from __future__ import annotations

import math

import numpy as np

from scaling.domain.slo_kernel.ages import oldest_event_ages
from scaling.domain.slo_kernel.arrays import is_nan, maximum, minimum, negation, where
from scaling.domain.slo_kernel.hub import _per_candidate, column_sums
from scaling.domain.slo_kernel.owners import Owners

#: Weight of a new saturated observation in the learned per-instance throughput.
THROUGHPUT_LEARNING_RATE = 0.3
#: A saturated interval that measures the per-instance rate more than this fraction below the
#: learned one is held back until the next learning step confirms it. A lone low reading (an
#: instance dying part way through the interval, a rebalance pause, a partition that read busy
#: on a checkpoint's lag while nothing arrived) would otherwise pull the rate down, and a rate
#: learned too low never recovers: the engine over-provisions, so no interval is saturated again.
UNCONFIRMED_DROP = 0.2
#: How far below the floor (the best rate an unsaturated interval showed) the rate sized by may
#: stand: consumers whose speed swings (a 10% wave over hours) showed the floor at their fastest.
#: At 0.2 (``UNCONFIRMED_DROP``, as it once was) the public realistic rows paid 1-2% more; at 0 a
#: bursty member of the realistic family missed its SLO (docs/policy-experiments.md, ninth round).
FLOOR_DOUBT = 0.05
#: The same for a Service Bus queue, whose rate is Azure Monitor's completions per minute, 1-3
#: minutes late and lumpy (a minute's count may carry the minute before's): its best minute
#: overstates more, and at 0.05 the queue benchmark's bursts member missed at lag 3 (4 -> 14 minutes).
QUEUE_FLOOR_DOUBT = UNCONFIRMED_DROP
#: How fast the learned checkpoint delay may creep up per evaluation (seconds), and its ceiling
#: as a fraction of the SLO: a delay is learned from the lowest ages seen, so it must not drift
#: far while consumers stay saturated.
CHECKPOINT_DELAY_DRIFT = 0.5
CHECKPOINT_DELAY_CEILING = 0.25
#: A drop the interval's own readings corroborate (``corroborated_drop``) is learned at once only
#: where the capacity has been steady for this many checkpoint delays (the learned one, or an
#: interval) before the interval: checkpoints may trail by more than the delay learned so far,
#: and then a drain just after a scale-out reads as what the fewer instances before it processed.
DROP_SETTLED_DELAYS = 2.0
#: ... and only where the backlog grew by more than this fraction of the interval's arrivals (the
#: instances processed under half of what arrived).
DROP_GROWTH = 0.5
#: A drop learned at once is remembered for this long (seconds) from the last saturated reading
#: that shows it (``remembered_drop``); then the rate returns to the one before it (``let_go``).
#: Instances sized at the dropped rate never read saturated again after the consumers recover
#: (a 30% slow-down at minute 300 held 11 instances at 5/s for the rest of the run), and the
#: scale-in rules still keep the oldest event within the SLO if it has not ended: a slow-down
#: that persists is proved again and learned at once again.
DROP_MEMORY_SECONDS = 7200.0
#: Events per partition, on average, over the checkpoint delay for an age reading to change the learned delay.
DENSE_EVENTS = 10.0
#: While the hub is steady (``learned_checkpoint_delay``), the learned delay follows an age that
#: stays above it by this fraction of the gap per evaluation, up to this fraction of the SLO.
CHECKPOINT_DELAY_FOLLOW = 0.1
CHECKPOINT_DELAY_STEADY_CEILING = 0.7
#: The learned delay also follows how far the checkpoints trail the arrivals (``steady_lags``),
#: but only on partitions whose owner's checkpoints moved by at most this share of what an
#: instance processes over the interval (``keeping_up``): that owner processed all that reached
#: it, so its checkpoints trail by the delay alone. Four saturated instances at 68/s otherwise
#: read a standing 172 s wait as the delay (the overload row: 15 violation minutes).
CHECKPOINT_DELAY_SPARE = 0.8
#: ... and only on a partition whose checkpoint trails its arrivals by as much, within this share
#: of an interval, as at the reading before: a backlog that drains or grows changes the lag.
STEADY_LAG = 0.1


def observed_throughput(processed: np.ndarray, elapsed: float, serving: np.ndarray, done: np.ndarray, busy: np.ndarray,
                        unmeasured: np.ndarray, owners: Owners | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per candidate, events per second per serving instance over the last interval, whether
    it was saturated (only a saturated interval tells the real rate: a partition that ran dry
    left its owner idle part of the time), and the fastest serving instance's rate where every
    one measured (each owner busy; without ownership, the mean where every partition was busy;
    infinite elsewhere: ``corroborated_drop``).

    ``processed`` events over ``elapsed`` seconds, ``done`` per partition (partitions x
    candidates), ``busy`` where a partition held more than two intervals' arrivals at both ends,
    ``unmeasured`` where its processed events are unknown. Without ownership (``owners`` None)
    ``serving`` instances divide what was processed, saturated when every partition was busy.
    With it, each owner with a busy partition and every partition measured is a measurement of
    one instance (it shares its throughput by demand: a backlogged partition leaves it nothing to
    spare): their mean is the rate, so a hub with a few busy partitions still teaches it."""
    spread = processed / elapsed / serving
    if owners is None:
        saturated = busy.all(axis=0) & ~unmeasured.any(axis=0) & (processed > 0)
        return spread, saturated, np.where(saturated, spread, math.inf)
    # Only a candidate with a busy partition has an owner that measures: the sums by owner are
    # worked out for those alone (most candidates of a sweep have none in most intervals).
    some = np.flatnonzero(busy.any(axis=0))
    saturated = np.zeros(len(spread), dtype=bool)
    fastest = np.full(len(spread), math.inf)
    if not some.size:
        return spread, saturated, fastest
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
    every = (measured > 0) & (measured == (part.partitions > 0).sum(axis=0))
    fastest[some] = np.where(every, np.where(measuring, owner_done, 0.0).max(axis=0) / elapsed, math.inf)
    return observed, saturated, fastest


def busy_partitions(start_backlog, end_backlog, arrived, lag_seconds, elapsed, lag_arrivals=None):
    """Where a partition was saturated over an interval of ``elapsed`` seconds in which
    ``arrived`` events came: it held, at both ends, more than two intervals' arrivals (room for
    checkpoints trailing by up to an interval), and, where the checkpoints trail by more than an
    interval (``lag_seconds``: the learned checkpoint delay), more by the arrivals over that lag.
    A consumer that keeps up shows a backlog of the arrivals over the lag: counted as busy,
    every partition of a hub whose checkpoints trail by 150 s or more reads saturated, and the
    rate is learned as arrivals / owners (3.5/s where the truth is 16.7/s).

    The arrivals over the lag are the interval's rate's, or, given ``lag_arrivals`` (what arrived
    over the lag before the interval's start and before its end, ``arrived_before``), those: the
    backlog a checkpoint that trails by the lag shows is what arrived then, and an interval
    quieter than the lag before it (NASA's outage; a minute of 20/s after minutes of 250/s) read
    every partition busy and taught what the checkpoints' lumps of earlier work say: 0.5-9.9/s
    where the truth is 16.7/s."""
    late = lag_seconds > elapsed
    if lag_arrivals is None:
        return minimum(start_backlog, end_backlog) > arrived * (2.0 + where(late, lag_seconds, 0.0) / elapsed)
    before_start, before_end = lag_arrivals
    return ((start_backlog > 2.0 * arrived + where(late, before_start, 0.0))
            & (end_backlog > 2.0 * arrived + where(late, before_end, 0.0)))


def arrived_before(times: np.ndarray, positions: np.ndarray, seconds) -> np.ndarray:
    """Per partition (and candidate), the events that arrived over the ``seconds`` (per candidate)
    before the last sample (``positions``: last-enqueued sequence numbers, samples x partitions[ x
    candidates], oldest first), the positions read linearly between samples (before the first
    one, at its interval's rate)."""
    seconds = np.atleast_1d(np.asarray(seconds, dtype=float))
    at = times[-1] - seconds
    index = np.clip(np.searchsorted(times, at, side="right") - 1, 0, len(times) - 2)
    share = (at - times[index]) / (times[index + 1] - times[index])
    if positions.ndim == 2:
        low, high = positions[index].T, positions[index + 1].T  # (partitions, candidates)
    else:
        columns = np.arange(positions.shape[2])
        low, high = positions[index, :, columns].T, positions[index + 1, :, columns].T
    return (positions[-1][:, None] if positions.ndim == 2 else positions[-1]) - (low + (high - low) * share)


def learned_throughput(throughput: np.ndarray, floor: np.ndarray, held_back: np.ndarray, observed: np.ndarray,
                       saturated: np.ndarray, learning: np.ndarray,
                       corroborated=False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fold an interval's per-instance rate into what is learned, where ``learning`` (NaN: none yet).

    A saturated interval moves the learned rate by ``THROUGHPUT_LEARNING_RATE`` (the first one sets
    it), unless it reads more than ``UNCONFIRMED_DROP`` below it and nothing waits to confirm it
    (``held_back``): then it waits one learning step, as the new ``unconfirmed``. A drop the
    interval's own readings confirm (``corroborated``, ``corroborated_drop``: every serving
    instance busy and slower, and the backlog growing) sets the rate at once: the instances no longer do what
    they did, and each minute spent blending towards it lets the oldest event age unseen (a
    slow-down to 30% took 20 minutes to be learned: 17 violation minutes). An unsaturated
    interval only raises the lower bound (``floor``). Returns the throughput, the floor, what waits
    (NaN: nothing) and where a reading was learned."""
    rows = learning & saturated
    drop = rows & (observed < throughput * (1 - UNCONFIRMED_DROP))  # (NaN: False)
    sudden = drop & corroborated
    doubtful = drop & negation(sudden) & is_nan(held_back)
    rows = rows & negation(doubtful)
    blended = (1 - THROUGHPUT_LEARNING_RATE) * throughput + THROUGHPUT_LEARNING_RATE * observed
    throughput = where(rows, where(is_nan(throughput) | sudden, observed, blended), throughput)
    raised = learning & negation(saturated) & (observed > where(is_nan(floor), 0.0, floor))
    # A saturated reading learned below the floor shows the instances no longer do what they did
    # (a slow-down): the floor is what they do now, not the best they ever did.
    lowered = rows & (observed < floor)  # (NaN: False)
    return throughput, where(raised | lowered, observed, floor), where(doubtful, observed, math.nan), rows


def remembered_drop(before, shown_at, previous, observed, saturated, learning, corroborated, now):
    """The rate before a drop learned at once (``before``, NaN: none remembered) and when a saturated
    reading last showed the drop (``shown_at``), after an interval's learning: a drop learned at
    once (``corroborated``, below the ``previous`` rate as ``learned_throughput`` learns it) keeps
    the rate before it (the first one's, where drops follow) and the moment ``now``; any saturated
    reading still ``UNCONFIRMED_DROP`` below the remembered rate renews the moment."""
    sudden = learning & saturated & corroborated & (observed < previous * (1 - UNCONFIRMED_DROP))  # (NaN: False)
    renewed = learning & saturated & (observed < before * (1 - UNCONFIRMED_DROP))  # (NaN: False)
    before = where(sudden & is_nan(before), previous, before)
    return before, where(sudden | renewed, now, shown_at)


def let_go(throughput, before, shown_at, now):
    """The learned rate, the remembered rate before a drop and its moment, once ``now`` is
    ``DROP_MEMORY_SECONDS`` past the last reading that showed the drop: the rate returns to the
    one before it (never lower than learned since), and nothing is remembered. A rate learned
    back within ``UNCONFIRMED_DROP`` of the one before the drop forgets it too."""
    recovered = throughput >= before * (1 - UNCONFIRMED_DROP)  # (NaN: False)
    due = negation(is_nan(before)) & (now - shown_at >= DROP_MEMORY_SECONDS)
    forget = due | recovered
    return (where(due, maximum(throughput, before), throughput), where(forget, math.nan, before),
            where(forget, math.nan, shown_at))


def settled_for_drop(steady_seconds, trail_seconds):
    """Whether the capacity has been steady long enough before an interval (``steady_seconds``
    from the last action or readiness to the interval's start; NaN: no action yet) for a drop
    to be learned at once: ``DROP_SETTLED_DELAYS`` times the checkpoints' ``trail_seconds``.
    Checkpoints 180 s late, learned as 112 s, read a drain after 1 -> 32 as 0.5/s per instance."""
    return is_nan(steady_seconds) | (steady_seconds >= DROP_SETTLED_DELAYS * trail_seconds)


def corroborated_drop(observed, fastest, throughput, start_backlog, end_backlog, arrived, done, elapsed, most):
    """Per candidate, whether an interval's drop below the learned ``throughput`` speaks for
    itself, a slow-down the readings prove:

    - every serving instance was busy and even the fastest of them (``fastest``,
      ``observed_throughput``; infinite where not every one measured) did more than
      ``UNCONFIRMED_DROP`` less than learned: none idle, none at the old rate;
    - every partition that held a backlog at both ends processed some of it (``done``): none
      was kept from its partitions (a rebalance's pause stands them still, and their owners
      read slow);
    - the backlog of the measured partitions (``start_backlog`` and ``end_backlog``: zero where
      unmeasured, partitions x candidates or per partition) grew by more than ``DROP_GROWTH`` of
      what ``arrived``: more than a rise in the arrivals over a checkpoint lag not learned yet
      explains (180 s late checkpoints learned as 60 s read 17% on a rise);
    - the ``most`` instances the bounds allow serve what arrived over ``elapsed`` seconds at the
      ``observed`` rate: a drop beyond that is a stall (``stalled``), where asking for the
      maximum at once serves nothing and costs (the 1% row held 32 instances for 45 minutes).

    A low reading with another cause still waits to be confirmed (``learned_throughput``)."""
    grown = end_backlog.sum(axis=0) - start_backlog.sum(axis=0)
    total = arrived.sum(axis=0)
    moving = ((start_backlog <= 0) | (end_backlog <= 0) | (done > 0)).all(axis=0)
    return ((fastest < throughput * (1 - UNCONFIRMED_DROP)) & moving & (grown > DROP_GROWTH * total)
            & (observed * most * elapsed >= total))


def serving_throughput(throughput, floor, doubt=FLOOR_DOUBT):
    """The per-instance rate to size by: the learned one (NaN: none), never below the ``floor``
    the instances have shown since (an unsaturated interval can only raise it) less the ``doubt``
    (``FLOOR_DOUBT``; a queue's ``QUEUE_FLOOR_DOUBT``). A rate learned during a slow-down would otherwise stay low for good: an
    over-provisioned hub is never saturated again to correct it (the 15% slow-down row at 32
    instances for hours)."""
    return where(is_nan(throughput), throughput, maximum(throughput, where(is_nan(floor), throughput, floor * (1 - doubt))))


def learned_checkpoint_delay(worst_age, previous, interval, ceiling, dense=True, steady=False, steady_ceiling=0.0,
                             youngest_lag=math.nan):
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
    ``steady_ceiling`` (checkpoints 180 s late read as a standing 105 s backlog).

    Below the maximum, the ``youngest_lag`` (``steady_lags``: the partition whose checkpoint
    trails its arrivals least and by as much as at the reading before, where some owner keeps up,
    ``keeping_up``; NaN: none) is followed the same way: checkpoints trail every partition
    alike, a real wait shows on the busiest owners' partitions and changes from one reading to
    the next, so the youngest steady lag is the delay (the first day of NASA's 180 s row held the
    delay at 125 s, followed at the maximum alone, and read every age 55 s too old)."""
    creep = where(worst_age <= previous + interval, CHECKPOINT_DELAY_DRIFT, 0.0)  # (NaN: 0)
    crept = minimum(minimum(worst_age, previous + creep), maximum(ceiling, previous))
    top = maximum(steady_ceiling, ceiling)
    follows = steady & (worst_age > previous)  # (NaN: False)
    followed = minimum(previous + CHECKPOINT_DELAY_FOLLOW * (worst_age - previous), top)
    youngest_lag = minimum(youngest_lag, worst_age)  # (a lag no older than the ages read)
    keeps_up = youngest_lag > previous  # (NaN: False)
    caught = minimum(previous + CHECKPOINT_DELAY_FOLLOW * (youngest_lag - previous), top)
    followed = where(follows, maximum(followed, where(keeps_up, caught, followed)), caught)
    kept = where(dense, where(follows | keeps_up, maximum(followed, crept), crept), previous)
    return where(is_nan(previous), minimum(worst_age, ceiling), kept)


def keeping_up(checkpoints, owners: Owners, rate, interval) -> np.ndarray:
    """Per partition (x candidate), whether its owner kept up over the last ``interval``: its
    partitions' checkpoints (now and at the reading before, ``HubReading.checkpoints``: 0 none) moved by
    at most ``CHECKPOINT_DELAY_SPARE`` of what an instance processes at ``rate`` (NaN: unknown,
    none), so it processed all that reached it, and the hub's checkpoints together moved by at
    most as much of what its live owners process: an owner under its rate on a hub at its
    capacity may be held back with the rest (a namespace that serves every partition at the
    busiest owner's pace, throttled reads), and its steady lag is a wait, not the delay (WC98's
    busiest half-day in the namespace world: 11 instances at 10,667 events a minute for 11,000
    arriving, the owner of two partitions under its rate, 210 s learned, 30 violation minutes).
    Where no ownership is collected, none."""
    now, before = checkpoints
    moved = np.where((now > 0) & (before > 0), np.maximum(now - before, 0.0), math.inf)
    slots = owners.slots
    by_owner = np.bincount(slots, weights=moved.ravel(), minlength=owners.size + 1)
    done = by_owner[slots].reshape(moved.shape)
    spare = CHECKPOINT_DELAY_SPARE * rate * interval
    hub_spare = np.where(np.isfinite(moved), moved, 0.0).sum(axis=0) <= spare * owners.live  # (NaN: False)
    return (slots.reshape(moved.shape) < owners.size) & (done <= spare) & hub_spare  # (NaN: False)


def steady_lags(checkpoints, history, arrival_rate, interval, row_of=None, hot=None, kept_up=None) -> np.ndarray:
    """Per partition (x candidate), the seconds its checkpoint trails the arrival of the event
    after it (the oldest unprocessed), where it trailed by as much (within ``STEADY_LAG`` of an ``interval``) at the
    reading before; infinite elsewhere (and where nothing waits, no checkpoint is known, a
    partition is ``hot`` or not ``kept_up`` (``keeping_up``), or the readings are missing). A checkpoint written ``d`` seconds
    behind a consumer that keeps up trails its arrivals by ``d`` at every reading; one behind a
    backlog that drains or grows trails by a changing wait.

    ``checkpoints``: the events checkpointed now and at the reading before (partitions x
    candidates, checkpoint + 1, 0: none; ``HubReading.checkpoints``), ``history``: the sample times and last-enqueued positions
    (``HubReading.arrivals``; rows, ``row_of`` mapping partitions to them), ``arrival_rate`` per
    partition (``oldest_event_ages``' extrapolation)."""
    if checkpoints is None or history is None or len(history[0]) < 3:
        return np.full((1, 1), math.inf)
    (now, before), (times, positions) = checkpoints, history
    if row_of is not None:
        positions = positions[:, row_of]
    lag = oldest_event_ages(times, positions, now, arrival_rate)
    then = oldest_event_ages(times[:-1], positions[:-1], before, arrival_rate)
    steady = (now > 0) & (before > 0) & (lag > 0) & (then > 0) & (np.abs(lag - then) <= STEADY_LAG * interval)
    if hot is not None:
        steady &= ~hot
    if kept_up is not None:
        steady &= kept_up
    return np.where(steady, lag, math.inf)


def learning_trail(delay, ceiling, steady_ceiling, interval):
    """How long after a change of capacity the checkpoints may still show the count before it:
    the learned checkpoint ``delay`` (NaN: none yet, the collection ``interval``), or, while it stands at or past
    its ``ceiling`` (the first ages were older still: the true delay may be longer), the
    ``steady_ceiling`` it may follow up to. NASA's cold start with checkpoints 180 s late learned
    a delay of 75 s and, 2.5 minutes after 3 -> 32, 1.56/s per instance (three instances' work
    over 32): the rate learned from it stayed at 10.2/s, the truth 16.7/s, for hours."""
    return where(is_nan(delay), interval, where(delay >= ceiling, maximum(delay, steady_ceiling), delay))


def delay_clipped(clipped, previous, delay, ceiling):
    """Whether the learned checkpoint ``delay`` is only a lower bound, after an evaluation that
    learned it from ``previous`` (NaN: none yet; ``clipped``: whether it was one): the first
    ages set it at its ``ceiling`` (they were older still), and no age has lowered it since. A
    delay that crept to its ceiling (0.5 s per evaluation while the ages stay within an interval
    of it) is no bound: ages were seen at it."""
    return where(is_nan(previous), delay >= ceiling, clipped & negation(delay < previous))


def saturation_lag(delay, clipped, steady_ceiling):
    """How far the saturation test (``busy_partitions``) allows the checkpoints to trail: the
    learned ``delay``, or, where it is only a lower bound (``delay_clipped``), the
    ``steady_ceiling`` it may follow to. Checkpoints 180 s late learned at the 75 s ceiling read
    every partition that kept up busy (three intervals' arrivals against two and 75 s'): NASA's
    cold start learned 10.2/s, the truth 16.7/s."""
    return where(clipped, maximum(delay, steady_ceiling), delay)


def dense_arrivals(arrival_rate, recent_rate, delay, interval, row_of=None, history=None):
    """Per candidate, whether the partitions in view received, over the checkpoint ``delay`` (at
    least an ``interval``), ``DENSE_EVENTS`` events each on average, at the lower of the rate
    window's and the last interval's arrivals: enough for the oldest event's age to show the
    delay (a partition that received nothing since its checkpoint looks caught up).

    With the arrivals' ``history`` (the sample times and the last-enqueued sequence numbers,
    samples x partitions[ x candidates], oldest first), at the quietest interval's rate among
    those within an interval of the delay (``quietest_rate``): a pause of two minutes inside a
    180 s delay leaves the oldest event 60 s old while the other intervals are busy, and the
    delay learned from it (NASA minute 1888: 177 s -> 60 s) read every partition busy and
    taught 5.6/s where the truth is 16.7/s."""
    partitions = len(row_of) if row_of is not None else arrival_rate.shape[0]
    span = where(is_nan(delay), interval, maximum(delay, interval))
    rate = minimum(column_sums(_per_candidate(arrival_rate), row_of), column_sums(_per_candidate(recent_rate), row_of))
    if history is not None:
        rate = minimum(rate, quietest_rate(*history, span + interval, row_of))
    return rate * span >= DENSE_EVENTS * partitions


def quietest_rate(times: np.ndarray, positions: np.ndarray, seconds, row_of=None):
    """Per candidate, the hub's lowest arrival rate (events/s, every partition) among the
    collection intervals that end within ``seconds`` (per candidate) of the last sample
    (``positions``: last-enqueued sequence numbers, samples x rows[ x candidates], oldest
    first; ``row_of``: each partition's row, where rows stand for several); infinite where no
    interval does."""
    if len(times) < 2:
        return np.full(np.shape(seconds) or (1,), math.inf)
    totals = (positions if row_of is None else positions[:, row_of]).sum(axis=1)
    steps = times[1:] - times[:-1]
    steps = np.where(steps > 0, steps, np.inf).reshape(-1, *[1] * (totals.ndim - 1))
    rates = np.maximum(totals[1:] - totals[:-1], 0.0) / steps  # (intervals[, candidates])
    within = (times[1:] > times[-1] - np.atleast_1d(seconds)[:, None]).T  # (intervals, candidates)
    return np.where(within, rates if rates.ndim > 1 else rates[:, None], math.inf).min(axis=0)
