"""Level-triggered convergence, table-driven: the desired capacity against the observed plan."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.reconcile import (
    EXTERNAL_CHANGE,
    IN_SYNC,
    REISSUE,
    UNKNOWN,
    WAITING,
    DesiredCapacity,
    reconcile,
    reissue_id_for,
)

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
GRACE = timedelta(minutes=3)
#: The autoscaler asked for 6 while the plan had 4, at T0.
ASKED = DesiredCapacity.decided(6, "4b0df8bfbb51ccbf1fe5b35f", T0, capacity_before=4)


@pytest.mark.parametrize(
    ("desired", "observed", "after", "kind", "reissue_id"),
    [
        (ASKED, None, timedelta(minutes=10), UNKNOWN, None),
        (ASKED, 6, timedelta(minutes=1), IN_SYNC, None),
        (ASKED, 4, timedelta(minutes=2, seconds=59), WAITING, None),  # the write may still be on its way
        (ASKED, 4, timedelta(minutes=3), REISSUE, "4b0df8bfbb51ccbf1fe5b35f-r1"),  # lost: re-issue at the grace
        (ASKED, 5, timedelta(minutes=1), EXTERNAL_CHANGE, None),  # a third value: someone else
        (replace(ASKED, confirmed=True), 4, timedelta(minutes=1), EXTERNAL_CHANGE, None),  # shown, then moved
        (ASKED, 4, -timedelta(seconds=1), WAITING, None),  # observed before the action was issued
        (None, 3, timedelta(0), IN_SYNC, None),  # first observation
    ],
)
def test_reconcile_cases(desired, observed, after, kind, reissue_id) -> None:
    result = reconcile(desired, observed, T0 + after, grace=GRACE)
    assert result.kind == kind
    assert result.reissue_id == reissue_id


def test_in_sync_confirms_and_a_later_difference_is_external() -> None:
    synced = reconcile(ASKED, 6, T0 + timedelta(minutes=1), grace=GRACE).desired
    assert synced.confirmed
    moved = reconcile(synced, 4, T0 + timedelta(minutes=20), grace=GRACE)
    assert moved.kind == EXTERNAL_CHANGE and not moved.acts
    # adopt (the default): the plan's capacity becomes the desired one, already confirmed
    assert moved.desired.capacity == 4 and moved.desired.confirmed
    assert "observed 4, desired 6" in moved.reasons[0] and "adopted 4" in moved.reasons[0]


def test_revert_reissues_the_desired_capacity_at_once() -> None:
    synced = reconcile(ASKED, 6, T0 + timedelta(minutes=1), grace=GRACE).desired
    reverted = reconcile(synced, 9, T0 + timedelta(minutes=20), grace=GRACE, on_external_change="revert")
    assert reverted.kind == EXTERNAL_CHANGE and reverted.acts
    assert reverted.desired.capacity == 6 and reverted.direction == "down"
    assert reverted.reissue_id == "4b0df8bfbb51ccbf1fe5b35f-r1"
    # if the revert is lost too, the ordinary re-issue follows after the grace (9 is now "before")
    again = reconcile(reverted.desired, 9, T0 + timedelta(minutes=20) + 2 * GRACE, grace=GRACE)
    assert again.kind == REISSUE and again.reissue_id == "4b0df8bfbb51ccbf1fe5b35f-r2"


def test_reissues_repeat_every_grace_by_default() -> None:
    desired, now, moments = ASKED, T0, []
    for _ in range(4):
        while (result := reconcile(desired, 4, now, grace=GRACE)).kind != REISSUE:
            now += timedelta(minutes=1)
        moments.append(now)
        desired = result.desired
    assert [(moment - T0) / timedelta(minutes=1) for moment in moments] == [3, 6, 9, 12]


def test_reissues_can_back_off_exponentially_up_to_a_cap() -> None:
    desired, moments = ASKED, []
    now = T0
    for _ in range(8):
        while (result := reconcile(desired, 4, now, grace=GRACE, max_backoff=timedelta(minutes=20))).kind != REISSUE:
            now += timedelta(minutes=1)
        moments.append(now)
        desired = result.desired
    gaps = [(later - earlier) / timedelta(minutes=1) for earlier, later in zip(moments, moments[1:], strict=False)]
    assert (moments[0] - T0) == GRACE
    assert gaps == [6, 12, 20, 20, 20, 20, 20]
    assert desired.reissues == 8


@pytest.mark.parametrize(
    ("decision_id", "attempt", "expected"),
    [("abc", 1, "abc-r1"), ("abc-r1", 2, "abc-r2"), ("observed-1714564800", 3, "observed-1714564800-r3"),
     ("a-rx", 1, "a-rx-r1")],
)
def test_reissue_ids_derive_from_the_original_decision(decision_id: str, attempt: int, expected: str) -> None:
    assert reissue_id_for(decision_id, attempt) == expected


SKEW = timedelta(seconds=60)
#: Then 8 while the plan had not shown 6 yet: the plan may still show 4 or 6 until 8 lands.
CHAINED = DesiredCapacity.decided(8, "9c0d", T0 + timedelta(seconds=30), capacity_before=4, previous=ASKED)


@pytest.mark.parametrize(
    ("desired", "observed", "after", "clock_skew", "kind"),
    [
        (CHAINED, 6, timedelta(minutes=1), timedelta(0), WAITING),  # our earlier write, not someone else's
        (CHAINED, 4, timedelta(minutes=1), timedelta(0), WAITING),
        (CHAINED, 5, timedelta(minutes=1), timedelta(0), EXTERNAL_CHANGE),
        (CHAINED, 6, timedelta(minutes=4), timedelta(0), REISSUE),  # still ours, lost: re-issued at the grace
        # Confirmed, then an observation from before the write stamped by a clock ahead: within
        # twice the tolerance it says nothing; past it, it is somebody's resize.
        (replace(ASKED, confirmed=True), 4, timedelta(seconds=119), SKEW, WAITING),
        (replace(ASKED, confirmed=True), 4, timedelta(seconds=120), SKEW, EXTERNAL_CHANGE),
        (replace(ASKED, confirmed=True), 5, timedelta(seconds=30), SKEW, EXTERNAL_CHANGE),
    ],
)
def test_reconcile_knows_its_own_earlier_writes(desired, observed, after, clock_skew, kind) -> None:
    assert reconcile(desired, observed, T0 + after, grace=GRACE, clock_skew=clock_skew).kind == kind


@pytest.mark.parametrize(
    ("previous", "decided_after", "clock_skew", "earlier"),
    [
        (None, timedelta(0), SKEW, ()),
        (ASKED, timedelta(seconds=30), SKEW, (6,)),  # unconfirmed: 6 may land or show; 4 is capacity_before
        (replace(ASKED, confirmed=True), timedelta(minutes=5), SKEW, (6,)),  # settled: only what the plan has
        (replace(ASKED, confirmed=True), timedelta(seconds=30), SKEW, (6,)),
        (replace(ASKED, confirmed=True, capacity_before=3), timedelta(seconds=30), SKEW, (6, 3)),  # recent: 3 may show
        (replace(ASKED, confirmed=True, capacity_before=3), timedelta(minutes=5), SKEW, (6,)),
    ],
)
def test_a_decision_remembers_the_writes_still_in_flight(previous, decided_after, clock_skew, earlier) -> None:
    desired = DesiredCapacity.decided(9, "d", T0 + decided_after, capacity_before=4, previous=previous,
                                      clock_skew=clock_skew)
    assert desired.earlier_capacities == earlier
