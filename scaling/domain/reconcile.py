"""Level-triggered convergence: the desired capacity against the plan's observed capacity.

The action queue is the fast path from a decision to the plan; correctness does not depend on
it. The state keeps the *desired* capacity with the decision that set it, and every sample
carries the plan's *observed* capacity (collect reads it each minute). ``reconcile`` compares
the two on every evaluation:

- equal: in sync (the desired capacity is *confirmed*: the plan has shown it);
- different while the autoscaler's own write has not shown up yet (the plan still has the
  capacity it had when the decision was taken, and never showed the desired one): a lost
  message, an ambiguous reply or a failed write. Once the difference outlives ``grace`` the
  absolute target is re-issued under a new decision id (``<decision>-r<N>``, so that the scale
  function's idempotency record of an earlier attempt cannot block it), and again every
  ``grace`` while the difference lasts (``max_backoff`` longer than ``grace`` makes the interval
  double up to it; the default keeps it at ``grace``, so that the plan is right within one grace
  and a collect interval after a fault ends, at a cost of at most 20 ARM writes an hour);
- different in any other way (the plan showed the desired capacity and moved away, or moved to
  a third value): someone else resized it. ``adopt`` accepts the new capacity as desired (the
  engine re-decides from it); ``revert`` re-issues the desired capacity at once.

Pure: values in, values out; the evaluate service persists ``desired`` with the state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from scaling.domain.decisions import DOWN, UP

IN_SYNC = "in_sync"
WAITING = "waiting"
REISSUE = "reissue"
EXTERNAL_CHANGE = "external_change"
UNKNOWN = "unknown"

ADOPT = "adopt"
REVERT = "revert"
EXTERNAL_CHANGE_CHOICES = (ADOPT, REVERT)
#: How many earlier in-flight targets a desired capacity remembers (a burst of decisions faster
#: than the plan is observed; older ones have landed or been superseded long since).
MAX_EARLIER_CAPACITIES = 4


@dataclass(frozen=True, slots=True)
class DesiredCapacity:
    """The capacity the autoscaler wants the plan to have, and how it got there.

    ``decision_id`` names the decision that set it (``observed-...`` / ``external-...`` when it
    was taken from the plan); ``capacity_before`` is what the plan had then; ``confirmed`` turns
    true once the plan has been observed at ``capacity``; ``reissues`` counts the re-issued
    actions and ``issued_at`` is when the last action for it was sent. ``earlier_capacities``
    are the targets of our own earlier writes that the plan had not shown yet when this one was
    decided: until it shows this one, it may still show any of them (our writes land in any
    order the queue delivers them, each a little late), and that is not somebody else's resize.
    """

    capacity: int
    decision_id: str
    set_at: datetime
    capacity_before: int | None
    issued_at: datetime
    confirmed: bool = False
    reissues: int = 0
    earlier_capacities: tuple[int, ...] = ()

    @classmethod
    def observed(cls, capacity: int, now: datetime, origin: str = "observed") -> DesiredCapacity:
        """Desired = what the plan has (first observation, or an adopted external change)."""
        return cls(capacity, f"{origin}-{int(now.timestamp())}", now, capacity, now, confirmed=True)

    @classmethod
    def decided(cls, capacity: int, decision_id: str, now: datetime, capacity_before: int | None,
                previous: DesiredCapacity | None = None, clock_skew: timedelta = timedelta(0)) -> DesiredCapacity:
        """A new decision's capacity. ``previous`` is the desired capacity it replaces: if the plan
        has not shown that one yet, or showed it so recently that the clocks cannot order the
        observations (``clock_skew``, see ``reconcile``), what came before it may still be observed."""
        earlier: tuple[int, ...] = ()
        if previous is not None:
            settled = previous.confirmed and now - previous.issued_at >= 2 * clock_skew
            earlier = (previous.capacity,) if settled else (previous.capacity, *previous.possible_before_write)
        kept = tuple(dict.fromkeys(c for c in earlier if c is not None and c != capacity_before))
        return cls(capacity, decision_id, now, capacity_before, now, earlier_capacities=kept[:MAX_EARLIER_CAPACITIES])

    @property
    def possible_before_write(self) -> tuple[int, ...]:
        """What the plan may show while our write of ``capacity`` has not landed."""
        before = () if self.capacity_before is None else (self.capacity_before,)
        return (*before, *self.earlier_capacities)

    def next_issue_at(self, grace: timedelta, max_backoff: timedelta) -> datetime:
        """When an unconfirmed capacity is re-issued: ``grace`` after the last issue, doubling."""
        return self.issued_at + min(grace * (2 ** self.reissues), max(max_backoff, grace))


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """What one observation means for the desired capacity.

    ``reissue_id`` (with ``direction``) is set when an action must be sent for ``desired``.
    """

    kind: str
    desired: DesiredCapacity | None
    observed: int | None
    reasons: tuple[str, ...] = ()
    reissue_id: str | None = None
    direction: str | None = None

    @property
    def acts(self) -> bool:
        return self.reissue_id is not None


def reissue_id_for(decision_id: str, attempt: int) -> str:
    """``<decision>-r<attempt>``: a fresh id per re-issue, derived from the original decision."""
    base, _, suffix = decision_id.rpartition("-r")
    return f"{base if base and suffix.isdigit() else decision_id}-r{attempt}"


def reconcile(desired: DesiredCapacity | None, observed: int | None, now: datetime, *, grace: timedelta,
              on_external_change: str = ADOPT, max_backoff: timedelta | None = None,
              clock_skew: timedelta = timedelta(0)) -> Reconciliation:
    """Compare ``desired`` with the plan's ``observed`` capacity, observed at ``now`` (the
    sample's collection time; see the module doc). An observation made before the last action
    was issued says nothing about it and changes nothing.

    ``clock_skew`` is how far the collector's and the evaluators' clocks may each be off: the
    observation's stamp and the action's ``issued_at`` come from different clocks, so within
    twice that after the action an observation of a capacity from before our write may have been
    taken before it, even after another observation confirmed the write. It waits, and is never
    taken for somebody else's resize (the next observation, a minute later, still is)."""
    if observed is None:
        return Reconciliation(UNKNOWN, desired, None, ("plan capacity not observed; nothing to compare",))
    max_backoff = grace if max_backoff is None else max_backoff
    if desired is not None and now < desired.issued_at:
        return Reconciliation(WAITING, desired, observed, ("observation older than the last action; nothing to compare",))
    if desired is not None and desired.confirmed and observed in desired.possible_before_write \
            and now - desired.issued_at < 2 * clock_skew:
        return Reconciliation(WAITING, desired, observed, (
            f"plan at {observed} from before decision {desired.decision_id}, observed within the clocks' tolerance "
            f"of it after {desired.capacity} was confirmed: possibly older than the write; nothing to compare",))
    if desired is None:
        return Reconciliation(IN_SYNC, DesiredCapacity.observed(observed, now), observed,
                              (f"first observation: desired capacity is the plan's {observed}",))
    if observed == desired.capacity:
        return Reconciliation(IN_SYNC, desired if desired.confirmed else replace(desired, confirmed=True), observed)
    direction = UP if desired.capacity > observed else DOWN
    own_write_pending = not desired.confirmed and observed in desired.possible_before_write
    if own_write_pending:
        due = desired.next_issue_at(grace, max_backoff)
        if now < due:
            return Reconciliation(WAITING, desired, observed,
                                  (f"plan at {observed}, desired {desired.capacity} (decision {desired.decision_id}); "
                                   f"waiting for the write until {due.isoformat()}",))
        attempt = desired.reissues + 1
        reissue_id = reissue_id_for(desired.decision_id, attempt)
        return Reconciliation(
            REISSUE, replace(desired, reissues=attempt, issued_at=now), observed,
            (f"plan still at {observed} {(now - desired.set_at).total_seconds():.0f} s after decision "
             f"{desired.decision_id} asked for {desired.capacity}; re-issuing the absolute target (attempt {attempt})",),
            reissue_id, direction)
    change = (f"plan changed outside the autoscaler: observed {observed}, desired {desired.capacity} "
              f"(decision {desired.decision_id})")
    if on_external_change == REVERT:
        reverted = DesiredCapacity(desired.capacity, desired.decision_id, desired.set_at, observed, now,
                                   reissues=desired.reissues + 1)
        return Reconciliation(EXTERNAL_CHANGE, reverted, observed, (f"{change}; reverting to {desired.capacity}",),
                              reissue_id_for(desired.decision_id, reverted.reissues), direction)
    return Reconciliation(EXTERNAL_CHANGE, DesiredCapacity.observed(observed, now, "external"), observed,
                          (f"{change}; adopted {observed} (on_external_change: adopt)",))
