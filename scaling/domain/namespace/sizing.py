"""Sizing an Event Hubs Standard namespace in throughput units (TUs), both ways.

Why this exists: auto-inflate only ever raises TUs, and a namespace whose egress is its ceiling
makes consumers look slow, so a lag autoscaler would add instances that cannot help. The
namespace target sizes TUs from what the namespace moved in the last minutes and from what its
consumer targets plan to read while they drain their backlog.

One TU allows ingress of 1 MB/s or 1,000 events/s and egress of 2 MB/s or 4,096 events/s,
whichever is hit first (MB = 10^6 bytes here: the lower reading of "MB", so that a count we ask
for never falls short). TUs are billed by the hour (the highest count in the hour), so:

- a raise is asked for at once (a throttled producer loses events), and ingress keeps
  ``spare_tus`` whole TUs above its need besides the headroom (a one-minute burst above the last
  hour's peak is more than 20% of one or two TUs; a spare TU costs little next to an instance);
- ``ingress_step`` (off at 1) keeps that many times the ingress standing: events turned away by a
  step are lost before a raise serves, so only the count standing protects them (at twice the
  TU-hours for a 5x step, where auto-inflate protects by never lowering);
- a lower count is asked for only when it would have carried every minute of the last
  ``scale_down_hold_seconds`` (it will hold) and only from minute ``scale_down_from_minute`` of
  the clock hour (the hour is paid at the high count already; lowering early saves nothing and
  risks a raise within the same hour);
- ``ingress_hold_seconds`` (off at 0) keeps the ingress of the busiest minute of that long
  standing: producers returning to a level seen within it lose nothing, where egress (a
  throttled read is only late) follows the scale-down hold;
- with auto-inflate on, the platform raises and we only deflate (the decision says so).

Pure: values in, a decision out; no Azure imports.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from scaling.domain.decisions import DOWN, HOLD, UP, Decision, ScalerState

INGRESS_BYTES_PER_SECOND_PER_TU = 1_000_000.0
INGRESS_EVENTS_PER_SECOND_PER_TU = 1_000.0
EGRESS_BYTES_PER_SECOND_PER_TU = 2_000_000.0
EGRESS_EVENTS_PER_SECOND_PER_TU = 4_096.0
#: Standard tier: at most 40 TUs per namespace (more needs a support request or Premium/Dedicated).
STANDARD_MAX_TUS = 40
#: Reads at or above this share of the egress ceiling count as "at the ceiling" (per-minute totals
#: of a throttled namespace sit just under it: the throttled reads are retried within the minute).
CEILING_SHARE = 0.95
#: A namespace's status older than this says nothing about the consumers' latest minute.
STATUS_FRESH_FOR = timedelta(minutes=3)

# Reason codes of the namespace target's decisions.
EGRESS_BOUND = "egress_bound"
INGRESS_THROTTLED = "ingress_throttled"
TU_SCALE_UP = "tu_scale_up"
TU_SCALE_DOWN = "tu_scale_down"
TU_STEADY = "tu_steady"
TU_AT_MAX = "tu_at_max"
TU_RAISE_IN_FLIGHT = "tu_raise_in_flight"
SCALE_DOWN_HOLD = "tu_scale_down_hold"
AUTO_INFLATE_RAISES = "auto_inflate_raises"
NO_METRICS = "tu_no_metrics"
#: The consumer-side reason: the namespace's egress, not the instance count, limits the reads.
NAMESPACE_EGRESS_BOUND = "namespace_egress_bound"


@dataclass(frozen=True, slots=True)
class NamespaceMinute:
    """One minute's totals of the namespace's Azure Monitor metrics (Total, PT1M)."""

    minute: datetime
    incoming_bytes: float = 0.0
    incoming_messages: float = 0.0
    outgoing_bytes: float = 0.0
    outgoing_messages: float = 0.0
    throttled_requests: float = 0.0


@dataclass(frozen=True, slots=True)
class NamespaceReading:
    """What collect read: the SKU capacity, auto-inflate, and the recent complete minutes (oldest first)."""

    capacity: int
    auto_inflate: bool = False
    auto_inflate_max: int | None = None
    minutes: tuple[NamespaceMinute, ...] = ()
    #: The TUs that served the latest minute, where known (a raise still provisioning serves
    #: later: its minute hit the ceiling of the count before it); ``None``: ``capacity``.
    serving: int | None = None


@dataclass(frozen=True, slots=True)
class ConsumerCatchUp:
    """A consumer target's planned read rate (events/s) while it drains its backlog: its desired
    instance count times what one instance processes. Each consumer group reads every event, so
    the namespace's egress is the sum over its consumer targets."""

    target: str
    events_per_second: float


