"""Issue 48's stall row: WC98 minutes 0-999, consumers at 1% of their speed for 45 minutes from
minute 600. The stall rule held the 16 instances that were serving; the backlog of 45 minutes
needed 32, and 16 -> 32 waited the provisioning delay (1.318 / 48 violation minutes). Now a stall
that goes on is raised to the count the recovery needs (``slo_kernel.recovery_counts``), and the
drain is not scaled in halfway (``hold_seconds``'s ``breach``).

The kernel's rules at their boundaries are in test_domain_slo_kernel.py and
test_domain_slo_step.py; the 8-partition stall through the engine in test_domain_slo_trouble.py.
"""

from __future__ import annotations

from scaling.domain.decisions import DOWN, UP
from scaling.simulation.drivers.batched_slo import simulate_slo_batch
from scaling.simulation.peers.looped import EngineAutoscaler, simulated_target
from scaling.simulation.world.loop import Scenario, load_trace, per_minute, scale_trace, simulate
from scaling.simulation.world.traces import WORLDCUP98
from tests.helpers import assert_same_run

STALL_STARTS, STALL_MINUTES = 600, 45


def test_the_issues_stall_row_drains_on_the_maximum_from_the_recovery() -> None:
    """No scale-in during the stall; raised once it goes on, so 32 instances serve from the
    recovery's first minute; 46 violation minutes (the lag peers' best 45 start the stall at 32
    instances with nothing waiting; from this row's 4 instances and a 30 s old backlog at minute
    599, the oldest event passes the SLO at minute 604 under any plan, and 32 instances, the most
    that serve 32 partitions, bring it back at 650). The batched simulator decides the same."""
    scenario = Scenario(slowdowns=((float(STALL_STARTS), float(STALL_MINUTES), 0.01, 0.0),))
    arrivals = scale_trace(per_minute(load_trace(WORLDCUP98), 60)[:1000], scenario)
    target = simulated_target(scenario, name="default")
    decisions = []
    result = simulate(arrivals, EngineAutoscaler(target, on_decision=lambda _, decision: decisions.append(decision)),
                      scenario)
    stall = [decision for decision in decisions if decision.reason_code == "stall"]
    assert stall and not any(decision.direction == DOWN for decision in stall)
    assert any(decision.direction == UP for decision in stall)
    recovered = STALL_STARTS + STALL_MINUTES
    assert result.serving[recovered] == 32
    assert result.slo_violation_minutes <= 46
    assert_same_run(result, simulate_slo_batch(arrivals, [target], scenario)[0], "the stall row")
