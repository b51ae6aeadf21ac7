"""A simulated Event Hubs Standard namespace with its consumer groups, one minute at a time
: what throughput units do to producers and consumers, and what they cost.

The world:

- **Ingress**: the trace's events per minute, each ``event_bytes`` long, offered by producers.
  The namespace accepts at most ``TUs x min(1 MB/s / event_bytes, 1,000 events/s) x 60`` a
  minute; the rest are **rejected** (producers throttled; counted, never enqueued: a producer
  that retries is a new offer, which the trace already is).
- **Egress**: ``groups`` consumer groups each read every accepted event. The namespace serves at
  most ``TUs x min(2 MB/s / event_bytes, 4,096 events/s) x 60`` reads a minute, shared evenly
  among the groups; a group that would read more is capped (its receives are throttled).
- **Consumers**: one fleet per group on ``partitions`` equal partitions; ``n`` ready instances
  read at most ``P x mu / ceil(P / n)`` events a minute (an instance owning two partitions serves
  each at half speed; docs/benchmark-contract.md's effective capacity). A scale-out serves after
  ``provision_delay`` minutes, a scale-in at once; instances are billed from the request.
  Events are read oldest first; the oldest unread event's age is the SLO's measure.
- **TUs**: a change serves ``tu_provision_delay`` minutes after it is asked for (both ways);
  TUs are billed per clock hour at the highest count asked for or serving in that hour.

The groups are identical (same trace, same fleet, same policy), so they evolve identically:
one fleet is simulated, its reads counted ``groups`` times in egress and its instances
``groups`` times in cost. Conservation: every offered event is rejected, read, or still waiting.

Pure numpy and the domain; what the autoscalers see is what collect reads (sequence numbers,
checkpoints, ownership, capacity; the namespace's per-minute metrics and SKU).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from scaling.domain.namespace.sizing import (
    EGRESS_BYTES_PER_SECOND_PER_TU,
    EGRESS_EVENTS_PER_SECOND_PER_TU,
    INGRESS_BYTES_PER_SECOND_PER_TU,
    INGRESS_EVENTS_PER_SECOND_PER_TU,
    NamespaceMinute,
)
from scaling.simulation.peers.looped import minute_time
from scaling.simulation.world.loop import Observation

#: Throttled requests are counted in batches of this many events (what one send or receive carries).
EVENTS_PER_REQUEST = 100
#: Standard tier list price per TU-hour and Premium v3 P1v3 (Linux) per instance-hour, USD,
#: pay-as-you-go, East US (docs/benchmark-namespace.md states them; both are knobs).
TU_HOUR_PRICE = 0.030
P1V3_HOUR_PRICE = 0.169


@dataclass(frozen=True, slots=True)
class NamespaceScenario:
    """The ``namespace`` benchmark scenario's world (defaults: the standard scenario's consumers)."""

    event_bytes: float = 20_000.0
    groups: int = 2
    partitions: int = 32
    events_per_instance_per_minute: float = 1_000.0
    peak_instances: int = 24
    provision_delay_minutes: int = 2
    tu_provision_delay_minutes: int = 1
    slo_minutes: float = 5.0
    slo_violation_share: float = 0.001
    initial_tus: int = 1
    min_tus: int = 1
    max_tus: int = 20
    tu_hour_price: float = TU_HOUR_PRICE
    instance_hour_price: float = P1V3_HOUR_PRICE

    @property
    def ingress_events_per_tu_minute(self) -> float:
        return 60.0 * min(INGRESS_BYTES_PER_SECOND_PER_TU / self.event_bytes, INGRESS_EVENTS_PER_SECOND_PER_TU)

    @property
    def egress_events_per_tu_minute(self) -> float:
        return 60.0 * min(EGRESS_BYTES_PER_SECOND_PER_TU / self.event_bytes, EGRESS_EVENTS_PER_SECOND_PER_TU)


@dataclass
class Fleet:
    """One consumer group's instances and backlog (partitions equal, read oldest first)."""

    partitions: int
    mu: float
    delay: int
    requested: int = 1
    ready: int = 1
    pending: list[tuple[int, int]] = field(default_factory=list)
    cohorts: deque = field(default_factory=deque)
    accepted: float = 0.0
    processed: float = 0.0

    @property
    def backlog(self) -> float:
        return self.accepted - self.processed

    def serving(self, minute: int) -> int:
        while self.pending and self.pending[0][0] <= minute:
            self.ready = max(self.ready, self.pending.pop(0)[1])
        return min(self.ready, self.requested)

    def capacity(self, minute: int) -> float:
        """Events the ready instances can read this minute."""
        n = self.serving(minute)
        if n <= 0:
            return 0.0
        return self.partitions * self.mu / math.ceil(self.partitions / min(n, self.partitions))

    def request(self, wanted: int, minute: int) -> bool:
        wanted = max(int(wanted), 1)
        if wanted == self.requested:
            return False
        if wanted > self.requested:
            self.pending.append((minute + self.delay, wanted))
        else:
            self.ready = min(self.ready, wanted)
            self.pending = [(at, min(count, wanted)) for at, count in self.pending]
        self.requested = wanted
        return True

    def read(self, minute: int, arrived: float, limit: float) -> tuple[float, float]:
        """Enqueue ``arrived`` events and read up to ``limit`` oldest first; returns (read, the
        oldest unread event's age in minutes at the minute's end)."""
        if arrived > 0:
            self.cohorts.append([minute, arrived])
            self.accepted += arrived
        want = min(self.backlog, max(limit, 0.0))
        left = want
        while left > 1e-9 and self.cohorts:
            head = self.cohorts[0]
            taken = min(head[1], left)
            head[1] -= taken
            left -= taken
            if head[1] <= 1e-9:
                self.cohorts.popleft()
        done = want - max(left, 0.0)
        self.processed += done
        while self.cohorts and self.cohorts[0][1] <= 1e-6:
            self.cohorts.popleft()
        age = (minute + 1 - self.cohorts[0][0]) if self.cohorts else 0.0
        return done, float(age)

    def observe(self, minute: int) -> Observation:
        """What collect reads: every partition's last enqueued sequence number and checkpoint
        (at the processed position), the owners, and the plan's capacity."""
        per_partition_enqueued = int(self.accepted // self.partitions)
        per_partition_processed = int(self.processed // self.partitions)
        last = np.full(self.partitions, per_partition_enqueued - 1, dtype=np.int64)
        checkpoint = np.full(self.partitions, per_partition_processed - 1, dtype=np.int64)
        n = min(self.serving(minute), self.partitions)
        owners = (np.arange(self.partitions) % n) if n > 0 else np.full(self.partitions, -1)
        return Observation(minute=minute, capacity=self.requested, last_enqueued=last, checkpoint=checkpoint,
                           true_backlog=self.backlog, owners=owners)


@dataclass
class NamespaceSeries:
    """Per minute: what happened (for scoring, the tests and the report page)."""

    offered: list[float] = field(default_factory=list)
    rejected: list[float] = field(default_factory=list)
    read: list[float] = field(default_factory=list)
    read_capped: list[bool] = field(default_factory=list)
    age: list[float] = field(default_factory=list)
    instances: list[int] = field(default_factory=list)
    tus_serving: list[int] = field(default_factory=list)
    tus_billed: list[int] = field(default_factory=list)


class NamespaceWorld:
    """The namespace, its TUs and one representative consumer fleet; ``advance`` runs a minute."""

    def __init__(self, arrivals: np.ndarray, scenario: NamespaceScenario) -> None:
        self.arrivals = np.asarray(arrivals, dtype=float)
        self.scenario = scenario
        self.minute = 0
        self.fleet = Fleet(scenario.partitions, scenario.events_per_instance_per_minute, scenario.provision_delay_minutes)
        self.tus_requested = scenario.initial_tus
        self.tus_serving = scenario.initial_tus
        self._tu_pending: list[tuple[int, int]] = []
        self.series = NamespaceSeries()
        self.minutes: deque[NamespaceMinute] = deque(maxlen=24 * 60)

    @property
    def done(self) -> bool:
        return self.minute >= len(self.arrivals)

    def request_tus(self, wanted: int) -> bool:
        wanted = max(int(wanted), 1)
        if wanted == self.tus_requested:
            return False
        self._tu_pending.append((self.minute + self.scenario.tu_provision_delay_minutes, wanted))
        self.tus_requested = wanted
        return True

    def advance(self) -> NamespaceMinute:
        """One minute: TU changes that are due, ingress (rejections), egress (caps), reads."""
        minute, scenario = self.minute, self.scenario
        while self._tu_pending and self._tu_pending[0][0] <= minute:
            self.tus_serving = self._tu_pending.pop(0)[1]
        offered = float(self.arrivals[minute])
        accepted = min(offered, self.tus_serving * scenario.ingress_events_per_tu_minute)
        rejected = offered - accepted
        fleet = self.fleet
        wants = min(fleet.backlog + accepted, fleet.capacity(minute))
        share = self.tus_serving * scenario.egress_events_per_tu_minute / scenario.groups
        capped = wants > share + 1e-9
        done, age = fleet.read(minute, accepted, min(wants, share))
        throttled = math.ceil(rejected / EVENTS_PER_REQUEST) + (math.ceil((wants - share) * scenario.groups / EVENTS_PER_REQUEST)
                                                              if capped else 0)
        reads = done * scenario.groups
        record = NamespaceMinute(minute_time(minute), accepted * scenario.event_bytes, accepted,
                                 reads * scenario.event_bytes, reads, float(throttled))
        self.minutes.append(record)
        series = self.series
        series.offered.append(offered)
        series.rejected.append(rejected)
        series.read.append(done)
        series.read_capped.append(capped)
        series.age.append(age)
        series.instances.append(fleet.requested)
        series.tus_serving.append(self.tus_serving)
        series.tus_billed.append(max(self.tus_serving, self.tus_requested))
        self.minute = minute + 1
        return record

    def observe(self) -> Observation:
        return self.fleet.observe(self.minute)

    def conservation_error(self) -> float:
        """Offered events not accounted for as rejected, read or waiting (should be ~0)."""
        return float(sum(self.series.offered) - sum(self.series.rejected) - self.fleet.processed - self.fleet.backlog)


@dataclass(frozen=True, slots=True)
class NamespaceResult:
    """A run's money and service: TU-hours, instance-hours, dollars; rejected events; the SLO."""

    algorithm: str
    knob: str
    minutes: int
    tu_hours: float
    instance_hours: float
    cost_usd: float
    rejected_events: float
    throttled_ingress_minutes: int
    egress_capped_minutes: int
    slo_violation_minutes: int
    max_age_minutes: float
    meets_slo: bool
    consumer_scale_actions: int
    tu_changes: int
    conservation_error: float

    def row(self) -> dict:
        return {name: getattr(self, name) for name in self.__slots__}


def score(world: NamespaceWorld, algorithm: str, knob: str = "") -> NamespaceResult:
    """The run's bill and service (see the module doc for what is billed how)."""
    scenario, series = world.scenario, world.series
    minutes = len(series.offered)
    billed = np.asarray(series.tus_billed, dtype=float)
    hours = math.ceil(minutes / 60)
    tu_hours = float(sum(billed[h * 60:(h + 1) * 60].max() for h in range(hours) if billed[h * 60:(h + 1) * 60].size))
    instance_hours = float(np.sum(series.instances)) / 60.0 * scenario.groups
    cost = tu_hours * scenario.tu_hour_price + instance_hours * scenario.instance_hour_price
    ages = np.asarray(series.age)
    violations = int(np.sum(ages > scenario.slo_minutes))
    instances = np.asarray(series.instances)
    tus = np.asarray(series.tus_billed)
    return NamespaceResult(
        algorithm, knob, minutes, round(tu_hours, 3), round(instance_hours, 3), round(cost, 2),
        round(float(np.sum(series.rejected)), 1), int(np.sum(np.asarray(series.rejected) > 0)),
        int(np.sum(series.read_capped)), violations, round(float(ages.max(initial=0.0)), 3),
        violations <= scenario.slo_violation_share * minutes, int(np.sum(instances[1:] != instances[:-1])),
        int(np.sum(tus[1:] != tus[:-1])), round(world.conservation_error(), 3))
