"""The policy modes side by side: the one place the engine looks up what a target's ``mode``
means. Adding a mode is a module with ``propose(target, situation) -> Proposal`` (see
``proposal.py``) and one entry here (plus the mode's name and settings in ``policy.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scaling.domain import rules, slo, slo_queue
from scaling.domain.policy import TargetPolicy
from scaling.domain.proposal import Proposal, Situation


@dataclass(frozen=True, slots=True)
class Mode:
    """A mode's proposal function and what the engine does differently for it:
    ``budgets_scale_in`` holds a scale-in unless the action budget has room for it and the
    scale-out likely to follow (the SLO mode alternates between counts on purpose)."""

    propose: Callable[[TargetPolicy, Situation], Proposal]
    budgets_scale_in: bool = False


def _slo(target: TargetPolicy, situation: Situation) -> Proposal:
    """The SLO mode reads Event Hubs partitions (``slo.py``) or Service Bus queues (``slo_queue.py``)."""
    return (slo_queue.propose if slo_queue.is_queue_target(target) else slo.propose)(target, situation)


MODES: dict[str, Mode] = {
    "rules": Mode(rules.propose),
    "slo": Mode(_slo, budgets_scale_in=True),
}


def mode_of(target: TargetPolicy) -> Mode:
    """The target's mode (the policy's validation keeps ``target.mode`` to the names above)."""
    return MODES[target.mode]
