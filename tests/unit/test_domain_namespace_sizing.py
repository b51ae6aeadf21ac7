"""TU sizing of an Event Hubs namespace (scaling/domain/namespace/sizing.py) and the consumer
rule that holds a scale-out while the namespace's egress is the bottleneck: boundaries as tables."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.decisions import DOWN, HOLD, UP, Decision, ScalerState
from scaling.domain.namespace.sizing import (
    AUTO_INFLATE_RAISES,
    EGRESS_BOUND,
    INGRESS_THROTTLED,
    NAMESPACE_EGRESS_BOUND,
    NO_METRICS,
    SCALE_DOWN_HOLD,
    TU_AT_MAX,
    TU_SCALE_DOWN,
    TU_SCALE_UP,
    TU_STEADY,
    ConsumerCatchUp,
    NamespaceMinute,
    NamespaceReading,
    NamespaceStatus,
    TuSettings,
    egress_bound_hold,
    egress_tus,
    ingress_tus,
    is_egress_bound,
    size_namespace,
)

NOW = datetime(2026, 3, 1, 12, 55, tzinfo=UTC)  # minute 55: late in the billing hour
EARLY = datetime(2026, 3, 1, 12, 10, tzinfo=UTC)
KB = 1_000


def minute(at: datetime, *, events_in: float = 0, events_out: float = 0, size: float = 1 * KB, throttled: float = 0) -> NamespaceMinute:
    """Per-second rates in, per-minute totals out (what Azure Monitor reports)."""
    return NamespaceMinute(at, events_in * size * 60, events_in * 60, events_out * size * 60, events_out * 60, throttled)


def steady(minutes: int, end: datetime, **rates) -> tuple[NamespaceMinute, ...]:
    return tuple(minute(end - timedelta(minutes=minutes - index), **rates) for index in range(minutes))


@pytest.mark.parametrize(("bytes_per_second", "events_per_second", "expected"), [
    (0, 0, 0.0),
    (1_000_000, 0, 1.0),      # 1 MB/s is one TU
    (0, 1_000, 1.0),          # so are 1,000 events/s
    (500_000, 1_500, 1.5),    # whichever needs more
    (2_500_000, 10, 2.5),
])
def test_ingress_tus(bytes_per_second, events_per_second, expected) -> None:
    assert ingress_tus(bytes_per_second, events_per_second) == pytest.approx(expected)


@pytest.mark.parametrize(("bytes_per_second", "events_per_second", "expected"), [
    (2_000_000, 0, 1.0),      # 2 MB/s is one TU of egress
    (0, 4_096, 1.0),          # so are 4,096 events/s
    (1_000_000, 8_192, 2.0),
    (6_000_000, 100, 3.0),
])
def test_egress_tus(bytes_per_second, events_per_second, expected) -> None:
    assert egress_tus(bytes_per_second, events_per_second) == pytest.approx(expected)


SETTINGS = TuSettings(min_tus=1, max_tus=10, headroom=0.2, scale_down_hold_seconds=3600, scale_down_from_minute=50,
                      spare_tus=0)


@pytest.mark.parametrize(("events_in", "events_out", "capacity", "catch_up", "direction", "target", "code"), [
    # ingress 2,000 ev/s of 1 KB = 2 MB/s -> 2 TU, x1.2 = 2.4 -> 3
    (2_000, 2_000, 1, 0, UP, 3, TU_SCALE_UP),
    (2_000, 2_000, 3, 0, HOLD, None, TU_STEADY),
    # egress: two consumer groups read 4,000 ev/s of 1 KB = 4 MB/s -> 2 TU, x1.2 -> 3
    (500, 1_000, 1, 4_000, UP, 3, TU_SCALE_UP),
    # the consumers' catch-up keeps the count up although the namespace is quiet now
    (100, 200, 3, 4_000, HOLD, None, TU_STEADY),
    # at the upper bound
    (20_000, 0, 4, 0, UP, 10, TU_SCALE_UP),
    # the lower bound: an idle namespace keeps min_tus
    (0, 0, 1, 0, HOLD, None, TU_STEADY),
])
def test_sizing_for_ingress_egress_and_catch_up(events_in, events_out, capacity, catch_up, direction, target, code) -> None:
    reading = NamespaceReading(capacity, minutes=steady(60, NOW, events_in=events_in, events_out=events_out))
    decision = size_namespace(reading, [ConsumerCatchUp("c", catch_up)], SETTINGS, NOW)
    assert (decision.direction, decision.target_capacity, decision.reason_code) == (direction, target, code)


def test_headroom_is_applied_before_rounding() -> None:
    """900 ev/s fits one TU; with 20% headroom (1,080) it needs two; with 10% (990) one."""
    reading = NamespaceReading(1, minutes=steady(60, NOW, events_in=900))
    assert size_namespace(reading, [], SETTINGS, NOW).target_capacity == 2
    assert size_namespace(reading, [], TuSettings(headroom=0.1, spare_tus=0), NOW).reason_code == TU_STEADY


@pytest.mark.parametrize(("events_in", "spare", "wanted"), [
    (900, 0, 2),      # 0.9 TU x 1.2 = 1.08
    (900, 1, 2),      # 0.9 + 1 spare = 1.9
    (1_500, 1, 3),    # 1.5 + 1 = 2.5 > 1.5 x 1.2 = 1.8: the spare wins at low counts
    (9_000, 1, 11),   # 9 x 1.2 = 10.8 > 9 + 1: the headroom wins at high counts
    (0, 1, 1),        # an idle namespace needs no spare: min_tus
])
def test_ingress_keeps_a_spare_tu_where_a_percentage_is_less_than_a_burst(events_in, spare, wanted) -> None:
    reading = NamespaceReading(1, minutes=steady(60, NOW, events_in=events_in))
    decision = size_namespace(reading, [], TuSettings(max_tus=20, spare_tus=spare), NOW)
    assert decision.metrics["wanted_tus"] == wanted


@pytest.mark.parametrize(("events_in", "step", "capacity", "direction", "target"), [
    (1_600, 1.0, 1, UP, 3),      # 1.6 TU + 1 spare = 2.6: no step beyond it
    (1_600, 4.0, 1, UP, 7),      # 4 x 1.6 = 6.4: a 4x step is accepted while the raise provisions
    (1_600, 4.0, 7, HOLD, None),  # ... and 7 stays standing
    (1_600, 4.0, 10, DOWN, 7),   # a lower count keeps the step: 7, not the 3 the need alone fits
    (6_000, 4.0, 10, UP, 20),    # 4 x 6 = 24: within max_tus
    (0, 4.0, 1, HOLD, None),     # an idle namespace: min_tus
])
def test_standing_tus_accept_an_ingress_step(events_in, step, capacity, direction, target) -> None:
    """Producers turned away by a step are lost before any raise serves (the minute that shows
    the step and the raise's provisioning): the count standing is what accepts them."""
    reading = NamespaceReading(capacity, minutes=steady(60, NOW, events_in=events_in))
    decision = size_namespace(reading, [], TuSettings(max_tus=20, ingress_step=step), NOW)
    assert (decision.direction, decision.target_capacity) == (direction, target)


@pytest.mark.parametrize(("now", "busy_minutes_ago", "last_raise_minutes_ago", "history_minutes", "direction", "code"), [
    (NOW, None, None, 60, DOWN, TU_SCALE_DOWN),          # quiet for the whole hold, late in the hour
    (EARLY, None, None, 60, HOLD, SCALE_DOWN_HOLD),      # would hold, but the hour is paid already: wait
    (NOW, 30, None, 60, HOLD, SCALE_DOWN_HOLD),          # a busy minute within the hold
    (NOW, 61, None, 62, DOWN, TU_SCALE_DOWN),            # a busy minute just before it no longer counts
    (NOW, None, 20, 60, HOLD, SCALE_DOWN_HOLD),          # raised within the hold
    (NOW, None, None, 30, HOLD, SCALE_DOWN_HOLD),        # too little history to show it holds
])
def test_scale_down_only_when_it_holds(now, busy_minutes_ago, last_raise_minutes_ago, history_minutes, direction, code) -> None:
    minutes = list(steady(history_minutes, now, events_in=500, events_out=500))
    if busy_minutes_ago is not None:
        index = len(minutes) - busy_minutes_ago
        minutes[index] = minute(minutes[index].minute, events_in=4_500, events_out=4_500)
    raised = None if last_raise_minutes_ago is None else now - timedelta(minutes=last_raise_minutes_ago)
    decision = size_namespace(NamespaceReading(5, minutes=tuple(minutes)), [], SETTINGS, now, raised)
    assert (decision.direction, decision.reason_code) == (direction, code)
    if direction == DOWN:
        assert decision.target_capacity == 1


@pytest.mark.parametrize(("hold_hours", "busy_minutes_ago", "busy", "capacity", "direction", "target"), [
    (0, 120, "in", 8, DOWN, 1),      # off: the scale-down hold's hour alone, the busy minute is outside it
    (3, 120, "in", 8, DOWN, 6),      # within the ingress hold: 4.5 TU x 1.2 = 5.4 stands, 6 TUs
    (3, 180, "in", 8, DOWN, 6),      # the hold's oldest minute still counts ...
    (3, 181, "in", 8, DOWN, 1),      # ... the one before it no longer
    (3, 120, "in", 6, HOLD, None),   # already at the held count: no lower one
    (3, 120, "out", 8, DOWN, 1),     # a busy egress minute is not held: a throttled read is only late
    (24, 1_440, "in", 8, DOWN, 6),   # the longest hold, its oldest minute
])
def test_tus_come_down_no_lower_than_the_busiest_ingress_of_the_ingress_hold(hold_hours, busy_minutes_ago, busy, capacity,
                                                                            direction, target) -> None:
    """Quiet at 500 events/s of 1 KB (1 TU) but for one minute of 4,500 in (or out) some time ago."""
    minutes = list(steady(max(busy_minutes_ago, 60) + 1, NOW, events_in=500, events_out=500))
    index = len(minutes) - busy_minutes_ago
    rates = {"events_in": 4_500, "events_out": 500} if busy == "in" else {"events_in": 500, "events_out": 4_500}
    minutes[index] = minute(minutes[index].minute, **rates)
    settings = replace(SETTINGS, ingress_hold_seconds=hold_hours * 3600.0)
    decision = size_namespace(NamespaceReading(capacity, minutes=tuple(minutes)), [], settings, NOW)
    assert (decision.direction, decision.target_capacity) == (direction, target)
    assert decision.reason_code == (TU_SCALE_DOWN if direction == DOWN else SCALE_DOWN_HOLD)


@pytest.mark.parametrize(("events_in", "capacity", "direction", "code", "says"), [
    (3_000, 1, HOLD, AUTO_INFLATE_RAISES, "we only deflate"),
    (500, 5, DOWN, TU_SCALE_DOWN, "deflating what auto-inflate raised"),
])
def test_with_auto_inflate_we_only_deflate(events_in, capacity, direction, code, says) -> None:
    reading = NamespaceReading(capacity, auto_inflate=True, auto_inflate_max=8, minutes=steady(60, NOW, events_in=events_in))
    decision = size_namespace(reading, [], SETTINGS, NOW)
    assert (decision.direction, decision.reason_code) == (direction, code)
    assert any(says in reason for reason in decision.reasons)


@pytest.mark.parametrize(("events_out", "throttled", "capacity", "bound"), [
    (4_096, 10, 1, True),     # at the ceiling and throttled
    (3_900, 10, 1, True),     # within 95% of it
    (3_000, 10, 1, False),    # throttled, but far below the egress ceiling: not egress's doing
    (4_096, 0, 1, False),     # at the ceiling without throttling: exactly enough
    (8_192, 5, 2, True),
])
def test_egress_bound_needs_throttling_at_the_ceiling(events_out, throttled, capacity, bound) -> None:
    assert is_egress_bound(minute(NOW, events_out=events_out, size=100, throttled=throttled), capacity) is bound


def test_egress_bound_asks_for_at_least_one_more_tu_and_says_so() -> None:
    reading = NamespaceReading(2, minutes=steady(60, NOW, events_in=500, events_out=8_192, size=100, throttled=40))
    decision = size_namespace(reading, [], SETTINGS, NOW)
    assert (decision.direction, decision.target_capacity, decision.reason_code, decision.egress_bound) == (UP, 3, EGRESS_BOUND, True)
    at_max = size_namespace(reading, [], TuSettings(max_tus=2), NOW)
    assert (at_max.direction, at_max.reason_code, at_max.egress_bound) == (HOLD, EGRESS_BOUND, True)


def test_ingress_throttled_at_max_holds() -> None:
    reading = NamespaceReading(2, minutes=steady(60, NOW, events_in=2_000, size=100, throttled=40))
    assert size_namespace(reading, [], TuSettings(max_tus=2, headroom=0.0, spare_tus=0), NOW).reason_code == TU_AT_MAX
    assert size_namespace(reading, [], TuSettings(max_tus=4, headroom=0.0, spare_tus=0), NOW).reason_code == INGRESS_THROTTLED


def test_no_metrics_holds() -> None:
    assert size_namespace(NamespaceReading(3), [], SETTINGS, NOW).reason_code == NO_METRICS


# --- the consumer side ---------------------------------------------------------------------------

OLD = ScalerState("orders", capacity=4, ready_capacity=4, last_action_at=NOW - timedelta(hours=1), last_direction=DOWN,
                  last_decision_id="earlier", action_tokens=2.0)


def consumer_decision(direction: str, target: int | None) -> Decision:
    acted = ScalerState("orders", capacity=target or 4, ready_capacity=4, last_action_at=NOW, last_direction=direction,
                        last_decision_id="d1", throughput_per_instance=55.0, action_tokens=1.0)
    return Decision("d1", "orders", NOW, 4, target, direction, "slo_scale_out" if direction == UP else "slo_steady",
                    ("age would pass the SLO",), {"predicted_age_seconds": 400}, acted)


@pytest.mark.parametrize(("direction", "target", "bound", "observed_minutes_ago", "held"), [
    (UP, 8, True, 1, True),          # egress bound: no scale-out
    (UP, 8, False, 1, False),        # not bound: the engine's decision stands
    (UP, 8, True, 5, False),         # a stale status says nothing
])
def test_a_consumer_on_an_egress_bound_namespace_does_not_scale_out(direction, target, bound, observed_minutes_ago, held) -> None:
    decision = consumer_decision(direction, target)
    status = NamespaceStatus("orders-ns", "ns-decision-7", bound, NOW - timedelta(minutes=observed_minutes_ago))
    result = egress_bound_hold(decision, status, OLD, NOW)
    if not held:
        assert (result.direction, result.target_capacity) == (decision.direction, decision.target_capacity)
        return
    assert (result.direction, result.target_capacity, result.reason_code) == (HOLD, None, NAMESPACE_EGRESS_BOUND)
    assert result.metrics["namespace_decision_id"] == "ns-decision-7" and "ns-decision-7" in result.reasons[0]
    state = result.state
    assert state is not None
    # nothing of the action is remembered, nor a throughput learned from throttled reads
    assert (state.capacity, state.last_action_at, state.last_decision_id, state.action_tokens) == (4, OLD.last_action_at, "earlier", 2.0)
    assert state.throughput_per_instance is None


@pytest.mark.parametrize(("direction", "target", "bound", "learned"), [
    (HOLD, None, True, None),      # egress bound: throttled reads teach nothing
    (DOWN, 2, True, None),
    (HOLD, None, False, 55.0),     # not bound: learned as before
])
def test_no_throughput_is_learned_while_egress_bound(direction, target, bound, learned) -> None:
    status = NamespaceStatus("orders-ns", "ns-decision-7", bound, NOW - timedelta(minutes=1))
    result = egress_bound_hold(consumer_decision(direction, target), status, OLD, NOW)
    assert result.direction == direction and result.state.throughput_per_instance == learned


def test_without_a_namespace_the_decision_is_unchanged() -> None:
    decision = consumer_decision(UP, 8)
    assert egress_bound_hold(decision, None, OLD, NOW) is decision


@pytest.mark.parametrize(
    ("serving", "throttled", "wanted"),
    [
        pytest.param(None, 3_000, None, id="ceiling-of-the-tus-asked-for-hides-the-throttling"),
        pytest.param(2, 0, None, id="at-the-ceiling-but-nothing-throttled"),
        pytest.param(2, 3_000, 9, id="throttled-on-the-tus-serving-sized-from-what-was-offered"),
    ],
)
def test_ingress_is_sized_from_what_was_offered_on_the_tus_serving(serving, throttled, wanted) -> None:
    """A raise 2 -> 3 TUs still provisioning; the minute ran at the 2 serving TUs' ingress ceiling
    (2,000 events/s) and turned away 3,000 requests of 100 events (5,000 events/s). On d0d07e7
    the ceiling test read the 3 TUs asked for (2,000 of 3,000/s: not throttled), sized from the
    accepted events alone, and held; on the TUs serving, what producers offered (7,000/s, with
    20% headroom 8.4 TUs) is asked for at once."""
    minutes = steady(60, NOW, events_in=2_000, size=100, throttled=throttled)
    settings = replace(SETTINGS, events_per_throttled_request=100.0)
    decision = size_namespace(NamespaceReading(3, minutes=minutes, serving=serving), [], settings, NOW)
    assert decision.target_capacity == wanted


def test_throttled_producers_of_an_unknown_batch_double_the_tus_serving() -> None:
    """The same minute with the batch unknown (each throttled request counted as one event): what
    producers offered is not known, so twice what served (one TU at a time took a 5x step six
    throttled minutes, now four; docs/benchmark-namespace.md)."""
    minutes = steady(60, NOW, events_in=2_000, size=100, throttled=10)
    decision = size_namespace(NamespaceReading(2, minutes=minutes, serving=2), [], SETTINGS, NOW)
    assert (decision.direction, decision.target_capacity) == (UP, 4)
