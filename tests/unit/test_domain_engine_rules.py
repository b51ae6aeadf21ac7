"""The rule engine in ``rules`` mode: ``evaluate(target, state, history, now)`` on hand-built
MetricSamples. Time is injected (``now``), nothing is patched."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.decisions import DOWN, HOLD, UP, ScalerState, decision_id_for
from scaling.domain.engine import evaluate
from scaling.domain.policy import Bounds, PlanSettings, Rule, SourceSettings, Step, TargetPolicy, Tier, policy_from_dict
from scaling.domain.samples import MetricSample, PartitionReading, SourceReading

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NAME = "orders"
PLAN = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Web/serverfarms/asp"


def at(minute: float) -> datetime:
    return T0 + timedelta(minutes=minute)


def hub(backlog: int, partitions: int = 32, *, name: str = "hub", ok: bool = True, error: str | None = None) -> SourceReading:
    """An Event Hubs reading whose partitions add up to ``backlog`` (checkpoint 1000, last 1000 + share)."""
    shares = [backlog // partitions + (1 if index < backlog % partitions else 0) for index in range(partitions)]
    readings = tuple(PartitionReading.measure(str(index), 0, 1000 + share, 1000) for index, share in enumerate(shares))
    return SourceReading(name=name, kind="eventhub", ok=ok, error=error, partitions=readings if ok else ())


def sample(minute: float, backlog: int = 0, capacity: int | None = 4, *, partitions: int = 32, ok: bool = True,
           error: str | None = None, sources: tuple[SourceReading, ...] | None = None, target: str = NAME,
           capacity_error: str | None = None) -> MetricSample:
    if sources is None:
        sources = (hub(backlog, partitions, ok=ok, error=error),)
    return MetricSample(target=target, collected_at=at(minute), capacity=capacity, sources=sources,
                        capacity_error=capacity_error)


def series(values: list[int], capacity: int = 4, *, partitions: int = 32, end: float = 0, step: float = 1) -> list[MetricSample]:
    """One sample per ``step`` minutes, the last at minute ``end``."""
    start = end - step * (len(values) - 1)
    return [sample(start + step * index, value, capacity, partitions=partitions) for index, value in enumerate(values)]


def rule(**changes) -> Rule:
    values = dict(name="backlog", metric="backlog", aggregate="average", window_seconds=600, min_samples=5,
                  scale_up_above=1000.0, scale_down_below=100.0)
    values.update(changes)
    return Rule(**values)


def rules_target(*rules: Rule, min_instances: int = 1, max_instances: int = 32, balanced: bool = False, cap: bool = True,
                 up: Step = Step(step=1, cooldown_seconds=0), down: Step = Step(step=1, cooldown_seconds=0),
                 sources: tuple[str, ...] = ("hub",)) -> TargetPolicy:
    return TargetPolicy(
        name=NAME, plan=PlanSettings(PLAN), sources=tuple(SourceSettings(kind="eventhub", name=s) for s in sources),
        bounds=Bounds(min_instances=min_instances, max_instances=max_instances, cap_at_partitions=cap, balanced_counts=balanced),
        mode="rules", rules=rules or (rule(),), scale_up=up, scale_down=down,
    )


def seed_policy_target(**bounds) -> TargetPolicy:
    document = {"version": 1, "targets": [{
        "name": NAME, "plan": {"resource_id": PLAN}, "preset": "seed", "bounds": {"max_instances": 30, **bounds},
        "sources": [{"kind": "eventhub", "name": "hub", "fullyQualifiedNamespace": "ns.servicebus.windows.net",
                     "eventHubName": "hub", "checkpointAccountUrl": "https://a.blob.core.windows.net"}],
    }]}
    return policy_from_dict(document).targets[0]


def fresh(capacity: int = 4, **changes) -> ScalerState:
    return replace(ScalerState(target=NAME, capacity=capacity), **changes)


# --- the seed rule ---------------------------------------------------------------------------------

SEED = seed_policy_target(balanced_counts=False)


@pytest.mark.parametrize(
    ("values", "capacity", "direction", "target_capacity", "code", "fragment"),
    [
        pytest.param([5000] * 4, 4, HOLD, None, "too_few_samples", "only 4 of 5", id="4-samples-hold"),
        pytest.param([50] * 4, 4, HOLD, None, "too_few_samples", "only 4 of 5", id="4-samples-no-scale-in"),
        pytest.param([1500] * 5, 4, UP, 5, "rule_scale_up", "average backlog 1500.0 > 1000", id="average-above"),
        pytest.param([0, 0, 0, 0, 6000], 4, UP, 5, "rule_scale_up", "average backlog 1200.0 > 1000", id="spike-lifts-average"),
        pytest.param([1000] * 5, 4, HOLD, None, "within_thresholds", "within thresholds", id="average-at-upper"),
        pytest.param([900, 900, 900, 900, 1300], 4, HOLD, None, "within_thresholds", "", id="average-below-upper"),
        pytest.param([50, 60, 70, 80, 90], 4, DOWN, 3, "rule_scale_down", "maximum backlog 90.0 < 100", id="maximum-below"),
        pytest.param([10, 10, 10, 10, 150], 4, HOLD, None, "within_thresholds", "", id="one-high-blocks-scale-in"),
        pytest.param([99] * 5, 4, DOWN, 3, "rule_scale_down", "", id="max-just-below"),
        pytest.param([100] * 5, 4, HOLD, None, "within_thresholds", "", id="max-at-lower"),
        pytest.param([1500] * 10, 29, UP, 30, "rule_scale_up", "", id="up-to-max"),
        pytest.param([1500] * 10, 30, HOLD, None, "at_max_bound", "already at the max bound (30)", id="at-max"),
        pytest.param([0] * 10, 1, HOLD, None, "at_min_bound", "already at the min bound (1)", id="at-min"),
    ],
)
def test_seed_rule(values, capacity, direction, target_capacity, code, fragment) -> None:
    history = series(values, capacity)
    decision = evaluate(SEED, fresh(capacity), history, at(0))
    assert (decision.direction, decision.target_capacity, decision.reason_code) == (direction, target_capacity, code)
    assert fragment in " ".join(decision.reasons)
    assert decision.current_capacity == capacity


@pytest.mark.parametrize(
    ("oldest_offset_seconds", "direction"),
    [(600, HOLD), (599, UP)],
    ids=["exactly-600s-old-excluded", "599s-old-included"],
)
def test_seed_window_is_600_seconds(oldest_offset_seconds: int, direction: str) -> None:
    # five samples averaging 900 (below the upper threshold) plus one old spike
    history = series([900] * 5, end=0)
    history.append(sample(-oldest_offset_seconds / 60, 100_000))
    decision = evaluate(SEED, fresh(), history, at(0))
    assert decision.direction == direction


@pytest.mark.parametrize(
    ("values", "since_last_action", "last_direction", "direction", "code"),
    [
        pytest.param([1500] * 5, 599, UP, HOLD, "cooldown", id="up-blocked-at-599s"),
        pytest.param([1500] * 5, 600, UP, UP, "rule_scale_up", id="up-allowed-at-600s"),
        pytest.param([50] * 5, 599, UP, HOLD, "cooldown", id="down-after-up-blocked"),
        pytest.param([50] * 5, 600, DOWN, DOWN, "rule_scale_down", id="down-allowed-at-600s"),
        pytest.param([1500] * 5, 60, DOWN, HOLD, "cooldown", id="shared-cooldown"),
    ],
)
def test_seed_cooldown(values, since_last_action, last_direction, direction, code) -> None:
    state = fresh(4, last_action_at=at(0) - timedelta(seconds=since_last_action), last_direction=last_direction)
    decision = evaluate(SEED, state, series(values), at(0))
    assert (decision.direction, decision.reason_code) == (direction, code)
    if code == "cooldown":
        until = (state.last_action_at + timedelta(seconds=600)).isoformat()
        assert f"cooldown until {until}" in decision.reasons[-1]
        assert decision.target_capacity is None


@pytest.mark.parametrize(("capacity", "values", "expected"), [(8, [1500] * 5, 9), (11, [50] * 5, 10)],
                         ids=["8-up-by-one", "11-down-by-one"])
def test_seed_preset_with_default_bounds_steps_by_one(capacity, values, expected) -> None:
    seed = seed_policy_target()
    decision = evaluate(seed, fresh(capacity), series(values, capacity, partitions=32), at(0))
    assert decision.target_capacity == expected


def test_scale_out_records_state_for_the_next_evaluation() -> None:
    decision = evaluate(SEED, fresh(4), series([1500] * 5), at(0))
    assert decision.acts
    assert decision.state.capacity == 5
    assert decision.state.last_action_at == at(0)
    assert decision.state.last_direction == UP
    # the next minute: still above, but the seed's 10-minute cooldown holds
    history = [*series([1500] * 5), sample(1, 1500, capacity=5)]
    following = evaluate(SEED, decision.state, history, at(1))
    assert following.reason_code == "cooldown"


# --- at-least-once delivery: duplicates and late samples -------------------------------------------


@pytest.mark.parametrize(
    ("history", "expected_code"),
    [
        # four distinct samples: a duplicate must not make up the fifth
        pytest.param(series([1500] * 4) + series([1500] * 4)[-1:], "too_few_samples", id="duplicate-does-not-count"),
        # the spike repeated three times would lift the average above 1000 if counted thrice
        pytest.param(series([2000, 500, 500, 500, 500]) + [sample(-4, 2000)] * 3, "within_thresholds", id="duplicate-no-weight"),
        # a redelivered sample from an older window position does not block a scale-in either
        pytest.param(series([50] * 5) + [sample(-2, 50)] * 2, "rule_scale_down", id="duplicate-harmless"),
    ],
)
def test_duplicates_do_not_change_aggregates(history, expected_code) -> None:
    decision = evaluate(SEED, fresh(), history, at(0))
    assert decision.reason_code == expected_code
    unique = list({s.sample_id: s for s in reversed(history)}.values())
    assert evaluate(SEED, fresh(), unique, at(0)) == decision


def test_late_sample_is_ordered_by_collection_time() -> None:
    latest = rules_target(rule(aggregate="latest", min_samples=3))
    early = [sample(-4, 0, 3), sample(-3, 0, 3), sample(-2, 0, 3)]
    newest = sample(0, 5000, capacity=3)
    late = sample(-1, 0, capacity=2)  # collected before `newest`, delivered after it
    decision = evaluate(latest, fresh(3), [*early, newest, late], at(0))
    assert decision.direction == UP  # the latest value is 5000, not the late 0
    assert decision.current_capacity == 3  # capacity from the newest sample, not the late one
    assert decision.target_capacity == 4
    # the late sample maps to the decision of the newest sample: no second decision
    assert decision.decision_id == decision_id_for(NAME, newest.sample_id)
    in_order = evaluate(latest, fresh(3), [*early, late, newest], at(0))
    assert in_order == decision


def test_samples_of_other_targets_and_far_future_are_ignored() -> None:
    history = series([50] * 5) + [sample(-1, 100_000, target="billing"), sample(20, 100_000)]
    decision = evaluate(SEED, fresh(), history, at(0))
    assert decision.reason_code == "rule_scale_down"


def test_no_samples_holds() -> None:
    decision = evaluate(SEED, fresh(), [sample(-20, 5000)], at(0))
    assert (decision.reason_code, decision.target_capacity) == ("no_samples", None)


def test_unknown_capacity_holds() -> None:
    history = [sample(m, 5000, capacity=None, capacity_error="ARM 503") for m in range(-4, 1)]
    decision = evaluate(SEED, ScalerState(target=NAME), history, at(0))
    assert decision.reason_code == "capacity_unknown"
    assert "ARM 503" in decision.reasons[0]


# --- failed sources ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected_direction", "expected_code"),
    [
        pytest.param([50] * 5, HOLD, "source_failed", id="no-scale-in"),
        pytest.param([1500] * 5, UP, "rule_scale_up", id="scale-out-allowed"),
    ],
)
def test_failed_source_never_scales_in(values, expected_direction, expected_code) -> None:
    history = [*series(values, end=-1), sample(0, ok=False, error="timeout reading partition properties")]
    decision = evaluate(SEED, fresh(), history, at(0))
    assert (decision.direction, decision.reason_code) == (expected_direction, expected_code)
    if expected_code == "source_failed":
        assert "no scale-in while a source failed" in decision.reasons[-1]
        assert "timeout reading partition properties" in decision.reasons[-1]


def test_capacity_error_blocks_scale_in() -> None:
    history = series([50] * 4, end=-1) + [sample(0, 50, capacity=None, capacity_error="ARM throttled")]
    decision = evaluate(SEED, fresh(4), history, at(0))
    assert decision.reason_code == "source_failed"
    assert "capacity: ARM throttled" in decision.reasons[-1]


# --- combined rules, tiers, steps -----------------------------------------------------------------------


def two_source_sample(minute: float, orders: int, payments: int, capacity: int = 4) -> MetricSample:
    return sample(minute, capacity=capacity, sources=(hub(orders, name="orders"), hub(payments, name="payments")))


COMBINED = rules_target(
    rule(name="orders-lag", source="orders", min_samples=3),
    rule(name="payments-lag", source="payments", min_samples=3, scale_up_above=500, scale_down_below=50),
    sources=("orders", "payments"),
)


@pytest.mark.parametrize(
    ("orders", "payments", "direction", "code"),
    [
        pytest.param(5000, 200, UP, "rule_scale_up", id="first-says-out"),
        pytest.param(500, 900, UP, "rule_scale_up", id="second-says-out"),
        pytest.param(5000, 10, UP, "rule_scale_up", id="out-beats-in"),
        pytest.param(10, 200, HOLD, "rules_disagree", id="only-first-says-in"),
        pytest.param(500, 10, HOLD, "rules_disagree", id="only-second-says-in"),
        pytest.param(10, 10, DOWN, "rule_scale_down", id="all-say-in"),
        pytest.param(500, 200, HOLD, "within_thresholds", id="none"),
    ],
)
def test_combined_rules_out_if_any_in_only_if_all(orders, payments, direction, code) -> None:
    history = [two_source_sample(m, orders, payments) for m in (-2, -1, 0)]
    decision = evaluate(COMBINED, fresh(), history, at(0))
    assert (decision.direction, decision.reason_code) == (direction, code)
    if code == "rules_disagree":
        assert "scale-in needs every rule to agree" in decision.reasons


def test_combined_rule_short_of_samples_blocks_scale_in() -> None:
    target = rules_target(rule(name="short", min_samples=3), rule(name="long", min_samples=10))
    decision = evaluate(target, fresh(), series([10] * 3), at(0))
    assert decision.direction == HOLD
    assert decision.reason_code == "too_few_samples"


TIERED = rules_target(rule(metric="backlog_per_instance", min_samples=3, scale_up_above=500, scale_down_below=50,
                           tiers=(Tier(1, 3, 300.0, 30.0),)))


@pytest.mark.parametrize(
    ("capacity", "per_instance", "direction"),
    [
        (2, 400, UP),  # tier 1-3: above 300
        (5, 400, HOLD),  # default: not above 500
        (5, 600, UP),
        (2, 40, HOLD),  # tier: not below 30
        (5, 40, DOWN),  # default: below 50
        (2, 20, DOWN),
        (3, 350, UP),  # tier upper edge inclusive
        (4, 350, HOLD),
    ],
)
def test_tiers_pick_thresholds_by_current_capacity(capacity: int, per_instance: int, direction: str) -> None:
    history = series([per_instance * capacity] * 3, capacity)
    decision = evaluate(TIERED, fresh(capacity), history, at(0))
    assert decision.direction == direction


@pytest.mark.parametrize(
    ("step", "values", "capacity", "expected"),
    [
        (Step(step_percent=50, cooldown_seconds=0), [5000] * 5, 4, 6),
        (Step(step_percent=50, cooldown_seconds=0), [5000] * 5, 10, 15),
        (Step(step_percent=50, cooldown_seconds=0), [5000] * 5, 1, 2),  # at least one
        (Step(step_percent=50, cooldown_seconds=0), [0] * 5, 10, 5),
        (Step(step_percent=10, cooldown_seconds=0), [0] * 5, 10, 9),
        (Step(step=3, cooldown_seconds=0), [5000] * 5, 4, 7),
        (Step(step=3, cooldown_seconds=0), [0] * 5, 4, 1),
        (Step(step=3, cooldown_seconds=0), [5000] * 5, 30, 32),  # clamped to the max bound
        (Step(step=3, cooldown_seconds=0), [0] * 5, 2, 1),  # clamped to the min bound
    ],
)
def test_steps_by_count_and_percent(step: Step, values: list[int], capacity: int, expected: int) -> None:
    target = rules_target(up=step, down=step)
    decision = evaluate(target, fresh(capacity), series(values, capacity), at(0))
    assert decision.target_capacity == expected


@pytest.mark.parametrize(
    ("capacity", "values", "min_instances", "max_instances", "code", "fragment"),
    [
        (10, [5000] * 5, 1, 10, "at_max_bound", "already at the max bound (10)"),
        (2, [0] * 5, 2, 10, "at_min_bound", "already at the min bound (2)"),
    ],
)
def test_bounds_hold_with_reason(capacity, values, min_instances, max_instances, code, fragment) -> None:
    target = rules_target(min_instances=min_instances, max_instances=max_instances)
    decision = evaluate(target, fresh(capacity), series(values, capacity), at(0))
    assert (decision.direction, decision.target_capacity, decision.reason_code) == (HOLD, None, code)
    assert fragment in decision.reasons[-1]


@pytest.mark.parametrize(
    ("capacity", "values", "partitions", "up", "direction", "expected", "code"),
    [
        pytest.param(1, [0] * 5, 32, 1, UP, 3, "below_min_bound", id="below-min-low-load"),
        pytest.param(1, [500] * 5, 32, 1, UP, 3, "below_min_bound", id="below-min-no-rule-fires"),
        pytest.param(1, [5000] * 5, 32, 1, UP, 3, "below_min_bound", id="below-min-step-too-short"),
        pytest.param(1, [5000] * 5, 32, 4, UP, 5, "rule_scale_up", id="below-min-step-past-it"),
        pytest.param(10, [500] * 5, 32, 1, DOWN, 8, "above_max_bound", id="above-max-no-rule-fires"),
        pytest.param(10, [5000] * 5, 32, 1, DOWN, 8, "above_max_bound", id="above-max-high-load"),
        pytest.param(10, [0] * 5, 32, 1, DOWN, 8, "above_max_bound", id="above-max-step-too-short"),
        pytest.param(6, [500] * 5, 4, 1, DOWN, 4, "above_max_bound", id="above-partitions"),
    ],
)
def test_a_capacity_outside_the_bounds_is_brought_inside(capacity, values, partitions, up, direction, expected,
                                                         code) -> None:
    """Bounds are a promise about the plan, not only a limit on the engine's own steps: a plan
    resized by hand, or a policy whose bounds changed, is brought inside them."""
    target = rules_target(min_instances=3, max_instances=8, up=Step(step=up, cooldown_seconds=0))
    decision = evaluate(target, fresh(capacity), series(values, capacity, partitions=partitions), at(0))
    assert (decision.direction, decision.target_capacity, decision.reason_code) == (direction, expected, code)
    if code != "rule_scale_up":
        assert f"the plan has {capacity}" in decision.reasons[-1]


def test_outside_the_bounds_a_cooldown_delays_the_correction_and_a_failed_source_holds_a_scale_in() -> None:
    """The correction is an action like any other: it waits for the cooldown, and a scale-in
    waits while a source fails (its partition count could be the failed one's)."""
    target = rules_target(min_instances=3, max_instances=8, down=Step(step=1, cooldown_seconds=600))
    cooling = fresh(10, last_action_at=at(-5))
    assert evaluate(target, cooling, series([500] * 5, 10), at(0)).reason_code == "cooldown"
    assert evaluate(target, cooling, series([500] * 5, 10, end=6), at(6)).target_capacity == 8
    failing = [*series([500] * 4, 10, end=-1), sample(0, capacity=10, ok=False, error="timeout")]
    assert evaluate(target, fresh(10), failing, at(0)).reason_code == "source_failed"


# --- partition-aware counts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capacity", "values", "partitions", "balanced", "cap", "expected", "code"),
    [
        pytest.param(8, [5000] * 5, 32, True, True, 11, "rule_scale_up", id="8-to-11-up"),
        pytest.param(11, [0] * 5, 32, True, True, 8, "rule_scale_down", id="11-to-8-down"),
        pytest.param(11, [5000] * 5, 32, True, True, 16, "rule_scale_up", id="11-to-16-up"),
        pytest.param(16, [0] * 5, 32, True, True, 11, "rule_scale_down", id="16-to-11-down"),
        pytest.param(9, [5000] * 5, 32, True, True, 11, "rule_scale_up", id="unbalanced-9-up"),
        pytest.param(9, [0] * 5, 32, True, True, 8, "rule_scale_down", id="unbalanced-9-down"),
        pytest.param(8, [5000] * 5, 32, False, True, 9, "rule_scale_up", id="no-balancing"),
        pytest.param(8, [5000] * 5, 8, True, True, None, "at_max_bound", id="capped-at-partitions"),
        pytest.param(4, [5000] * 5, 8, True, True, 8, "rule_scale_up", id="4-to-8-on-8-partitions"),
        pytest.param(7, [5000] * 5, 8, False, True, 8, "rule_scale_up", id="up-to-partitions"),
        pytest.param(8, [5000] * 5, 8, False, False, 9, "rule_scale_up", id="cap-disabled"),
        pytest.param(16, [5000] * 5, 32, True, True, 32, "rule_scale_up", id="16-to-32"),
        pytest.param(32, [5000] * 5, 32, True, True, None, "at_max_bound", id="at-32"),
    ],
)
def test_partition_balanced_counts(capacity, values, partitions, balanced, cap, expected, code) -> None:
    target = rules_target(balanced=balanced, cap=cap, max_instances=50)
    decision = evaluate(target, fresh(capacity), series(values, capacity, partitions=partitions), at(0))
    assert (decision.target_capacity, decision.reason_code) == (expected, code)


