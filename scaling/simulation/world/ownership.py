"""Who owns which partition: ``p mod n`` or the processor's load balancer (the fewest partitions
move when the serving count changes, which ones drawn from the seed)."""

from __future__ import annotations

import numpy as np


class Ownership:
    """Who owns which partition for each candidate's serving count, kept up to date as serving
    counts change (rarely). Arrays are (partitions, candidates): ``local`` the owning instance
    (0 .. n-1), ``owner`` its slot in the flattened batch (``i * C + c``), ``share`` each
    partition's first-round share, ``rate / partitions its owner has``.

    ``modulo`` reads the owners of each count off a table; ``balanced`` keeps each candidate's
    assignment and moves the fewest partitions (``rebalance``). After each change ``moved``
    tells which partitions changed owner (for the rebalance pause), and ``names`` each
    instance's name (stable while it lives: what collect reads as the owner)."""

    def __init__(self, count: int, partitions: int, rate: float, assignment: str = "modulo", seed: int = 1) -> None:
        index = np.arange(partitions)
        sizes = np.arange(1, partitions + 1)
        self.partitions = partitions
        self.rate = rate
        self.balanced = assignment == "balanced"
        self.seed = seed
        self.by_count = index[:, None] % sizes[None, :]  # column n - 1: owners with n instances
        owned = np.stack([np.bincount(column, minlength=partitions)[column] for column in self.by_count.T], axis=1)
        self.share_by_count = rate / owned  # an owner's rate split evenly among its partitions
        self.count = count
        self.serving = np.zeros(count, dtype=np.int64)
        self.local = np.zeros((partitions, count), dtype=np.int64)
        self.owner = np.zeros((partitions, count), dtype=np.int64)
        self.share = np.zeros((partitions, count))
        self.moved = np.zeros((partitions, count), dtype=bool)
        self.names: list[list[int]] = [[] for _ in range(count)]
        #: ``names`` as a table (local index, candidate), kept in step with it (``balanced`` only).
        self.name_table = np.zeros((partitions, count), dtype=np.int64)
        self._next_name = [0] * count

    def update(self, serving: np.ndarray, minute: int = 0) -> np.ndarray:
        """Follow new serving counts; returns the candidates whose count changed (their
        ``moved`` column says which partitions changed owner)."""
        changed = np.flatnonzero(serving != self.serving)
        if not changed.size:
            return changed
        if not self.balanced:  # the table, for the whole batch at once (names are the indices)
            column = np.maximum(np.minimum(serving[changed], self.partitions) - 1, 0)
            local = self.by_count[:, column]
            self.moved[:, changed] = (self.local[:, changed] != local) & (self.serving[changed] > 0)[None, :]
            self.local[:, changed] = local
            self.owner[:, changed] = local * self.count + changed[None, :]
            self.share[:, changed] = self.share_by_count[:, column]
            self.serving[changed] = serving[changed]
            return changed
        for column in changed:
            before, after = int(self.serving[column]), int(serving[column])
            local = rebalance(self.local[:, column], before, after, self._rng(minute, before, after))
            self._assign(column, local, counted=before > 0)
            names = self.names[column]
            del names[after:]
            while len(names) < after:
                names.append(self._next_name[column])
                self._next_name[column] += 1
            self._tabulate_names(column)
            self.serving[column] = after
        return changed

    def fail(self, column: int, victim: int, minute: int) -> np.ndarray:
        """Instance ``victim`` (a local index) of candidate ``column`` is gone: the survivors take
        its partitions (``balanced``: only those move; ``modulo``: ``p mod (n-1)``). Returns the
        partitions it owned."""
        orphans = self.local[:, column] == victim
        survivors = int(self.serving[column]) - 1
        kept = None
        if self.balanced:
            del self.names[column][victim]
            self._tabulate_names(column)
            local = self.local[:, column].copy()
            kept = np.where(local > victim, local - 1, local)  # the survivors' new indices: same instances
            kept[orphans] = -1
            local = rebalance(kept, survivors, survivors, self._rng(minute, survivors + 1, survivors))
        elif survivors:
            local = self.by_count[:, min(survivors, self.partitions) - 1]
        else:
            local = np.zeros(self.partitions, np.int64)
        self._assign(column, local, counted=True)
        if kept is not None:  # moved: the orphans and what the balancer moved, not what was renumbered
            self.moved[:, column] = local != kept
        self.serving[column] = survivors
        return orphans

    def _tabulate_names(self, column: int) -> None:
        names = self.names[column]
        if len(names) > len(self.name_table):
            self.name_table = np.vstack((self.name_table, np.zeros((len(names) - len(self.name_table), self.count), np.int64)))
        self.name_table[:len(names), column] = names

    def _rng(self, minute: int, before: int, after: int) -> np.random.Generator:
        """The draws of one change: from the seed, the minute and the counts, so that a
        candidate's world does not depend on the batch it runs in."""
        return np.random.default_rng([int(self.seed), int(minute), before, after])

    def _assign(self, column: int, local: np.ndarray, counted: bool) -> None:
        self.moved[:, column] = (self.local[:, column] != local) if counted else False
        self.local[:, column] = local
        self.owner[:, column] = local * self.count + column
        self.share[:, column] = self.rate / np.bincount(local)[local]

    def owners_of(self, column: int) -> np.ndarray:
        """Per partition, the name of the instance that owns it (what collect reads); -1: none."""
        if not self.serving[column]:
            return np.full(self.partitions, -1, dtype=np.int64)
        if not self.balanced:
            return self.local[:, column].copy()
        names = self.names[column]
        if not names:
            return np.full(self.partitions, -1, dtype=np.int64)
        return np.asarray(names, dtype=np.int64)[self.local[:, column]]


def rebalance(local: np.ndarray, before: int, after: int, rng: np.random.Generator) -> np.ndarray:
    """The processor's load balancer from ``before`` to ``after`` instances: each instance owns
    ``floor`` or ``ceil`` of ``P / after`` partitions and the fewest partitions move. Instances
    ``after`` and up leave (a scale-in removes the newest), a partition marked ``-1`` has no
    owner (a failed instance's); which partitions an instance over its share gives up and where
    the freed ones go are drawn from ``rng``. ``before == 0``: the first assignment, ``p mod n``."""
    partitions = len(local)
    if after <= 0:
        return np.zeros(partitions, dtype=np.int64)
    if before <= 0:
        return np.arange(partitions, dtype=np.int64) % after
    local = np.where(local >= after, -1, local).astype(np.int64)
    quota, extra = divmod(partitions, after)
    held = np.bincount(local[local >= 0], minlength=after)
    allowed = np.full(after, quota)
    allowed[np.lexsort((rng.random(after), -held))[:extra]] += 1  # the ceil shares go to those holding most
    for instance in np.flatnonzero(held > allowed):
        local[rng.choice(np.flatnonzero(local == instance), size=int(held[instance] - allowed[instance]), replace=False)] = -1
    free = rng.permutation(np.flatnonzero(local < 0))
    room = allowed - np.bincount(local[local >= 0], minlength=after)
    local[free] = np.repeat(np.arange(after), room)
    return local
