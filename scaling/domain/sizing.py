"""How much of its owner's throughput each partition gets at an instance count (the SLO mode's sizing).

The arithmetic is ``slo_kernel.OwnerLoads`` (one implementation for the engine and the batched
simulator); this module says why it sizes as it does, and names the sizings a decision quotes.

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
  at the hub's mean load three quarters of the way to them (``slo_kernel.NEWCOMER_MARGIN``), a stated
  quantile of the draw; the busier of the two, never above the bound. A hub whose forecasts
  are mostly equal (fewer than half distinct: ``slo_kernel.distinct_shares``) keeps the bound.
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

OWNER_LOAD = "owner_load"
WORST_CASE = "worst_case"
