"""The look-ahead in the evaluate service (issue 52): the profile fitted from the target's own
recorded history after a decision, stored, and read into the next decisions' outlook; the
shadow mode's log row; nothing read or said with ``forecast: off``."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from scaling.domain import forecast
from scaling.domain.decisions import ScalerState
from scaling.domain.evaluation import FORECAST_SHADOW, EvaluationSettings, Prior, plan_evaluation
from scaling.domain.forecast_record import StoredProfile
from scaling.domain.policy import Bounds, PlanSettings, SourceSettings, TargetPolicy
from scaling.domain.samples import MetricSample, PartitionReading, SourceReading
from scaling.services.evaluate import EvaluateService
from scaling.storage.memory import MemoryStorage
from scaling.storage.records import StoredState
from scaling.storage.synthetic import plan_id, policy_of
from tests.helpers import Clock

T0 = datetime(2024, 5, 1, 0, 0, tzinfo=UTC)
PARTITIONS = 4
DAY = forecast.DAY_MINUTES


def hub_target(mode: str) -> TargetPolicy:
    source = SourceSettings(kind="eventhub", name="hub", fully_qualified_namespace="x.servicebus.windows.net",
                            event_hub_name="hub", checkpoint_account_url="https://x.blob.core.windows.net")
    return TargetPolicy(name="orders", plan=PlanSettings(plan_id("plan-orders")), sources=(source,),
                        bounds=Bounds(min_instances=1, max_instances=4), forecast=mode)


def hourly_jumps(minutes: int) -> np.ndarray:
    """Events per minute: a jump to five times the base at the top of every hour (batch jobs)."""
    return np.round(1000 * (1 + 4 * np.exp(-(np.arange(minutes) % 60) / 4.0)))


def samples(arrivals: np.ndarray, backlog: int = 0) -> list[MetricSample]:
    """One sample per minute: the partitions' last enqueued numbers rise by the arrivals."""
    totals = np.concatenate(([0.0], np.cumsum(arrivals)))
    result = []
    for index, total in enumerate(totals):
        share = int(total) // PARTITIONS
        partitions = tuple(PartitionReading.measure(str(p), 0, share, max(share - backlog, 0), owner=f"w{p % 2}")
                           for p in range(PARTITIONS))
        result.append(MetricSample(target="orders", collected_at=T0 + timedelta(minutes=index), capacity=2,
                                   sources=(SourceReading(name="hub", kind="eventhub", partitions=partitions),)))
    return result


def service_with_history(mode: str, minutes: int = 3 * DAY) -> tuple[EvaluateService, MemoryStorage, Clock, list]:
    store = MemoryStorage()
    history = samples(hourly_jumps(minutes + 5))
    for sample in history[:minutes]:
        store.add_sample(sample)
    store.commit(StoredState(ScalerState("orders", capacity=2, throughput_per_instance=100.0)))
    clock = Clock(history[minutes - 1].collected_at + timedelta(seconds=5))
    return EvaluateService(store, policy_of(hub_target(mode)), clock=clock), store, clock, history[minutes:]


def deliver(service, clock, sample):
    clock.now = sample.collected_at + timedelta(seconds=5)
    return service.handle(sample.to_json())


def test_the_profile_is_fitted_from_the_recorded_history_after_a_decision_and_read_by_the_next() -> None:
    service, store, clock, coming = service_with_history("on")
    first = deliver(service, clock, coming[0])
    assert first.status == "evaluated"
    # No profile yet when the first decision was taken: it said so, and ran as without.
    assert first.decision.metrics["forecast_trusted"] is False
    assert "no profile fitted yet" in first.decision.metrics["forecast_untrusted"]
    profile = store.load_profile("orders")
    assert profile is not None and profile.trusted and 60 in profile.periods
    second = deliver(service, clock, coming[1])
    assert second.decision.metrics["forecast_trusted"] is True
    assert second.decision.metrics["forecast_expected_peak"] > 0
    # Fitted once an hour: the next evaluations read the cached profile and do not refit.
    calls = dict(store.calls)
    deliver(service, clock, coming[2])
    assert store.calls.get("save_profile") == calls.get("save_profile") == 1
    assert store.calls.get("load_profile") == calls.get("load_profile")  # (one of them the test's own)


def test_a_profile_older_than_an_hour_is_refit() -> None:
    service, store, clock, coming = service_with_history("shadow")
    deliver(service, clock, coming[0])
    old = store.load_profile("orders")
    assert old is not None
    service._profiles["orders"] = replace(old, fitted_at=old.fitted_at - timedelta(hours=1))
    deliver(service, clock, coming[1])
    assert store.calls["save_profile"] == 2
    assert store.load_profile("orders").fitted_at > old.fitted_at


