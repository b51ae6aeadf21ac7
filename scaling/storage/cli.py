"""``python -m scaling decisions --target NAME [--since ISO]``: a target's decision log as a table.

One row per logged decision (every action, and every change of reason while holding): the
time, the metric values behind it, the capacity before and after, the reason, and what ``scale``
did with it. Metrics: the latest backlog and the other scalar numbers the engine reported; per
rule, ``RULE.up`` is the value compared with ``scale_up_above`` and ``RULE.down`` the one compared
with ``scale_down_below`` (shown when different). Storage comes from ``--connection-string`` or the app settings
(``AzureWebJobsStorage`` locally; the identity-based settings in Azure).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from scaling.storage.records import DecisionRecord

#: Metric keys shown first, in this order, when present; others follow.
PREFERRED = ("backlog", "arrival_rate", "oldest_age_seconds", "predicted_age_seconds", "throughput_per_instance")
CONTAINERS = {"rules"}
HIDDEN = {"capacity", "ready_capacity", "partitions", "age_limit_seconds", "reaction_seconds", "samples",
          "scale_up_above", "scale_down_below", "metric", "cooldown_until"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", required=True, help="the target's name in the policy")
    parser.add_argument("--since", help="only decisions at or after this ISO-8601 time (e.g. 2024-05-01T12:00:00Z)")
    parser.add_argument("--limit", type=int, default=None, help="at most this many rows")
    parser.add_argument("--connection-string", help="a storage connection string (Azurite); default: the app settings")
    parser.add_argument("--table", default=None, help="the state table holding the decision log (default: scalerstate)")


def _number(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"
    return str(value)


def format_metrics(metrics: Mapping[str, Any]) -> str:
    """The numbers behind a decision, compact: ``backlog=1200 seed.up=1100 seed.down=900``."""
    parts: list[str] = []
    keys = [key for key in PREFERRED if key in metrics] + sorted(k for k in metrics if k not in PREFERRED)
    for key in keys:
        _flatten(key, metrics[key], parts)
    return " ".join(parts)


def _flatten(name: str, value: Any, parts: list[str]) -> None:
    if name.rsplit(".", 1)[-1] in HIDDEN or value is None or isinstance(value, bool):
        return
    if isinstance(value, Mapping):
        if "scale_up_value" in value or "scale_down_value" in value:  # one rule's aggregates
            up, down = value.get("scale_up_value"), value.get("scale_down_value")
            if up is not None:
                parts.append(f"{name}.up={_number(up)}")
            if down is not None and down != up:
                parts.append(f"{name}.down={_number(down)}")
            return
        for key in sorted(value):  # e.g. {"rules": {name: {...}}}: the rule names stand alone
            _flatten(key if name in CONTAINERS else f"{name}.{key}", value[key], parts)
        return
    if isinstance(value, int | float):
        parts.append(f"{name}={_number(value)}")


def rows_for(records: Iterable[DecisionRecord]) -> list[list[str]]:
    rows = []
    for record in records:
        before = "?" if record.capacity_before is None else str(record.capacity_before)
        after = "?" if record.capacity_after is None else str(record.capacity_after)
        reason = record.reason_code + (": " + "; ".join(record.reasons) if record.reasons else "")
        outcome = record.outcome or ("pending" if record.acts else "")
        rows.append([
            record.evaluated_at.strftime("%Y-%m-%d %H:%M:%S"),
            record.direction if record.acts else "hold",
            f"{before} -> {after}",
            format_metrics(record.metrics),
            reason,
            outcome,
        ])
    return rows


def render(records: Iterable[DecisionRecord], out: TextIO, *, max_width: int = 80) -> int:
    header = ["time (UTC)", "action", "capacity", "metrics", "reason", "outcome"]
    rows = rows_for(records)
    if not rows:
        out.write("no decisions logged\n")
        return 0
    return write_table(header, rows, out, max_width=max_width)


def write_table(header: list[str], rows: list[list[str]], out: TextIO, *, max_width: int = 80) -> int:
    """Rows as aligned columns under ``header``, cells clipped to ``max_width``; returns the rows."""
    clipped = [[cell if len(cell) <= max_width else cell[: max_width - 1] + "…" for cell in row] for row in rows]
    widths = [max(len(header[i]), *(len(row[i]) for row in clipped)) for i in range(len(header))]
    out.write("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for row in clipped:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n")
    return len(rows)


def run(args: argparse.Namespace) -> int:
    from scaling.domain.samples import parse_time
    from scaling.settings import SettingsError, command_storage
    from scaling.storage.base import TableNames
    from scaling.storage.factory import build_table_storage
    from scaling.storage.records import utc_now

    try:
        since = parse_time(args.since, "--since") if args.since else None
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        storage = command_storage(args.connection_string)
    except SettingsError as error:
        print(f"error: {error} (or pass --connection-string)", file=sys.stderr)
        return 2
    names = TableNames(state=args.table) if args.table else TableNames()
    tables = build_table_storage(storage, names=names, ensure=False)
    try:
        records = tables.decisions(args.target, since=since, limit=args.limit)
        pause = tables.load_state(args.target).pause
    except Exception as error:  # a missing table or unreachable account: say so, no traceback
        print(f"error: cannot read the decision log of {args.target!r}: {error}", file=sys.stderr)
        return 1
    finally:
        tables.close()
    print(f"decision log of {args.target} ({len(records)} rows)")
    if pause is not None and pause.active(utc_now()):
        print(f"PAUSED NOW: {pause.describe()} (python -m scaling resume --target {args.target} ends it)")
    render(records, sys.stdout)
    return 0
