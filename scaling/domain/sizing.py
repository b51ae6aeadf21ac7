"""How much of its owner's throughput each partition gets at an instance count (the SLO mode's sizing).

The SLO mode predicts each partition's oldest-event age under a candidate count, so what it needs
from a count is each partition's service rate. Consumers share an instance's throughput among
the partitions it owns by demand (a quiet partition's unused share goes to the busy ones), so
what limits a partition is its owner's **load**: the sum of the forecast arrival rates of the
partitions that instance owns.

- **Holding at the current count** (as many live owners as the count, every partition owned):
  the latest sample names each partition's owner, so each owner's load is exact, and the busiest
  owner's load is what the count must carry.
- **Another count**: the load balancer moves the fewest partitions, but which ones is not known
  in advance. After the change every instance owns at most ``k = ceil(P / n)`` partitions, so
  the busiest owner carries at most the ``k`` heaviest partitions: their sum bounds the busiest
  load whatever moves where. With fewer instances than the current owners, the survivors keep
  what they own (only the leaving instances' partitions move, which ones go where is drawn),
  so an owner ends with its load now plus ``k - c`` moved partitions (``c``: how many it owns),
  estimated at the mean load of the partitions it does not own: the busiest such estimate is
  used when lower than the bound (which instances leave is not known: every owner is assumed
  to survive). This is an expectation over the draw, not a worst case, so after the change the
  next evaluation reads the real assignment (the first point above): a better one may let it
  scale in further, a worse one (or a balancer that moves more than it must) is corrected by
  scaling out, and that action counts in the action budget. With more instances than the
  current owners, an owner keeps at most ``k`` of its ``c`` partitions (expected: ``k / c`` of
  its load) and each newcomer takes ``k`` of the moved ones: not the ``k`` heaviest of the hub
  (a hot partition and its two nearest rivals are rarely moved to one newcomer) but from ``k``
  at the hub's mean load three quarters of the way to them (``NEWCOMER_MARGIN``), a stated
  quantile of the draw; the busier of the two, never above the bound. A hub whose forecasts
  are mostly equal (fewer than half distinct: ``distinct_shares``) keeps the bound.
- **No ownership collected** (a consumer that writes none, the legacy layout, Service Bus): the
  worst case, as if every partition were as busy as the busiest and all shared one owner: each
  gets ``throughput / k`` (``sizing: worst_case, no ownership`` in the decision).

A partition set aside as hotter than one instance (``hot_partition``) asks more than its owner
serves, so it takes at least what any partition it shares an owner with gets: in the loads it
counts as heavy as the heaviest other partition (its own age is not sized for).

With ownership each partition is served at the busiest owner's ratio ``throughput / load`` of its
own forecast (no partition falls behind faster than those of the busiest owner), and never
below an equal share ``throughput / k`` (what an owner gives each of its partitions before
redistributing). With uniform load the two rules agree: ``k`` partitions of rate ``r`` on the
busiest owner, ``r * throughput / (k * r) = throughput / k``.

Worked example (docs/policy.md, "Sizing by owner load"): 8 partitions, 4 instances, throughput
100/s, forecasts 60, 20, 20, 20, 20, 20, 20, 20 /s, owners a: {60, 20}, b, c, d: {20, 20} each.
The worst case gives each partition 100 / 2 = 50/s: the 60/s partition falls behind, and 8
instances would be needed. By owner load the busiest owner carries 80/s <= 100/s: 4 hold. At 3
instances (k = 3) the bound is 60 + 20 + 20 = 100/s <= 100/s: 3 hold too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scaling.domain.lag import partitions_per_instance

OWNER_LOAD = "owner_load"
WORST_CASE = "worst_case"
#: Where a scale-out sizes a newcomer's load between the expected draw (0: ``k`` partitions at the
#: hub's mean load) and the worst case (1: the ``k`` heaviest partitions).
NEWCOMER_MARGIN = 0.75


def has_ownership(owners: tuple[str | None, ...] | None) -> bool:
    """Whether the collected ownership says anything (some partition has a live owner)."""
    return owners is not None and any(owner is not None for owner in owners)


def owner_indices(owners: tuple[str | None, ...]) -> np.ndarray:
    """Per partition, its owner as an index in order of first appearance (-1: no live owner)."""
    seen: dict[str, int] = {}
    return np.asarray([-1 if owner is None else seen.setdefault(owner, len(seen)) for owner in owners], dtype=np.int64)


def owner_loads(forecast: np.ndarray, owners: tuple[str | None, ...]) -> np.ndarray:
    """Each live owner's load (in order of first appearance): the sum of its partitions' forecasts,
    added in partition order."""
    return _summed_by_owner(owner_indices(owners), forecast)


def _summed_by_owner(index: np.ndarray, forecast: np.ndarray) -> np.ndarray:
    owned = index >= 0
    return np.bincount(index[owned], weights=np.asarray(forecast, dtype=float)[owned], minlength=int(index.max(initial=-1)) + 1)


@dataclass(frozen=True, slots=True)
class OwnerLoads:
    """One source's forecasts (events/s per partition, set-aside partitions at 0) and what sizes
    them at any count: the heaviest partitions' running sums and, when every partition has a
    live owner, the busiest owner's exact load and how many owners there are."""

    forecast: np.ndarray
    ownership: bool
    heaviest: np.ndarray
    exact: float
    live_owners: int
    #: Each live owner's load and partition count (when every partition has one).
    owner_load: np.ndarray = field(default_factory=lambda: np.zeros(0))
    owner_partitions: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: The lightest partition's load (equal loads size every count by the bound).
    lightest: float = 0.0
    #: Whether a scale-out's newcomers are sized by the draw (``distinct_shares``), else by the bound.
    by_draw: bool = False

    @classmethod
    def of(cls, forecast: np.ndarray, owners: tuple[str | None, ...] | None,
           set_aside: np.ndarray | None = None, *, by_draw: bool = False) -> OwnerLoads:
        forecast = np.asarray(forecast, dtype=float)
        if not has_ownership(owners):
            return cls(forecast, False, np.zeros(0), 0.0, 0)
        loads = load_forecast(forecast, set_aside)
        ranked = np.sort(loads)
        heaviest = np.cumsum(ranked[::-1])
        if None in owners:
            return cls(forecast, True, heaviest, 0.0, -1)
        index = owner_indices(owners)
        per_owner = _summed_by_owner(index, loads)
        return cls(forecast, True, heaviest, float(per_owner.max()), len(per_owner), per_owner, np.bincount(index),
                   float(ranked[0]), by_draw)

    def busiest(self, instances: int) -> float:
        """The busiest owner's load at ``instances`` (module docstring): exact when the current
        owners are that many and own every partition, else at most the ``k`` heaviest partitions'
        sum (less where the current owners tell more); without ownership ``k`` times the heaviest
        partition."""
        per_owner = partitions_per_instance(len(self.forecast), instances)
        if not self.ownership:
            return float(per_owner * self.forecast.max(initial=0.0))
        if self.live_owners == instances:
            return self.exact
        bound = float(self.heaviest[min(per_owner, len(self.heaviest)) - 1])
        if self.live_owners > instances:
            # Fewer instances: the survivors keep what they own and take, of the partitions that move
            # (which ones is drawn), as many as they have room for at the others' mean load.
            partitions = len(self.heaviest)
            others = (self.heaviest[-1] - self.owner_load) / np.maximum(partitions - self.owner_partitions, 1)
            gained = np.clip(per_owner - self.owner_partitions, 0, partitions) * others
            return min(bound, float((self.owner_load + gained).max()))
        if self.by_draw and 0 < self.live_owners < instances and self.lightest < self.heaviest[0]:
            # More instances: each owner keeps at most k of its partitions (which ones is drawn: its
            # load in proportion), and each newcomer takes k of the moved ones, sized from k at the
            # hub's mean load three quarters of the way to the k heaviest (NEWCOMER_MARGIN).
            kept = self.owner_load * np.minimum(self.owner_partitions, per_owner) / np.maximum(self.owner_partitions, 1)
            mean = per_owner * (float(self.heaviest[-1]) / len(self.heaviest))
            newcomer = mean + NEWCOMER_MARGIN * (bound - mean)
            return min(bound, max(float(kept.max()), newcomer))
        return bound

    def service(self, instances: int, throughput: float) -> np.ndarray:
        """Events per second each partition is served at ``instances`` (module docstring); none
        at no instance."""
        if instances <= 0:
            return np.zeros(len(self.forecast))
        equal = throughput / partitions_per_instance(len(self.forecast), instances)
        if not self.ownership:
            return np.full(len(self.forecast), equal)
        load = self.busiest(instances)
        if load <= 0:
            return np.full(len(self.forecast), equal)
        return np.maximum(self.forecast * (throughput / load), equal)


def distinct_shares(forecast: np.ndarray) -> bool:
    """Whether a hub's forecasts are spread enough for a scale-out to size its newcomers by the
    draw (``NEWCOMER_MARGIN``): at least half of them distinct. Partitions with equal shares see
    equal sequence numbers, so then the draw and the bound differ only by the backlogs, and the
    bound stays (as the batched simulator's equal-share rows assume)."""
    return 2 * len(np.unique(forecast)) >= len(forecast)


def load_forecast(forecast: np.ndarray, set_aside: np.ndarray | None) -> np.ndarray:
    """The forecasts that make up the owners' loads: a set-aside (hot) partition counts as the
    heaviest other partition (module docstring)."""
    forecast = np.asarray(forecast, dtype=float)
    if set_aside is None or not set_aside.any():
        return forecast
    return np.where(set_aside, forecast[~set_aside].max(initial=0.0), forecast)

