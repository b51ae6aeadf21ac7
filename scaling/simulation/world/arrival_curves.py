"""When each event arrived: the cumulative arrival curves, searched for the minute a position was
enqueued (the oldest unprocessed event's age is read off them)."""

from __future__ import annotations

import numpy as np


def arrival_minutes(cumulative: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """When the event at each (fractional) position of the cumulative arrivals curve arrived, in
    minutes: arrivals are spread evenly within a minute."""
    index = np.clip(np.searchsorted(cumulative, positions, side="right"), 1, len(cumulative) - 1)
    low, high = cumulative[index - 1], cumulative[index]
    return index - 1 + np.where(high > low, (positions - low) / np.maximum(high - low, 1e-12), 0.0)


class Curves:
    """Ascending curves, one per row, searched together: ``search(rows, values)`` gives for each
    (row, value) what ``np.searchsorted(curves[row], value, side="right")`` gives, exactly. One
    search over the curves laid end to end, each lifted above the one before it, then a check
    against the row's own curve: adding the lift can round a value onto a neighbouring point."""

    def __init__(self, curves: np.ndarray) -> None:
        self.curves = curves = np.ascontiguousarray(curves)
        self.length = curves.shape[1]
        self.lift = np.arange(len(curves)) * (float(curves[:, -1].max()) + 1.0)
        self.line = (curves + self.lift[:, None]).ravel()

    def search(self, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
        length, curves = self.length, self.curves
        index = np.clip(np.searchsorted(self.line, values + self.lift[rows], side="right") - rows * length, 0, length)
        while True:
            up = index < length
            up[up] = curves[rows[up], index[up]] <= values[up]
            down = index > 0
            down[down] = curves[rows[down], index[down] - 1] > values[down]
            if not (up.any() or down.any()):
                return index
            index = index + up - down


def arrival_moments(curves: Curves, rows: np.ndarray, positions: np.ndarray, last: int) -> np.ndarray:
    """``arrival_minutes`` for many curves at once: row ``rows[i]``'s curve at ``positions[i]``,
    the index kept within 1..``last``."""
    index = np.clip(curves.search(rows, positions), 1, last)
    low, high = curves.curves[rows, index - 1], curves.curves[rows, index]
    return index - 1 + np.where(high > low, (positions - low) / np.maximum(high - low, 1e-12), 0.0)
