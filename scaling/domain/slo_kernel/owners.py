"""Sizing by owner load: which instance owns which partitions at a count, and each owner's load."""

from __future__ import annotations

import functools

import numpy as np

from scaling.domain.slo_kernel.arrays import all_of, any_of

#: Where a scale-out sizes a newcomer's load between the expected draw (0: ``k`` partitions at the
#: hub's mean load) and the worst case (1: the ``k`` heaviest partitions).
NEWCOMER_MARGIN = 0.75


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
        self._some_exact: bool | None = None
        self._spare: dict[int, np.ndarray] = {}

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
        made._some_exact, made._spare = None, {}
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

    @property
    def some_exact(self) -> bool:
        """Whether some candidate's load is exact at a count (``exact_count``): read at every
        sizing, worked out once (the engine's owners are made once per distinct collection)."""
        if self._some_exact is None:
            self._some_exact = any_of(self.exact_count >= 0)
        return self._some_exact

    def spare(self, partitions: int) -> np.ndarray:
        """Per owner, the partitions of ``partitions`` it does not hold (at least 1: a divisor),
        made once per number of partitions."""
        spare = self._spare.get(partitions)
        if spare is None:
            spare = self._spare[partitions] = np.maximum(partitions - self.partitions, 1)
        return spare

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
    if rows.shape[-1] <= NARROW_COLUMNS:  # (``np.add.accumulate`` is ``np.cumsum`` without its wrapper)
        return np.add.accumulate(np.repeat(rows[None, :], count, axis=0) if one else rows, axis=0)
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
        self._per_owner: np.ndarray | None = None  # (``per_instance`` as integers: made when a bound needs it)
        self.index = _columns(count)
        self._owners = owners
        self._spread: tuple[np.ndarray, np.ndarray] | None = None
        self._kept_by: list | None = None
        self._others: np.ndarray | None = None
        self._some_exact = owners.some_exact  # (else no count is sized by the owners now)
        self._some_varied = False
        if equal_shares:
            self.varied = np.zeros(count, dtype=bool)  # the partitions' loads differ (worth sizing newcomers by the draw)
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
        self.exact = np.maximum.reduce(self.owner_load, axis=0)
        self._some_varied = any_of(self.varied)

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
        if all_of(exact):  # (the engine's usual case: its owners at the count asked about)
            return self.exact[columns].copy()
        if self._per_owner is None:
            self._per_owner = self.per_instance.astype(np.int64)
        per_owner = self._per_owner[counts]
        index = self.index[columns]
        bound = self._running((np.minimum(per_owner, self.partitions) - 1) * self.count + index)
        fewer = (live > counts).nonzero()[0] if self._some_exact else ()
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
                    self._others = (self.total[None, :] - self.owner_load) / self._owners.spare(self.partitions)
                owners = self._owners.partitions[:, at]
                gained = np.minimum(np.maximum(room[None, :] - owners, 0), self.partitions) * self._others[:, at]
                kept = np.maximum.reduce(np.where(owners > 0, self.owner_load[:, at] + gained, -np.inf), axis=0)
            bound[fewer] = np.minimum(bound[fewer], kept)
        more = ((live > 0) & (live < counts) & self.varied[columns]).nonzero()[0] if self._some_varied else ()
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
        if all_of(owned):  # (the engine's usual case)
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
        if all_of(sized):  # (the engine's usual case: the selections below would pick the first choice throughout)
            served = np.maximum(values * (rate / load)[None, :], equal[None, :])
        else:
            ratio = rate / np.where(sized, load, 1.0)
            served = np.where(sized[None, :], np.maximum(values * ratio[None, :], equal[None, :]), equal[None, :])
        if counts.size and np.minimum.reduce(counts) > 0:  # (the usual case: every count has an instance)
            return served
        return np.where(counts[None, :] > 0, served, 0.0)  # no instance serves nothing