# --- determinism and absolute targets -------------------------------------------------------------------


def test_decision_is_deterministic_and_absolute() -> None:
    history = series([1500] * 5, 6)
    state = fresh(6, last_action_at=at(-30), last_direction=DOWN)
    first = evaluate(SEED, state, history, at(0))
    second = evaluate(SEED, state, list(history), at(0))
    assert first == second
    assert first.target_capacity == 7  # an absolute count, not "+1"
    # redelivering the same sample against the same persisted state asks for the same count again
    assert evaluate(SEED, state, history + history[-1:], at(0)).target_capacity == 7
    assert first.decision_id == decision_id_for(NAME, history[-1].sample_id)
    # the input state is a value: evaluating did not change it
    assert state == fresh(6, last_action_at=at(-30), last_direction=DOWN)


def test_decision_logs_the_numbers_behind_it() -> None:
    decision = evaluate(SEED, fresh(), series([100, 200, 300, 400, 3000]), at(0))
    numbers = decision.metrics["rules"]["seed"]
    assert numbers["scale_up_value"] == 800.0
    assert numbers["scale_down_value"] == 3000.0
    assert numbers["samples"] == 5
    assert (numbers["scale_up_above"], numbers["scale_down_below"]) == (1000.0, 100.0)
    assert decision.metrics["backlog"] == 3000