def test_forecast_off_reads_and_says_nothing() -> None:
    service, store, clock, coming = service_with_history("off", minutes=60)
    outcome = deliver(service, clock, coming[0])
    assert outcome.status == "evaluated"
    assert not any(key.startswith("forecast") for key in outcome.decision.metrics)
    assert "load_profile" not in store.calls and "save_profile" not in store.calls


def test_no_period_in_the_history_stores_an_untrusted_profile_that_changes_nothing() -> None:
    store = MemoryStorage()
    rng = np.random.default_rng(5)
    history = samples(np.round(1000 + 200 * np.abs(rng.standard_normal(3 * DAY + 5))))
    for sample in history[:3 * DAY]:
        store.add_sample(sample)
    store.commit(StoredState(ScalerState("orders", capacity=2, throughput_per_instance=100.0)))
    clock = Clock(T0)
    service = EvaluateService(store, policy_of(hub_target("on")), clock=clock)
    deliver(service, clock, history[3 * DAY])
    profile = store.load_profile("orders")
    assert profile is not None and not profile.trusted and "no period" in profile.reasons
    decision = deliver(service, clock, history[3 * DAY + 1]).decision
    assert decision.metrics["forecast_trusted"] is False and decision.metrics["forecast_acted"] is False


# --- plan_evaluation: shadow and on with a given outlook ---------------------------------------------

SETTINGS = EvaluationSettings(timedelta(minutes=3), timedelta(minutes=1), 3)


def plan(mode: str, expected: tuple[float, ...]):
    window = samples(np.full(10, 1000.0))  # two instances of 10 events/s carry it
    state = ScalerState("orders", capacity=2, throughput_per_instance=10.0, last_action_at=T0 - timedelta(hours=1))
    return plan_evaluation(hub_target(mode), Prior(state), window[-1], window[:-1], window[-1].collected_at,
                           SETTINGS, outlook=forecast.Outlook(expected, True))


#: Five minutes at three times the load, from when a count ordered now serves: 3 instances carry
#: them within the age budget (the backlog at most 3.5 minutes of their work), snapped up to 4.
RISE = (1000.0, 1000.0, *[3000.0] * 5, *[1000.0] * 23)


@pytest.mark.parametrize(("mode", "acts", "shadow_row"), [("off", False, False), ("shadow", False, True), ("on", True, False)])
def test_a_predicted_rise_raises_the_floor_only_when_on_and_shadow_logs_it(mode: str, acts: bool, shadow_row: bool) -> None:
    result = plan(mode, RISE)
    assert (result.act is not None) == acts
    if acts:
        assert result.decision.reason_code == "forecast_floor" and result.act.target_capacity == 4
    rows = [row for row in result.rows if row.reason_code == FORECAST_SHADOW]
    assert bool(rows) == shadow_row
    if rows:
        assert "would raise the floor to 3" in rows[0].reasons[0] and not rows[0].acts


def test_shadow_decides_what_off_decides() -> None:
    off, shadow = plan("off", RISE), plan("shadow", RISE)
    assert (off.act, off.decision.target_capacity, off.decision.reason_code) == \
        (shadow.act, shadow.decision.target_capacity, shadow.decision.reason_code)
    assert off.state == shadow.state


def test_a_stored_profile_gives_the_outlook_from_the_recent_level() -> None:
    arrivals = hourly_jumps(3 * DAY)
    result = forecast.forecast(arrivals)
    stored = forecast.stored_profile("orders", result, T0, T0)
    assert isinstance(stored, StoredProfile) and stored.trusted
    start = T0 + timedelta(minutes=3 * DAY + 55)  # five minutes before the top of an hour
    outlook = forecast.outlook_from(stored, hourly_jumps(3 * DAY + 55)[-15:], start)
    assert outlook.trusted and np.argmax(outlook.expected[:30]) == 5
    assert forecast.outlook_from(None, [1.0], start).reasons == ("no profile fitted yet",)


def test_arrivals_per_minute_spreads_a_gap_over_its_minutes() -> None:
    points = [(T0, 0.0), (T0 + timedelta(minutes=1), 60.0), (T0 + timedelta(minutes=4), 360.0),
              (T0 + timedelta(minutes=5), 300.0)]
    values, origin = forecast.arrivals_per_minute(points)
    assert origin == T0 and values.tolist() == [60.0, 100.0, 100.0, 100.0, 0.0]
