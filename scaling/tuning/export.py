"""``python -m scaling export-history``: the history table to Parquet, for the tuning job.

Reads the history table written by ``evaluate`` (layout: docs/storage.md; PartitionKey = the
target, RowKey = ``{epoch seconds:012d}-{sample_id}``, the sample JSON in ``sample`` split over
``sample_1``... when long) with a RowKey range query per time window, page by page, parses each
stored sample with ``scaling.domain.samples.sample_from_dict``, drops duplicates by
``sample_id`` and writes the Parquet dataset with ``scaling.tuning.history.write_history``.

Connection: ``--connection-string`` (Azurite locally), else the app's own settings
(``AzureWebJobsStorage`` or the identity-based ``AzureWebJobsStorage__accountName`` /
``__tableServiceUri`` with ``DefaultAzureCredential``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

#: Samples written to Parquet per batch (bounded memory for long exports).
BATCH = 20_000
PAGE_SIZE = 1000


@dataclass(slots=True)
class ExportResult:
    samples: int = 0
    rows: int = 0
    duplicates: int = 0
    unreadable: list[str] = field(default_factory=list)
    pages: int = 0
    targets: set[str] = field(default_factory=set)


def parse_moment(text: str, name: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as error:
        raise ValueError(f"{name} is not an ISO-8601 time: {text!r}") from error
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def history_filter(since: datetime, until: datetime, target: str | None) -> str:
    """The OData filter: RowKeys of samples collected in ``[since, until)`` (one partition if
    ``target`` is given, otherwise a scan across targets)."""
    from scaling.storage.base import history_bound, partition_key
    from scaling.storage.tables import quote_literal

    condition = f"RowKey ge {quote_literal(history_bound(since))} and RowKey lt {quote_literal(history_bound(until))}"
    if target is not None:
        condition = f"PartitionKey eq {quote_literal(partition_key(target))} and {condition}"
    return condition


def iter_samples(table: Any, since: datetime, until: datetime, target: str | None, result: ExportResult,
                 page_size: int = PAGE_SIZE) -> Iterator[Any]:
    """Parsed samples from the history table, page by page, duplicates dropped by ``sample_id``."""
    from scaling.domain.samples import SampleError, sample_from_dict
    from scaling.storage.base import join_text

    seen: set[str] = set()
    pages = table.query_entities(history_filter(since, until, target), results_per_page=page_size).by_page()
    for page in pages:
        result.pages += 1
        for entity in page:
            where = f"{entity.get('PartitionKey')}/{entity.get('RowKey')}"
            try:
                text = join_text(entity, "sample")
                if text is None:
                    raise SampleError("the entity has no 'sample' property")
                sample = sample_from_dict(json.loads(text))
            except (ValueError, SampleError) as error:
                result.unreadable.append(f"{where}: {error}")
                continue
            if not since <= sample.collected_at < until:
                continue
            if sample.sample_id in seen:
                result.duplicates += 1
                continue
            seen.add(sample.sample_id)
            result.targets.add(sample.target)
            yield sample


def export_history(table: Any, since: datetime, until: datetime, out_dir: str, target: str | None = None,
                   page_size: int = PAGE_SIZE) -> ExportResult:
    from scaling.tuning.history import write_history

    result = ExportResult()
    batch = []
    for sample in iter_samples(table, since, until, target, result, page_size):
        batch.append(sample)
        if len(batch) >= BATCH:
            result.rows += write_history(batch, out_dir)
            result.samples += len(batch)
            batch = []
    if batch:
        result.rows += write_history(batch, out_dir)
        result.samples += len(batch)
    return result


def history_table_client(connection_string: str | None, table_name: str, environ: dict[str, str] | None = None) -> Any:
    """A ``TableClient`` for the history table: a connection string, or the app's settings."""
    from azure.data.tables import TableClient

    if connection_string:
        return TableClient.from_connection_string(connection_string, table_name=table_name)
    from scaling.settings import StorageSettings

    storage = StorageSettings.from_environment(os.environ if environ is None else environ)
    if storage.connection_string:
        return TableClient.from_connection_string(storage.connection_string, table_name=table_name)
    from azure.identity import DefaultAzureCredential

    credential = DefaultAzureCredential(**({"managed_identity_client_id": storage.client_id} if storage.client_id else {}))
    return TableClient(storage.table_service_uri, table_name=table_name, credential=credential)


def configure(parser: argparse.ArgumentParser) -> None:
    from scaling.settings import HISTORY_TABLE

    parser.add_argument("--since", required=True, help="first collection time to export (ISO-8601, UTC if no offset)")
    parser.add_argument("--until", required=True, help="export samples collected before this time (ISO-8601)")
    parser.add_argument("--out", required=True, help="Parquet dataset directory (partitioned by target and date)")
    parser.add_argument("--target", help="only this target (default: all)")
    parser.add_argument("--connection-string", help="storage connection string (Azurite); default: AzureWebJobsStorage settings")
    parser.add_argument("--table", default=HISTORY_TABLE, help=f"history table name (default {HISTORY_TABLE})")
    parser.add_argument("--page-size", type=int, default=PAGE_SIZE, help="entities per page")


def run(args: argparse.Namespace) -> int:
    from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

    from scaling.settings import SettingsError

    try:
        since, until = parse_moment(args.since, "--since"), parse_moment(args.until, "--until")
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if until <= since:
        print("error: --until must be later than --since", file=sys.stderr)
        return 2
    try:
        table = history_table_client(args.connection_string, args.table)
    except SettingsError as error:
        print(f"error: {error} (or pass --connection-string)", file=sys.stderr)
        return 2
    try:
        with table:
            result = export_history(table, since, until, args.out, args.target, args.page_size)
    except ResourceNotFoundError:
        print(f"error: table {args.table!r} does not exist in this storage account", file=sys.stderr)
        return 2
    except HttpResponseError as error:
        print(f"error: reading table {args.table!r} failed: {error.message}", file=sys.stderr)
        return 2
    for problem in result.unreadable[:20]:
        print(f"warning: unreadable history row skipped: {problem}", file=sys.stderr)
    if len(result.unreadable) > 20:
        print(f"warning: ... and {len(result.unreadable) - 20} more unreadable rows", file=sys.stderr)
    print(f"exported {result.samples} samples ({result.rows} rows) of {len(result.targets)} targets to {args.out}; "
          f"{result.duplicates} duplicates dropped, {len(result.unreadable)} unreadable rows skipped, {result.pages} pages read")
    if not result.samples:
        print(f"error: no history between {since.isoformat()} and {until.isoformat()}"
              + (f" for target {args.target!r}" if args.target else ""), file=sys.stderr)
        return 1
    return 0
