"""``python -m scaling pause --target NAME [--at N] [--until TIME | --for DURATION] --reason TEXT``
and ``python -m scaling resume --target NAME``.

Paused, the target keeps collecting and evaluating and the decision log says what it would have
done, but nothing is sent to ``scale``. ``--at N`` pins it: N instances are requested once
through the normal scale path, then held. Every pause ends by itself (default after 4 hours, at
most 7 days). Storage comes from ``--connection-string`` or the app settings
(``AzureWebJobsStorage`` locally; the identity-based settings in Azure); the policy (to check the
target and the pinned count) from ``--policy`` or ``AUTOSCALER_POLICY(_FILE)`` when set.
docs/operations.md has examples.
"""

from __future__ import annotations

import argparse
import getpass
import os
import re
import sys


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", required=True, help="the target's name in the policy")
    parser.add_argument("--by", default=None, help="who asks (default: the login name)")
    parser.add_argument("--policy", help="the policy file, to check the target (default: the app settings, if set)")
    parser.add_argument("--connection-string", help="a storage connection string (Azurite); default: the app settings")
    parser.add_argument("--table", default=None, help="the state table (default: scalerstate)")


def configure(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.add_argument("--at", type=int, default=None, metavar="N", help="pin at N instances (set once, then held)")
    ends = parser.add_mutually_exclusive_group()
    ends.add_argument("--until", help="when the pause ends, ISO 8601 with an offset (at most 7 days ahead)")
    ends.add_argument("--for", dest="duration", help="how long it lasts: 90m, 4h, 1h30m, 2d (default 4h, at most 7d)")
    parser.add_argument("--reason", required=True, help="why (shown in the decision log and the report)")


def configure_resume(parser: argparse.ArgumentParser) -> None:
    _common(parser)


#: What an Azure table name must be (letters and digits, starting with a letter, 3-63 long).
_TABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]{2,62}")
#: The longest ``--by`` and ``--reason`` a decision-log row carries.
MAX_BY_CHARS = 128
MAX_REASON_CHARS = 256


def _argument_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments every command shares, before anything is read or written
    (``None`` when nothing): each becomes an ``error:`` line and exit code 2, never a traceback or
    a storage error after the fact."""
    from scaling.domain.names import target_name_problem

    problem = target_name_problem(args.target)
    if problem:
        return f"--target {_shown(args.target)} {problem}"
    if args.by is not None and _text_problem(args.by, MAX_BY_CHARS):
        return f"--by must be printable text of 1-{MAX_BY_CHARS} characters, got {_shown(args.by)}"
    if args.table is not None and not _TABLE_NAME.fullmatch(args.table):
        return f"--table {_shown(args.table)} is not a table name (a letter, then letters or digits; 3-63 characters)"
    return None


def _text_problem(text: str, max_chars: int) -> bool:
    """Whether ``text`` cannot go into a decision-log row: empty, unprintable, too long, or not UTF-8."""
    from scaling.domain.names import text_problem

    return (not text.strip() or not text.isprintable() or text_problem(text, max_chars=max_chars) is not None)


def _shown(text: str) -> str:
    """``text`` as an error quotes it: short, and printable whatever it holds."""
    return ascii(text[:40]) + ("..." if len(text) > 40 else "")


def _who(args: argparse.Namespace) -> str:
    if args.by:
        return args.by
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "operator"


def _check_target(args: argparse.Namespace, pinned_at: int | None) -> str | None:
    """A problem with the target or the pinned count, when a policy is at hand; else ``None``."""
    from scaling.domain.namespace.policy import EventHubsNamespaceTarget
    from scaling.domain.policy import PolicyError, load_policy
    from scaling.domain.profiles import widest_bounds
    from scaling.settings import SettingsError, load_policy_setting

    try:
        policy = load_policy(args.policy) if args.policy else load_policy_setting(os.environ)
    except (OSError, PolicyError) as error:
        return f"--policy: {error}"
    except SettingsError:
        print("note: no policy given (--policy or AUTOSCALER_POLICY_FILE); the target name is not checked", file=sys.stderr)
        return None
    try:
        target = policy.scale_target(args.target)  # a plan target or a namespace target
    except KeyError:
        known = [t.name for t in policy.targets] + [n.name for n in policy.namespaces]
        return f"--target {args.target!r} is not in the policy (known: {', '.join(known)})"
    if isinstance(target, EventHubsNamespaceTarget):
        low, high, unit = target.min_tus, target.max_tus, " TUs"
    else:
        (low, high), unit = widest_bounds(target), ""
    if pinned_at is not None and not low <= pinned_at <= high:
        return f"--at {pinned_at} is outside {target.name}'s bounds ({low}-{high}{unit})"
    return None


def _service(args: argparse.Namespace):
    from scaling.services.pause import PauseService
    from scaling.settings import command_storage
    from scaling.storage.base import TableNames
    from scaling.storage.factory import build_table_storage

    storage = command_storage(args.connection_string)
    names = TableNames(state=args.table) if args.table else TableNames()
    tables = build_table_storage(storage, names=names, ensure=False)
    return PauseService(tables), tables


def run(args: argparse.Namespace) -> int:
    from scaling.domain.pause import PauseError, parse_duration, pause_until
    from scaling.domain.policy_fields import MAX_INSTANCES
    from scaling.storage.records import utc_now

    problem = _argument_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.at is not None and not 1 <= args.at <= MAX_INSTANCES:
        print(f"error: --at must be between 1 and {MAX_INSTANCES}, got {args.at}", file=sys.stderr)
        return 2
    if _text_problem(args.reason, MAX_REASON_CHARS):
        print(f"error: --reason must be printable text of at most {MAX_REASON_CHARS} characters", file=sys.stderr)
        return 2
    try:
        until = pause_until(utc_now(), until=args.until,
                            duration=parse_duration(args.duration) if args.duration else None)
    except PauseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    code, outcome = _on_service(args, args.at, "pause", lambda service: service.pause(
        args.target, reason=args.reason, requested_by=_who(args), until=until, pinned_at=args.at))
    if code is not None:
        return code
    print(f"{args.target}: {outcome.describe()}")
    return 0


def _on_service(args: argparse.Namespace, pinned_at: int | None, verb: str, act):
    """Check the target, build the pause service on the app's storage and ``act`` on it: ``(None,
    what act returned)``, or ``(exit code, None)`` (2: bad input or settings, 1: a conflict or an
    unreachable store), said on stderr."""
    from scaling.services.pause import PauseConflict
    from scaling.settings import SettingsError

    problem = _check_target(args, pinned_at)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2, None
    try:
        service, tables = _service(args)
    except SettingsError as error:
        print(f"error: {error} (or pass --connection-string)", file=sys.stderr)
        return 2, None
    except ValueError as error:  # the storage SDK refuses a malformed connection string
        print(f"error: --connection-string: {error}", file=sys.stderr)
        return 2, None
    try:
        return None, act(service)
    except PauseConflict as error:
        print(f"conflict: {error}", file=sys.stderr)
        return 1, None
    except Exception as error:  # a missing table or unreachable account: say so, no traceback
        print(f"error: cannot {verb} {args.target!r}: {error}", file=sys.stderr)
        return 1, None
    finally:
        tables.close()


def run_resume(args: argparse.Namespace) -> int:
    problem = _argument_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    code, outcome = _on_service(args, None, "resume", lambda service: service.resume(args.target, requested_by=_who(args)))
    if code is not None:
        return code
    print(f"{args.target}: resumed" + (f" (was {outcome.describe()})" if outcome else " (it was neither paused nor held)"))
    return 0
