"""The SLO mode on a Service Bus queue (scaling/domain/slo_queue.py), through the real engine."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain import slo_kernel
from scaling.domain.decisions import DOWN, HOLD, UP, ScalerState
from scaling.domain.engine import evaluate
from scaling.domain.policy import Bounds, PlanSettings, SloSettings, SourceSettings, TargetPolicy
from scaling.domain.samples import MetricSample, SourceReading
from scaling.domain.slo_queue import (
    QueueOutlook,
    Readiness,
    interval_throughput,
    is_queue_target,
    readiness,
    scale_in_hold_seconds,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
PLAN = "/subscriptions/0/resourceGroups/rg/providers/Microsoft.Web/serverfarms/jobs"
NAMESPACE_ID = "/subscriptions/0/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/jobs-ns"
QUEUE = SourceSettings(kind="servicebus", name="jobs", fully_qualified_namespace="jobs-ns.servicebus.windows.net",
                       queue_name="jobs", metrics_resource_id=NAMESPACE_ID)


def target(throughput: float | None = 10.0, **slo) -> TargetPolicy:
    return TargetPolicy(name="jobs", plan=PlanSettings(PLAN), sources=(QUEUE,), bounds=Bounds(1, 32, balanced_counts=False),
                        mode="slo", slo=SloSettings(events_per_instance_per_second=throughput, **slo))


def sample(minute: int, capacity: int, *, active: int, age: float | None, incoming: float | None,
           completed: float | None = None, ok: bool = True) -> MetricSample:
    moment = T0 + timedelta(minutes=minute)
    reading = SourceReading(name="jobs", kind="servicebus", ok=ok, error=None if ok else "peek: timed out",
                            active_messages=active if ok else None,
                            oldest_enqueued_at=None if age is None else moment - timedelta(seconds=age),
                            incoming_per_minute=incoming, completed_per_minute=completed)
    return MetricSample(target="jobs", collected_at=moment, capacity=capacity, sources=(reading,))


def steady(minutes: int, capacity: int, **reading) -> list[MetricSample]:
    return [sample(minute, capacity, **reading) for minute in range(minutes)]


def decide(policy: TargetPolicy, samples: list[MetricSample], state: ScalerState | None = None):
    return evaluate(policy, state or ScalerState(target="jobs"), samples, samples[-1].collected_at)


@pytest.mark.parametrize(
    ("age", "backlog", "arrivals", "service", "seconds", "expected"),
    [
        pytest.param(100, 1000, 10, 5, 60, 130, id="half-served-ages-half-as-fast"),
        pytest.param(100, 1000, 10, 10, 60, 100, id="served-as-fast-as-it-arrives"),
        pytest.param(100, 1000, 10, 20, 60, 40, id="served-twice-as-fast-gets-younger"),
        pytest.param(100, 1000, 10, 20, 0, 100, id="no-time-no-change"),
        pytest.param(100, 500, 0, 0, 60, 160, id="nobody-serving-ages-by-the-clock"),
        pytest.param(100, 500, 0, 10, 60, 0, id="backlog-drained"),
        pytest.param(0, 0, 10, 10, 60, 0, id="keeping-up-stays-empty"),
        pytest.param(0, 0, 10, 5, 60, 30, id="falling-behind-starts-aging"),
        pytest.param(30, 100, 10, 100, 60, 0, id="drained-within-the-time"),
    ],
)
def test_a_queue_age_follows_the_fifo_fluid_model(age, backlog, arrivals, service, seconds, expected) -> None:
    came_in = slo_kernel.backlog_came_in(float(backlog), float(age))
    assert float(slo_kernel.predicted_age(float(age), float(backlog), float(arrivals), float(service), float(seconds),
                                          came_in)) == pytest.approx(expected)


def test_only_all_servicebus_targets_are_queue_targets() -> None:
    eventhub = SourceSettings(kind="eventhub", name="hub", fully_qualified_namespace="ns.servicebus.windows.net",
                              event_hub_name="hub", checkpoint_account_url="https://a.blob.core.windows.net")
    assert is_queue_target(target())
    assert not is_queue_target(replace(target(), sources=(eventhub,)))


def test_an_aging_queue_scales_out_to_serve_arrivals_and_drain() -> None:
    """Arrivals of 30/s against 2 x 10/s: the oldest message would pass the limit before new
    instances serve, so the count jumps to one that serves the forecast and drains the backlog."""
    policy = target()
    decision = decide(policy, steady(4, 2, active=6000, age=200, incoming=1800, completed=1200))
    forecast = 30 * (1 + policy.slo.headroom)
    assert (decision.direction, decision.reason_code) == (UP, "slo_at_risk")
    assert decision.target_capacity * 10 > forecast
    assert (decision.target_capacity - 1) * 10 < forecast + 6000 / policy.slo.max_event_age_seconds * 2
    assert decision.metrics["predicted_age_seconds"] > decision.metrics["age_limit_seconds"]


def test_on_a_lower_bound_of_the_rate_an_aging_queue_drains_within_the_slo() -> None:
    """Nothing learned or configured, only the lower bound of the rate (a cold start): the
    oldest message is predicted past the SLO itself, so the scale-out drains within the SLO
    (``slo_kernel.drain_seconds``, the Event Hubs mode's rule) instead of half the dwell, and
    asks for more instances than the same rate known for sure would."""
    samples = steady(4, 2, active=12000, age=290, incoming=1800, completed=None)
    bound = decide(target(None), samples, ScalerState(target="jobs", throughput_floor=10.0))
    known = decide(target(10.0), samples)
    slo = target(None).slo
    assert slo.min_dwell_seconds / 2 > slo.max_event_age_seconds  # (the two drains differ)
    assert bound.metrics["throughput_source"] == "lower bound"
    assert bound.metrics["predicted_age_seconds"] > slo.max_event_age_seconds
    forecast = 30 * (1 + slo.headroom)
    piled = 12000 + forecast * slo.provisioning_delay_seconds - forecast * slo.safety_seconds  # (decided as sampled)
    assert (bound.direction, known.direction) == (UP, UP)
    assert bound.target_capacity == math.ceil((forecast + piled / slo.max_event_age_seconds) / 10)
    assert bound.target_capacity > known.target_capacity
    # ... and the decision says so, as the Event Hubs mode's does.
    assert bound.metrics["drain_seconds"] == slo.max_event_age_seconds
    assert known.metrics["drain_seconds"] == slo.min_dwell_seconds / 2
    assert any(reason.startswith(f"draining within the SLO ({slo.max_event_age_seconds:.0f}s)") for reason in bound.reasons)
    assert not any(reason.startswith("draining within the SLO") for reason in known.reasons)


@pytest.mark.parametrize(
    ("arrivals", "budget", "expected"),
    [
        # 3 x 10/s against 36.75/s: the oldest message reaches the 210 s limit after about 1,140 s
        pytest.param(35, 4, 3, id="falls-behind-slowly-holds-the-budgets-900s"),
        pytest.param(35, 2, 4, id="budget-spacing-1800s"),
        # ... against 39.9/s: after about 850 s, within the spacing and a reaction
        pytest.param(38, 4, 4, id="falls-behind-too-fast-for-the-spacing"),
        pytest.param(25, 4, 3, id="serves-the-arrivals-holds-indefinitely"),
    ],
)
def test_a_queue_with_surplus_scales_in_to_the_smallest_count_that_holds(arrivals, budget, expected) -> None:
    """A queue's scale-in holds the dwell or the action budget's spacing, whichever is shorter
    (``queue_scale_in_hold``): its age is read every minute, so a count a little short of the
    arrivals runs a standing backlog within the limit until the next scale-out."""
    policy = target(max_actions_per_hour=budget)
    decision = decide(policy, steady(5, 10, active=3, age=1, incoming=arrivals * 60, completed=arrivals * 60))
    hold = min(policy.slo.min_dwell_seconds, 3600 / budget)
    assert (decision.direction, decision.reason_code) == (DOWN, "slo_surplus")
    assert decision.target_capacity == expected
    assert decision.metrics["calm_rate"] == pytest.approx(arrivals * (1 + policy.slo.headroom), abs=1e-3)
    if expected * 10 < decision.metrics["calm_rate"]:  # (falls behind: it holds at least the spacing, not forever)
        assert "for about" in decision.reasons[0]
        assert float(decision.reasons[0].split("for about ")[1].split("s")[0]) >= hold


@pytest.mark.parametrize(
    ("dwell", "budget", "expected"),
    [
        pytest.param(2400, 4, 900, id="the-budgets-spacing"),
        pytest.param(2400, 1, 2400, id="the-dwell-when-shorter"),
        pytest.param(600, 4, 600, id="a-short-dwell"),
        pytest.param(2400, 0, 2400, id="no-budget-the-dwell"),
    ],
)
def test_a_queues_scale_in_holds_the_shorter_of_the_dwell_and_the_budgets_spacing(dwell, budget, expected) -> None:
    assert scale_in_hold_seconds(target(min_dwell_seconds=dwell, max_actions_per_hour=budget)) == expected


@pytest.mark.parametrize(
    ("age", "direction", "code"),
    [pytest.param(30, HOLD, "queue_rates_unknown", id="young"), pytest.param(250, UP, "queue_age_over_limit", id="old")],
)
def test_without_azure_monitor_rates_the_age_alone_decides(age, direction, code) -> None:
    decision = decide(target(), steady(5, 4, active=100, age=age, incoming=None))
    assert (decision.direction, decision.reason_code) == (direction, code)


def test_no_scale_in_without_the_latest_rate() -> None:
    samples = steady(5, 10, active=0, age=None, incoming=60, completed=60)
    samples[-1] = sample(4, 10, active=0, age=None, incoming=None)
    decision = decide(target(), samples)
    assert (decision.direction, decision.reason_code) == (HOLD, "queue_rates_unknown")


def test_a_failed_peek_holds() -> None:
    samples = steady(5, 10, active=0, age=None, incoming=60, completed=60)
    samples[-1] = sample(4, 10, active=0, age=None, incoming=60, ok=False)
    decision = decide(target(), samples)
    assert (decision.direction, decision.reason_code) == (HOLD, "no_queue_data")


@pytest.mark.parametrize(
    ("active", "learned"),
    [pytest.param(5000, True, id="busy-queue-teaches-the-rate"), pytest.param(3, False, id="idle-queue-is-a-floor")],
)
def test_throughput_is_learned_from_completions_of_a_busy_queue(active, learned) -> None:
    """Completions of 1200 a minute on 2 instances: 10 messages/s each, learned only while busy."""
    decision = decide(target(throughput=None), steady(9, 2, active=active, age=30, incoming=1200, completed=1200))
    state = decision.state
    if learned:
        assert state.throughput_per_instance == pytest.approx(10.0)
        assert decision.metrics["throughput_source"] == "learned"
    else:
        assert state.throughput_per_instance is None and state.throughput_floor == pytest.approx(10.0)


def test_completions_after_a_capacity_change_teach_nothing_until_it_is_steady() -> None:
    """Azure Monitor's minute trails the sample: right after 4 -> 2 instances the completions
    still count 4 instances' work and would double the learned rate. Divided by the most
    instances of that stretch they are still a lower bound."""
    samples = steady(3, 4, active=5000, age=30, incoming=2400, completed=2400) + [
        sample(minute, 2, active=5000, age=30, incoming=2400, completed=2400) for minute in range(3, 6)]
    decision = decide(target(throughput=None), samples)
    assert decision.state.throughput_per_instance is None
    assert decision.state.throughput_floor == pytest.approx(2400 / 60 / 4)
    # Seven minutes after the change (lag and provisioning both) they still may count the 4.
    seven = samples + [sample(minute, 2, active=5000, age=30, incoming=1200, completed=1200) for minute in range(6, 10)]
    assert decide(target(throughput=None), seven).state.throughput_per_instance is None
    later = seven + [sample(minute, 2, active=5000, age=30, incoming=1200, completed=1200) for minute in range(10, 12)]
    assert decide(target(throughput=None), later).state.throughput_per_instance == pytest.approx(10.0)


# --- issue 51: the queue-specific readings ------------------------------------------------------------


def _capacities(*counts: int) -> list[MetricSample]:
    return [sample(minute, count, active=0, age=None, incoming=60, completed=60) for minute, count in enumerate(counts)]


@pytest.mark.parametrize(
    ("counts", "fallback", "ready", "steps"),
    [
        pytest.param((4, 4, 4, 4), 4, 4, (), id="steady"),
        pytest.param((4, 4, 4, 8, 12), 4, 8, ((60.0, 12),), id="each-scale-out-on-its-own"),
        pytest.param((4, 4, 4, 4, 8), 4, 4, ((60.0, 8),), id="one-in-flight"),
        pytest.param((8, 8, 8, 4, 6), 4, 4, ((60.0, 6),), id="scale-in-at-once-then-out"),
        pytest.param((6, 6), 3, 3, ((60.0, 6),), id="window-shorter-than-the-delay"),
    ],
)
def test_readiness_is_tracked_per_scale_out(counts, fallback, ready, steps) -> None:
    """A count the samples show was asked for after the sample before and serves 120 s later;
    another scale-out does not restart its wait (on d0d07e7 the engine's single due time moved
    with every scale-out, and the mode added an instance a minute meanwhile)."""
    schedule = readiness(_capacities(*counts), counts[-1], 120.0, fallback)
    assert (schedule.ready, schedule.steps) == (ready, steps)


def test_a_climbing_count_still_raises_the_throughput_floor() -> None:
    """Completions of 2,400 a minute while the count climbs 2 -> 3 -> 4: never steady for five
    minutes, so d0d07e7 learned no bound at all; over the most instances it is 10/s each."""
    samples = [sample(minute, count, active=9000, age=100, incoming=3000, completed=2400)
               for minute, count in enumerate((2, 3, 4))]
    assert interval_throughput(samples, 4) == (pytest.approx(10.0), False)


def test_no_scale_in_while_the_oldest_message_is_past_the_limit() -> None:
    """Reproduction 1 on the engine: 32 instances, 103,200 waiting, the oldest 420 s old, arrivals
    down to 80/s. On d0d07e7: 32 -> 11 ("holds indefinitely"), judged at the now-low rate."""
    samples = steady(6, 32, active=103_200, age=420, incoming=4800, completed=32_000)
    decision = decide(target(1000 / 60), samples)
    assert decision.direction != DOWN
    assert decision.reason_code in ("queue_age_over_limit", "slo_at_risk")


def test_the_active_counts_growth_calls_a_surge_azure_monitor_has_not_reported() -> None:
    """Reproduction 3 on the engine: the active count 19,000 -> 38,000 -> 57,000 a minute apart
    while Azure Monitor still reports 80/s; 5 instances serve 10/s each and stay busy, so the
    arrivals are (19,000 / 60 + 50)/s. On d0d07e7 the forecast stayed 84/s and it held."""
    samples = steady(3, 5, active=100, age=5, incoming=4800, completed=3000) + [
        sample(3 + minute, 5, active=active, age=age, incoming=4800, completed=3000)
        for minute, (active, age) in enumerate(((19_000, 50), (38_000, 100), (57_000, 150)))]
    decision = decide(target(10.0), samples)
    assert decision.metrics["growth_rate"] == pytest.approx(19_000 / 60 + 50)
    assert (decision.direction, decision.reason_code) == (UP, "slo_at_risk")
    assert decision.target_capacity == 32  # (its serving the growth needs more than the 32 allowed)


def test_the_age_path_moves_the_head_through_the_backlog_at_the_rate_it_came_in_across_a_scale_out() -> None:
    """20,781 messages that came in over the last 57 s, 15/s arriving now; one instance of 1,000/min
    serves until a scale-out to six serves at 120 s. The head reaches the newest of them once
    all 20,781 are served: 2,000 by 120 s, the rest at 100/s, at 307.8 s, then 307.8 s old (they
    came in at the sample). Chaining the stretches at backlog / age anew (the first version) thinned
    the backlog with the new arrivals and put that age at 206 s, under the 210 s limit."""
    outlook = QueueOutlook(arrival_rate=15.0, recent_arrival_rate=15.0, completion_rate=None, backlog=20_781.0,
                           age_seconds=57.0)
    schedule = Readiness(1, ((120.0, 6),))
    path = slo_kernel.age_path(outlook.age_seconds, outlook.backlog, 15.0, schedule.services(1000 / 60), [420.0])
    through = 120 + (20_781 - 2_000) / 100
    assert max(age for _, age in path) == pytest.approx(through, rel=1e-3)
    assert any(abs(moment - through) < 1e-6 for moment, _ in path)


@pytest.mark.parametrize(("learned", "floor", "sized_by"), [
    pytest.param(5.0, 14.0, (1 - slo_kernel.QUEUE_FLOOR_DOUBT) * 14.0, id="a-low-rate-rises-to-the-queues-doubted-floor"),
    pytest.param(12.0, 14.0, 12.0, id="within-the-queues-doubt-the-learned-rate-stands"),
])
def test_a_queues_floor_is_doubted_more_than_a_hubs(learned, floor, sized_by) -> None:
    """A queue's rate is Azure Monitor's completions per minute, late and lumpy, so its best minute
    overstates more than a hub's checkpoints do: at the hub's ``FLOOR_DOUBT`` the queue benchmark's
    bursts member in ``realistic`` missed its SLO at lag 3 (4 -> 14 violation minutes)."""
    assert slo_kernel.QUEUE_FLOOR_DOUBT > slo_kernel.FLOOR_DOUBT
    samples = steady(4, 4, active=100, age=20, incoming=600, completed=None)
    decision = decide(target(None), samples, ScalerState(target="jobs", throughput_per_instance=learned,
                                                         throughput_floor=floor))
    assert decision.metrics["throughput_per_instance"] == pytest.approx(sized_by)


@pytest.mark.parametrize(
    ("rising_per_minute", "expected"),
    [
        pytest.param(0, 3, id="level-arrivals-hold-the-budgets-spacing"),
        pytest.param(1, 4, id="clearly-rising-arrivals-hold-the-dwell"),
    ],
)
def test_into_a_rising_edge_a_queues_scale_in_still_holds_the_dwell(rising_per_minute, expected) -> None:
    """Arrivals of 35/s, level or rising by a message a minute (the rise is clear: no noise about
    the line, and the calm rate it adds is under 1%): 3 x 10/s falls behind, reaching the limit
    after about 1,100 s, which holds the budget's 900 s but not the dwell. While the arrivals
    clearly rise the dwell stays (reproduction 6: no scale-in into a rising edge)."""
    samples = [sample(minute, 10, active=3, age=1, incoming=2096 + rising_per_minute * minute,
                      completed=2096 + rising_per_minute * minute) for minute in range(5)]
    decision = decide(target(), samples)
    assert (decision.direction, decision.reason_code) == (DOWN, "slo_surplus")
    assert decision.target_capacity == expected


@pytest.mark.parametrize(
    ("capacity", "rising_per_minute", "quoted"),
    [
        pytest.param(3, 0, "900s", id="level-arrivals-quote-the-budgets-spacing"),
        pytest.param(4, 1, "2400s", id="clearly-rising-arrivals-quote-the-dwell"),
    ],
)
def test_a_queues_hold_quotes_the_span_its_scale_in_was_tested_for(capacity, rising_per_minute, quoted) -> None:
    """The decision log says how long no smaller count would hold for the span the step tested:
    the budget's spacing on level arrivals, the dwell while they clearly rise (the same arrivals
    as the rising-edge test: 3 instances hold about 1,100 s)."""
    samples = [sample(minute, capacity, active=3, age=1, incoming=2096 + rising_per_minute * minute,
                      completed=2096 + rising_per_minute * minute) for minute in range(5)]
    decision = decide(target(), samples)
    assert (decision.direction, decision.reason_code) == (HOLD, "slo_steady")
    assert f"no smaller count would hold for {quoted}" in decision.reasons[0]