@pytest.mark.parametrize(
    ("throughput", "capacity", "backlog", "direction"),
    [
        (None, 4, 10_000, HOLD),  # lag seconds unknown without a throughput
        (10.0, 4, 10_000, UP),  # 10000 / (10 * 4) = 250 s > 120
        (10.0, 4, 1_000, DOWN),  # 25 s < 30
        (10.0, 4, 3_000, HOLD),  # 75 s
    ],
)
def test_lag_seconds_metric(throughput, capacity, backlog, direction) -> None:
    target = rules_target(rule(metric="lag_seconds", min_samples=3, scale_up_above=120, scale_down_below=30))
    state = fresh(capacity, throughput_per_instance=throughput, throughput_observations=1 if throughput else 0)
    # last_action long ago and samples at equal backlog keep throughput learning out of the way
    decision = evaluate(target, state, series([backlog] * 3, capacity), at(0))
    assert decision.direction == direction


# --- found while testing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "backlog", "up_above", "down_below"),
    [
        ("backlog_per_instance", 5000, 1000, 100),  # 500 per instance at 10 instances, 5000 if read as 1
        ("lag_seconds", 500, 60, 6),  # 50 s at 1 event/s on 10 instances, 500 s if read as 1
    ],
)
def test_sample_with_unknown_capacity_is_not_read_as_one_instance(metric, backlog, up_above, down_below) -> None:
    target = rules_target(rule(metric=metric, min_samples=3, scale_up_above=up_above, scale_down_below=down_below))
    state = fresh(10, throughput_per_instance=1.0, throughput_observations=1)
    history = [sample(-2, backlog, 10), sample(-1, backlog, None, capacity_error="ARM 503"), sample(0, backlog, 10)]
    decision = evaluate(target, state, history, at(0))
    assert decision.direction != UP, decision.reasons


def test_rule_names_do_not_overwrite_the_logged_numbers() -> None:
    target = rules_target(rule(name="backlog", min_samples=3), rule(name="capacity", min_samples=3))
    decision = evaluate(target, fresh(4), series([5000] * 3, 4), at(0))
    assert decision.metrics["backlog"] == 5000
    assert decision.metrics["capacity"] == 4
