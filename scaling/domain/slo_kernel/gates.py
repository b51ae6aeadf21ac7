"""The engine's gates, every mode's: bounds, cooldowns, the action budget, in their one order."""

from __future__ import annotations

from scaling.domain.slo_kernel.arrays import is_nan, maximum, minimum, negation, where

# Every mode's: the engine applies them to what the mode proposes, the batched simulators to
# every candidate's proposal.

#: Tokens a scale-in needs from the action budget: itself and the scale-out likely to follow.
SCALE_IN_TOKENS = 2.0


def bounds_correction(capacity, wanted, upward, downward, lowest, highest):
    """A capacity outside the bounds brought inside (someone resized the plan, or the bounds
    changed): below ``lowest``, up to it unless the proposal already goes up that far; above
    ``highest``, down to it unless the proposal already goes down that far. ``wanted`` is the
    proposal's count (any number where neither ``upward`` nor ``downward``). Returns the count
    wanted now, and whether it was raised or lowered (then ``upward`` or ``downward`` instead of
    the proposal's direction)."""
    raised = (capacity < lowest) & (negation(upward) | (wanted < lowest))
    lowered = (capacity > highest) & (negation(downward) | (wanted > highest))
    return where(raised, lowest, where(lowered, highest, wanted)), raised, lowered


def cooldown_over(elapsed_seconds, cooldown_seconds):
    """Whether a direction's cooldown has passed, ``elapsed_seconds`` after the last action
    (NaN: no action yet)."""
    return is_nan(elapsed_seconds) | (elapsed_seconds >= cooldown_seconds)


def action_tokens(budget, tokens, elapsed_seconds):
    """Tokens left in the action budget: refilled at ``budget`` per hour since the last action
    (``elapsed_seconds``), at most ``budget``; the whole budget when nothing was spent yet (NaN)."""
    refilled = minimum(budget, tokens + maximum(elapsed_seconds, 0.0) / 3600.0 * budget)
    return where(is_nan(tokens) | is_nan(elapsed_seconds), budget, refilled)


def budget_allows_scale_in(tokens):
    """Whether the tokens left (``action_tokens``) let a scale-in act (``SCALE_IN_TOKENS``)."""
    return tokens >= SCALE_IN_TOKENS


def tokens_after_action(tokens):
    """The tokens left once an action spends one of those there are now."""
    return maximum(tokens - 1.0, 0.0)


#: The gates' verdicts, in the order ``gates`` applies them: a candidate's verdict is the first
#: gate that holds it (``ACTS``: none does).
ACTS, NO_CHANGE, SOURCE_FAILED, AT_BOUND, PAUSED, COOLDOWN, ACTION_BUDGET = range(7)


def gates(capacity, proposed, upward, downward, snapped_up, snapped_down, lowest, highest, since_action, cooldown_up,
          cooldown_down, tokens, budgets_scale_in, failed=False, paused=False):
    """The engine's gates, every mode's, in their one order over a batch (plain numbers: the
    live evaluation's batch of one; arrays: a sweep's candidates). The engine, the batched SLO
    and rules simulators call this; what stays theirs is the proposal and the snapping.

    1. a capacity outside the bounds brought inside (``bounds_correction``: raised or lowered
       instead of the proposal's direction, to ``lowest`` or ``highest``);
    2. no direction left: ``NO_CHANGE`` (the proposal's own hold);
    3. a scale-in while a source ``failed``: ``SOURCE_FAILED``;
    4. the count wanted: the proposal snapped to an allowed count (the caller's ``snapped_up``,
       the proposal at least one above the capacity, or ``snapped_down``, at least one below),
       kept within the bounds; no change that way: ``AT_BOUND``;
    5. ``paused``: ``PAUSED`` (what it would do, cooldowns aside);
    6. the direction's cooldown since the last action (``since_action``, NaN: none yet):
       ``COOLDOWN``;
    7. where the mode ``budgets_scale_in``, a scale-in without the tokens it needs
       (``budget_allows_scale_in``): ``ACTION_BUDGET``.

    Returns the count wanted (the capacity where nothing moves), whether it goes up, whether the bounds raised or lowered it, and
    the verdict (``ACTS`` where it acts)."""
    _, raised, lowered = bounds_correction(capacity, proposed, upward, downward, lowest, highest)
    upward = (upward | raised) & negation(lowered)
    downward = (downward | lowered) & negation(raised)
    moving = upward | downward
    wanted = where(raised, lowest, where(lowered, highest, where(upward, snapped_up, snapped_down)))
    wanted = where(moving, maximum(lowest, minimum(highest, wanted)), capacity)
    unmoved = (wanted == capacity) | (upward & (wanted < capacity)) | (downward & (wanted > capacity))
    cooling = negation(cooldown_over(since_action, where(upward, cooldown_up, cooldown_down)))
    budget = budgets_scale_in & downward & negation(budget_allows_scale_in(tokens))
    verdict = where(budget, ACTION_BUDGET, ACTS)
    for held, code in ((cooling, COOLDOWN), (paused, PAUSED), (unmoved, AT_BOUND), (downward & failed, SOURCE_FAILED),
                       (negation(moving), NO_CHANGE)):
        verdict = where(held, code, verdict)
    return wanted, upward, raised, lowered, verdict
