"""The simulate-only reference: what ``python -m scaling simulate`` reports for the demo's window
(the same engine and world without functions or storage), and how close the demo must come.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaling.local.demo.config import demo_target


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How close the demo's summary must be to ``simulate``'s on the same window."""

    cost_ratio_relative: float = 0.02
    slo_violation_minutes: int = 2
    scale_actions: int = 2

    def describe(self) -> str:
        return (f"cost ratio within {self.cost_ratio_relative:.0%}, SLO-violation minutes within "
                f"{self.slo_violation_minutes}, scale actions within {self.scale_actions}")


TOLERANCE = Tolerance()


def summarize(result: Any, scenario: Any) -> dict[str, Any]:
    """The run summary with the keys and rounding of ``python -m scaling simulate``."""
    return result.summary(scenario)


def simulate_summary(trace: str | Path, *, start: int = 0, minutes: int | None = None, target: Any = None,
                     scenario: Any = None, source: str = "eventhub") -> dict[str, Any]:
    """What ``python -m scaling simulate --trace T --start S --minutes M [--policy P] [--source S]``
    reports for the same window and target: the same engine and world, without functions or storage."""
    from scaling.local.simhub import load_arrivals
    from scaling.simulation.peers.looped import EngineAutoscaler
    from scaling.simulation.queue.world import QueueEngineAutoscaler, simulate_queue
    from scaling.simulation.world.loop import Scenario, simulate

    scenario = scenario or Scenario()
    target = target or demo_target(partitions=scenario.partitions, source=source)
    arrivals = load_arrivals(trace, start=start, minutes=minutes, scenario=scenario)
    if source == "servicebus":
        result = simulate_queue(arrivals, QueueEngineAutoscaler(target), scenario, algorithm=f"policy:{target.name}",
                                knob=target.mode)
        return summarize(result, scenario)
    result = simulate(arrivals, EngineAutoscaler(target), scenario, algorithm=f"policy:{target.name}", knob=target.mode)
    return summarize(result, scenario)


def compare(demo: dict[str, Any], simulated: dict[str, Any], tolerance: Tolerance = TOLERANCE) -> list[str]:
    """Where the demo's summary is further from simulate's than the tolerance (empty: they agree)."""
    problems = []
    if demo["minutes"] != simulated["minutes"]:
        problems.append(f"minutes differ: demo {demo['minutes']}, simulate {simulated['minutes']}")
    base = simulated["cost_ratio"]
    if abs(demo["cost_ratio"] - base) > tolerance.cost_ratio_relative * base:
        problems.append(f"cost ratio: demo {demo['cost_ratio']:.4f}, simulate {base:.4f}")
    if abs(demo["slo_violation_minutes"] - simulated["slo_violation_minutes"]) > tolerance.slo_violation_minutes:
        problems.append(f"SLO-violation minutes: demo {demo['slo_violation_minutes']}, simulate {simulated['slo_violation_minutes']}")
    if abs(demo["scale_actions"] - simulated["scale_actions"]) > tolerance.scale_actions:
        problems.append(f"scale actions: demo {demo['scale_actions']}, simulate {simulated['scale_actions']}")
    return problems
