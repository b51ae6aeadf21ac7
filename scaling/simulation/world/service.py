"""How instances serve their partitions: each shares its throughput among the partitions it owns,
water-filling, without waste; and the ages a partition would have with an instance of its own."""

from __future__ import annotations

import numpy as np

from scaling.simulation.world.arrival_curves import arrival_minutes
from scaling.simulation.world.ownership import Ownership

#: Backlog (events) below which a partition counts as drained; the fluid model leaves fractions.
DRAINED = 0.5


def dedicated_ages(shares: np.ndarray, service: np.ndarray) -> np.ndarray:
    """(minute, partition): the oldest event's age (minutes) at the end of each minute if every
    partition had an instance of its own from the start, serving ``service`` events a minute
    (per minute): the least any count achieves, since a partition is served by one instance at
    most. ``shares``: (minute, partition) arrivals."""
    minutes, partitions = shares.shape
    backlog, served = np.zeros(partitions), np.zeros((minutes, partitions))
    for minute in range(minutes):
        demand = backlog + shares[minute]
        served[minute] = np.minimum(demand, service[minute])
        backlog = demand - served[minute]
    processed = np.cumsum(served, axis=0)
    curves = np.concatenate((np.zeros((1, partitions)), np.cumsum(shares, axis=0)))
    now = np.arange(1, minutes + 1, dtype=float)[:, None]
    arrived = np.column_stack([arrival_minutes(curves[:, partition], processed[:, partition])
                               for partition in range(partitions)])
    return np.where(curves[1:] - processed > DRAINED, now - arrived, 0.0)


def water_fill(demand: np.ndarray, owners: Ownership, rate: float, done: np.ndarray, scratch: np.ndarray,
               capped: np.ndarray, check_full: bool, speed: float = 1.0) -> np.ndarray:
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
    ``rate`` is this minute's (the nominal one times ``speed``, the factor ``owners.share`` takes).
    """
    partitions, count = demand.shape
    owner = owners.owner
    # Which first round a candidate takes depends on its own demand only (the two round
    # ``rate * speed / k`` differently), so that it gets the same numbers in any batch.
    busy = demand.min(axis=0) > 0
    if busy.all():
        np.minimum(demand, owners.share if speed == 1.0 else owners.share * speed, out=done)
    else:
        active = demand > 0
        sharing = np.bincount(owner[active], minlength=owner.size)
        share = np.where(sharing > 0, rate / np.maximum(sharing, 1), 0.0)
        done[...] = np.where(active, np.minimum(demand, share[owner]), 0.0)
        if busy.any():
            share = owners.share[:, busy]
            done[:, busy] = np.minimum(demand[:, busy], share if speed == 1.0 else share * speed)
    np.greater(np.subtract(demand, done, out=scratch), 1e-9, out=capped)  # (implies demand > 0, so active)
    some = capped.any(axis=0)
    if not check_full:
        some &= ~capped.all(axis=0)
    columns = np.flatnonzero(some)
    if not columns.size:
        return done
    served = done
    local, capped = owners.local[:, columns], capped[:, columns]
    if not check_full:
        # Room is left only in an owner with a partition under its share: a candidate none of
        # whose capped partitions shares an owner with an uncapped one takes no round (as above).
        owner = local * len(columns) + np.arange(len(columns))[None, :]
        short = np.zeros(owner.size, dtype=bool)
        short[owner[capped]] = True
        going = (short[owner] & ~capped).any(axis=0)
        if not going.all():
            columns, local, capped = columns[going], local[:, going], capped[:, going]
            if not columns.size:
                return served
    wanted, done = demand[:, columns], done[:, columns]
    owner = local * len(columns) + np.arange(len(columns))[None, :]
    room = np.maximum(float(rate) - np.bincount(owner.ravel(), weights=done.ravel(), minlength=owner.size), 0.0)
    active = capped & (room[owner] > 1e-9)
    rounds = 0  # before the first round ``done`` is a copy of ``served``'s columns: nothing to write back
    while True:
        going = active.any(axis=0)
        if not going.all():
            finished = ~going
            if rounds:
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
        rounds += 1


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
