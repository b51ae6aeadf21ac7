"""The tuning grids (scaling.simulation.drivers.candidates): unions of products, and the rule knobs in the
default grid, so that the tuner can turn a rule off where the target's history does not need it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaling.simulation.drivers.candidates import GRIDS, RULE_KNOBS, batch_group, slo_candidates
from scaling.simulation.peers import looped as peers
from scaling.simulation.world.loop import Scenario


@pytest.fixture(scope="module")
def base():
    return peers.simulated_target(Scenario.named("standard"), name="tuned")


def test_a_union_of_grids_gives_each_setting_once_in_order(base) -> None:
    grid = ({"safety_seconds": (60.0, 90.0)}, {"safety_seconds": (90.0, 120.0)})
    candidates = slo_candidates(base, grid)
    assert [c.label for c in candidates] == ["slo safety_seconds=60", "slo safety_seconds=90", "slo safety_seconds=120"]
    assert [c.target.slo.safety_seconds for c in candidates] == [60.0, 90.0, 120.0]


def test_settings_equal_under_other_labels_are_one_candidate(base) -> None:
    """A second product that repeats the first's settings (its own knobs at the base's values)
    adds nothing: the same policy is simulated once."""
    grid = ({"safety_seconds": (120.0,)}, {"safety_seconds": (120.0,), "headroom": (base.slo.headroom,)})
    assert len(slo_candidates(base, grid)) == 1


@pytest.mark.parametrize(("field", "value"), [
    ("scale_in_peak_seconds", 0.0),        # no peak hold
    ("max_actions_per_hour", 8.0),         # a larger action budget
    ("min_dwell_seconds", 1200.0),         # a short dwell
])
def test_the_default_grid_can_turn_each_rule_knob(base, field: str, value: float) -> None:
    candidates = slo_candidates(base, "large")
    assert value in RULE_KNOBS[field]
    assert any(getattr(c.target.slo, field) == value for c in candidates), field
    assert getattr(base.slo, field) != value  # a change from the default, not the default again


@pytest.mark.parametrize("peak", [0.0, 240.0])
def test_the_default_grid_holds_the_default_with_only_its_peak_hold_changed(base, peak: float) -> None:
    """The default minus one margin (issue 53: without the peak hold, 5.4% cheaper on a noisy trace
    with the same oldest event) is a candidate, not only the hold paired with a short dwell."""
    wanted = replace(base.slo, scale_in_peak_seconds=peak)
    assert wanted in {c.target.slo for c in slo_candidates(base, "large")}


def test_the_default_grid_is_one_batch_and_every_setting_once(base) -> None:
    candidates = slo_candidates(base, "large")
    first, *_ = GRIDS["large"]
    distinct = {c.target.slo for c in candidates}
    assert len(distinct) == len(candidates)
    assert len(candidates) > len(slo_candidates(base, first))
    assert len({batch_group(c.target) for c in candidates}) == 1  # the tuning job simulates them together
