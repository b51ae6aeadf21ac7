"""The offline optimum: the cheapest schedule of instance counts that meets the SLO, knowing every
arrival, bracketed between a provable lower bound and a feasible schedule replayed in ``World``.

The world (world/physics.py) tracks 32 partition backlogs; with uniform partitions and ``p mod n``
ownership they collapse into one aggregate backlog ``B`` and two fluid models bound it:

- **relaxed** (for the lower bound): ``n`` serving instances serve at most ``min(n, P) * mu``
  events a minute in total, so the world's aggregate backlog is at least
  ``B' = max(B + a - n * mu, 0)``; a minute can only be on time if every partition is drained
  (backlog <= ``DRAINED``) or holds at most ``1/P`` of the last ``SLO`` minutes' arrivals, so
  ``B' <= max(A_slo, P * DRAINED)``. Any schedule that meets the SLO in the world meets it here.
- **conservative** (for the feasible schedule): every partition gets at least ``mu / ceil(P/n)``
  a minute (the first water-filling round), so the busiest partition's backlog is at most
  ``B / P`` with ``B' = max(B + a - P * mu / ceil(P/n), 0)``; a schedule on time here is on time
  in the world.

The two capacities differ only for counts that do not divide the partitions (3, 5, 6, 7, 11 of
32): that, and nothing else, is the gap between the bounds.

Provisioning: a scale-out requested after minute ``t - 1`` serves from minute ``t + delay``; a
scale-in at once and trims what is in flight; so the count serving minute ``t`` is the smallest
count requested over minutes ``t - delay .. t``. The state of a schedule is the last ``delay``
requests (folded to their minimum and the latest) plus the backlog; billing is the requested
count, every minute.

The search is exact on each model: a forward label-setting dynamic program that keeps, per
minute and count state, every (cost, backlog) pair not dominated by another (lower cost and
lower backlog); backlog is not discretised at all. The action budget enters by a Lagrange
price per action: for any price ``lam >= 0`` the priced optimum minus ``lam * budget`` is a lower
bound on the budgeted optimum (weak duality), and a priced schedule within the budget is a
feasible one; prices are searched by bisection. The 0.1% violation budget is priced the same
way in the lower bound (``nu`` per violation minute); the feasible schedule allows none.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scaling.domain.lag import balanced_counts, effective_capacity
from scaling.simulation.world.scenario import Scenario
from scaling.simulation.world.service import DRAINED

#: A late minute in the relaxed model forgets backlog above this multiple of the limit.
FORGET_ABOVE = 2.0


@dataclass(frozen=True, slots=True)
class FluidModel:
    """One aggregate fluid model of the world: the counts a schedule may request, what each
    serves per minute, and per minute the largest backlog left after it that is on time."""

    counts: np.ndarray
    capacity: np.ndarray
    limits: np.ndarray
    delay: int
    initial: int


def _limits(arrivals: np.ndarray, scenario: Scenario, margin: float) -> np.ndarray:
    """Per minute ``t``: the largest aggregate backlog after minute ``t`` that the SLO allows,
    ``max(arrivals of minutes t-SLO+1..t, P * DRAINED)`` (less ``margin``); none in the first
    minutes, when nothing can be older than the SLO yet."""
    slo = scenario.slo_minutes
    window = int(math.floor(slo))
    cumulative = np.concatenate(([0.0], np.cumsum(arrivals)))
    now = np.arange(1, len(arrivals) + 1)
    earlier = cumulative[np.maximum(now - window, 0)]
    recent = cumulative[now] - earlier
    limits = np.maximum(recent, scenario.partitions * DRAINED) - margin
    limits[now - slo < 0] = np.inf  # nothing is older than the SLO before minute SLO
    return limits


def _check(scenario: Scenario) -> None:
    if scenario.skew > 0:
        raise ValueError("the offline optimum assumes uniform partitions (skew 0)")
    stressed = [name for name in ("checkpoint_interval_seconds", "hot_spot_rotation_minutes", "instance_failures_per_day",
                                  "rebalance_pause_seconds") if getattr(scenario, name)]
    if stressed or scenario.slowdowns or scenario.throughput_wave[0] or scenario.assignment != "modulo" \
            or scenario.delay_range[0] != scenario.delay_range[1]:
        raise ValueError("the offline optimum models the standard scenario only (no stress knobs: "
                         f"{', '.join(stressed) or 'drift, assignment or drawn delays'} set)")
    if scenario.slo_minutes != math.floor(scenario.slo_minutes):
        raise ValueError("the offline optimum assumes a whole-minute SLO")


def relaxed_model(arrivals: np.ndarray, scenario: Scenario) -> FluidModel:
    """Every schedule's backlog in the world is at least this model's: for the lower bound."""
    _check(scenario)
    counts = np.asarray(balanced_counts(scenario.partitions), dtype=np.int64)
    capacity = np.minimum(counts, scenario.partitions) * scenario.events_per_instance_per_minute
    return FluidModel(counts, capacity.astype(float), _limits(arrivals, scenario, -1e-6),
                      scenario.provisioning_delay_minutes, scenario.initial_capacity)


def conservative_model(arrivals: np.ndarray, scenario: Scenario) -> FluidModel:
    """Every schedule's busiest partition in the world holds at most ``1/P`` of this model's
    backlog: for a feasible schedule."""
    _check(scenario)
    counts = np.asarray(balanced_counts(scenario.partitions), dtype=np.int64)
    rate = scenario.events_per_instance_per_minute
    capacity = np.array([effective_capacity(scenario.partitions, int(n), rate) for n in counts])
    margin = 1e-3 + 1e-9 * float(np.sum(arrivals))
    return FluidModel(counts, capacity, _limits(arrivals, scenario, margin),
                      scenario.provisioning_delay_minutes, scenario.initial_capacity)


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule of requested counts (one per minute) and what it scores in its model."""

    requested: np.ndarray
    cost: float
    actions: int
    violations: int
    objective: float  # cost + action_price * actions + violation_price * violations


