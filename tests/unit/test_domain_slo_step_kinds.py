"""Both source kinds through the one SLO step (``slo_kernel.slo_step``): the same situation read
as an Event Hubs hub (4 partitions, each owner serving its own) and as a Service Bus queue (the
same messages pooled, every instance serving the one queue), decided by the same tests in the same
order. Where the rows differ, the readings differ (docs/architecture.md, "One SLO step, two source
kinds"): the queue's age is read directly and its backlog drains at the rate it came in, its
rates may be unknown, its instances in flight are tracked per scale-out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from scaling.domain import slo_kernel as kernel
from tests.unit.test_domain_slo_step import INTERVAL, TOP, Case, step


@dataclass(frozen=True)
class Queue:
    """What a queue reads besides the case's pooled numbers: the scale-outs in flight (seconds on,
    instances serving from then) and whether Azure Monitor reported its rates yet."""

    steps: tuple = ()
    rates_known: bool = True


def queue_step(case: Case, queue: Queue) -> kernel.StepOutcome:
    """The step over ``case`` read as one queue: the partitions' messages pooled (the oldest is
    the oldest of them, the backlog and the rates add up)."""
    arrival, recent = sum(case.arrival), sum(case.recent or case.arrival)
    unknown = np.array([np.nan])
    rate = (lambda value: np.array([value])) if queue.rates_known else (lambda value: unknown)
    capacity = case.capacity
    ready = capacity if case.ready is None else case.ready
    age, backlog = max(case.ages), sum(case.backlog)
    limit = case.slo.max_event_age_seconds - case.slo.safety_seconds
    reading = kernel.QueueReading(
        age=np.array([age]), backlog=np.array([backlog]), arrival_rate=rate(arrival), recent_rate=rate(recent),
        signal=rate(max(arrival, recent)), peak=rate(max(arrival, recent)), rise=np.zeros(1), noise=np.zeros(1),
        schedules=[(ready, queue.steps)])
    state = kernel.StepState(
        throughput=np.array([case.throughput]), measured=np.array([case.measured]), capacity=np.array([capacity]),
        ready=np.array([ready]), pending_seconds=np.zeros(1), delay=np.array([np.nan]), stalling=np.zeros(1, dtype=bool),
        up_size=np.ones(1, dtype=np.int64), below=np.array([sum(1 for n in case.counts if n < capacity)]),
        backlog_total=np.zeros(1), previous_backlog_total=np.zeros(1), unowned=np.zeros(1, dtype=np.int64),
        pause=np.array([np.nan]),
        falling_behind=np.array([backlog > 0 and age > limit / 2]))
    return kernel.slo_step([], state, kernel.StepKnobs.of([case.slo]), kernel.StepCounts.one(case.counts, TOP),
                           interval=INTERVAL, since_latest=0.0, enough_history=case.enough_history,
                           stall_readings=lambda: None, queue=reading)


def _decision(outcome: kernel.StepOutcome) -> tuple[str, int, int]:
    return kernel.REASONS[int(outcome.reason[0])], int(outcome.direction[0]), int(outcome.wanted[0])


#: The oldest event 270.5 s old (the limit is 270 s) with the backlog that age implies at 5/s a partition.
AGED = {"ages": (270.5,) * 4, "backlog": (1352.5,) * 4}
UNKNOWN, DOWN, HOLD, UP = np.nan, kernel.DOWN, kernel.HOLD, kernel.UP
#: name: (the case, what the queue reads besides, the hub's decision (None: a hub never reads
#: that), the queue's decision), each decision (reason, direction, count wanted).
KINDS = {
    # the same tests, the same outcome
    "throughput unknown, new instances to wait for": (
        Case(throughput=UNKNOWN, ready=1), Queue(), ("throughput_unknown_waiting", HOLD, 2), "same"),
    "throughput unknown, falling behind (hub: the backlog grew; queue: the head past half the limit)": (
        Case(throughput=UNKNOWN, ages=(200.0,) * 4, backlog_total=401.0), Queue(),
        ("throughput_unknown_backlog_growing", UP, 3), "same"),
    "throughput unknown, keeping up": (Case(throughput=UNKNOWN), Queue(), ("throughput_unknown", HOLD, 2), "same"),
    "at risk: the oldest past the limit and served as fast as it arrives": (
        Case(**AGED), Queue(), ("slo_at_risk", UP, 4), "same"),
    "at the limit": (Case(ages=(270.0,) * 4, backlog=(1350.0,) * 4), Queue(), ("slo_steady", HOLD, 2), "same"),
    "too little history for a scale-in": (
        Case(arrival=(0.5,) * 4, enough_history=False), Queue(), ("too_few_samples", HOLD, 2), "same"),
    "a surplus": (Case(arrival=(1.0,) * 4, capacity=4, owners=(0, 1, 2, 3)), Queue(), ("slo_surplus", DOWN, 1), "same"),
    "no smaller count holds": (Case(), Queue(), ("slo_steady", HOLD, 2), "same"),
    # the readings differ
    "a backlog that grows (hub: no scale-in; queue: the growth is a rate, 2/s here)": (
        Case(arrival=(0.5,) * 4, backlog=(130.1,) * 4, earlier=(100.0,) * 4), Queue(),
        ("backlog_growing", HOLD, 2), ("slo_surplus", DOWN, 1)),
    "Azure Monitor's rates not reported yet": (
        Case(arrival=(0.5,) * 4), Queue(rates_known=False), None, ("queue_rates_unknown", HOLD, 2)),
    "no rates, the oldest past the limit": (
        Case(**AGED), Queue(rates_known=False), None, ("queue_age_over_limit", UP, 3)),
    "the oldest past the limit, a few messages waiting (hub: drained within a reaction)": (
        Case(arrival=(0.5,) * 4, ages=(400.0,) * 4, backlog=(10.0,) * 4, capacity=4, owners=(0, 1, 2, 3)), Queue(),
        ("slo_surplus", DOWN, 1), ("queue_age_over_limit", HOLD, 4)),
    "an instance in flight (hub: the owners show who serves)": (
        Case(arrival=(0.5,) * 4, ready=1), Queue(steps=((60.0, 2),)), ("slo_surplus", DOWN, 1),
        ("scale_out_in_flight", HOLD, 2)),
    # (one of 4 instances of 12.5/s serving, the other 3 from 200 s on: past the limit in 180 s, back
    # under 300 s after they serve, and the 50/s asked for serve the 44/s needed; 44/s at 11/s each do not)
    "at risk, the scale-out in flight serves the need": (
        Case(**AGED, throughput=12.5, capacity=4, owners=(0, 1, 2, 3), ready=1), Queue(steps=((200.0, 4),)), None,
        ("scale_out_in_flight", HOLD, 4)),
    "at risk, the scale-out in flight falls short of the need": (
        Case(**AGED, throughput=11.0, capacity=4, counts=(1, 2, 3, 4, 5), ready=1), Queue(steps=((200.0, 4),)), None,
        ("slo_at_risk", UP, 5)),
}


@pytest.mark.parametrize(("case", "queue", "hub_decides", "queue_decides"), KINDS.values(), ids=KINDS.keys())
def test_both_source_kinds_go_through_the_one_step(case: Case, queue: Queue, hub_decides, queue_decides) -> None:
    if hub_decides is not None:
        assert _decision(step([case])) == hub_decides
    assert _decision(queue_step(case, queue)) == (hub_decides if queue_decides == "same" else queue_decides)
