"""Regime change: per fold, whether the validation block's traffic looks unlike its training
window (rate level, peak-to-mean, burstiness): evidence shown beside a selection."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scaling.tuning.folds import Folds

#: A validation block's traffic is "unlike" its training window when one of these ratios (either
#: way round) is above its limit: mean rate, p99 minute over the mean (peak-to-mean), and the mean
#: absolute minute-to-minute change over the mean (burstiness).
REGIME_LIMITS: dict[str, float] = {"rate level": 1.5, "peak-to-mean": 1.3, "burstiness": 1.5}


@dataclass(frozen=True, slots=True)
class TrafficShape:
    """What a regime change is judged on: mean rate, p99 minute / mean, mean |change| / mean."""

    mean: float
    peak_to_mean: float
    burstiness: float


def traffic_shape(arrivals: np.ndarray) -> TrafficShape:
    values = np.asarray(arrivals, dtype=float)
    mean = float(values.mean()) if len(values) else 0.0
    if mean <= 0:
        return TrafficShape(0.0, 0.0, 0.0)
    change = float(np.abs(np.diff(values)).mean()) if len(values) > 1 else 0.0
    return TrafficShape(mean, float(np.percentile(values, 99)) / mean, change / mean)


def regime_change(train: np.ndarray, validation: np.ndarray, limits: Mapping[str, float] = REGIME_LIMITS) -> list[str]:
    """Why the validation traffic looks unlike the training traffic (empty: alike)."""
    before, after = traffic_shape(train), traffic_shape(validation)
    reasons = []
    for name, old, new in (("rate level", before.mean, after.mean), ("peak-to-mean", before.peak_to_mean, after.peak_to_mean),
                           ("burstiness", before.burstiness, after.burstiness)):
        if old <= 0 or new <= 0:
            if old != new:
                reasons.append(f"{name} {old:.3g} -> {new:.3g}")
            continue
        ratio = new / old
        if max(ratio, 1 / ratio) > limits[name]:
            reasons.append(f"{name} x{ratio:.2f} ({old:.3g} -> {new:.3g}; limit x{limits[name]:g} either way)")
    return reasons


def regime_changes(arrivals: np.ndarray, folds: Folds) -> list[dict]:
    """Per fold, the regime-change reasons between its training window and its validation block."""
    return [{"fold": number, "validation": list(valid), "changes": regime_change(arrivals[slice(*train)], arrivals[slice(*valid)])}
            for number, (train, valid) in enumerate(zip(folds.training, folds.validation, strict=True), start=1)]
