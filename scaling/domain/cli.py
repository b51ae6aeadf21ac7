"""``python -m scaling validate-policy FILE``: say what is wrong with a policy, naming the field;
``python -m scaling policy-schema``: print the policy's JSON Schema (the shipped policy.schema.json);
``--knobs``: docs/policy.md's table of the knob registry."""

from __future__ import annotations

import argparse
import json
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the policy file (JSON)")


def run(args: argparse.Namespace) -> int:
    from scaling.domain.policy import PolicyError, load_policy

    try:
        policy = load_policy(args.file)
    except OSError as error:
        print(f"{args.file}: cannot be read: {error}", file=sys.stderr)
        return 2
    except PolicyError as error:
        for line in str(error).splitlines():
            print(f"{args.file}: {line}", file=sys.stderr)
        return 1
    for target in policy.targets:
        bounds = target.bounds
        detail = target.preset or target.mode
        print(f"{target.name}: {detail}, {len(target.sources)} source(s), {bounds.min_instances}-{bounds.max_instances} instances"
              f"{', balanced counts' if bounds.balanced_counts else ''}, plan {target.plan.name}")
    print(f"{args.file}: valid ({len(policy.targets)} target(s))")
    return 0


def configure_schema(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "Redirect to policy.schema.json; policy files reference it with \"$schema\": \"./policy.schema.json\"."
    parser.add_argument("--knobs", action="store_true",
                        help="print docs/policy.md's knob table instead (scaling/domain/knobs.py), between its markers")


def schema_text() -> str:
    """The schema exactly as shipped in policy.schema.json (a test compares the two)."""
    from scaling.domain.policy import policy_json_schema

    return json.dumps(policy_json_schema(), indent=2, ensure_ascii=False) + "\n"


def run_schema(args: argparse.Namespace) -> int:
    if getattr(args, "knobs", False):
        from scaling.domain.knobs import knobs_table

        sys.stdout.write(knobs_table())
        return 0
    sys.stdout.write(schema_text())
    return 0
