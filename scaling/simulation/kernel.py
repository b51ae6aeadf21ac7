"""The physics of the simulated world, written once: one minute step over candidates x partitions.

Every run of the simulator goes through ``Kernel``: ``World`` (``simulate``, the demo's
simulated hub, the peers) is a batch of one driven by an autoscaler a minute at a time, and the
batched simulators (``batched.py`` for threshold rules, ``batched_slo.py`` for the SLO mode)
are batches of many candidates that share the arrivals but each have their own capacity.
Arrays are (partitions, candidates); series are (minutes, candidates).

The rules of the world, each in one place (all parameters come from ``Scenario``):

- arrivals: partition ``p`` gets ``weights[p]`` of each minute's events (``Kernel.__init__``);
  collect reads the last enqueued sequence number ``floor(weights * cumulative) - 1``;
- ownership: partition ``p`` is owned by instance ``p mod n`` (``Ownership``);
- serving: each instance serves at most ``mu`` events a minute, shared among its partitions
  without waste, water-filling (``water_fill``);
- provisioning: a scale-out serves after ``provisioning_delay_minutes``, a scale-in at once,
  and trims scale-outs in flight (``Kernel.request`` and the start of ``Kernel.advance``);
- checkpoints: consumers checkpoint ``checkpoint_delay_seconds`` behind what they processed,
  processing being even within a minute (``Kernel.checkpoint_positions``);
- cost, actions and the SLO: per minute the requested and serving counts, the backlog, and the
  age of the oldest unprocessed event (``Kernel.advance``), scored by ``scored_result``.

A new knob of the world is a ``Scenario`` field and a change to its rule here; every run,
looped or batched, then sees it.
"""

from __future__ import annotations

import numpy as np

from scaling.simulation.scenario import RunResult, Scenario, scored_result

#: Backlog (events) below which a partition counts as drained; the fluid model leaves fractions.
DRAINED = 0.5


