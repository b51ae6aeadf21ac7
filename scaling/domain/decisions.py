"""Values the rule engine reads and returns: the persisted scaler state and the decision."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from operator import attrgetter
from typing import Any

UP = "up"
DOWN = "down"
HOLD = "none"


@dataclass(frozen=True, slots=True)
class ScalerState:
    """Everything the engine must remember between evaluations; lives in Table storage.

    ``capacity`` is the last capacity the scaler asked for; ``ready_capacity`` the part of it
    that serves already (new instances serve after the provisioning delay, ``pending_ready_at``).
    ``throughput_per_instance`` (events per second) is learned from saturated periods (until then
    ``throughput_floor``, the best rate seen, is a safe lower bound), and
    ``checkpoint_delay_seconds`` (how far checkpoints trail) from the age seen while consumers keep up,
    ``rebalance_pause_seconds`` (how long a moved partition stands still) from the moves seen, and
    ``checkpoint_cadence_seconds`` (how often checkpoints move) from the checkpoints' own moves.
    """

    target: str
    capacity: int | None = None
    ready_capacity: int | None = None
    pending_ready_at: datetime | None = None
    last_action_at: datetime | None = None
    last_direction: str = HOLD
    last_decision_id: str | None = None
    last_reason_code: str | None = None
    last_sample_at: datetime | None = None
    throughput_per_instance: float | None = None
    throughput_observations: int = 0
    throughput_floor: float | None = None
    #: A saturated reading far below the learned rate, waiting for the next one to confirm it.
    throughput_unconfirmed: float | None = None
    #: The rate before a drop learned at once and when a saturated reading last showed the drop
    #: (``slo_kernel.remembered_drop``): ``slo_kernel.let_go`` returns to it after a while.
    throughput_before_drop: float | None = None
    throughput_drop_shown_at: datetime | None = None
    checkpoint_delay_seconds: float | None = None
    #: Whether the learned checkpoint delay is only a lower bound: the first ages set it at its
    #: ceiling and none has lowered it since (``slo_kernel.delay_clipped``).
    checkpoint_delay_clipped: bool = False
    #: How long a partition that changed owner keeps its checkpoint still (``slo_kernel.rebalance``):
    #: learned from the moves the readings show; above 0, scale-outs allow for it.
    rebalance_pause_seconds: float | None = None
    #: How often each partition's checkpoint moves where consumers checkpoint less often than
    #: collect runs (``slo_kernel.cadence``): learned from the moves the readings show.
    checkpoint_cadence_seconds: float | None = None
    action_tokens: float | None = None
    action_tokens_at: datetime | None = None

    def changed(self, **changes: Any) -> ScalerState:
        """``dataclasses.replace`` with the field names read once: an evaluation makes several
        states, and ``replace`` looks the 21 fields up anew each time (half its cost)."""
        values = dict(zip(_STATE_FIELDS, _STATE_VALUES(self), strict=True))
        values.update(changes)
        return ScalerState(**values)


_STATE_FIELDS = tuple(field.name for field in dataclasses.fields(ScalerState))
_STATE_VALUES = attrgetter(*_STATE_FIELDS)


@dataclass(frozen=True, slots=True)
class Decision:
    """What the engine decided for one evaluation, with the numbers behind it.

    ``target_capacity`` is absolute (never "+1") so that a duplicated action cannot scale twice;
    it is ``None`` when the engine holds. ``reasons`` explain the action or why there was none.
    """

    decision_id: str
    target: str
    evaluated_at: datetime
    current_capacity: int | None
    target_capacity: int | None
    direction: str
    reason_code: str
    reasons: tuple[str, ...]
    metrics: Mapping[str, Any] = field(default_factory=dict)
    state: ScalerState | None = None

    @property
    def acts(self) -> bool:
        return self.target_capacity is not None and self.direction != HOLD


def decision_id_for(target: str, sample_id: str) -> str:
    """One decision per target and evaluated sample: a redelivered sample maps to the same id."""
    return hashlib.sha256(f"{target}|{sample_id}".encode()).hexdigest()[:24]


#: Fields of ``ScalerState`` that the engine learns from the window. Re-evaluating a window whose
#: newest sample was already evaluated (a late sample arrived) must not learn from it twice.
LEARNED_FIELDS = ("throughput_per_instance", "throughput_observations", "throughput_floor", "throughput_unconfirmed",
                  "throughput_before_drop", "throughput_drop_shown_at",
                  "checkpoint_delay_seconds", "checkpoint_delay_clipped", "rebalance_pause_seconds",
                  "checkpoint_cadence_seconds")


def restore_learning(new: ScalerState, old: ScalerState) -> ScalerState:
    """``new`` with the learned fields of ``old`` (for re-evaluations of an evaluated window)."""
    names = {f.name for f in dataclasses.fields(ScalerState)}
    return replace(new, **{name: getattr(old, name) for name in LEARNED_FIELDS if name in names})