@dataclass(frozen=True, slots=True)
class CountStates:
    """What of the past requests decides the future: for a delay ``d >= 1`` the suffix minima of
    the last ``d`` requests (``min(r[t-d+1..t]), ..., min(r[t-1..t]), r[t]``), since the count
    serving minute ``t + 1`` is the smallest of ``r[t-d+1..t+1]``; with no delay the latest
    request. Indices into the counts; tables per (state, next request)."""

    latest: np.ndarray
    serving: np.ndarray
    following: np.ndarray
    pairs: np.ndarray | None  # with a delay of 2: each state's (older minimum, latest)

    @classmethod
    def build(cls, count: int, delay: int) -> CountStates:
        import itertools

        width = max(delay, 1)
        tuples = list(itertools.combinations_with_replacement(range(count), width))
        index = {state: number for number, state in enumerate(tuples)}
        latest = np.array([state[-1] for state in tuples])
        serving = np.zeros((len(tuples), count), dtype=np.int64)
        following = np.zeros((len(tuples), count), dtype=np.int64)
        for number, state in enumerate(tuples):
            for choice in range(count):
                serving[number, choice] = choice if delay == 0 else min(state[0], choice)
                nxt = (choice,) if delay == 0 else (*(min(s, choice) for s in state[1:]), choice)
                following[number, choice] = index[nxt]
        pairs = np.array(tuples) if width == 2 else None
        return cls(latest, serving, following, pairs)

    def dominated(self, state: np.ndarray, level: np.ndarray, backlog: np.ndarray, price: int) -> np.ndarray:
        """Labels (state, objective level, backlog) that a label of another state beats: one whose
        state is at least as high in both places (it serves at least as much from now on), with
        no more backlog and an objective no higher, plus ``price`` if its latest request differs
        (the one extra action that following the other's requests may take). Pairs only."""
        count = self.serving.shape[1]
        older, latest = self.pairs[state, 0], self.pairs[state, 1]
        span = int(level.max()) + 1
        table = np.full((count, count, span), np.inf)
        table[older, latest, level] = backlog  # one label per state and level
        np.minimum.accumulate(table, axis=2, out=table)  # objective no higher
        for index in range(count - 2, -1, -1):  # older minimum no lower
            np.minimum(table[index], table[index + 1], out=table[index])
        higher = table
        same = np.empty_like(higher)
        same[-1] = np.inf
        same[:-1] = higher[1:]  # same latest, older minimum strictly higher
        other = np.empty_like(higher)
        other[:, -1] = np.inf
        for index in range(count - 2, -1, -1):  # latest strictly higher
            np.minimum(other[:, index + 1], higher[:, index + 1], out=other[:, index])
        beaten = same[older, latest, level] <= backlog
        shifted = level - price
        usable = shifted >= 0
        beaten[usable] |= other[older[usable], latest[usable], shifted[usable]] <= backlog[usable]
        return beaten

    def start(self, initial: int) -> int:
        """The state before the first minute: every past request at the initial count."""
        state = 0
        for _ in range(self.serving.shape[0] and len(self.latest)):
            state = int(self.following[state, initial])
            if self.following[state, initial] == state:
                return state
        raise AssertionError("no steady state at the initial count")


