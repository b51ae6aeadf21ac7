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
from scaling.domain.policy_rules import Step
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
    for block in ("bounds", "scale_up", "scale_down", "slo", "on_external_change", "forecast", "mode", "profiles", "preset", "seed"):
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


#: docs/policy.md's sections whose field tables name knobs without their block.
SECTION_BLOCKS = {"## A target": "", "## Threshold rules": "rules.", "## The SLO mode (": "slo."}


def documented_defaults() -> list[tuple[str, str]]:
    """(knob key, default cell) of every hand-written field table row of docs/policy.md that names
    registry knobs: ``| `a`, `b` | 1, 2 |`` and ``| `a` / `b` | 1 / 2 |`` name two."""
    rows, prefix = [], None
    for line in (REPO / "docs" / "policy.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            prefix = next((block for heading, block in SECTION_BLOCKS.items() if line.startswith(heading)), None)
            continue
        if prefix is None or not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        for separator in (", ", " / "):
            names, values = cells[0].split(separator), cells[1].split(separator)
            if len(names) == len(values) and all(f"{prefix}{name.strip('`')}" in knobs.KNOB for name in names):
                rows += [(f"{prefix}{name.strip('`')}", value) for name, value in zip(names, values, strict=True)]
                break
    return rows


def test_the_hand_written_field_tables_show_the_registrys_defaults() -> None:
    rows = documented_defaults()
    assert len(rows) >= 15  # the SLO table, the rules' window, the bounds: else this checks nothing
    for key, cell in rows:
        default = knobs.KNOB[key].default
        if isinstance(default, bool):
            assert cell == f"`{str(default).lower()}`", key
        elif isinstance(default, str):
            assert cell == f"`{default}`", key
        elif default is not None:
            assert float(cell.replace(",", "")) == default, key
    text = (REPO / "docs" / "policy.md").read_text(encoding="utf-8")
    [steps] = [line for line in text.splitlines() if line.startswith("| `scale_up` / `scale_down` |")]
    expected = (f"up: step {knobs.KNOB['scale_up.step'].default}, cooldown {knobs.KNOB['scale_up.cooldown_seconds'].default} s; "
                f"down: step {knobs.KNOB['scale_down.step'].default}, "
                f"cooldown {knobs.KNOB['scale_down.cooldown_seconds'].default} s")
    assert expected in steps


@pytest.mark.parametrize(("sources", "name_chars", "parses"), [
    pytest.param(knobs.MAX_SOURCES, knobs.MAX_NAME_CHARS, True, id="at-the-policy-limits"),
    pytest.param(knobs.MAX_SOURCES + 1, 8, False, id="more-sources-than-a-policy-has"),  # parsed up to 64 before
    pytest.param(1, knobs.MAX_NAME_CHARS + 1, False, id="a-source-name-no-policy-can-give"),  # up to 256 before
])
def test_a_sample_is_held_to_the_policys_source_limits(sources, name_chars, parses) -> None:
    from datetime import UTC, datetime

    from scaling.domain.samples import SampleError, parse_sample
    from scaling.storage.synthetic import queue_sample

    at = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    document = json.loads(queue_sample("orders", at, 10, capacity=2).to_json())
    [source] = document["sources"]
    document["sources"] = [{**source, "name": f"{index:03d}".ljust(name_chars, "s")} for index in range(sources)]
    if parses:
        assert len(parse_sample(json.dumps(document), now=at).sources) == sources
    else:
        with pytest.raises(SampleError):
            parse_sample(json.dumps(document), now=at)


def documented_bounds() -> list[tuple[str, str]]:
    """(knob key, allowed cell) of docs/policy.md's "Bounds" rows whose every field is a knob."""
    text = (REPO / "docs" / "policy.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Bounds\n"):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    rows = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        names, allowed = (cell.strip() for cell in line.strip("|").split("|")[:2])
        keys = []
        for name in names.split(", "):
            name = name.strip("`")
            key = next((key for key in (name, f"rules.{name}", f"scale_up.{name}") if key in knobs.KNOB), None)
            keys.append(key)
        if all(keys):
            rows += [(key, allowed) for key in keys]
    return rows


def parse_allowed(cell: str) -> tuple[float, float, bool]:
    cell = cell.split(" (")[0].replace(",", "").replace("10⁹", "1000000000")
    if cell.startswith("over "):
        low, high = cell.removeprefix("over ").split(" at most ")
        return float(low), float(high), True
    low, high = cell.split("–")
    return float(low), float(high), False


def test_the_hand_written_bounds_table_shows_the_registrys_bounds() -> None:
    rows = documented_bounds()
    assert len(rows) >= 8, rows
    for key, cell in rows:
        knob = knobs.KNOB[key]
        assert parse_allowed(cell) == (knob.minimum, knob.maximum, knob.above), key
