"""Schedule profiles at a moment: which profile holds, and the instance bounds in force.

Pure: the moment comes in, and local wall time is computed with ``zoneinfo`` so that a 09:00
Europe/Berlin window opens at 09:00 local on both sides of a daylight-saving change. The first
profile whose window holds applies; outside every profile the target's own bounds do.

A profile's minimum must *serve* when its window opens, so it is asked for one lead time
(the provisioning delay) before: the minimum in force is the higher of the one that holds now
and the one that will hold one lead from now. At the window's end the minimum simply drops;
the count then comes down through the normal scale-in logic, not in one step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from scaling.domain.policy_model import TargetPolicy
from scaling.domain.policy_profiles import DAYS, Profile, Recurrence, clock_time, zone


def recurrence_holds(recurrence: Recurrence, moment: datetime) -> bool:
    """Whether the weekly window holds at ``moment`` (an aware time)."""
    local = moment.astimezone(zone(recurrence.time_zone))
    start, end, now = clock_time(recurrence.start), clock_time(recurrence.end), local.time().replace(tzinfo=None)
    today = DAYS[local.weekday()]
    if start < end:
        return today in recurrence.days and start <= now < end
    # Crosses midnight: the evening part belongs to today, the morning part to yesterday's window.
    yesterday = DAYS[(local.weekday() - 1) % 7]
    return (today in recurrence.days and now >= start) or (yesterday in recurrence.days and now < end)


def profile_holds(profile: Profile, moment: datetime) -> bool:
    if profile.fixed is not None:
        return profile.fixed.start <= moment < profile.fixed.end
    assert profile.recurrence is not None
    return recurrence_holds(profile.recurrence, moment)


def profile_at(profiles: Sequence[Profile], moment: datetime) -> Profile | None:
    """The first profile whose window holds at ``moment`` (fixed dates listed first override)."""
    return next((profile for profile in profiles if profile_holds(profile, moment)), None)


@dataclass(frozen=True, slots=True)
class BoundsInForce:
    """The instance bounds at one moment and which profile set each (``None``: the target's own).

    ``profile`` is the profile whose window holds now; ``min_from`` may name the profile about to
    open (its minimum is asked for one lead early, ``early`` is then true)."""

    min_instances: int
    max_instances: int
    profile: str | None = None
    min_from: str | None = None
    max_from: str | None = None
    early: bool = False

    def describe(self) -> str:
        if self.early:
            return (f"profile {self.min_from} opens within the provisioning delay: at least {self.min_instances} "
                    f"instances now (bounds {self.min_instances}-{self.max_instances})")
        return f"profile {self.profile} in force: bounds {self.min_instances}-{self.max_instances}"


def bounds_in_force(target: TargetPolicy, now: datetime, lead: timedelta) -> BoundsInForce:
    """The bounds ``target`` has at ``now``, its profiles' minimums asked for ``lead`` early."""
    base = target.bounds
    if not target.profiles:
        return BoundsInForce(base.min_instances, base.max_instances)
    current = profile_at(target.profiles, now)
    low, high, min_from, max_from = base.min_instances, base.max_instances, None, None
    if current is not None:
        if current.min_instances is not None:
            low, min_from = current.min_instances, current.name
        if current.max_instances is not None:
            high, max_from = current.max_instances, current.name
    early = False
    ahead = profile_at(target.profiles, now + lead) if lead > timedelta(0) else current
    if ahead is not None and ahead is not current and ahead.min_instances is not None and ahead.min_instances > low:
        low, min_from, early = ahead.min_instances, ahead.name, True
        if high < low:
            high, max_from = low, ahead.name
    return BoundsInForce(low, high, current.name if current else None, min_from, max_from, early)


def with_bounds(target: TargetPolicy, bounds: BoundsInForce) -> TargetPolicy:
    """``target`` with ``bounds`` as its own (what the modes and the snapping then see)."""
    if (bounds.min_instances, bounds.max_instances) == (target.bounds.min_instances, target.bounds.max_instances):
        return target
    return replace(target, bounds=replace(target.bounds, min_instances=bounds.min_instances,
                                          max_instances=bounds.max_instances))


def widest_bounds(target: TargetPolicy) -> tuple[int, int]:
    """The lowest minimum and highest maximum any profile (or the target itself) can put in
    force: what ``scale`` clamps to, since the bounds in force were applied when deciding."""
    lows = [target.bounds.min_instances, *(p.min_instances for p in target.profiles if p.min_instances is not None)]
    highs = [target.bounds.max_instances, *(p.max_instances for p in target.profiles if p.max_instances is not None)]
    return min(lows), max(highs)
