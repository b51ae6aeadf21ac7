"""Who serves: the instances counted serving, ready, and how long the rest take."""

from __future__ import annotations

from scaling.domain.slo_kernel.arrays import maximum, minimum, negation, where


def serving_count(capacity, live_owners, partitions):
    """How many of ``capacity`` instances serve, as the collected ownership shows: all of them once
    the source has as many live owners (or every partition has one, when there are more instances
    than partitions), else its live owners."""
    return where(live_owners >= minimum(capacity, partitions), capacity, live_owners)


def ready_instances(expected, serving, just_due):
    """The instances ready now: those the owners show serving, unless fewer show while a scale-out
    is ``just_due`` (until an interval past its provisioning delay: the collection sees the new
    instances' claims up to an interval late); then the ``expected`` count."""
    return where((serving >= expected) | negation(just_due), serving, expected)


def pending_seconds(ready, capacity, due, interval, provisioning):
    """How long the instances not serving yet still need: until the scale-out is ``due`` (NaN:
    none in flight), or, late or lost, the next collection (``interval``); a provisioning delay
    when none serves at all (the restart); none when all serve."""
    waiting = where(due > 0, due, interval)  # (NaN: False)
    return where(ready < capacity, where(ready <= 0, maximum(waiting, provisioning), waiting), 0.0)