@dataclass(frozen=True, slots=True)
class TuSettings:
    """The namespace target's sizing knobs (policy ``eventhubs_namespace``)."""

    min_tus: int = 1
    max_tus: int = 20
    headroom: float = 0.2
    scale_down_hold_seconds: float = 3600.0
    scale_down_from_minute: int = 50
    spare_tus: int = 1
    #: Standing ingress TUs accept this many times the minute's offered ingress (and a lower count
    #: must have carried that for every minute of the hold): a step of that size loses no event
    #: while the raise it triggers provisions. 1: none beyond headroom and the spare TUs.
    ingress_step: float = 1.0
    #: Events a throttled request is counted as (the producers' batch): the ingress a throttled
    #: minute needs is what was accepted plus what was turned away. 1: at least one each.
    events_per_throttled_request: float = 1.0
    #: The count is not lowered below the ingress (with headroom, spare TUs and step) of the busiest
    #: minute of this long: a producer turned away is an event lost, a TU-hour costs little, so
    #: TUs come down more slowly for ingress than for egress. 0: the scale-down hold alone.
    ingress_hold_seconds: float = 0.0

    @property
    def lookback_seconds(self) -> float:
        """How much of the namespace's history a decision reads."""
        return max(self.scale_down_hold_seconds, self.ingress_hold_seconds)


@dataclass(frozen=True, slots=True)
class TuNeed:
    """TUs one minute needs, as fractions (before rounding), per direction."""

    ingress: float
    egress: float

    @property
    def tus(self) -> float:
        return max(self.ingress, self.egress)


def ingress_tus(bytes_per_second: float, events_per_second: float) -> float:
    """TUs that carry this ingress: whichever of bytes and events needs more."""
    return max(bytes_per_second / INGRESS_BYTES_PER_SECOND_PER_TU, events_per_second / INGRESS_EVENTS_PER_SECOND_PER_TU, 0.0)


def egress_tus(bytes_per_second: float, events_per_second: float) -> float:
    """TUs that carry this egress: whichever of bytes and events needs more."""
    return max(bytes_per_second / EGRESS_BYTES_PER_SECOND_PER_TU, events_per_second / EGRESS_EVENTS_PER_SECOND_PER_TU, 0.0)


def egress_ceiling_share(minute: NamespaceMinute, capacity: int) -> float:
    """How much of the egress ceiling of ``capacity`` TUs the minute's reads used (1.0 = all)."""
    return egress_tus(minute.outgoing_bytes / 60.0, minute.outgoing_messages / 60.0) / max(capacity, 1)


def ingress_ceiling_share(minute: NamespaceMinute, capacity: int) -> float:
    return ingress_tus(minute.incoming_bytes / 60.0, minute.incoming_messages / 60.0) / max(capacity, 1)


def is_egress_bound(minute: NamespaceMinute, capacity: int) -> bool:
    """Throttled requests while the reads are at the egress ceiling: the namespace, not the
    consumers, limits what is read. Throttling at a low egress is ingress's (or a burst's)."""
    return minute.throttled_requests > 0 and egress_ceiling_share(minute, capacity) >= CEILING_SHARE


def is_ingress_throttled(minute: NamespaceMinute, capacity: int) -> bool:
    return minute.throttled_requests > 0 and ingress_ceiling_share(minute, capacity) >= CEILING_SHARE


def bytes_per_event(minutes: Iterable[NamespaceMinute]) -> float:
    """The mean event size the namespace saw (egress first: that is what consumers read)."""
    minutes = tuple(minutes)
    out_bytes, out_events = sum(m.outgoing_bytes for m in minutes), sum(m.outgoing_messages for m in minutes)
    if out_events > 0:
        return out_bytes / out_events
    in_bytes, in_events = sum(m.incoming_bytes for m in minutes), sum(m.incoming_messages for m in minutes)
    return in_bytes / in_events if in_events > 0 else 0.0


