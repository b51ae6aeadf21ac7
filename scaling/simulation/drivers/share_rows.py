"""Partitions grouped by their share of the arrivals, for ``batched_slo.py``'s exact shortcut.

Kept apart from the batched SLO simulator because it is a fact about the world's observations
(equal shares see equal sequence numbers) that any batched policy mirror may use.
"""

from __future__ import annotations

import numpy as np


class ShareRows:
    """The rows the engine's per-partition arithmetic runs on.

    Partitions with the same share of arrivals have the same sequence numbers, arrival rates and
    forecast, and the service rate the engine assumes for a partition depends on nothing else of
    it (``slo_kernel.OwnerLoads.service``: its forecast and the busiest owner's load). Then each
    per-partition quantity the engine reduces is monotone in the partition's checkpoint: its
    oldest-event age (and the predicted ages built on it) and its backlog are largest at the
    smallest checkpoint, the hold time of a scale-in shortest there, the saturation test
    strictest at the largest. So each group of equal shares is represented by two rows, its
    smallest and its largest checkpoint, and the maxima and minima come out as over every
    partition, bit for bit (floating-point operations are monotone too). Sums (events processed,
    total backlog) are taken over all partitions. With as many groups as half the partitions or
    more, every partition is its own row.
    """

    def __init__(self, weights: np.ndarray) -> None:
        shares, group = np.unique(weights, return_inverse=True)
        partitions = len(weights)
        self.groups: list[np.ndarray] | None = None
        if 2 * len(shares) < partitions:
            self.groups = [np.flatnonzero(group == index) for index in range(len(shares))]
            self.representative = np.repeat([members[0] for members in self.groups], 2)
            self.row_of = 2 * group  # each partition's group's first row (both rows share its forecast)
        else:
            self.representative = np.arange(partitions)
            self.row_of = np.arange(partitions)
        self.count = len(self.representative)

    def reduce(self, checkpoints: np.ndarray) -> np.ndarray:
        """(rows, candidates) from (partitions, candidates): per group, smallest then largest."""
        if self.groups is None:
            return checkpoints.copy()
        reduced = np.empty((self.count, checkpoints.shape[1]))
        if len(self.groups) == 1:
            checkpoints.min(axis=0, out=reduced[0])
            checkpoints.max(axis=0, out=reduced[1])
            return reduced
        for index, members in enumerate(self.groups):
            chosen = checkpoints[members]
            chosen.min(axis=0, out=reduced[2 * index])
            chosen.max(axis=0, out=reduced[2 * index + 1])
        return reduced
