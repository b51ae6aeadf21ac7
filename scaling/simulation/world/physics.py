"""The physics of the simulated world, written once: one minute step over candidates x partitions.

Every run of the simulator goes through ``Physics``: ``World`` (``simulate``, the demo's
simulated hub, the peers) is a batch of one driven by an autoscaler a minute at a time, and the
batched simulators (``batched.py`` for threshold rules, ``batched_slo.py`` for the SLO mode)
are batches of many candidates that share the arrivals but each have their own capacity.
Arrays are (partitions, candidates); series are (minutes, candidates). A batch may also run
several traces of the same length at once (``arrivals`` (minutes, traces), ``trace_of`` naming
each candidate's): the benchmark's family members as columns of one step, each column the
numbers it gets alone (tests/unit/test_simulation_physics.py).

The rules of the world, each in one place (all parameters come from ``Scenario``; the step is
here, who owns and how an instance serves in ``ownership.py`` and ``service.py``, when an event
arrived in ``arrival_curves.py``):

- arrivals: partition ``p`` gets ``weights[p]`` of each minute's events (``Physics.__init__``);
  collect reads the last enqueued sequence number ``floor(weights * cumulative) - 1``;
  the weights shift by one partition every ``hot_spot_rotation_minutes`` (``Scenario.weights_at``);
- ownership: partition ``p`` is owned by instance ``p mod n`` (``assignment`` ``modulo``), or
  by the processor's load balancer (``balanced``: floor or ceil of P/n each, the fewest
  partitions move when the serving count changes, which ones drawn from the seed)
  (``ownership.py``: ``Ownership``, ``rebalance``);
- serving: each instance serves at most ``mu`` events a minute times the consumers' speed factor
  (``Scenario.speed_factors``: the wave and slow-down windows), shared among its partitions
  without waste, water-filling (``service.py``: ``water_fill``); a partition that is stalled or pausing for part
  of a minute gets that part of its service only (``Physics._availability``);
- provisioning: a scale-out serves after a delay (``provisioning_delay_minutes``, or drawn per
  scale-out from ``provisioning_delay_range``), a scale-in at once, and trims scale-outs in
  flight (``Physics.request`` and the start of ``Physics.advance``);
- failures: at ``instance_failures_per_day`` (drawn from the seed) an instance dies: its
  partitions stall for ``ownership_expiry_seconds``, then move to the survivors; the plan
  restores it after a provisioning delay (``Physics._fail``);
- rebalancing: every partition whose owner changes pauses for ``rebalance_pause_seconds``;
- checkpoints: consumers checkpoint ``checkpoint_delay_seconds`` behind what they processed,
  or every ``checkpoint_interval_seconds`` per partition (phases spread evenly), processing
  being even within a minute (``Physics.checkpoint_positions``);
- cost, actions and the SLO: per minute the requested and serving counts, the backlog, and the
  age of the oldest unprocessed event (``Physics.advance``), scored by ``scored_result``.

A new knob of the world is a ``Scenario`` field and a change to its rule here; every run,
looped or batched, then sees it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scaling.simulation.world.arrival_curves import Curves, arrival_minutes, arrival_moments
from scaling.simulation.world.ownership import Ownership
from scaling.simulation.world.scenario import RunResult, Scenario, scored_result
from scaling.simulation.world.service import DRAINED, dedicated_ages, rounding_needs_full_check, water_fill


class Physics:
    """The world for ``count`` candidates: ``advance()`` processes the next minute for all of
    them, ``enqueued`` and ``checkpoint_positions()`` tell what ``collect`` reads,
    ``request(rows, wanted)`` applies scale actions, ``results(...)`` scores each candidate."""

    def __init__(self, arrivals: np.ndarray, scenario: Scenario, count: int, trace_of: Sequence[int] | None = None) -> None:
        """``arrivals``: events per minute, for every candidate; or (minutes, traces) with
        ``trace_of`` giving each candidate's trace (its column of ``arrivals``)."""
        self.scenario = scenario
        self.arrivals = arrivals = np.asarray(arrivals, dtype=float)
        self.count = count
        #: Each candidate's trace (a column of ``arrivals``); ``None``: one trace for all.
        self.trace_of = None if arrivals.ndim == 1 else np.asarray(trace_of, dtype=np.int64)
        if self.trace_of is not None and (self.trace_of.shape != (count,) or not
                                          np.all((self.trace_of >= 0) & (self.trace_of < arrivals.shape[1]))):
            raise ValueError("trace_of needs one trace (a column of arrivals) per candidate")
        minutes, partitions = len(arrivals), scenario.partitions
        self.partitions = partitions
        weights = scenario.partition_weights()
        self.weights = weights
        self.rotating = scenario.hot_spot_rotation_minutes > 0 and not np.all(weights == weights[0])
        self._safe_weights = np.where(weights > 0, weights, 1.0)[:, None]
        self._uniform = bool(np.all(weights == weights[0]))
        self.cumulative = np.concatenate((np.zeros((1, *arrivals.shape[1:])), np.cumsum(arrivals, axis=0)))
        self.rate = scenario.events_per_instance_per_minute
        self.speed = scenario.speed_factors(minutes)
        self._steady_speed = bool(np.all(self.speed == 1.0))
        low, high = scenario.delay_range
        self.delay = high  # the longest a scale-out can take
        self._draws = np.random.default_rng([int(scenario.seed), 17])
        self._delays = self._draws.integers(low, high + 1, size=max(minutes, 1)) if high > low else None
        self._scale_outs = np.zeros(count, dtype=np.int64)
        whole, self._partial = divmod(scenario.checkpoint_delay_seconds / 60.0, 1.0)
        self._whole = int(whole)
        self._owners = Ownership(count, partitions, self.rate, scenario.assignment, scenario.seed)
        self.minute = 0  # the next minute to process
        self.backlog = np.zeros((partitions, count))
        self._demand = np.zeros((partitions, count))
        self._done = np.zeros((partitions, count))
        self.scratch = np.zeros((partitions, count))
        self._capped = np.zeros((partitions, count), dtype=bool)
        self._waiting = np.zeros((partitions, count), dtype=bool)
        # Seconds (from the start) until which each partition gets no service: stalled with a failed
        # owner, or pausing while it changes owner. None while nothing ever paused.
        self._unavailable_until: np.ndarray | None = None
        self._failed = np.zeros(count, dtype=np.int64)  # instances down, waiting to be restored
        self._restores: list[tuple[int, int]] = []  # (minute, candidate) when a failed instance is back
        self._failures = self._failure_plan(minutes)
        # processed after each of the last minutes, oldest first; the oldest buffer takes the next minute
        reach = scenario.checkpoint_delay_seconds + scenario.checkpoint_interval_seconds
        self._recent = [np.zeros((partitions, count)) for _ in range(int(reach // 60) + 2)]
        self._check_full = rounding_needs_full_check(partitions, self.rate)
        self.requested = np.full(count, scenario.initial_capacity, dtype=np.int64)
        self.ready = self.requested.copy()
        self._pending = np.zeros((count, self.delay + 1), dtype=np.int64)  # count ready at minute m in slot m % (delay + 1)
        self.capacity_series = np.zeros((minutes, count), dtype=np.int64)
        self.serving_series = np.zeros((minutes, count), dtype=np.int64)
        self.backlog_series = np.zeros((minutes, count))
        self.age_series = np.zeros((minutes, count))
        self.action_series = np.zeros((minutes, count), dtype=np.int32)  # actions decided at the end of each minute
        self._arrival_tables(minutes, partitions, count)

    def _arrival_tables(self, minutes: int, partitions: int, count: int) -> None:
        """What the arrivals imply, worked out once: each partition's share per minute, which
        partitions any count can serve, their cumulative curves and what collect reads."""
        scenario, arrivals = self.scenario, self.arrivals
        weights_at = scenario.weights_at(np.arange(minutes))
        # (minute, partition), or (minute, partition, trace)
        shares = arrivals[:, None] * weights_at if self.trace_of is None else arrivals[:, None, :] * weights_at[:, :, None]
        speed_limit = (self.rate * self.speed).reshape(-1, *[1] * (shares.ndim - 1))
        #: The partitions whose arrivals stay within one instance's throughput (mu times the speed
        #: factor) in every minute: the only ones any count can keep within the SLO (per trace).
        self.servable = np.all(shares <= speed_limit * (1 + 1e-9), axis=0)
        all_servable = bool(self.servable.all())
        #: Per candidate, whether its trace has a partition no count serves (its results report the
        #: servable partitions' and the avoidable SLO, as a run on that trace alone does).
        unservable = ~self.servable.reshape(partitions, -1).all(axis=0)  # per trace
        self._judged_by_partition = np.broadcast_to(unservable if self.trace_of is None else unservable[self.trace_of], (count,))
        #: The oldest event's age over the servable partitions (docs/benchmark-contract.md's ``hot`` scenario);
        #: only when some partition is not servable.
        self.servable_age_series = None if all_servable else np.zeros((minutes, count))
        #: Per minute and partition, whether an instance of its own would have kept it within the
        #: SLO (``dedicated_ages``): the most any count can do for it. Only when some partition is
        #: not servable; with it, the oldest event's age over those partitions in each minute.
        self._within_reach = None if all_servable else (self._dedicated_ages(shares) <= scenario.slo_minutes)
        self.reachable_age_series = None if all_servable else np.zeros((minutes, count))
        # Per minute, (partition, 1) with one trace, else (partition, trace): ``_by_column`` gives each candidate's.
        self._arrival_shares = shares[:, :, None] if self.trace_of is None else shares
        #: Per partition, events arrived by the start of each minute (minute + 1, partition[, trace]).
        self.partition_cumulative = np.concatenate((np.zeros((1, *shares.shape[1:])), np.cumsum(shares, axis=0)))
        if self.rotating:  # for ``_oldest_arrival``: each partition's curve (of each trace) in a row
            self._partition_curves = Curves(self.partition_cumulative.reshape(minutes + 1, -1).T)
        elif self.trace_of is not None:  # each trace's curve in a row
            self._trace_curves = Curves(self.cumulative.T)
        #: What collect reads: last enqueued sequence number + 1 per partition, per minute
        #: (minute, partition, 1), or (minute, partition, trace): ``enqueued_at`` gives each candidate's.
        enqueued = np.floor(self.partition_cumulative + 1e-6)
        self.enqueued = enqueued[:, :, None] if self.trace_of is None else enqueued

    def _by_column(self, table: np.ndarray) -> np.ndarray:
        """A (partition, 1) or (partition, trace) table as each candidate sees it: (partition, 1)
        for one trace (it broadcasts), else (partition, candidate)."""
        return table if self.trace_of is None else table[:, self.trace_of]

    def enqueued_at(self, minute: int) -> np.ndarray:
        """What collect reads at the start of ``minute`` (last enqueued sequence number + 1), per
        partition and candidate: (partition, 1) for one trace, else (partition, candidate)."""
        return self._by_column(self.enqueued[minute])

    def arrived_by(self, minute: int) -> np.ndarray:
        """Events arrived (whole, as enqueued) in all partitions by ``minute``, per candidate,
        summed over the partitions in one fixed order."""
        totals = np.ascontiguousarray(self.enqueued[minute].T).sum(axis=1)
        return np.broadcast_to(totals[0], (self.count,)) if self.trace_of is None else totals[self.trace_of]

    def _dedicated_ages(self, shares: np.ndarray) -> np.ndarray:
        """``dedicated_ages`` of each trace: (minute, partition[, trace])."""
        service = self.rate * self.speed
        if self.trace_of is None:
            return dedicated_ages(shares, service)
        return np.stack([dedicated_ages(shares[:, :, trace], service) for trace in range(shares.shape[2])], axis=2)

    def _failure_plan(self, minutes: int) -> list[tuple[int, float]]:
        """(minute, which instance as a fraction of the serving count) of each failure, drawn once
        from the seed for every candidate alike."""
        per_day = self.scenario.instance_failures_per_day
        if per_day <= 0:
            return []
        draws = np.random.default_rng([int(self.scenario.seed), 23])
        plan, moment = [], 0.0
        while True:
            moment += draws.exponential(1440.0 / per_day)
            if moment >= minutes:
                return plan
            plan.append((int(moment), float(draws.random())))

    @property
    def done(self) -> bool:
        return self.minute >= len(self.arrivals)

    @property
    def processed(self) -> np.ndarray:
        """Events processed so far, per partition and candidate."""
        return self._recent[-1]

    def owners(self, column: int = 0) -> np.ndarray:
        """Per partition, the instance that owns it as collect reads the ownership blobs (-1: no
        live owner: its instance failed and the survivors have not taken it over yet)."""
        owners = self._owners.owners_of(column)
        if self._unavailable_until is not None:
            stalled = self._stalled_until[:, column] > 60.0 * self.minute
            owners = np.where(stalled, -1, owners)
        return owners

    def ownership_snapshot(self) -> np.ndarray:
        """(partitions, candidates): each partition's owning instance index as collect would
        compare it between samples (-1: no live owner). Indices stand for names: instances that
        stay keep theirs (a failed instance's partitions, which do move, aside)."""
        local = self._owners.local.copy()
        if not self._owners.serving.all():
            local[:, self._owners.serving == 0] = -1
        if self._unavailable_until is not None:
            local[self._stalled_until > 60.0 * self.minute] = -1
        return local

    def owner_names(self, snapshot: np.ndarray | None = None) -> np.ndarray:
        """(partitions, candidates): what ``owners`` gives each candidate, for all at once: the
        owning instance's name (-1: no live owner), from ``ownership_snapshot`` (taken now unless
        given). Unlike its indices, a name is never reused: an instance replaced within a minute
        (the only one failed, a new one started) shows as a change, as collect sees it."""
        local = self.ownership_snapshot() if snapshot is None else snapshot
        if not self._owners.balanced:  # (names are the indices)
            return local
        names = np.take_along_axis(self._owners.name_table, np.maximum(local, 0), axis=0)
        return np.where(local >= 0, names, -1)

    def advance(self) -> None:
        """Process the next minute for every candidate and record its series."""
        minute = self.minute
        slot = minute % (self.delay + 1)
        arriving = self._pending[:, slot]
        if arriving.any():
            self.ready = np.where(arriving > 0, np.maximum(self.ready, arriving), self.ready)
            self._pending[:, slot] = 0
        while self._restores and self._restores[0][0] <= minute:
            self._failed[self._restores.pop(0)[1]] -= 1
        while self._failures and self._failures[0][0] <= minute:
            self._fail(*self._failures.pop(0))
        serving = np.maximum(np.minimum(self.ready, self.requested) - self._failed, 0)
        changed = self._owners.update(serving, minute)
        if changed.size and self.scenario.rebalance_pause_seconds > 0:
            self._pause(changed, self._owners.moved[:, changed], 60.0 * minute + self.scenario.rebalance_pause_seconds)
        demand, backlog = self._demand, self.backlog
        np.add(backlog, self._by_column(self._arrival_shares[minute]), out=demand)
        speed = float(self.speed[minute])
        availability = None if self._unavailable_until is None else self._availability(minute)
        if availability is None:
            served = water_fill(demand, self._owners, self.rate * speed, self._done, self.scratch, self._capped,
                                self._check_full, speed)
        else:
            # A partition out for the whole minute asks nothing (its owner serves the others);
            # one out for part of it gets that part of what its owner gives it.
            asking = np.where(availability > 0, demand, 0.0)
            served = water_fill(asking, self._owners, self.rate * speed, self._done, self.scratch, self._capped,
                                self._check_full, speed)
            served *= availability
        if not serving.all():
            served[:, serving == 0] = 0.0
        np.subtract(demand, served, out=backlog)
        recent = self._recent
        processed = np.add(recent[-1], served, out=recent[0])
        self._recent = [*recent[1:], processed]
        self.minute = now = minute + 1
        waiting = np.greater(backlog, DRAINED, out=self._waiting)
        if waiting.any():
            self.age_series[minute] = now - self._oldest_arrival(waiting, processed)
            if self.servable_age_series is not None:
                servable = waiting & self._by_column(self.servable.reshape(self.partitions, -1))
                if servable.any():
                    self.servable_age_series[minute] = now - self._oldest_arrival(servable, processed)
                reachable = waiting & self._by_column(self._within_reach[minute].reshape(self.partitions, -1))
                if reachable.any():
                    self.reachable_age_series[minute] = now - self._oldest_arrival(reachable, processed)
        self.capacity_series[minute] = self.requested
        self.serving_series[minute] = serving
        self.backlog_series[minute] = self.total_backlog()

    def _oldest_arrival(self, waiting: np.ndarray, processed: np.ndarray) -> np.ndarray:
        """Per candidate, when its oldest unprocessed event arrived (minutes; ``now`` where none waits)."""
        now = self.minute
        if not self.rotating:
            # The oldest unprocessed event is in the waiting partition whose processed position
            # (in events of the whole hub) is smallest: arrival time rises with the position.
            # Division by one positive weight keeps the order, so uniform weights divide the minimum.
            if self._uniform:
                position = np.where(waiting, processed, np.inf).min(axis=0) / self.weights[0]
            else:
                position = np.where(waiting, processed / self._safe_weights, np.inf).min(axis=0)
            some = np.isfinite(position)
            arrived = np.full(self.count, float(now))
            if self.trace_of is None:
                arrived[some] = arrival_minutes(self.cumulative, position[some])
            else:
                arrived[some] = arrival_moments(self._trace_curves, self.trace_of[some], position[some],
                                                self._trace_curves.length - 1)
            return arrived
        # Shares move: each partition (of each trace) has its own arrival curve, searched together.
        partitions, columns = np.nonzero(waiting)
        rows = partitions if self.trace_of is None else partitions * self.arrivals.shape[1] + self.trace_of[columns]
        times = arrival_moments(self._partition_curves, rows, processed[partitions, columns], now)  # up to now
        arrived = np.full(self.count, float(now))
        np.minimum.at(arrived, columns, times)
        return arrived

    def _fail(self, minute: int, which: float) -> None:
        """An instance of every candidate that has one serving dies now (see the module docstring)."""
        scenario = self.scenario
        serving = self._owners.serving
        for column in np.flatnonzero(serving > 0):
            orphans = self._owners.fail(column, int(which * serving[column]), minute)
            self._failed[column] += 1
            stall_end = 60.0 * minute + scenario.ownership_expiry_seconds
            self._pause(np.array([column]), orphans[:, None], stall_end, stalled=True)
            self._pause(np.array([column]), self._owners.moved[:, [column]],
                        stall_end if orphans.any() else 60.0 * minute, extra=scenario.rebalance_pause_seconds)
            restore = minute + self._next_delay(column)
            self._restores.append((restore, column))
        self._restores.sort()

    def _pause(self, columns: np.ndarray, partitions: np.ndarray, until: float, *, extra: float = 0.0,
               stalled: bool = False) -> None:
        """Partitions (a mask per column of ``columns``) get no service until ``until + extra``
        seconds; ``stalled`` ones also show no live owner meanwhile."""
        if self._unavailable_until is None:
            self._unavailable_until = np.zeros((self.partitions, self.count))
            self._stalled_until = np.zeros((self.partitions, self.count))
        block = self._unavailable_until[:, columns]
        self._unavailable_until[:, columns] = np.where(partitions, np.maximum(block, until + extra), block)
        if stalled:
            block = self._stalled_until[:, columns]
            self._stalled_until[:, columns] = np.where(partitions, np.maximum(block, until), block)

    def _availability(self, minute: int) -> np.ndarray | None:
        """Per partition and candidate, the part of this minute it can be served (``None``: all of it)."""
        out = np.clip(self._unavailable_until - 60.0 * minute, 0.0, 60.0)
        if not out.any():
            return None
        return 1.0 - out / 60.0

    def _next_delay(self, column: int) -> int:
        """The provisioning delay of the candidate's next scale-out (or restore): the k-th of
        every candidate takes the k-th draw, so a candidate does not depend on its batch."""
        if self._delays is None:
            return self.delay
        index = int(self._scale_outs[column]) % len(self._delays)
        self._scale_outs[column] += 1
        return int(self._delays[index])

    def total_backlog(self) -> np.ndarray:
        """Events waiting per candidate, each summed over its partitions in one fixed order (so a
        candidate's numbers do not depend on the batch it runs in)."""
        return np.ascontiguousarray(self.backlog.T).sum(axis=1)

    def busy_time_rates(self) -> tuple[np.ndarray, np.ndarray]:
        """Per candidate, (events processed in the last minute, the true processing rate per
        instance as busy time measures it): an instance is busy while it has backlog, so busy
        ``served / (mu x speed)`` of the minute; the busiest instance's busy fraction divides the
        processed rate (a stream processor's default aggregation), per owning instance. ``nan``
        when nothing was processed. What a rate-based autoscaler reads from its consumers' own metrics."""
        minute = self.minute - 1
        served = self._recent[-1] - self._recent[-2]
        owners = self._owners
        per_instance = np.bincount(owners.owner.ravel(), weights=served.ravel(), minlength=owners.owner.size)
        busiest = per_instance.reshape(self.partitions, self.count).max(axis=0)
        processed = np.ascontiguousarray(served.T).sum(axis=1)
        instances = np.minimum(owners.serving, self.partitions)
        rate = self.rate * float(self.speed[max(minute, 0)])
        working = (busiest > 0) & (instances > 0)
        true_rate = np.full(self.count, np.nan)
        true_rate[working] = processed[working] / instances[working] / (busiest[working] / rate)
        return processed, true_rate

    def checkpoint_positions(self, out: np.ndarray) -> np.ndarray:
        """Per partition and candidate, the checkpoint + 1 that collect reads now (0 before the
        first checkpoint), written into ``out``: ``checkpoint_delay_seconds`` behind what was
        processed, and with ``checkpoint_interval_seconds`` at each partition's last checkpoint
        moment (partition ``p`` checkpoints at ``p * interval / P`` past each multiple of the
        interval), interpolating within a minute (processing is even within a minute)."""
        interval = self.scenario.checkpoint_interval_seconds
        if interval <= 0:
            recent, whole, partial = self._recent, self._whole, self._partial
            latest = recent[-1 - whole]
            if partial:  # latest - partial * (latest - earlier)
                np.subtract(latest, recent[-2 - whole], out=out)
                np.multiply(partial, out, out=out)
                np.subtract(latest, out, out=out)
                np.add(out, 1e-6, out=out)
            else:
                np.add(latest, 1e-6, out=out)
            return np.floor(out, out=out)
        moment = 60.0 * self.minute
        phase = np.arange(self.partitions) * interval / self.partitions
        behind = self.scenario.checkpoint_delay_seconds + np.mod(moment - phase, interval)  # seconds, per partition
        behind = np.minimum(behind, moment)
        whole, partial = np.divmod(behind / 60.0, 1.0)
        whole = whole.astype(np.int64)
        history = np.stack(self._recent)  # (buffers, partitions, candidates), oldest first
        rows = np.arange(self.partitions)
        latest = history[len(self._recent) - 1 - whole, rows]
        earlier = history[np.maximum(len(self._recent) - 2 - whole, 0), rows]
        out[...] = np.floor(latest - partial[:, None] * (latest - earlier) + 1e-6)
        return out

    def request(self, rows: np.ndarray, wanted: np.ndarray) -> None:
        """Scale actions decided now (after minute ``self.minute - 1``) for candidates ``rows``,
        each wanting a count other than its requested one: a scale-out serves after the
        provisioning delay, a scale-in at once and trims scale-outs in flight."""
        now, requested = self.minute, self.requested
        rising = wanted > requested[rows]
        if rising.any():
            if self._delays is None:
                self._pending[rows[rising], (now + self.delay) % (self.delay + 1)] = wanted[rising]
            else:
                for row, count in zip(rows[rising], wanted[rising], strict=True):
                    slot = (now + self._next_delay(row)) % (self.delay + 1)
                    self._pending[row, slot] = max(self._pending[row, slot], count)
        if not rising.all():
            falling, lower = rows[~rising], wanted[~rising]
            self.ready[falling] = np.minimum(self.ready[falling], lower)
            self._pending[falling] = np.minimum(self._pending[falling], lower[:, None])
        requested[rows] = wanted
        if now:
            self.action_series[now - 1, rows] += 1

    def results(self, *, algorithm: str, knobs: list[str], score_from: int | Sequence[int]) -> list[RunResult]:
        """Each candidate's run over the minutes processed so far, scored from ``score_from`` (one
        minute for all, or one per candidate); checks that no event was lost."""
        minutes = self.minute
        final_backlog = self.total_backlog()
        arrived = self.cumulative[minutes] if self.trace_of is None else self.cumulative[minutes, self.trace_of]
        lost = arrived - np.ascontiguousarray(self.processed.T).sum(axis=1) - final_backlog
        if (np.abs(lost) > 1e-6 * np.maximum(arrived, 1.0)).any():
            raise AssertionError(f"events not conserved: {lost}")
        capacity_series, serving_series = self.capacity_series[:minutes].T.copy(), self.serving_series[:minutes].T.copy()
        backlog_series, age_series = self.backlog_series[:minutes].T.copy(), self.age_series[:minutes].T.copy()
        servable_ages = self.servable_age_series[:minutes].T.copy() if self.servable_age_series is not None else None
        reachable_ages = self.reachable_age_series[:minutes].T.copy() if self.reachable_age_series is not None else None
        starts = [int(start) for start in np.broadcast_to(np.asarray(score_from, dtype=np.int64), (self.count,))]
        return [
            scored_result(self.scenario, algorithm=algorithm, knob=knobs[column], score_from=starts[column],
                          arrivals=self.arrivals[:minutes] if self.trace_of is None else self.arrivals[:minutes, self.trace_of[column]],
                          capacity=capacity_series[column],
                          serving=serving_series[column], backlog=backlog_series[column], age=age_series[column],
                          scale_actions=int(self.action_series[starts[column]:minutes, column].sum()),
                          final_backlog=float(final_backlog[column]),
                          servable_age=servable_ages[column] if self._judged_by_partition[column] else None,
                          reachable_age=reachable_ages[column] if self._judged_by_partition[column] else None)
            for column in range(self.count)
        ]
