"""The engine asks a target's mode through ``domain/modes.py`` and nothing else: a mode put in
the registry is what ``evaluate`` runs, it sees the engine's ``Situation``, and the engine's own
rules (snapping to allowed counts, the action budget for modes that ask for it) still apply."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain import modes
from scaling.domain.decisions import DOWN, HOLD, ScalerState
from scaling.domain.engine import evaluate
from scaling.domain.proposal import Proposal, Situation
from scaling.domain.samples import MetricSample, PartitionReading, SourceReading
from scaling.simulation.peers.looped import simulated_target
from scaling.simulation.world.loop import Scenario

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def samples(capacity: int = 8, partitions: int = 32) -> list[MetricSample]:
    return [MetricSample(target="orders", collected_at=T0 - timedelta(minutes=minutes), capacity=capacity,
                         sources=(SourceReading(name="hub", kind="eventhub", partitions=tuple(
                             PartitionReading.measure(str(p), 0, 1000 - minutes, 990) for p in range(partitions))),))
            for minutes in (1, 0)]


@pytest.fixture
def seen(monkeypatch) -> list[Situation]:
    """Every registered mode replaced by one that wants 10 instances and records what it saw."""
    calls: list[Situation] = []

    def wants_ten(target, situation: Situation) -> Proposal:
        calls.append(situation)
        return Proposal(10, DOWN, "stub_mode", ("the stub wants 10",), {"stub": True})

    for name, mode in list(modes.MODES.items()):
        monkeypatch.setitem(modes.MODES, name, modes.Mode(wants_ten, budgets_scale_in=mode.budgets_scale_in))
    return calls


def test_the_engine_runs_the_registered_mode_and_snaps_its_wish(seen):
    """A scale-in from 16 to the 10 the mode wants lands on 8: the engine snaps a scale-in down to
    the largest count at or below the wish that spreads the 32 partitions evenly (..., 8, 11, 16)."""
    target = simulated_target(Scenario(partitions=32), name="orders")
    decision = evaluate(target, ScalerState(target="orders"), samples(capacity=16), T0)
    assert decision.reason_code == "stub_mode" and decision.metrics["stub"] is True
    assert decision.target_capacity == 8  # 10 snapped down to a count that spreads 32 partitions evenly
    situation = seen[0]
    assert (situation.capacity, situation.ready_capacity, situation.now) == (16, 16, T0)
    assert len(situation.samples) == 2 and 8 in situation.counts and 10 not in situation.counts


@pytest.mark.parametrize(("budgets", "direction"), [(True, HOLD), (False, DOWN)])
def test_only_modes_that_ask_for_it_keep_room_in_the_action_budget(seen, monkeypatch, budgets, direction):
    target = simulated_target(Scenario(partitions=32), name="orders")
    mode = modes.mode_of(target)
    monkeypatch.setitem(modes.MODES, target.mode, modes.Mode(mode.propose, budgets_scale_in=budgets))
    one_token = ScalerState(target="orders", action_tokens=1.0, action_tokens_at=T0)
    decision = evaluate(target, one_token, samples(capacity=16), T0)
    assert decision.direction == direction, decision.reasons
    assert (decision.reason_code == "action_budget") == budgets
