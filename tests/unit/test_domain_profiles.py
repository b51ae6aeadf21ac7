"""Schedule profiles: which window holds at a moment (a weekday business-hours window in
Europe/Berlin across both daylight-saving changes, an overnight window, a fixed date overriding a
recurrence), and the engine driven minute by minute with an injected clock: the minimum asked for
one provisioning delay before the window opens, the profile named in the reason, the count let
go through the normal scale-in at the end, a profile's maximum, a pause. Nothing is patched."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scaling.domain.decisions import DOWN, HOLD, UP, ScalerState
from scaling.domain.engine import evaluate
from scaling.domain.pause import Pause
from scaling.domain.policy import FixedWindow, PolicyError, Profile, Recurrence, policy_from_dict
from scaling.domain.profiles import bounds_in_force, profile_at, widest_bounds
from scaling.settings import Settings, SettingsError
from scaling.storage.synthetic import queue_sample, rules_target

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday")
BUSINESS = Profile(name="business", min_instances=4,
                   recurrence=Recurrence(days=WEEKDAYS, start="09:00", end="18:00", time_zone="Europe/Berlin"))
NIGHT = Profile(name="night", max_instances=2,
                recurrence=Recurrence(days=("friday",), start="22:00", end="06:00", time_zone="UTC"))
LAUNCH = Profile(name="launch", min_instances=6,
                 fixed=FixedWindow(start=datetime.fromisoformat("2026-03-30T00:00:00+02:00"),
                                   end=datetime.fromisoformat("2026-03-31T00:00:00+02:00")))


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# --- which window holds ------------------------------------------------------------------------------


@pytest.mark.parametrize(("moment", "holds"), [
    # Before the spring change (Friday 27 March 2026, CET = UTC+1): 09:00 local is 08:00 UTC.
    ("2026-03-27T07:59", False), ("2026-03-27T08:00", True), ("2026-03-27T16:59", True), ("2026-03-27T17:00", False),
    # After it (Monday 30 March, CEST = UTC+2): 09:00 local is 07:00 UTC.
    ("2026-03-30T06:59", False), ("2026-03-30T07:00", True), ("2026-03-30T15:59", True), ("2026-03-30T16:00", False),
    # Before the autumn change (Friday 23 October, CEST): 07:00 UTC; after it (Monday 26 October, CET): 08:00 UTC.
    ("2026-10-23T06:59", False), ("2026-10-23T07:00", True), ("2026-10-26T07:59", False), ("2026-10-26T08:00", True),
    # The weekend around each change: never.
    ("2026-03-28T10:00", False), ("2026-03-29T10:00", False), ("2026-10-25T10:00", False),
])
def test_a_berlin_business_hours_window_opens_at_nine_local_on_both_sides_of_each_change(moment: str, holds: bool):
    assert (profile_at((BUSINESS,), utc(moment)) is BUSINESS) is holds


@pytest.mark.parametrize(("moment", "holds"), [
    ("2026-03-27T21:59", False), ("2026-03-27T22:00", True), ("2026-03-27T23:59", True),  # Friday evening
    ("2026-03-28T00:00", True), ("2026-03-28T05:59", True), ("2026-03-28T06:00", False),  # Saturday morning
    ("2026-03-28T23:00", False),  # Saturday evening: the window opens on Fridays only
    ("2026-03-27T05:00", False),  # Friday morning belongs to Thursday's window, which there is none of
])
def test_an_overnight_window_belongs_to_the_day_it_opens(moment: str, holds: bool):
    assert (profile_at((NIGHT,), utc(moment)) is NIGHT) is holds


@pytest.mark.parametrize(("profiles", "moment", "expected"), [
    ((LAUNCH, BUSINESS), "2026-03-30T10:00", "launch"),  # the launch day overrides business hours
    ((LAUNCH, BUSINESS), "2026-03-30T20:00", "launch"),  # and holds all day
    ((LAUNCH, BUSINESS), "2026-03-31T10:00", "business"),  # the next day, the recurrence again
    ((BUSINESS, LAUNCH), "2026-03-30T10:00", "business"),  # listed after, the fixed date is shadowed
    ((LAUNCH, BUSINESS), "2026-03-29T21:59", None),  # 23:59 Berlin on the Sunday before: neither
])
def test_the_first_profile_that_holds_applies(profiles, moment: str, expected: str | None):
    found = profile_at(profiles, utc(moment))
    assert (found.name if found else None) == expected


def test_bounds_in_force_take_the_next_minimum_one_lead_early_and_drop_it_at_the_end():
    target = replace(rules_target(min_instances=1, max_instances=8), profiles=(BUSINESS,))
    lead = timedelta(minutes=2)
    opens = utc("2026-03-30T07:00")
    before, early, inside = (bounds_in_force(target, opens + delta, lead) for delta in
                             (timedelta(minutes=-3), timedelta(minutes=-2), timedelta(minutes=0)))
    assert (before.min_instances, before.profile, before.early) == (1, None, False)
    assert (early.min_instances, early.min_from, early.early) == (4, "business", True)
    assert (inside.min_instances, inside.profile, inside.early) == (4, "business", False)
    after = bounds_in_force(target, utc("2026-03-30T16:00"), lead)
    assert (after.min_instances, after.max_instances, after.profile) == (1, 8, None)


def test_scale_clamps_to_the_widest_bounds_any_profile_sets():
    target = replace(rules_target(min_instances=2, max_instances=8),
                     profiles=(replace(BUSINESS, min_instances=6, max_instances=12), NIGHT))
    assert widest_bounds(target) == (2, 12)


# --- the engine, minute by minute ------------------------------------------------------------------


def drive(target, start: datetime, minutes: int, backlog: int = 500, capacity: int = 2, pause: Pause | None = None):
    """Evaluate once a minute from ``start``; the plan follows each action at once. Returns the
    acting decisions and the last decision."""
    state, history, acted, decision = ScalerState(target.name, capacity=capacity), [], [], None
    for minute in range(minutes):
        now = start + timedelta(minutes=minute)
        history.append(queue_sample(target.name, now, backlog, capacity))
        decision = evaluate(target, state, history[-10:], now + timedelta(seconds=5), pause=pause)
        state = decision.state or state
        if decision.acts:
            acted.append(decision)
            capacity = decision.target_capacity
    return acted, decision


def business_target(**slo):
    target = replace(rules_target(min_samples=1, min_instances=1, max_instances=8), profiles=(BUSINESS,))
    return replace(target, slo=replace(target.slo, provisioning_delay_seconds=120, **slo))


@pytest.mark.parametrize("opens", [utc("2026-03-27T08:00"), utc("2026-03-30T07:00"),
                                   utc("2026-10-23T07:00"), utc("2026-10-26T08:00")])
def test_the_minimum_is_requested_one_provisioning_delay_before_the_window(opens: datetime):
    acted, _ = drive(business_target(), opens - timedelta(minutes=10), 15)
    [first] = acted
    assert first.evaluated_at == opens - timedelta(minutes=2) + timedelta(seconds=5)
    assert (first.direction, first.target_capacity, first.reason_code) == (UP, 4, "profile:business")
    assert first.metrics["profile"] == "business"


def test_a_longer_provisioning_delay_asks_earlier():
    opens = utc("2026-03-30T07:00")
    acted, _ = drive(business_target(), opens - timedelta(minutes=10), 15)
    later, _ = drive(replace(business_target(), slo=replace(business_target().slo, provisioning_delay_seconds=300)),
                     opens - timedelta(minutes=10), 15)
    assert later[0].evaluated_at - acted[0].evaluated_at == timedelta(minutes=-3)


def test_inside_the_window_every_decision_names_the_profile():
    _, last = drive(business_target(), utc("2026-03-30T08:00"), 3, capacity=4)
    assert last.direction == HOLD and last.metrics["profile"] == "business"
    assert any("profile business in force" in reason for reason in last.reasons)


def test_at_the_end_the_count_comes_down_through_the_normal_scale_in_not_at_once():
    closes = utc("2026-03-30T16:00")
    target = replace(business_target(), scale_down=replace(business_target().scale_down, cooldown_seconds=120))
    steady, _ = drive(target, closes - timedelta(minutes=3), 6, backlog=500, capacity=4)
    assert steady == []  # between the thresholds: the minimum's end alone moves nothing
    acted, _ = drive(target, closes - timedelta(minutes=3), 8, backlog=10, capacity=4)
    assert [(d.direction, d.current_capacity, d.target_capacity) for d in acted] == [(DOWN, 4, 3), (DOWN, 3, 2), (DOWN, 2, 1)]
    assert acted[0].evaluated_at >= closes  # not before the window closes
    gaps = [later.evaluated_at - earlier.evaluated_at for earlier, later in zip(acted, acted[1:], strict=False)]
    assert all(gap >= timedelta(minutes=2) for gap in gaps)  # one step per scale-in cooldown, no cliff
    assert all(d.reason_code != "profile:business" for d in acted)


def test_a_profile_maximum_brings_the_count_down_and_caps_scale_outs_naming_the_profile():
    target = replace(rules_target(min_samples=1, max_instances=8), profiles=(NIGHT,))
    acted, _ = drive(target, utc("2026-03-27T22:00"), 1, backlog=500, capacity=5)
    assert [(d.direction, d.target_capacity, d.reason_code) for d in acted] == [(DOWN, 2, "profile:night")]
    _, held = drive(target, utc("2026-03-27T22:30"), 1, backlog=50_000, capacity=2)
    assert held.reason_code == "at_max_bound" and held.metrics["profile"] == "night"


def test_a_paused_target_says_what_it_would_have_done_and_does_nothing():
    pause = Pause("p1", "incident 42", "alice", utc("2026-03-30T06:00"), utc("2026-03-30T10:00"))
    acted, last = drive(business_target(), utc("2026-03-30T06:50"), 10, pause=pause)
    assert acted == []
    assert last.reason_code == "paused" and last.reasons[0] == "paused: would scale 2 -> 4"
    assert last.metrics["would_scale_to"] == 4
    assert any("paused by alice until 2026-03-30T10:00:00Z: incident 42" in reason for reason in last.reasons)


# --- validation: at start-up and in validate-policy, naming the field ---------------------------------


SAMPLE = json.loads((Path(__file__).resolve().parents[2] / "policy.sample.json").read_text(encoding="utf-8"))
GOOD = {"name": "business", "min_instances": 4,
        "recurrence": {"days": ["monday"], "start": "09:00", "end": "18:00", "time_zone": "Europe/Berlin"}}


def with_profile(**changes) -> dict:
    document = json.loads(json.dumps(SAMPLE))
    profile = {**GOOD, **{key: value for key, value in changes.items() if key != "recurrence"}}
    profile["recurrence"] = {**GOOD["recurrence"], **changes.get("recurrence", {})}
    document["targets"][0]["profiles"] = [profile]
    return document


INVALID = [
    (with_profile(recurrence={"time_zone": "Europe/Atlantis"}),
     "targets[0].profiles[0].recurrence.time_zone is not a known IANA time zone: 'Europe/Atlantis'"),
    (with_profile(recurrence={"days": []}), "targets[0].profiles[0].recurrence.days must list at least one day"),
    (with_profile(recurrence={"end": "09:00"}), "targets[0].profiles[0].recurrence.end must differ from start"),
    (with_profile(min_instances=40), "targets[0].profiles[0].min_instances (40) must not be above bounds.max_instances (30)"),
    (with_profile(min_instances=5, max_instances=3), "targets[0].profiles[0].min_instances must not be above max_instances"),
    (with_profile(recurrence={"start": "9:00"}), "targets[0].profiles[0].recurrence.start must be a time of day"),
    (with_profile(recurrence={"days": ["funday"]}), "targets[0].profiles[0].recurrence.days[0] must be one of monday"),
]


@pytest.mark.parametrize(("document", "message"), INVALID)
def test_an_invalid_profile_is_refused_naming_the_field(document: dict, message: str):
    with pytest.raises(PolicyError) as raised:
        policy_from_dict(document)
    assert message in str(raised.value)


@pytest.mark.parametrize(("document", "message"), INVALID[:4])
def test_an_invalid_profile_stops_the_app_at_start_up(document: dict, message: str):
    with pytest.raises(SettingsError) as raised:
        Settings.from_environment({"AzureWebJobsStorage": "UseDevelopmentStorage=true",
                                   "AUTOSCALER_POLICY": json.dumps(document)})
    assert message in str(raised.value)


def test_a_fixed_window_needs_an_offset_and_an_end_after_its_start():
    document = with_profile()
    document["targets"][0]["profiles"][0] = {"name": "launch", "min_instances": 6,
                                              "fixed": {"start": "2026-03-30T00:00:00", "end": "2026-03-29T00:00:00+02:00"}}
    with pytest.raises(PolicyError) as raised:
        policy_from_dict(document)
    assert "targets[0].profiles[0].fixed.start must carry an offset" in str(raised.value)
    document["targets"][0]["profiles"][0]["fixed"]["start"] = "2026-03-30T00:00:00+02:00"
    with pytest.raises(PolicyError, match=r"targets\[0\]\.profiles\[0\]\.fixed\.end must be after start"):
        policy_from_dict(document)


def test_the_sample_policy_carries_a_profile_that_round_trips():
    from scaling.domain.policy import policy_to_dict

    policy = policy_from_dict(SAMPLE)
    assert any(target.profiles for target in policy.targets)
    assert policy_from_dict(policy_to_dict(policy)) == policy


def test_the_batched_simulators_leave_profiles_to_the_engine():
    """They have no wall clock; a target with profiles is simulated by the engine itself."""
    from scaling.simulation.drivers import batched, batched_slo
    from scaling.simulation.peers.looped import seed_target, simulated_target
    from scaling.simulation.world.loop import Scenario

    slo, seed = simulated_target(Scenario()), seed_target(Scenario(), 1000.0, 100.0)
    assert batched_slo.supports(slo) and batched.supports(seed)
    assert not batched_slo.supports(replace(slo, profiles=(BUSINESS,)))
    assert not batched.supports(replace(seed, profiles=(BUSINESS,)))
