"""The counts: the scale-out that drains, and the scale-in that holds for the dwell."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scaling.domain.slo_kernel.arrays import NO_RATE, all_of, any_of, filled
from scaling.domain.slo_kernel.owners import OwnerLoads


def scale_out_counts(levels: np.ndarray, valid: np.ndarray, capacity: np.ndarray, highest: np.ndarray, top: int,
                     needs: Sequence[tuple[OwnerLoads, np.ndarray]]) -> np.ndarray:
    """Per candidate, the smallest allowed count above ``capacity`` at which every partition of
    every source is served its need (``needs``: each source's loads and needs, partitions x
    candidates), else the ``highest`` allowed. ``levels`` holds each candidate's allowed counts
    ascending (candidates x counts; ``valid`` marks the real ones), looked up up to ``top`` + 1."""
    width = levels.shape[1]
    fits = valid & (levels > capacity[:, None])
    pairs = fits.ravel().nonzero()[0]
    if pairs.size:  # every (candidate, count) pair at once
        column = pairs // width
        counts = np.minimum(levels.ravel()[pairs], top + 1)
        served = np.ones(pairs.size, dtype=bool)
        for loads, need in needs:
            served &= (loads.service(need[:, column], counts, column) >= need[:, column]).all(axis=0)
        fits.ravel()[pairs] = served
    return np.where(fits.any(axis=1), levels[np.arange(len(levels)), fits.argmax(axis=1)], highest)


def hold_seconds(loads: OwnerLoads, calm: np.ndarray, age: np.ndarray, counts: np.ndarray, limit: np.ndarray,
                 reaction: np.ndarray, columns: np.ndarray | slice = slice(None), breach: tuple | None = None) -> np.ndarray:
    """How long ``counts`` (one per chosen column) keep every partition's oldest event under
    ``limit``, at the ``calm`` rates from ``age`` now, a scale-out ``reaction`` seconds away
    (infinite where no partition fills). Not at all where a partition's oldest event is past the
    limit and still would be after ``reaction`` seconds of draining at that count: an old backlog
    that drains slowly is no surplus (scaled in on it, the SLO was missed until the next scale-out).
    Nor, with ``breach`` (the SLO and the collection interval, per chosen column), where it is past
    the SLO and still would be after an interval at that count: the drain after a stall, scaled in
    halfway, added a violation minute."""
    calm = calm[:, columns]
    serve = loads.service(calm, counts, columns)
    flowing = calm > NO_RATE
    # (where every row flows, or none fills, the selections would pick one side throughout: skipped)
    growth = 1.0 - serve / calm if all_of(flowing) else np.where(flowing, 1.0 - serve / np.maximum(calm, NO_RATE), -1.0)
    filling = growth > 0
    ages = age[:, columns]
    margin = limit - growth * reaction - ages
    if breach is not None:
        slo, interval = breach
        past = ages > slo
        if any_of(past):  # (worked out only where an oldest event is past the SLO)
            margin = np.where(past & (ages + growth * interval > slo), 0.0, margin)
    if not any_of(filling):
        return np.minimum.reduce(np.where(margin > 0, np.inf, 0.0), axis=0)
    return np.minimum.reduce(np.where(margin > 0, np.where(filling, margin / np.where(filling, growth, 1.0), np.inf), 0.0), axis=0)


#: Up to this many (candidate, count) pairs, ``scale_in_counts`` tries every count below the
#: capacity at once (a batch of one: the engine); above, it tries where the fluid model points.
EVERY_COUNT_PAIRS = 64


def scale_in_counts(levels: np.ndarray, below: np.ndarray, capacity: np.ndarray, top: int, limit: np.ndarray,
                    dwell: np.ndarray, reaction: np.ndarray,
                    sources: Sequence[tuple[OwnerLoads, np.ndarray, np.ndarray]],
                    breach: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate, the smallest allowed count below ``capacity`` expected to hold for ``dwell``
    (``hold_seconds`` over every source: its loads, calm rates and ages), -1 where none does, and
    how long it holds (seconds; NaN where none does). ``levels`` holds the allowed counts ascending
    (candidates x counts), ``below`` how many lie under the capacity; ``breach``: ``hold_seconds``'s.

    The counts are tried ascending and the first that holds is taken: all at once when there are
    few (``EVERY_COUNT_PAIRS``). With many, since how long a count holds never shrinks as the
    count grows (more service: slower growth, fewer filling partitions), a candidate whose
    highest count below the capacity does not hold has none; for the others the first that holds is
    found by checking where the fluid model says it should be and the count below; only when
    those disagree with the estimate are all counts tried in turn (and always where a count below
    the capacity is sized by exact owner loads, which may hold where the bound of the count above
    does not). One function because the three searches share the candidates' rows and the counts
    already tried; it is the evaluation's hottest path in a sweep.
    """
    count = len(capacity)
    columns = np.arange(count)
    counts = np.minimum(levels, top + 1)
    width = levels.shape[1]

    def hold(level: np.ndarray, chosen: np.ndarray | slice = slice(None)) -> np.ndarray:
        at = counts[columns[chosen], level]
        shortest = None  # (the first source's, then the shortest: as from infinity, one np.minimum fewer)
        for loads, calm, age in sources:
            seconds = hold_seconds(loads, calm, age, at, limit[chosen], reaction[chosen], chosen,
                                   None if breach is None else (breach[0][chosen], breach[1]))
            shortest = seconds if shortest is None else np.minimum(shortest, seconds)
        return filled(len(at), np.inf) if shortest is None else shortest

    if int(below.sum()) <= EVERY_COUNT_PAIRS:
        pairs = (np.arange(width)[None, :] < below[:, None]).ravel().nonzero()[0]  # (candidate, level) below the capacity
        held = np.zeros(levels.shape, dtype=bool)
        seconds = np.empty(levels.shape)  # (read only where a count held: every such entry is written)
        if pairs.size:
            at = pairs // width
            seconds.ravel()[pairs] = lasting = hold(pairs % width, at)
            held.ravel()[pairs] = lasting >= dwell[at]
        first = held.argmax(axis=1)
        found = held[columns, first]
        return np.where(found, levels[columns, first], -1), np.where(found, seconds[columns, first], np.nan)

    def holds(level: np.ndarray, chosen: np.ndarray | slice = slice(None)) -> np.ndarray:
        lasting = hold(level, chosen)
        return lasting >= dwell[chosen], lasting

    exact_below = np.zeros(count, dtype=bool)
    for loads, _, _ in sources:
        exact_below |= (loads.exact_count > 0) & (loads.exact_count < capacity)
    chosen = np.full(count, -1)
    chosen_hold = np.full(count, np.nan)
    # The highest count below the capacity first: where it does not hold, no lower count does
    # (exact owner loads aside), so most candidates are settled by that one check.
    at_highest, highest_lasting = holds(np.maximum(below - 1, 0))
    rest = ((at_highest | exact_below) & (below > 0)).nonzero()[0]
    if not rest.size:
        return chosen, chosen_hold
    # Where it should be: growth at most (limit - age) / (reaction + dwell) on every partition,
    # i.e. a service of at least (1 - that) of each forecast, at the equal share or the owner-load ratio.
    rest_counts, rest_below = counts[rest], below[rest]
    short = np.zeros((rest.size, width), dtype=bool)
    for loads, calm, age in sources:
        calm, age = calm[:, rest], age[:, rest]
        flowing = calm > NO_RATE
        allowed_growth = (limit[rest] - age) / (reaction[rest] + dwell[rest])
        required = np.where(flowing, calm * (1.0 - allowed_growth), -np.inf).max(axis=0)
        fraction = np.maximum(np.where(flowing, 1.0 - allowed_growth, 0.0).max(axis=0), 0.0)
        lacking = loads.rate[rest, None] / loads.per_instance[rest_counts] < required[:, None]  # at the equal share
        # ... unless the owner-load ratio serves enough: worked out only for those (all at once).
        pairs = (lacking & loads.ownership[rest, None]).ravel().nonzero()[0]
        if pairs.size:
            row = pairs // width
            load = loads.load(rest_counts.ravel()[pairs], rest[row])
            by_load = (load > 0) & (loads.rate[rest[row]] >= fraction[row] * load)
            lacking.ravel()[pairs[by_load]] = False
        short |= lacking
    guess = np.clip(short.sum(axis=1), 0, rest_below - 1)
    at_guess, lasting = at_highest[rest], highest_lasting[rest]  # (the guess is often the highest count)
    elsewhere = (guess != rest_below - 1).nonzero()[0]
    if elsewhere.size:
        at_guess[elsewhere], lasting[elsewhere] = holds(guess[elsewhere], rest[elsewhere])
    # The count under the guess matters only where the guess holds (elsewhere the guess is not
    # taken, and whether to try every count depends on the guess alone).
    lower = (at_guess & (guess > 0)).nonzero()[0]
    under_guess = np.zeros(rest.size, dtype=bool)
    if lower.size:
        under_guess[lower] = holds(guess[lower] - 1, rest[lower])[0]
    found = at_guess & ~under_guess & ~exact_below[rest]
    unsure = rest[~found & (exact_below[rest] | ~(~at_guess & (guess == rest_below - 1)))]
    chosen[rest[found]] = guess[found]
    chosen_hold[rest[found]] = lasting[found]
    for level in range(width):  # (rarely needed) every count in turn, ascending
        trying = unsure[level < below[unsure]]
        if not trying.size:
            break
        holding, lasting = holds(np.full(len(trying), level), trying)
        chosen[trying[holding]] = level
        chosen_hold[trying[holding]] = lasting[holding]
        unsure = np.setdiff1d(unsure, trying[holding], assume_unique=True)
    return np.where(chosen >= 0, levels[columns, np.maximum(chosen, 0)], -1), np.where(chosen >= 0, chosen_hold, np.nan)
