"""Issue 48: the SLO mode keeps its footing when the consumers misbehave (checkpoints late or rare,
a slow-down the learned rate must recover from, a quiet spell, a stall), through the engine.

The kernel's rules at their boundaries are in test_domain_slo_kernel.py; the batched simulator's
equality with the engine in these worlds in test_simulation_batched_slo.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaling.domain.decisions import DOWN, HOLD, UP
from scaling.domain.engine import evaluate
from scaling.domain.slo_kernel import FLOOR_DOUBT
from scaling.simulation.namespace.peers import run_namespace, started_for
from scaling.simulation.namespace.world import NamespaceScenario
from scaling.simulation.peers.looped import EngineAutoscaler, simulated_target
from scaling.simulation.world.loop import Scenario, load_trace, per_minute, scale_trace, simulate
from scaling.simulation.world.traces import NASA_JUL95, WORLDCUP98
from tests.helpers import noisy_diurnal
from tests.unit.test_domain_slo import T0, history, slo_target, state
from tests.unit.test_simulation_namespace import TRACES, busiest


@pytest.mark.parametrize(("learned", "floor", "sized_by"), [
    pytest.param(5.0, 14.0, (1 - FLOOR_DOUBT) * 14.0, id="a-rate-learned-in-a-slow-down-rises-with-what-instances-showed-since"),
    pytest.param(13.5, 14.0, 13.5, id="within-the-doubt-the-learned-rate-stands"),
    pytest.param(5.0, None, 5.0, id="no-floor-no-change"),
])
def test_the_rate_sized_by_is_never_far_below_the_floor(learned, floor, sized_by) -> None:
    """The 15% slow-down row stayed at 32 instances for hours: the rate learned during it (2.5/s)
    was never raised, since an over-provisioned hub is never saturated again."""
    decision = evaluate(slo_target(), state(8, throughput_per_instance=learned, throughput_floor=floor),
                        history(0.5, 0.5, 0), T0)  # (what it shows now: 0.5/s x 32 partitions / 8 = 2/s)
    assert decision.metrics["throughput_per_instance"] == pytest.approx(sized_by)


def test_a_quiet_spell_keeps_the_learned_checkpoint_delay() -> None:
    """Nearly nothing arrives (NASA's outage): the oldest event cannot show a 180 s delay, so the
    delay learned before stays (it was reset to 0.5 s, and every age after read 180 s too old)."""
    decision = evaluate(slo_target(), state(8, checkpoint_delay_seconds=180.0), history(0.01, 0.01, 0), T0)
    assert decision.state.checkpoint_delay_seconds == pytest.approx(180.0)


def test_checkpoints_180_s_late_teach_their_delay_and_cost_less() -> None:
    """The delay stopped at its 75 s ceiling (and a quiet spell reset it to 0.5 s): ages read up
    to 105 s old where the consumers kept up, and every partition, holding three intervals'
    arrivals, read saturated, so the rate was learned as arrivals / owners. On main: 3.61 of the
    fluid bound, the delay 0.5 s at the end; now the delay is learned (179 s) and it costs 2.51."""
    scenario = Scenario(checkpoint_delay_seconds=180.0)
    decisions = []
    result = simulate(noisy_diurnal(900, seed=3), EngineAutoscaler(simulated_target(scenario),
                                                                   on_decision=lambda _, d: decisions.append(d)), scenario)
    assert decisions[-1].state.checkpoint_delay_seconds > 150.0
    assert result.slo_violation_minutes == 0
    assert result.cost_ratio < 3.0


def test_a_pause_in_the_arrivals_inside_the_delay_keeps_it() -> None:
    """Two minutes without arrivals inside a 180 s delay, the minutes around them busy: for two
    minutes after it the oldest event is only as old as the first arrival after the pause, and
    the delay learned from that (NASA minute 1888: 177 s -> 60 s) read every partition busy and
    taught 5.6/s where the truth is 16.7/s. The quietest interval within the delay says so."""
    scenario = Scenario(checkpoint_delay_seconds=180.0)
    arrivals = noisy_diurnal(420, seed=3)
    arrivals[360:362] = 0.0
    delays = {}
    simulate(arrivals, EngineAutoscaler(simulated_target(scenario), on_decision=lambda sample, decision: delays.update(
        {sample.collected_at: decision.state.checkpoint_delay_seconds})), scenario)
    learned = [value for _, value in sorted(delays.items())]
    assert learned[355] >= 75.0
    # (on main: 60 s for the rest of the run; the delay now stands at the truth and the ages read
    # around it, within a second)
    assert min(learned[356:]) >= learned[355] - 1.0


def test_a_cold_start_under_late_checkpoints_learns_the_rate_the_new_instances_show() -> None:
    """NASA's first hour, checkpoints 180 s late: the first ages set the delay at its 75 s
    ceiling, and the interval read 75 s after 3 -> 32 showed the three instances before it
    (1.56/s per instance, the truth 16.7/s); the rate learned from it stayed at 10.2/s for hours.
    A delay at its ceiling is only a lower bound: learning waits as long as it may follow to."""
    scenario = Scenario(checkpoint_delay_seconds=180.0)
    arrivals = scale_trace(per_minute(load_trace(NASA_JUL95), 60)[:60], scenario)
    rates = []
    simulate(arrivals, EngineAutoscaler(simulated_target(scenario), on_decision=lambda _, decision: rates.append(
        decision.state.throughput_per_instance)), scenario)
    learned = [rate for rate in rates if rate is not None]
    assert learned, "the drain after the scale-out saturates the consumers"
    assert learned[0] == pytest.approx(scenario.events_per_instance_per_minute / 60.0, rel=0.05)


def test_a_cold_start_under_late_checkpoints_learns_no_rate_below_what_the_instances_show() -> None:
    """Checkpoints 180 s late, the delay set at its 75 s ceiling by the first ages and never
    lowered: every partition that kept up held three intervals' arrivals, more than the two and
    75 s the saturation test allowed (here 3.2/s learned, sized by at 80% of what the instances had
    shown). A clipped delay is a lower bound: the test allows the longest it may follow to; and
    the owners that keep up show the delay itself (``steady_lags``), learned here by the end."""
    scenario = Scenario(checkpoint_delay_seconds=180.0)
    decisions = []
    simulate(noisy_diurnal(240, seed=3), EngineAutoscaler(simulated_target(scenario), on_decision=lambda _, decision:
                                                          decisions.append(decision)), scenario)
    truth = scenario.events_per_instance_per_minute / 60.0
    assert decisions[-1].state.checkpoint_delay_seconds > 170.0
    learned = [decision.state.throughput_per_instance for decision in decisions
               if decision.state.throughput_per_instance is not None]
    assert all(rate > 0.8 * truth for rate in learned)
    assert decisions[-1].metrics["throughput_per_instance"] > 0.95 * truth


def stalled_run(**slo):
    scenario = Scenario(partitions=8, peak_instances=6.0, slowdowns=((300.0, 45.0, 0.01, 0.0),))
    target = simulated_target(scenario)
    if slo:
        target = replace(target, slo=replace(target.slo, **slo))
    decisions = []
    result = simulate(noisy_diurnal(480, seed=7) * 0.4, EngineAutoscaler(target, on_decision=lambda _, d: decisions.append(d)),
                      scenario)
    return result, decisions


def test_a_stall_holds_the_count_that_was_serving_raised_to_what_the_recovery_needs() -> None:
    """More instances did not raise the processed rate: reason ``stall`` with the numbers; it holds
    the count that was serving at its first reading (one interval's reading is no stall yet: a
    rebalance pause shows as one), and while it goes on raises it to the count that drains the
    backlog within the SLO (here the maximum, 8); no scale-in while it lasts, and the recovery
    drains on the count held, with no scale-out after it. Held at 4 until the recovery (main at
    e686922), the recovery's scale-out waited the provisioning delay: 62 violation minutes."""
    result, decisions = stalled_run()
    stalls = [index for index, decision in enumerate(decisions) if decision.reason_code == "stall"]
    assert stalls, "the stall is recognised"
    during = decisions[stalls[0]:stalls[-1] + 1]
    assert during[0].direction == HOLD and "more instances do not help" in during[0].reasons[0]
    assert all(decision.direction in (HOLD, UP) for decision in during)
    raised = [decision for decision in during if decision.direction == UP]
    assert raised and "drain the" in raised[0].reasons[0] and "events waiting within the SLO" in raised[0].reasons[0]
    assert max(decision.current_capacity for decision in during) == 8
    assert not any(decision.direction == UP for decision in decisions[stalls[-1] + 1:stalls[-1] + 30])
    assert result.slo_violation_minutes <= 59


def test_an_operator_may_choose_the_minimum_during_a_stall() -> None:
    _, decisions = stalled_run(stall_scale_to_minimum=True)
    [first] = [decision for decision in decisions if decision.reason_code == "stall" and decision.acts][:1]
    assert first.direction == DOWN and first.target_capacity == 1
    assert "stall_scale_to_minimum" in first.reasons[0]


def test_the_stall_knob_is_off_by_default() -> None:
    assert simulated_target(Scenario()).slo.stall_scale_to_minimum is False


@pytest.mark.parametrize(("capacity", "arrival", "backlog", "learned", "direction", "wanted"), [
    pytest.param(16, 1.0, 200, None, HOLD, None, id="no-pause-known: holds at 199 s"),
    pytest.param(16, 1.0, 200, 0.0, HOLD, None, id="a-pause-of-0-learned: the same"),
    pytest.param(16, 1.0, 200, 120.0, UP, 32, id="a-120-s-pause-known: scales out before its ages pass the SLO"),
    pytest.param(8, 2.0, 150, None, DOWN, 4, id="no-pause-known: scales in to 4"),
    pytest.param(8, 2.0, 150, 120.0, DOWN, 5, id="a-120-s-pause-known: the scale-in holds the ages the pause adds"),
    pytest.param(8, 2.0, 200, None, DOWN, 4, id="no-pause-known: scales in at 100 s"),
    pytest.param(8, 2.0, 200, 120.0, HOLD, None, id="a-120-s-pause-known: no scale-in whose pause would pass the limit"),
])
def test_a_learned_rebalance_pause_changes_the_decision_and_none_changes_nothing(capacity, arrival, backlog, learned,
                                                                                 direction, wanted) -> None:
    """Each scale-out's pause read as a shortfall called for another (4 -> 7 -> 8 -> 11 -> 16 -> 32
    in 13 minutes); where the target's history shows pauses, it acts earlier and once, and a
    scale-in allows for the pause it causes itself. Where none is known, the decision is main's."""
    decision = evaluate(slo_target(), state(capacity, rebalance_pause_seconds=learned),
                        history(arrival, arrival, backlog, capacity=capacity), T0)
    assert (decision.direction, decision.target_capacity) == (direction, wanted)
    assert ("rebalance_pause_seconds" in decision.metrics) == bool(learned)


@pytest.mark.parametrize(("pause", "learned_at_least", "learned_at_most"), [
    pytest.param(120.0, 90.0, 150.0, id="partitions-pause-120-s-on-every-rebalance: learned"),
    pytest.param(0.0, 0.0, 0.0, id="no-pause: learned 0, no decision allows for one"),
])
def test_the_rebalance_pause_is_learned_from_the_targets_own_history(pause, learned_at_least, learned_at_most) -> None:
    scenario = Scenario(assignment="balanced", rebalance_pause_seconds=pause)
    decisions = []
    simulate(noisy_diurnal(600, seed=3), EngineAutoscaler(simulated_target(scenario), on_decision=lambda _, d: decisions.append(d)),
             scenario)
    learned = decisions[-1].state.rebalance_pause_seconds
    assert learned is not None and learned_at_least <= learned <= learned_at_most
    assert any("rebalance_pause_seconds" in decision.metrics for decision in decisions) == (pause > 0)


def test_checkpoints_180_s_late_teach_their_delay_below_the_maximum() -> None:
    """NASA's first hours, checkpoints 180 s late: the delay followed the ages only at the maximum
    with a flat backlog, so after the cold start's 32 -> 16 it stood at 111-125 s for the day and
    every age read 55 s too old (11 <-> 32 flaps). Owners that keep up show the delay in how far
    their checkpoints trail the arrivals, at any count."""
    scenario = Scenario(checkpoint_delay_seconds=180.0)
    arrivals = scale_trace(per_minute(load_trace(NASA_JUL95), 60)[:200], scenario)
    decisions = []
    simulate(arrivals, EngineAutoscaler(simulated_target(scenario), on_decision=lambda _, decision: decisions.append(
        decision)), scenario)
    below = [decision.state.checkpoint_delay_seconds for decision in decisions[100:]
             if decision.current_capacity is not None and decision.current_capacity < 32]
    assert below and min(below) > 165.0  # (on main: 111.1)


def test_a_standing_backlog_of_saturated_owners_is_no_checkpoint_delay() -> None:
    """The issue's overload row (WC98 minutes 7000-8999, checkpoints on time): minutes 90-260 at 4
    instances near what they serve, a backlog standing at equilibrium, every partition trailing
    its arrivals by a steady wait. Only owners that processed less than an instance does have
    kept up; following every owner's lag learned 172 s here (the row: 15 violation minutes)."""
    scenario = Scenario(peak_instances=40.0)
    arrivals = scale_trace(per_minute(load_trace(WORLDCUP98), 60)[7000:9000], scenario)
    decisions = []
    result = simulate(arrivals, EngineAutoscaler(simulated_target(scenario), on_decision=lambda _, decision:
                                                 decisions.append(decision)), scenario)
    assert max(decision.state.checkpoint_delay_seconds or 0.0 for decision in decisions[30:300]) < 30.0
    assert result.slo_violation_minutes == 0


def test_consumers_held_at_the_hubs_capacity_show_no_checkpoint_delay() -> None:
    """WC98's busiest half-day in the namespace world (checkpoints on time), where a hub's reads
    run at the pace of its busiest owner: 11 instances read 10,667 events a minute of 11,000
    arriving, and the owner of two partitions, under its rate, trailed by the wait with the rest.
    Learned as the delay (up to 210 s), the ages read young and the backlog grew to a 7-minute
    oldest event (30 violation minutes); a hub at its capacity teaches no delay."""
    arrivals = busiest(TRACES / "worldcup98" / "per_minute.csv", NamespaceScenario())[:660]
    result, _ = run_namespace(arrivals, started_for(arrivals, NamespaceScenario()), "joint")
    assert result.slo_violation_minutes == 0 and result.max_age_minutes <= 4.0