def cheapest_schedule(arrivals: np.ndarray, model: FluidModel, *, action_price: int = 0,
                      violation_price: int | None = None, across_states: bool | None = None) -> Schedule:
    """The schedule minimising ``cost + action_price * actions + violation_price * violations``
    in ``model`` (no violation allowed when ``violation_price`` is None), exactly: labels
    ``(objective, backlog)`` per count state, pruned each minute to those no cheaper label of the
    same state beats on backlog. Backlog is never discretised; prices are whole instance-minutes
    so that objectives stay integers. The first minute runs at the initial count (the world's
    loop decides after each minute). ``across_states`` also prunes labels that a label of a
    higher count state beats (same result, fewer labels; by default only when no violation is
    priced: priced violations widen the objective levels, and the pruning's table with them)."""
    if across_states is None:
        across_states = violation_price is None
    arrivals = np.asarray(arrivals, dtype=float)
    minutes, count = len(arrivals), len(model.counts)
    initial = int(np.searchsorted(model.counts, model.initial))
    if initial >= count or model.counts[initial] != model.initial:
        raise ValueError(f"initial capacity {model.initial} is not one of the counts {model.counts.tolist()}")
    table = CountStates.build(count, model.delay)
    states = len(table.latest)
    served = model.capacity[table.serving]  # (state, choice): events served in the minute
    price = model.counts[None, :] + int(action_price) * (np.arange(count)[None, :] != table.latest[:, None])
    choice_of = np.broadcast_to(np.arange(count)[None, :], served.shape)
    label_state = np.array([table.start(initial)])
    label_objective = np.zeros(1, dtype=np.int64)
    label_backlog = np.zeros(1)
    parents: list[np.ndarray] = []
    choices: list[np.ndarray] = []
    for minute in range(minutes):
        if minute == 0:  # the first minute runs at the initial count
            cap, cost, follow, choice = (served[label_state][:, [initial]], price[label_state][:, [initial]],
                                         table.following[label_state][:, [initial]], choice_of[label_state][:, [initial]])
        else:
            cap, cost, follow, choice = (served[label_state], price[label_state], table.following[label_state],
                                         choice_of[label_state])
        backlog = np.maximum(label_backlog[:, None] + (arrivals[minute] - cap), 0.0)
        objective = label_objective[:, None] + cost
        late = backlog > model.limits[minute]
        parent = np.broadcast_to(np.arange(len(label_state))[:, None], backlog.shape)
        if violation_price is None:
            keep = ~late
            parent, choice, follow, objective, backlog = parent[keep], choice[keep], follow[keep], objective[keep], backlog[keep]
            if not len(backlog):
                raise ValueError(f"no schedule meets the SLO at minute {minute}")
        else:
            # a late minute pays its price and, to keep the model a relaxation with a bounded
            # front, forgets the backlog above the limit (less backlog is never worse)
            objective = objective + int(violation_price) * late
            backlog = np.minimum(backlog, FORGET_ABOVE * model.limits[minute])
            parent, choice, follow, objective, backlog = (parent.ravel(), choice.ravel(), follow.ravel(),
                                                         objective.ravel(), backlog.ravel())
        order = _front(follow, objective, backlog, states)
        follow, objective, backlog = follow[order], objective[order], backlog[order]
        label_state, label_objective, label_backlog = follow, objective, backlog
        if across_states and table.pairs is not None and len(label_state) > 64:
            keep = ~table.dominated(label_state, label_objective - label_objective.min(), label_backlog, int(action_price))
            order, label_state, label_objective, label_backlog = (order[keep], label_state[keep], label_objective[keep],
                                                                  label_backlog[keep])
        parents.append(parent[order].astype(np.int32))
        choices.append(choice[order].astype(np.int8))
    best = int(np.argmin(label_objective))
    requested = np.zeros(minutes, dtype=np.int64)
    index = best
    for minute in range(minutes - 1, -1, -1):
        requested[minute] = model.counts[choices[minute][index]]
        index = parents[minute][index]
    cost, actions, violations = score(arrivals, model, requested)
    return Schedule(requested, cost, actions, violations, float(label_objective[best]))


