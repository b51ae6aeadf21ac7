"""The knob registry (``domain/knobs.py``) is the one place of every knob: the shipped schema,
docs/policy.md's table, the model's defaults and the internal constants' modules agree with it,
and a policy gets the same defaults from a document as from code."""

from __future__ import annotations

import importlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from scaling.domain import knobs, policy_fields, samples
from scaling.domain.knobs import CONSTANTS, KNOBS, TABLE_BEGIN, TABLE_END, knobs_table
from scaling.domain.policy import policy_from_dict
from scaling.domain.policy_model import Step
from scaling.storage.synthetic import rules_target

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "policy.schema.json").read_text(encoding="utf-8"))
#: Where each block of a target lives in the schema.
DEFINITION = {"bounds": "Bounds", "scale_up": "Step", "scale_down": "Step", "slo": "SloSettings", "rules": "Rule"}


def schema_property(key: str) -> dict:
    block, _, name = key.rpartition(".")
    definition = SCHEMA["$defs"][DEFINITION[block] if block else "TargetPolicy"]
    return definition["properties"][name]


def numeric(schema: dict) -> dict:
    """The bounds of a property, or of the number inside an optional one."""
    for choice in schema.get("anyOf", ()):
        if choice.get("type") in ("number", "integer"):
            return choice
    return schema


@pytest.mark.parametrize("knob", KNOBS, ids=lambda knob: knob.key)
def test_the_schema_is_the_registry(knob) -> None:
    schema = schema_property(knob.key)
    bounds = numeric(schema)
    low = bounds.get("exclusiveMinimum", bounds.get("minimum"))
    assert (low, bounds.get("maximum"), "exclusiveMinimum" in bounds) == (knob.minimum, knob.maximum, knob.above)
    if not knob.key.endswith("cooldown_seconds"):  # the direction's default: checked below
        assert schema.get("default") == knob.default
    if not knob.key.startswith(("scale_up.", "scale_down.")):  # one Step definition serves both directions
        assert schema["description"] == knob.meaning


def test_docs_policy_md_shows_the_generated_table() -> None:
    text = (REPO / "docs" / "policy.md").read_text(encoding="utf-8")
    start, end = text.index(TABLE_BEGIN), text.index(TABLE_END) + len(TABLE_END) + 1
    assert text[start:end] == knobs_table(), "regenerate with python -m scaling policy-schema --knobs"


@pytest.mark.parametrize("direction", ["scale_up", "scale_down"])
def test_a_step_without_a_cooldown_gets_its_directions_default_from_a_document_and_from_code(direction) -> None:
    """The document ``{"scale_up": {"step": 2}}`` got 0 s, ``Step(step=2)`` in code 600 s."""
    document = json.loads((REPO / "policy.sample.json").read_text(encoding="utf-8"))
    document["targets"][0][direction] = {"step": 2}
    from_document = getattr(policy_from_dict(document).targets[0], direction)
    from_code = getattr(replace(rules_target("orders"), **{direction: Step(step=2)}), direction)
    expected = knobs.KNOB[f"{direction}.cooldown_seconds"].default
    assert from_document.cooldown_seconds == from_code.cooldown_seconds == expected


def test_every_default_of_the_model_is_the_registrys() -> None:
    document = json.loads((REPO / "policy.sample.json").read_text(encoding="utf-8"))
    target = document["targets"][0]
    for block in ("bounds", "scale_up", "scale_down", "slo", "on_external_change", "mode", "profiles", "preset", "seed"):
        target.pop(block, None)
    target["mode"] = "slo"
    target["rules"] = [{"scale_up_above": 10, "scale_down_below": 1}]
    policy = policy_from_dict(document).targets[0]
    for knob in KNOBS:
        block, _, name = knob.key.rpartition(".")
        owner = policy.rules[0] if block == "rules" else getattr(policy, block) if block else policy
        value = getattr(owner, name)
        assert value == knob.default, knob.key


@pytest.mark.parametrize("constant", CONSTANTS, ids=lambda constant: constant.name)
def test_each_internal_constant_is_listed_with_its_value(constant) -> None:
    assert getattr(importlib.import_module(constant.module), constant.name) == constant.value


@pytest.mark.parametrize("name", ["MAX_SOURCES", "MAX_NAME_CHARS", "MAX_TEXT_CHARS", "MAX_INSTANCES", "MAX_SECONDS",
                                  "MAX_SAMPLES"])
def test_limits_are_defined_once(name) -> None:
    """The policy and the samples once defined these apart (samples: 64 sources, 256-character
    names, 4,096-character text): now one definition, in the registry."""
    assert getattr(policy_fields, name) is getattr(knobs, name)
    assert getattr(samples, name, getattr(knobs, name)) is getattr(knobs, name)


def test_app_setting_defaults_are_the_registrys_wherever_they_are_read() -> None:
    """The Settings dataclass, the environment reader and the services' own defaults once each
    typed 60 s, 180 s and 3: one value each now, the registry's."""
    from datetime import timedelta

    from scaling.domain.conflict import DEFAULT_EXTERNAL_CHANGES_LIMIT
    from scaling.domain.samples import MAX_CLOCK_SKEW
    from scaling.services.evaluate import RECONCILE_GRACE
    from scaling.settings import Settings

    defaults = {"SCALER_DRY_RUN": "dry_run", "HISTORY_RETENTION_DAYS": "history_retention_days",
                "OWNERSHIP_EXPIRY_SECONDS": "ownership_expiry_seconds", "COLLECT_CONCURRENCY": "collect_concurrency",
                "COLLECT_TIMEOUT_SECONDS": "collect_timeout_seconds", "CLOCK_SKEW_SECONDS": "clock_skew_seconds",
                "RECONCILE_GRACE_SECONDS": "reconcile_grace_seconds",
                "EXTERNAL_CHANGES_PER_HOUR": "external_changes_per_hour"}
    assert set(defaults) == {setting.name for setting in knobs.SETTINGS}
    built = Settings(policy=None, storage=None)  # type: ignore[arg-type]
    for name, attribute in defaults.items():
        assert getattr(built, attribute) == knobs.SETTING[name].default, name
    assert timedelta(seconds=knobs.SETTING["CLOCK_SKEW_SECONDS"].default) == MAX_CLOCK_SKEW
    assert timedelta(seconds=knobs.SETTING["RECONCILE_GRACE_SECONDS"].default) == RECONCILE_GRACE
    assert knobs.SETTING["EXTERNAL_CHANGES_PER_HOUR"].default == DEFAULT_EXTERNAL_CHANGES_LIMIT


@pytest.mark.parametrize("setting", [s for s in knobs.SETTINGS if isinstance(s.default, float)], ids=lambda s: s.name)
def test_app_setting_bounds_are_the_registrys(setting) -> None:
    from scaling.settings import SettingsError
    from scaling.settings import _setting as read

    assert read({}, setting.name) == setting.default
    if setting.maximum is not None:
        assert read({setting.name: str(setting.maximum)}, setting.name) == setting.maximum
        with pytest.raises(SettingsError):
            read({setting.name: str(setting.maximum + 1)}, setting.name)
    if setting.minimum:
        with pytest.raises(SettingsError):
            read({setting.name: str(setting.minimum / 2)}, setting.name)
