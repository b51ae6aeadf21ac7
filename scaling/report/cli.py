"""``python -m scaling report --target NAME [--since T] [--until T] --out report.html``.

Reads the target's history and decision log (Azurite locally through ``AzureWebJobsStorage``;
the real account with the identity-based settings and ``DefaultAzureCredential`` in Azure, as
``python -m scaling decisions`` does) and writes one self-contained HTML page
(``scaling.report.page``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Protocol

from scaling.domain.samples import MetricSample
from scaling.report.page import ReportData
from scaling.storage.records import DecisionRecord, StoredState, utc_now

DEFAULT_SPAN = timedelta(hours=24)


class ReportSource(Protocol):
    """What the page needs from storage (``TableStorage`` and ``MemoryStorage`` both have it)."""

    def load_window(self, target: str, start: datetime, end: datetime) -> list[MetricSample]: ...

    def decisions(self, target: str, since: datetime | None = None, limit: int | None = None) -> list[DecisionRecord]: ...

    def load_state(self, target: str) -> StoredState: ...


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", required=True, help="the target's name in the policy")
    parser.add_argument("--since", help="ISO-8601 start (default: 24 hours before --until)")
    parser.add_argument("--until", help="ISO-8601 end (default: now)")
    parser.add_argument("--out", required=True, help="the HTML file to write")
    parser.add_argument("--slo-seconds", type=float, help="the SLO line (default: the target's slo in the app's policy, if set)")
    parser.add_argument("--connection-string", help="a storage connection string (Azurite); default: the app settings")
    parser.add_argument("--history-table", help="the history table (default: metrichistory)")
    parser.add_argument("--state-table", help="the state table holding the decision log (default: scalerstate)")


def read_report(source: ReportSource, target: str, since: datetime, until: datetime, *,
                slo_seconds: float | None, origin: str, now: datetime | None = None) -> ReportData:
    """The page's rows: samples collected and decisions logged from ``since`` to ``until`` (both included)."""
    from scaling.report.history import report_from_history

    samples = source.load_window(target, since, until)
    decisions = [record for record in source.decisions(target, since=since) if record.evaluated_at <= until]
    data = report_from_history(target, samples, decisions, slo_seconds=slo_seconds, origin=origin)
    return replace(data, pause=pause_in_force(source, target, now or utc_now()))


def pause_in_force(source: ReportSource, target: str, now: datetime) -> str | None:
    """The target's pause or pin at ``now``, as the page and ``decisions`` show it."""
    pause = source.load_state(target).pause
    return pause.describe() if pause is not None and pause.active(now) else None


def policy_slo_seconds(environ: Mapping[str, str], target: str) -> float | None:
    """The target's SLO from the app's policy setting; ``None`` when there is no policy or no SLO."""
    from scaling.settings import SettingsError, load_policy_setting

    if not (environ.get("AUTOSCALER_POLICY") or environ.get("AUTOSCALER_POLICY_FILE")):
        return None
    try:
        policy = load_policy_setting(environ)
        chosen = policy.target(target)
    except (SettingsError, KeyError):
        return None
    return float(chosen.slo.max_event_age_seconds) if chosen.mode == "slo" else None


def run(args: argparse.Namespace) -> int:
    from scaling.domain.samples import parse_time
    from scaling.report.page import render
    from scaling.report.runs import write_page
    from scaling.settings import SettingsError, command_storage
    from scaling.storage.base import TableNames
    from scaling.storage.factory import build_table_storage

    try:
        until = parse_time(args.until, "--until") if args.until else utc_now()
        since = parse_time(args.since, "--since") if args.since else until - DEFAULT_SPAN
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if since >= until:
        print("error: --since must be before --until", file=sys.stderr)
        return 2
    try:
        storage = command_storage(args.connection_string)
    except SettingsError as error:
        print(f"error: {error} (or pass --connection-string)", file=sys.stderr)
        return 2
    slo = args.slo_seconds if args.slo_seconds is not None else policy_slo_seconds(os.environ, args.target)
    account = "the storage in --connection-string" if args.connection_string else "the app's storage account"
    defaults = TableNames()
    names = replace(defaults, history=args.history_table or defaults.history, state=args.state_table or defaults.state)
    tables = build_table_storage(storage, names=names, ensure=False)
    try:
        data = read_report(tables, args.target, since, until, slo_seconds=slo,
                           origin=f"history and decision tables of {account}, {since:%Y-%m-%d %H:%M} – {until:%Y-%m-%d %H:%M} UTC")
    except Exception as error:  # a missing table or unreachable account: say so, no traceback
        print(f"error: cannot read the history of {args.target!r}: {error}", file=sys.stderr)
        return 1
    finally:
        tables.close()
    path = write_page(args.out, render(data))
    acting = sum(1 for record in data.decisions if record.acts)
    print(f"report of {args.target}: {len(data.points)} samples, {len(data.decisions)} decisions ({acting} acting) -> {path}")
    return 0