def _front(state: np.ndarray, objective: np.ndarray, backlog: np.ndarray, states: int) -> np.ndarray:
    """The labels worth keeping: per (state, objective level) the least backlog, then a cell only
    if its backlog is below every cheaper level's of the same state (a dense table: no sort)."""
    base = objective.min()
    spread = int(objective.max() - base) + 1
    cell = state * spread + (objective - base)
    least = np.full(states * spread, np.inf)
    np.minimum.at(least, cell, backlog)
    winner = np.full(states * spread, -1, dtype=np.int64)
    best_here = backlog == least[cell]
    winner[cell[best_here]] = np.flatnonzero(best_here)
    grid = least.reshape(states, spread)
    before = np.minimum.accumulate(grid, axis=1)
    useful = np.isfinite(grid)
    useful[:, 1:] &= grid[:, 1:] < before[:, :-1]
    return winner[np.flatnonzero(useful.ravel())]


def serving_counts(requested: np.ndarray, delay: int, initial: int) -> np.ndarray:
    """The count serving each minute: the smallest requested over the last ``delay + 1`` minutes
    (before the first minute, the initial count)."""
    padded = np.concatenate((np.full(delay, initial), requested))
    windows = np.lib.stride_tricks.sliding_window_view(padded, delay + 1)
    return windows.min(axis=1)


def score(arrivals: np.ndarray, model: FluidModel, requested: np.ndarray) -> tuple[float, int, int]:
    """A schedule's cost, actions and violation minutes in ``model``."""
    serving = serving_counts(requested, model.delay, model.initial)
    capacity = model.capacity[np.searchsorted(model.counts, serving)]
    backlog, violations = 0.0, 0
    for minute, arrived in enumerate(arrivals):
        backlog = max(backlog + arrived - capacity[minute], 0.0)
        violations += backlog > model.limits[minute]
    actions = int(np.count_nonzero(np.diff(np.concatenate(([model.initial], requested)))))
    return float(requested.sum()), actions, int(violations)



class ScheduledCapacity:
    """An autoscaler that requests a fixed schedule: ``requested[t]`` for minute ``t`` (decided
    after minute ``t - 1``, as ``simulate`` asks), so that a schedule replays through ``World``."""

    def __init__(self, requested: np.ndarray) -> None:
        self.requested = np.asarray(requested, dtype=np.int64)

    def decide(self, observation) -> int | None:
        minute = observation.minute
        return int(self.requested[minute]) if minute < len(self.requested) else None


