"""The simulated world for many candidates at once: ``World`` with the candidate as an array dimension.

Every candidate sees the same arrivals but its own capacity, so the hub's sequence numbers are
shared while backlog, processed positions and checkpoints are (partitions, candidates) arrays.
It mirrors ``World.advance``/``observe``/``request`` operation for operation where floating
point matters (``serve``'s water-filling, the provisioning delay, the checkpoint delay, the
integer sequence numbers collect reads), so that the batched simulators built on it
(``batched.py`` for threshold rules, ``batched_slo.py`` for the SLO mode) reproduce the
engine-driven ``simulate`` exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from scaling.domain.policy import TargetPolicy
from scaling.simulation.world import DRAINED, RunResult, Scenario, arrival_minutes, scored_result


def checked_batch(targets: Sequence[TargetPolicy], knobs: Sequence[str] | None, supports: Callable[[TargetPolicy], bool],
                  simulator: str) -> tuple[list[TargetPolicy], list[str]]:
    """The batch's targets and knobs as lists; a ``ValueError`` naming the first target the
    simulator cannot reproduce."""
    targets = list(targets)
    unsupported = [target.name for target in targets if not supports(target)]
    if unsupported:
        raise ValueError(f"{simulator} cannot reproduce the engine for {unsupported[0]!r} (see supports())")
    return targets, list(knobs) if knobs is not None else [""] * len(targets)


class _Owners:
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
        self.share_by_count = rate / owned  # the same division ``serve`` makes in its first round
        self.columns = np.arange(count)
        self.serving = np.zeros(count, dtype=np.int64)
        self.local = np.zeros((partitions, count), dtype=np.int64)
        self.owner = np.zeros((partitions, count), dtype=np.int64)
        self.share = np.zeros((partitions, count))

    def update(self, serving: np.ndarray) -> None:
        changed = np.flatnonzero(serving != self.serving)
        if changed.size:
            column = np.minimum(serving[changed], self.partitions) - 1  # n >= P: one partition each
            self.local[:, changed] = self.by_count[:, column]
            self.owner[:, changed] = self.by_count[:, column] * len(self.columns) + changed[None, :]
            self.share[:, changed] = self.share_by_count[:, column]
            self.serving = serving.copy()


def _serve(demand: np.ndarray, owners: _Owners, rate: float, done: np.ndarray, scratch: np.ndarray,
           capped: np.ndarray, check_full: bool) -> np.ndarray:
    """``world.serve`` for every candidate (column) at once, with the same floating-point operations.

    The first round runs on the whole batch: for a candidate with an instance per partition it
    gives ``minimum(demand, rate)``, which is all ``serve`` does for it, and such a candidate
    never goes on. Only candidates with a partition capped by its share take further rounds,
    together, owner slots flattened (their j-th column's instance i is slot ``i * k + j``);
    those that settle leave, so each sees exactly the rounds ``serve`` would run for it alone.
    A candidate with every partition capped has no room left (each owner gave ``rate / k`` to
    each of its ``k`` partitions; the rounding is far below the 1e-9 ``serve`` stops at) and is
    done after the first round unless ``check_full`` asks to check that too.
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


class BatchWorld:
    """``World`` for ``count`` candidates: ``advance(minute)`` processes a minute for all of them,
    ``checkpoint_positions()`` and ``enqueued`` tell what ``collect`` reads, ``request(rows,
    wanted, now)`` applies scale actions, ``results(...)`` scores each candidate's run."""

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
        self._owners = _Owners(count, partitions, self.rate)
        self.backlog = np.zeros((partitions, count))
        self._demand = np.zeros((partitions, count))
        self._done = np.zeros((partitions, count))
        self.scratch = np.zeros((partitions, count))
        self._capped = np.zeros((partitions, count), dtype=bool)
        self._waiting = np.zeros((partitions, count), dtype=bool)
        # processed after each of the last minutes, oldest first; the oldest buffer takes the next minute
        self._recent = [np.zeros((partitions, count)) for _ in range(self._whole + 2)]
        # Rounding in a full owner's room stays below serve's 1e-9 cut unless rates are huge.
        self._check_full = partitions * self.rate * 1e-15 >= 1e-9
        self.requested = np.full(count, scenario.initial_capacity, dtype=np.int64)
        self.ready = self.requested.copy()
        self._pending = np.zeros((count, self.delay + 1), dtype=np.int64)  # count ready at minute m in slot m % (delay + 1)
        self.capacity_series = np.zeros((minutes, count), dtype=np.int64)
        self.serving_series = np.zeros((minutes, count), dtype=np.int64)
        self.backlog_series = np.zeros((minutes, count))
        self.age_series = np.zeros((minutes, count))
        self.actions = np.zeros(count, dtype=np.int64)
        self._arrival_shares = (arrivals[:, None] * weights[None, :])[:, :, None]  # (minute, partition, 1)
        #: What collect reads: last enqueued sequence number + 1 per partition, per minute (minute, partition, 1).
        self.enqueued = np.floor(weights[None, :] * cumulative[:, None] + 1e-6)[:, :, None]

    def advance(self, minute: int) -> None:
        """``World.advance`` for every candidate: serve minute ``minute``, record its series."""
        slot = minute % (self.delay + 1)
        arriving = self._pending[:, slot]
        if arriving.any():
            self.ready = np.where(arriving > 0, np.maximum(self.ready, arriving), self.ready)
            self._pending[:, slot] = 0
        serving = np.minimum(self.ready, self.requested)
        self._owners.update(serving)
        demand, backlog = self._demand, self.backlog
        np.add(backlog, self._arrival_shares[minute], out=demand)
        served = _serve(demand, self._owners, self.rate, self._done, self.scratch, self._capped, self._check_full)
        np.subtract(demand, served, out=backlog)
        recent = self._recent
        processed = np.add(recent[-1], served, out=recent[0])
        self._recent = [*recent[1:], processed]
        now = minute + 1
        waiting = np.greater(backlog, DRAINED, out=self._waiting)
        if waiting.any():
            # The oldest unprocessed event: ``advance`` takes the largest age over waiting
            # partitions; the age falls as the position rises, so the smallest position gives it.
            # Division by one positive weight keeps the order, so uniform weights divide the minimum.
            if self._uniform:
                position = np.where(waiting, processed, np.inf).min(axis=0) / self.weights[0]
            else:
                position = np.where(waiting, processed / self._safe_weights, np.inf).min(axis=0)
            some = np.isfinite(position)
            self.age_series[minute, some] = now - arrival_minutes(self.cumulative, position[some])
        self.capacity_series[minute] = self.requested
        self.serving_series[minute] = serving
        self.backlog_series[minute] = backlog.sum(axis=0)

    def checkpoint_positions(self, out: np.ndarray) -> np.ndarray:
        """Per partition and candidate, the checkpoint + 1 that collect reads now (``World.checkpoints``
        + 1: 0 before the first checkpoint), written into ``out``."""
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

    def request(self, rows: np.ndarray, wanted: np.ndarray, now: int, counted: bool) -> None:
        """``World.request(wanted)`` at minute ``now`` for candidates ``rows`` (each wanting a change)."""
        requested = self.requested
        rising = wanted > requested[rows]
        if rising.any():
            self._pending[rows[rising], (now + self.delay) % (self.delay + 1)] = wanted[rising]
        if not rising.all():
            falling, lower = rows[~rising], wanted[~rising]
            self.ready[falling] = np.minimum(self.ready[falling], lower)
            self._pending[falling] = np.minimum(self._pending[falling], lower[:, None])
        requested[rows] = wanted
        if counted:
            self.actions[rows] += 1

    def results(self, *, algorithm: str, knobs: list[str], score_from: int) -> list[RunResult]:
        # The last backlog summed per candidate like ``World`` sums it (the series is summed in
        # another order: equal to within rounding).
        final_backlog = np.ascontiguousarray(self.backlog.T).sum(axis=1)
        capacity_series, serving_series = self.capacity_series.T.copy(), self.serving_series.T.copy()
        backlog_series, age_series = self.backlog_series.T.copy(), self.age_series.T.copy()
        return [
            scored_result(self.scenario, algorithm=algorithm, knob=knobs[column], score_from=score_from,
                          arrivals=self.arrivals, capacity=capacity_series[column], serving=serving_series[column],
                          backlog=backlog_series[column], age=age_series[column],
                          scale_actions=int(self.actions[column]), final_backlog=float(final_backlog[column]))
            for column in range(self.count)
        ]