def standing_ingress(ingress: float, headroom: float, spare_tus: int, ingress_step: float) -> float:
    """The TUs that stand for ``ingress`` TUs offered: raised by ``headroom``, at least ``spare_tus``
    whole TUs above it and ``ingress_step`` times it (none for no ingress)."""
    if ingress <= 0:
        return 0.0
    return max(ingress * (1.0 + headroom), ingress * ingress_step, ingress + spare_tus)


def held_ingress(minutes: Sequence[NamespaceMinute], settings: TuSettings) -> float:
    """The standing ingress TUs of the busiest minute of the last ``ingress_hold_seconds`` (0: off)."""
    if settings.ingress_hold_seconds <= 0 or not minutes:
        return 0.0
    since = minutes[-1].minute - timedelta(seconds=settings.ingress_hold_seconds)
    busiest = max((ingress_tus(m.incoming_bytes / 60.0, m.incoming_messages / 60.0) for m in minutes if m.minute > since),
                  default=0.0)
    return standing_ingress(busiest, settings.headroom, settings.spare_tus, settings.ingress_step)


def minute_need(minute: NamespaceMinute, headroom: float, catch_up_events_per_second: float = 0.0,
                event_bytes: float = 0.0, spare_tus: int = 0, turned_away: float = 0.0,
                ingress_step: float = 1.0) -> TuNeed:
    """The TUs one minute needs with headroom: what producers offered (accepted plus the
    ``turned_away`` events of a throttled minute) raised by ``headroom``, and at least
    ``spare_tus`` whole TUs above it (at one or two TUs a percentage is less than a burst), and
    its egress or the consumers' planned catch-up reads, whichever is higher."""
    egress_events = max(minute.outgoing_messages / 60.0, catch_up_events_per_second)
    egress_bytes = max(minute.outgoing_bytes / 60.0, catch_up_events_per_second * event_bytes)
    raise_by = 1.0 + headroom
    size = minute.incoming_bytes / minute.incoming_messages if minute.incoming_messages > 0 else event_bytes
    offered = minute.incoming_messages + turned_away
    ingress = ingress_tus((minute.incoming_bytes + turned_away * size) / 60.0, offered / 60.0)
    return TuNeed(standing_ingress(ingress, headroom, spare_tus, ingress_step), egress_tus(egress_bytes, egress_events) * raise_by)


def whole_tus(need: float, settings: TuSettings) -> int:
    """The count that carries ``need``, within the bounds (a tiny float excess is no reason for one more)."""
    return max(settings.min_tus, min(settings.max_tus, math.ceil(need - 1e-9)))


@dataclass(frozen=True, slots=True)
class TuDecision:
    """The namespace target's decision; ``egress_bound`` tells its consumer targets not to scale out."""

    capacity: int
    target_capacity: int | None
    direction: str
    reason_code: str
    reasons: tuple[str, ...]
    egress_bound: bool = False
    metrics: Mapping[str, Any] = field(default_factory=dict)

    @property
    def acts(self) -> bool:
        return self.target_capacity is not None and self.direction != HOLD


