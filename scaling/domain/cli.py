"""``python -m scaling validate-policy FILE``: say what is wrong with a policy, naming the field."""

from __future__ import annotations

import argparse
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
        print(f"{args.file}: {error}", file=sys.stderr)
        return 1
    for target in policy.targets:
        bounds = target.bounds
        detail = target.preset or target.mode
        print(f"{target.name}: {detail}, {len(target.sources)} source(s), {bounds.min_instances}-{bounds.max_instances} instances"
              f"{', balanced counts' if bounds.balanced_counts else ''}, plan {target.plan.name}")
    print(f"{args.file}: valid ({len(policy.targets)} target(s))")
    return 0
