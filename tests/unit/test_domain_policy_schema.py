"""The policy's JSON Schema (policy.schema.json): generated from the model, shipped up to date,
and every policy example (the sample, the JSON blocks of docs/) valid under both the model and
the schema, so that what an editor accepts is what the autoscaler accepts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from scaling.domain.cli import schema_text
from scaling.domain.policy import KEDA_ALIASES, policy_from_dict, policy_json_schema

REPO = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO / "policy.schema.json"
SCHEMA_REFERENCE = "./policy.schema.json"


def _json_blocks(path: Path) -> list[tuple[str, str]]:
    text = path.read_text(encoding="utf-8")
    return [(f"{path.relative_to(REPO)}:{text[:match.start()].count(chr(10)) + 1}", match.group(1))
            for match in re.finditer(r"```json\n(.*?)```", text, flags=re.DOTALL)]


def _policy_examples() -> list:
    """Every JSON code block in docs/ that is a policy (has ``targets``), and the sample."""
    examples = [pytest.param(json.loads((REPO / "policy.sample.json").read_text(encoding="utf-8")), id="policy.sample.json")]
    for path in sorted((REPO / "docs").rglob("*.md")):
        for where, block in _json_blocks(path):
            document = json.loads(block)
            if isinstance(document, dict) and "targets" in document:
                examples.append(pytest.param(document, id=where))
    return examples


EXAMPLES = _policy_examples()


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_shipped_schema_is_the_generated_one() -> None:
    """Regenerate with ``python -m scaling policy-schema > policy.schema.json`` after a model change."""
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text()


def test_policy_schema_command_prints_the_schema() -> None:
    done = subprocess.run([sys.executable, "-m", "scaling", "policy-schema"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == policy_json_schema()


def test_docs_hold_policy_examples() -> None:
    """docs/policy.md shows at least one policy besides the sample (else the next test checks nothing)."""
    assert any("docs/policy.md" in param.id for param in EXAMPLES)


@pytest.mark.parametrize("document", EXAMPLES)
def test_examples_are_valid_under_the_model_and_the_schema(document: dict, validator) -> None:
    assert document.get("$schema") == SCHEMA_REFERENCE
    policy_from_dict(document)
    validator.validate(document)


def test_every_field_has_a_description() -> None:
    schema = policy_json_schema()
    missing = [f"{name}.{field}" for name, definition in schema["$defs"].items()
               for field, property_schema in definition["properties"].items() if not property_schema.get("description")]
    missing += [field for field, property_schema in schema["properties"].items() if not property_schema.get("description")]
    assert missing == []


def test_every_number_has_bounds() -> None:
    """Nothing numeric is open-ended: each number has a minimum and a maximum (issue 11, item 7)."""

    def numbers(property_schema: dict) -> list[dict]:
        options = property_schema.get("anyOf", [property_schema])
        return [option for option in options if option.get("type") in ("integer", "number")]

    schema = policy_json_schema()
    objects = {**schema["$defs"], "Policy": schema}
    unbounded = [f"{name}.{field}" for name, definition in objects.items()
                 for field, property_schema in definition["properties"].items()
                 for option in numbers(property_schema)
                 if "const" not in option and not ({"minimum", "exclusiveMinimum"} & option.keys() and "maximum" in option)]
    assert unbounded == []


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        pytest.param({"bounds": {"max_instances": 1e308}}, "max_instances", id="max-instances-1e308"),
        pytest.param({"slo": {"max_event_age_seconds": 1e308}}, "max_event_age_seconds", id="slo-1e308"),
        pytest.param({"scale_down": {"cooldown_seconds": 10**12}}, "cooldown_seconds", id="cooldown-1e12"),
        pytest.param({"scale_up": {"step": 1, "step_percent": 50}}, "scale_up", id="step-and-percent"),
        pytest.param({"colour": "blue"}, "colour", id="unknown-key"),
        pytest.param({"on_external_change": "ignore"}, "on_external_change", id="external-change"),
    ],
)
def test_schema_rejects_what_the_model_rejects(change: dict, fragment: str, validator) -> None:
    document = json.loads((REPO / "policy.sample.json").read_text(encoding="utf-8"))
    document["targets"][0].update(change)
    errors = list(validator.iter_errors(document))
    assert errors, "the schema accepted it"
    with pytest.raises(ValueError, match=fragment):
        policy_from_dict(document)


def test_schema_names_are_canonical_and_keda_aliases_are_accepted(validator) -> None:
    """snake_case is the canonical spelling; a source written with KEDA's names still validates in an editor."""
    schema = policy_json_schema()
    source = schema["$defs"]["SourceSettings"]["properties"]
    for snake, camel in KEDA_ALIASES.items():
        assert snake in source and "KEDA" in source[camel]["description"] and snake in source[camel]["description"]
    document = json.loads((REPO / "policy.sample.json").read_text(encoding="utf-8"))
    hub = document["targets"][0]["sources"][0]
    document["targets"][0]["sources"][0] = {KEDA_ALIASES.get(key, key): value for key, value in hub.items()}
    validator.validate(document)
    assert policy_from_dict(document) == policy_from_dict(json.loads((REPO / "policy.sample.json").read_text(encoding="utf-8")))