def arrival_minutes(cumulative: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """When the event at each (fractional) position of the cumulative arrivals curve arrived, in
    minutes: arrivals are spread evenly within a minute."""
    index = np.clip(np.searchsorted(cumulative, positions, side="right"), 1, len(cumulative) - 1)
    low, high = cumulative[index - 1], cumulative[index]
    return index - 1 + np.where(high > low, (positions - low) / np.maximum(high - low, 1e-12), 0.0)


class Ownership:
    """Who owns which partition for each candidate's serving count (``p mod n``), kept up to date
    as serving counts change (rarely). Arrays are (partitions, candidates): ``local`` the owning
    instance, ``owner`` its slot in the flattened batch (``i * C + c``), ``share`` each
    partition's first-round share, ``rate / partitions its owner has``."""

    def __init__(self, count: int, partitions: int, rate: float) -> None:
        index = np.arange(partitions)
        sizes = np.arange(1, partitions + 1)
        self.partitions = partitions
        self.by_count = index[:, None] % sizes[None, :]  # column n - 1: owners with n instances
        owned = np.stack([np.bincount(column, minlength=partitions)[column] for column in self.by_count.T], axis=1)
        self.share_by_count = rate / owned  # an owner's rate split evenly among its partitions
        self.count = count
        self.serving = np.zeros(count, dtype=np.int64)
        self.local = np.zeros((partitions, count), dtype=np.int64)
        self.owner = np.zeros((partitions, count), dtype=np.int64)
        self.share = np.zeros((partitions, count))

    def update(self, serving: np.ndarray) -> None:
        changed = np.flatnonzero(serving != self.serving)
        if changed.size:
            column = np.minimum(serving[changed], self.partitions) - 1  # n >= P: one partition each
            self.local[:, changed] = self.by_count[:, column]
            self.owner[:, changed] = self.by_count[:, column] * self.count + changed[None, :]
            self.share[:, changed] = self.share_by_count[:, column]
            self.serving = serving.copy()


def water_fill(demand: np.ndarray, owners: Ownership, rate: float, done: np.ndarray, scratch: np.ndarray,
               capped: np.ndarray, check_full: bool) -> np.ndarray:
    """Events each partition (row) of each candidate (column) gets this minute: every instance
    shares ``rate`` among the partitions it owns, in rounds, a quiet partition's unused share
    going to the busy ones, until every partition is served or its owner is out of room.

    The first round runs on the whole batch: for a candidate with an instance per partition it
    is all there is. Only candidates with a partition capped by its share take further rounds,
    together, owner slots flattened (their j-th column's instance i is slot ``i * k + j``);
    those that settle leave, so each sees exactly the rounds it would see alone. A candidate
    with every partition capped has no room left (each owner gave ``rate / k`` to each of its
    ``k`` partitions; the rounding is far below the 1e-9 the rounds stop at) and is done after
    the first round unless ``check_full`` asks to check that too.
    ``done``, ``scratch`` and ``capped`` are (partitions, candidates) buffers; the result is ``done``.
    """
    partitions, count = demand.shape
    owner = owners.owner
    if demand.min() > 0:
        np.minimum(demand, owners.share, out=done)
    else:
        active = demand > 0
        sharing = np.bincount(owner[active], minlength=owner.size)
        share = np.where(sharing > 0, rate / np.maximum(sharing, 1), 0.0)
        done[...] = np.where(active, np.minimum(demand, share[owner]), 0.0)
    np.greater(np.subtract(demand, done, out=scratch), 1e-9, out=capped)  # (implies demand > 0, so active)
    some = capped.any(axis=0)
    if not check_full:
        some &= ~capped.all(axis=0)
    columns = np.flatnonzero(some)
    if not columns.size:
        return done
    served = done
    wanted, done, local = demand[:, columns], done[:, columns], owners.local[:, columns]
    owner = local * len(columns) + np.arange(len(columns))[None, :]
    room = np.maximum(float(rate) - np.bincount(owner.ravel(), weights=done.ravel(), minlength=owner.size), 0.0)
    active = capped[:, columns] & (room[owner] > 1e-9)
    while True:
        going = active.any(axis=0)
        if not going.all():
            finished = ~going
            served[:, columns[finished]] = done[:, finished]
            if not going.any():
                return served
            room = room.reshape(partitions, len(columns))[:, going].ravel()
            columns, wanted, done, active, local = columns[going], wanted[:, going], done[:, going], active[:, going], local[:, going]
            owner = local * len(columns) + np.arange(len(columns))[None, :]
        size = owner.size
        sharing = np.bincount(owner[active], minlength=size)
        share = np.where(sharing > 0, room / np.maximum(sharing, 1), 0.0)
        give = np.where(active, np.minimum(wanted - done, share[owner]), 0.0)
        done = done + give
        room = np.maximum(room - np.bincount(owner.ravel(), weights=give.ravel(), minlength=size), 0.0)
        active &= (wanted - done > 1e-9) & (room[owner] > 1e-9)


def rounding_needs_full_check(partitions: int, rate: float) -> bool:
    """Whether rounding in a full owner's room could reach the 1e-9 ``water_fill`` stops at."""
    return partitions * rate * 1e-15 >= 1e-9


def serve(demand: np.ndarray, instances: int | np.ndarray, rate: float) -> np.ndarray:
    """``water_fill`` on its own: ``demand`` per partition (or partitions x candidates) served by
    ``instances`` (one count, or one per candidate)."""
    demand = np.asarray(demand, dtype=float)
    table = demand.reshape(len(demand), -1)
    partitions, count = table.shape
    owners = Ownership(count, partitions, rate)
    owners.update(np.broadcast_to(np.asarray(instances, dtype=np.int64), (count,)))
    buffers = np.zeros_like(table), np.zeros_like(table), np.zeros(table.shape, dtype=bool)
    served = water_fill(table, owners, rate, *buffers, rounding_needs_full_check(partitions, rate))
    return served.reshape(demand.shape)


class Kernel:
    """The world for ``count`` candidates: ``advance()`` processes the next minute for all of
    them, ``enqueued`` and ``checkpoint_positions()`` tell what ``collect`` reads,
    ``request(rows, wanted)`` applies scale actions, ``results(...)`` scores each candidate."""

    def __init__(self, arrivals: np.ndarray, scenario: Scenario, count: int) -> None:
        self.scenario = scenario
        self.arrivals = arrivals = np.asarray(arrivals, dtype=float)
        self.count = count
        minutes, partitions = len(arrivals), scenario.partitions
        self.partitions = partitions
        weights = scenario.partition_weights()
        self.weights = weights
        self._safe_weights = np.where(weights > 0, weights, 1.0)[:, None]
        self._uniform = bool(np.all(weights == weights[0]))
        self.cumulative = cumulative = np.concatenate(([0.0], np.cumsum(arrivals)))
        self.rate = scenario.events_per_instance_per_minute
        self.delay = scenario.provisioning_delay_minutes
        whole, self._partial = divmod(scenario.checkpoint_delay_seconds / 60.0, 1.0)
        self._whole = int(whole)
        self._owners = Ownership(count, partitions, self.rate)
        self.minute = 0  # the next minute to process
        self.backlog = np.zeros((partitions, count))
        self._demand = np.zeros((partitions, count))
        self._done = np.zeros((partitions, count))
        self.scratch = np.zeros((partitions, count))
        self._capped = np.zeros((partitions, count), dtype=bool)
        self._waiting = np.zeros((partitions, count), dtype=bool)
        # processed after each of the last minutes, oldest first; the oldest buffer takes the next minute
        self._recent = [np.zeros((partitions, count)) for _ in range(self._whole + 2)]
        self._check_full = rounding_needs_full_check(partitions, self.rate)
        self.requested = np.full(count, scenario.initial_capacity, dtype=np.int64)
        self.ready = self.requested.copy()
        self._pending = np.zeros((count, self.delay + 1), dtype=np.int64)  # count ready at minute m in slot m % (delay + 1)
        self.capacity_series = np.zeros((minutes, count), dtype=np.int64)
        self.serving_series = np.zeros((minutes, count), dtype=np.int64)
        self.backlog_series = np.zeros((minutes, count))
        self.age_series = np.zeros((minutes, count))
        self.action_series = np.zeros((minutes, count), dtype=np.int32)  # actions decided at the end of each minute
        self._arrival_shares = (arrivals[:, None] * weights[None, :])[:, :, None]  # (minute, partition, 1)
        #: What collect reads: last enqueued sequence number + 1 per partition, per minute (minute, partition, 1).
        self.enqueued = np.floor(weights[None, :] * cumulative[:, None] + 1e-6)[:, :, None]

    @property
    def done(self) -> bool:
        return self.minute >= len(self.arrivals)

    @property
    def processed(self) -> np.ndarray:
        """Events processed so far, per partition and candidate."""
        return self._recent[-1]

    def advance(self) -> None:
        """Process the next minute for every candidate and record its series."""
        minute = self.minute
        slot = minute % (self.delay + 1)
        arriving = self._pending[:, slot]
        if arriving.any():
            self.ready = np.where(arriving > 0, np.maximum(self.ready, arriving), self.ready)
            self._pending[:, slot] = 0
        serving = np.minimum(self.ready, self.requested)
        self._owners.update(serving)
        demand, backlog = self._demand, self.backlog
        np.add(backlog, self._arrival_shares[minute], out=demand)
        served = water_fill(demand, self._owners, self.rate, self._done, self.scratch, self._capped, self._check_full)
        np.subtract(demand, served, out=backlog)
        recent = self._recent
        processed = np.add(recent[-1], served, out=recent[0])
        self._recent = [*recent[1:], processed]
        self.minute = now = minute + 1
        waiting = np.greater(backlog, DRAINED, out=self._waiting)
        if waiting.any():
            # The oldest unprocessed event of a candidate is in the waiting partition whose
            # processed position (in events of the whole hub) is smallest: arrival time rises
            # with the position. Division by one positive weight keeps the order, so uniform
            # weights divide the minimum.
            if self._uniform:
                position = np.where(waiting, processed, np.inf).min(axis=0) / self.weights[0]
            else:
                position = np.where(waiting, processed / self._safe_weights, np.inf).min(axis=0)
            some = np.isfinite(position)
            self.age_series[minute, some] = now - arrival_minutes(self.cumulative, position[some])
        self.capacity_series[minute] = self.requested
        self.serving_series[minute] = serving
        self.backlog_series[minute] = self.total_backlog()

    def total_backlog(self) -> np.ndarray:
        """Events waiting per candidate, each summed over its partitions in one fixed order (so a
        candidate's numbers do not depend on the batch it runs in)."""
        return np.ascontiguousarray(self.backlog.T).sum(axis=1)

    def checkpoint_positions(self, out: np.ndarray) -> np.ndarray:
        """Per partition and candidate, the checkpoint + 1 that collect reads now (0 before the
        first checkpoint), written into ``out``: ``checkpoint_delay_seconds`` behind what was
        processed, interpolating within a minute."""
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

    def request(self, rows: np.ndarray, wanted: np.ndarray) -> None:
        """Scale actions decided now (after minute ``self.minute - 1``) for candidates ``rows``,
        each wanting a count other than its requested one: a scale-out serves after the
        provisioning delay, a scale-in at once and trims scale-outs in flight."""
        now, requested = self.minute, self.requested
        rising = wanted > requested[rows]
        if rising.any():
            self._pending[rows[rising], (now + self.delay) % (self.delay + 1)] = wanted[rising]
        if not rising.all():
            falling, lower = rows[~rising], wanted[~rising]
            self.ready[falling] = np.minimum(self.ready[falling], lower)
            self._pending[falling] = np.minimum(self._pending[falling], lower[:, None])
        requested[rows] = wanted
        if now:
            self.action_series[now - 1, rows] += 1

    def results(self, *, algorithm: str, knobs: list[str], score_from: int) -> list[RunResult]:
        """Each candidate's run over the minutes processed so far, scored from ``score_from``;
        checks that no event was lost."""
        minutes = self.minute
        final_backlog = self.total_backlog()
        arrived = self.cumulative[minutes]
        lost = arrived - np.ascontiguousarray(self.processed.T).sum(axis=1) - final_backlog
        if (np.abs(lost) > 1e-6 * max(arrived, 1.0)).any():
            raise AssertionError(f"events not conserved: {lost}")
        capacity_series, serving_series = self.capacity_series[:minutes].T.copy(), self.serving_series[:minutes].T.copy()
        backlog_series, age_series = self.backlog_series[:minutes].T.copy(), self.age_series[:minutes].T.copy()
        actions = self.action_series[score_from:minutes].sum(axis=0)
        return [
            scored_result(self.scenario, algorithm=algorithm, knob=knobs[column], score_from=score_from,
                          arrivals=self.arrivals[:minutes], capacity=capacity_series[column],
                          serving=serving_series[column], backlog=backlog_series[column], age=age_series[column],
                          scale_actions=int(actions[column]), final_backlog=float(final_backlog[column]))
            for column in range(self.count)
        ]