def size_namespace(reading: NamespaceReading, consumers: Sequence[ConsumerCatchUp], settings: TuSettings, now: datetime,
                   last_raise_at: datetime | None = None) -> TuDecision:
    """The TU count for the namespace now (see the module doc).

    ``last_raise_at`` is when TUs last went up (ours or auto-inflate's): a lower count is not
    asked for within ``scale_down_hold_seconds`` of it."""
    capacity = reading.capacity
    if not reading.minutes:
        return TuDecision(capacity, None, HOLD, NO_METRICS, ("no complete minute of namespace metrics yet",))
    latest = reading.minutes[-1]
    # The ceilings are those of the TUs that served the minute, not of a raise still provisioning.
    serving = reading.serving if reading.serving is not None else capacity
    catch_up = sum(max(consumer.events_per_second, 0.0) for consumer in consumers)
    event_bytes = bytes_per_event(reading.minutes[-10:])
    egress_bound = is_egress_bound(latest, serving)
    ingress_throttled = is_ingress_throttled(latest, serving)
    turned_away = latest.throttled_requests * settings.events_per_throttled_request if ingress_throttled else 0.0
    need = minute_need(latest, settings.headroom, catch_up, event_bytes, settings.spare_tus, turned_away,
                       settings.ingress_step)
    wanted = whole_tus(need.tus, settings)
    if egress_bound or ingress_throttled:
        # What was moved is capped by the ceiling: the real demand is at least one TU more than served.
        wanted = max(wanted, min(max(capacity, serving + 1), settings.max_tus))
    if ingress_throttled:
        # Producers turned away: how much they offered is known only as far as the batch says; twice
        # what served finds a step of any size in a few raises instead of one TU at a time.
        wanted = max(wanted, min(2 * serving, settings.max_tus))
    metrics = {"capacity": capacity, "ingress_tus": round(need.ingress, 3), "egress_tus": round(need.egress, 3),
               "catch_up_events_per_second": round(catch_up, 3), "bytes_per_event": round(event_bytes, 1),
               "throttled_requests": latest.throttled_requests, "serving_tus": serving,
               "turned_away_events": turned_away, "egress_bound": egress_bound,
               "ingress_throttled": ingress_throttled, "auto_inflate": reading.auto_inflate,
               "egress_ceiling_share": round(egress_ceiling_share(latest, serving), 3), "wanted_tus": wanted}
    numbers = (f"ingress needs {need.ingress:.2f} TU, egress {need.egress:.2f} TU with {settings.headroom:.0%} headroom "
               f"(consumers plan to read {catch_up:.0f} events/s)")
    code = EGRESS_BOUND if egress_bound else INGRESS_THROTTLED if ingress_throttled else TU_SCALE_UP
    if wanted > capacity:
        if reading.auto_inflate:
            return TuDecision(capacity, None, HOLD, EGRESS_BOUND if egress_bound else AUTO_INFLATE_RAISES,
                              (numbers, f"auto-inflate is on: it raises TUs (up to {reading.auto_inflate_max}); "
                                        f"we only deflate, so {wanted} is not asked for"), egress_bound, metrics)
        return TuDecision(capacity, wanted, UP, code, (numbers, f"{capacity} -> {wanted} TUs"), egress_bound, metrics)
    if (egress_bound or ingress_throttled) and capacity > serving:
        return TuDecision(capacity, None, HOLD, EGRESS_BOUND if egress_bound else TU_RAISE_IN_FLIGHT,
                          (numbers, f"throttled on the {serving} TUs serving; the {capacity} asked for serve "
                                    "within the provisioning delay"), egress_bound, metrics)
    if egress_bound or ingress_throttled:
        return TuDecision(capacity, None, HOLD, EGRESS_BOUND if egress_bound else TU_AT_MAX,
                          (numbers, f"throttled at the maximum of {settings.max_tus} TUs"), egress_bound, metrics)
    if wanted == capacity:
        return TuDecision(capacity, None, HOLD, TU_STEADY, (numbers, f"{capacity} TUs carry it"), False, metrics)
    return _scale_down(reading, settings, now, last_raise_at, catch_up, event_bytes, numbers, metrics)


