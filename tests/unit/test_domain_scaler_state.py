"""``ScalerState.changed``: ``dataclasses.replace`` with the field names read once, the same state."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from scaling.domain.decisions import ScalerState

MOMENT = datetime(2026, 1, 1, tzinfo=UTC)
BEFORE = ScalerState("t", capacity=2, ready_capacity=1, pending_ready_at=MOMENT, throughput_per_instance=10.0,
                     throughput_observations=4, checkpoint_delay_clipped=True, action_tokens=2.5, action_tokens_at=MOMENT)


@pytest.mark.parametrize("changes", [
    {},
    {"capacity": 3},
    {"throughput_per_instance": None, "throughput_floor": 4.5, "throughput_drop_shown_at": MOMENT},
    {"last_reason_code": "cooldown", "last_action_at": MOMENT, "checkpoint_cadence_seconds": 300.0},
    {field.name: None for field in dataclasses.fields(ScalerState) if field.name not in ("target", "last_direction",
                                                                                           "throughput_observations",
                                                                                           "checkpoint_delay_clipped")},
], ids=["none", "one", "several", "others", "every optional"])
def test_changed_is_replace(changes: dict) -> None:
    changed = BEFORE.changed(**changes)
    assert changed == dataclasses.replace(BEFORE, **changes)
    assert repr(changed) == repr(dataclasses.replace(BEFORE, **changes))


def test_changed_refuses_a_field_the_state_does_not_have() -> None:
    with pytest.raises(TypeError):
        BEFORE.changed(capacityy=3)
