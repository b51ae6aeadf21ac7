"""Another controller on the plan, table-driven: when external changes mean one, and the sample's
list of enabled autoscale settings."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaling.domain.conflict import (
    EXTERNAL_WRITER,
    ExternalChange,
    ExternalWriterHold,
    external_writer,
    recent_changes,
)
from scaling.domain.samples import SampleError, parse_sample
from scaling.storage.synthetic import queue_sample

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def changes(*minutes: int) -> tuple[ExternalChange, ...]:
    return tuple(ExternalChange(T0 + timedelta(minutes=minute), 5 + index, 3) for index, minute in enumerate(minutes))


@pytest.mark.parametrize(
    ("minutes", "now_minute", "limit", "held"),
    [
        ((0, 10, 20), 21, 3, False),  # three in the hour: answered as usual
        ((0, 10, 20, 30), 31, 3, True),  # the fourth: another controller
        ((0, 10, 20, 30), 31, 4, False),
        ((0, 10, 20, 30), 31, 0, False),  # 0 turns the check off
        ((0, 1), 2, 1, True),
    ],
)
def test_more_external_changes_than_the_limit_in_the_window_is_another_writer(minutes, now_minute, limit, held):
    now = T0 + timedelta(minutes=now_minute)
    hold = external_writer(recent_changes(changes(*minutes), None, now), now, limit)
    assert (hold is not None) == held
    if held:
        assert hold.describe().startswith(EXTERNAL_WRITER) and f"{len(minutes)} times" in hold.describe()


@pytest.mark.parametrize(
    ("minutes", "now_minute", "kept"),
    [((0, 10, 20), 59, 3), ((0, 10, 20), 60, 2), ((0, 10, 20), 90, 0)],  # older than an hour: forgotten
)
def test_changes_older_than_the_window_are_forgotten(minutes, now_minute, kept):
    assert len(recent_changes(changes(*minutes), None, T0 + timedelta(minutes=now_minute))) == kept


def test_the_hold_round_trips():
    hold = ExternalWriterHold(T0, changes(0, 10, 20, 30))
    assert ExternalWriterHold.from_dict(json.loads(json.dumps(hold.to_dict()))) == hold


def test_a_sample_carries_the_enabled_autoscale_settings_and_older_samples_have_none():
    sample = queue_sample("orders", T0, 10, 2)
    assert "autoscale_settings" not in json.loads(sample.to_json())
    named = replace(sample, autoscale_settings=("cpu-autoscale",))
    assert parse_sample(named.to_json()).autoscale_settings == ("cpu-autoscale",)


@pytest.mark.parametrize(("value", "fragment"), [("cpu", "autoscale_settings must be a list"),
                                                 ([7], "autoscale_settings[0]"), (["x"] * 17, "at most 16")])
def test_a_malformed_list_of_autoscale_settings_is_refused_naming_the_field(value, fragment):
    document = {**json.loads(queue_sample("orders", T0, 10, 2).to_json()), "autoscale_settings": value}
    with pytest.raises(SampleError) as error:
        parse_sample(json.dumps(document))
    assert fragment in str(error.value)