def _scale_down(reading: NamespaceReading, settings: TuSettings, now: datetime, last_raise_at: datetime | None,
                catch_up: float, event_bytes: float, numbers: str, metrics: Mapping[str, Any]) -> TuDecision:
    """A lower count, only when every minute of the hold would have fitted it, and late in the
    clock hour (the hour is billed at its highest count)."""
    capacity = reading.capacity
    hold = timedelta(seconds=settings.scale_down_hold_seconds)
    covered = reading.minutes[-1].minute - reading.minutes[0].minute + timedelta(minutes=1)
    held = [m for m in reading.minutes if m.minute > reading.minutes[-1].minute - hold]
    lower = whole_tus(max(minute_need(m, settings.headroom, catch_up, event_bytes, settings.spare_tus,
                                      ingress_step=settings.ingress_step).tus for m in held), settings)
    kept_for_ingress = whole_tus(held_ingress(reading.minutes, settings), settings)
    metrics = {**metrics, "hold_tus": lower,
               **({"ingress_hold_tus": kept_for_ingress} if settings.ingress_hold_seconds > 0 else {})}
    if lower >= capacity:
        return TuDecision(capacity, None, HOLD, SCALE_DOWN_HOLD,
                          (numbers, f"a busier minute of the last {hold.total_seconds() / 60:.0f} min needed {lower} TUs: "
                                    "a lower count would not hold"), False, metrics)
    if settings.ingress_hold_seconds > 0 and kept_for_ingress >= capacity:
        return TuDecision(capacity, None, HOLD, SCALE_DOWN_HOLD,
                          (numbers, f"the busiest minute of the last {settings.ingress_hold_seconds / 60:.0f} min offered "
                                    f"ingress for {kept_for_ingress} TUs: they stand for producers returning to it"),
                          False, metrics)
    lower = max(lower, kept_for_ingress)
    if covered < hold:
        return TuDecision(capacity, None, HOLD, SCALE_DOWN_HOLD,
                          (numbers, f"metrics cover {covered.total_seconds() / 60:.0f} of the {hold.total_seconds() / 60:.0f} "
                                    "min a lower count must be shown to hold"), False, metrics)
    if last_raise_at is not None and now - last_raise_at < hold:
        return TuDecision(capacity, None, HOLD, SCALE_DOWN_HOLD,
                          (numbers, f"TUs went up at {last_raise_at.isoformat()}, within the {hold.total_seconds() / 60:.0f} "
                                    "min hold"), False, metrics)
    if now.minute < settings.scale_down_from_minute:
        return TuDecision(capacity, None, HOLD, SCALE_DOWN_HOLD,
                          (numbers, f"{lower} TUs would hold, asked for from minute {settings.scale_down_from_minute} "
                                    f"of the hour (this hour is billed at {capacity} already)"), False, metrics)
    deflate = " (deflating what auto-inflate raised)" if reading.auto_inflate else ""
    return TuDecision(capacity, lower, DOWN, TU_SCALE_DOWN, (numbers, f"{capacity} -> {lower} TUs{deflate}: every minute "
                      f"of the last {hold.total_seconds() / 60:.0f} min fitted {lower}"), False, metrics)


# --- the consumer side ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NamespaceStatus:
    """What a consumer target needs of its namespace target: whether egress limits its reads now,
    and which decision said so."""

    namespace_target: str
    decision_id: str | None
    egress_bound: bool
    observed_at: datetime | None


#: What a consumer target learns of its instances' throughput: not learned from throttled reads.
LEARNING_FIELDS = ("throughput_per_instance", "throughput_observations", "throughput_floor", "throughput_unconfirmed",
                   "throughput_before_drop", "throughput_drop_shown_at")


def egress_bound_hold(decision: Decision, namespace: NamespaceStatus | None, old_state: ScalerState,
                      now: datetime) -> Decision:
    """A consumer target's decision while its namespace's egress is the bottleneck:

    - a scale-out is held (``namespace_egress_bound``, pointing to the namespace's decision):
      more instances would read no faster, their receives are throttled;
    - nothing is learned of the instances' throughput from this minute (throttled reads would
      teach a rate the instances do not have, and size the consumers up once egress is free).

    Any decision of a namespace that is not egress bound, or whose status is older than
    ``STATUS_FRESH_FOR``, or with no namespace, passes unchanged."""
    if namespace is None or not namespace.egress_bound:
        return decision
    if namespace.observed_at is None or now - namespace.observed_at > STATUS_FRESH_FOR:
        return decision
    acted = decision.state or old_state
    unlearned = replace(acted, **{name: getattr(old_state, name) for name in LEARNING_FIELDS})
    if decision.direction != UP or not decision.acts:
        return replace(decision, state=unlearned) if decision.state is not None else decision
    state = replace(unlearned, capacity=decision.current_capacity, ready_capacity=old_state.ready_capacity,
                    pending_ready_at=old_state.pending_ready_at, last_action_at=old_state.last_action_at,
                    last_direction=old_state.last_direction, action_tokens=old_state.action_tokens,
                    action_tokens_at=old_state.action_tokens_at, last_reason_code=NAMESPACE_EGRESS_BOUND,
                    last_decision_id=old_state.last_decision_id)
    reason = (f"namespace target {namespace.namespace_target!r} is egress bound (throttled at its TU egress ceiling; "
              f"decision {namespace.decision_id}): {decision.target_capacity} instances would read no faster than "
              f"{decision.current_capacity}; see the namespace's decision")
    metrics = {**decision.metrics, "held_scale_out_to": decision.target_capacity,
               "namespace_target": namespace.namespace_target, "namespace_decision_id": namespace.decision_id}
    return replace(decision, target_capacity=None, direction=HOLD, reason_code=NAMESPACE_EGRESS_BOUND,
                   reasons=(reason, *decision.reasons), metrics=metrics, state=state)