@dataclass(frozen=True, slots=True)
class Bracket:
    """The offline optimum under one action budget, between a lower bound and a schedule.

    ``lower_bound`` no schedule of balanced counts within ``budget`` actions that meets the SLO
    in the world costs less; ``schedule`` (found at action price ``price``) meets it in the
    conservative model, hence in the world, within the budget, at ``cost``."""

    budget: int | None
    lower_bound: float
    cost: float
    actions: int
    price: int
    schedule: np.ndarray

    @property
    def gap(self) -> float:
        """How far the schedule may be above the true optimum, as a fraction of the bound."""
        return self.cost / self.lower_bound - 1.0 if self.lower_bound > 0 else math.inf


class _Passes:
    """Cached searches at whole action prices, one model each (prices are searched by bisection,
    and several budgets share them)."""

    def __init__(self, arrivals: np.ndarray, model: FluidModel, violation_price: int | None, name: str,
                 progress: Callable[[str], None] | None) -> None:
        self.arrivals, self.model, self.violation_price = arrivals, model, violation_price
        self.name, self.progress = name, progress
        self.done: dict[int, Schedule] = {}

    def at(self, price: int) -> Schedule:
        if price not in self.done:
            started = time.perf_counter()
            self.done[price] = found = cheapest_schedule(self.arrivals, self.model, action_price=price,
                                                         violation_price=self.violation_price)
            if self.progress:
                self.progress(f"{self.name} model, action price {price}: objective {found.objective:.0f}, "
                              f"{found.actions} actions ({time.perf_counter() - started:.0f}s)")
        return self.done[price]

    def within(self, budget: int, steps: int, first: int = 2) -> Schedule:
        """The schedule at the smallest price found (doubling from ``first``, then ``steps``
        bisection steps) whose actions fit ``budget``: actions fall as the price rises."""
        if self.at(0).actions <= budget:
            return self.at(0)
        low, high = 0, first
        while self.at(high).actions > budget:
            if high >= 1 << 12:
                raise ValueError(f"no schedule within {budget} actions")
            low, high = high, high * 2
        for _ in range(steps):
            if high - low <= 1:
                break
            middle = (low + high) // 2
            if self.at(middle).actions <= budget:
                high = middle
            else:
                low = middle
        return self.at(high)

    def price_of(self, schedule: Schedule) -> int:
        return next(price for price, found in self.done.items() if found is schedule)


def offline_optimum(arrivals: np.ndarray, scenario: Scenario, budgets: list[int | None], *,
                    violation_price: int = 16, steps: int = 2,
                    progress: Callable[[str], None] | None = None) -> list[Bracket]:
    """Per action budget (``None``: unlimited), a lower bound on the offline optimum and the
    best schedule found.

    Lower bound (Lagrangian weak duality): for any prices ``lam, nu >= 0`` the relaxed model's
    optimum of ``cost + lam * actions + nu * violations``, less ``lam * budget`` and less ``nu``
    times the violation minutes the SLO allows, is at most the cost of any schedule within the
    budget that meets the SLO in the world; the best over the prices tried is reported, found
    where the relaxed optimum's actions cross the budget. Schedule: the conservative model's
    priced optimum with no violation minute, at the smallest price tried that keeps it within
    the budget. ``steps`` bounds the bisection on the schedule's price (more steps, a cheaper
    schedule); the bound's price is only doubled."""
    arrivals = np.asarray(arrivals, dtype=float)
    allowed = int(math.floor(scenario.max_violation_fraction * len(arrivals) + 1e-9))
    relaxed = _Passes(arrivals, relaxed_model(arrivals, scenario), violation_price if allowed else None, "relaxed", progress)
    conservative = _Passes(arrivals, conservative_model(arrivals, scenario), None, "conservative", progress)
    allowance = violation_price * allowed if allowed else 0
    brackets = []
    for budget in budgets:
        if budget is None:
            lower = relaxed.at(0).objective - allowance
            found = conservative.at(0)
        else:
            relaxed.within(budget, 0)  # any price gives a bound; the doubling's crossing is near the best
            lower = max(found.objective - price * budget for price, found in relaxed.done.items()) - allowance
            found = conservative.within(budget, steps)
        brackets.append(Bracket(budget, float(lower), found.cost, found.actions, conservative.price_of(found),
                                found.requested))
    return brackets
