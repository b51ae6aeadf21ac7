"""``python -m scaling dead-letters [--target NAME] [--function F] [--replay ID]``.

Lists the dead-letter table (messages refused with an error, and messages drained from the
poison queues), oldest first: the id to replay, when, which function, where it came from, the
target it names, and the error. ``--replay ID`` (a unique prefix is enough) puts the message
back on its function's queue after a fix and marks it replayed. Storage comes from
``--connection-string`` or the app settings (``AzureWebJobsStorage`` locally, identity in Azure).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import TextIO

from scaling.storage.cli import write_table
from scaling.storage.records import DeadLetter


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", help="only letters naming this target")
    parser.add_argument("--function", choices=("evaluate", "scale"), help="only letters of this function")
    parser.add_argument("--replay", metavar="ID", help="re-queue this letter (a unique id prefix) and mark it replayed")
    parser.add_argument("--connection-string", help="a storage connection string (Azurite); default: the app settings")
    parser.add_argument("--table", default=None, help="the dead-letter table (default: deadletters)")


def render(letters: Iterable[DeadLetter], out: TextIO, *, max_error: int = 100) -> int:
    letters = list(letters)
    if not letters:
        out.write("no dead letters\n")
        return 0
    header = ["id", "received (UTC)", "function", "origin", "target", "deliveries", "replayed", "error"]
    rows = [[letter.letter_id[:12], letter.received_at.strftime("%Y-%m-%d %H:%M:%S"), letter.function, letter.origin,
             letter.target or "?", str(letter.dequeue_count),
             letter.replayed_at.strftime("%Y-%m-%d %H:%M") if letter.replayed_at else "",
             letter.error] for letter in letters]
    return write_table(header, rows, out, max_width=max_error)


def run(args: argparse.Namespace) -> int:
    from scaling.services.dead_letters import DeadLetterService
    from scaling.settings import SettingsError, command_storage
    from scaling.storage.base import TableNames
    from scaling.storage.factory import build_queue_client, build_table_storage

    try:
        storage = command_storage(args.connection_string)
    except SettingsError as error:
        print(f"error: {error} (or pass --connection-string)", file=sys.stderr)
        return 2
    names = TableNames(dead_letters=args.table) if args.table else TableNames()
    tables = build_table_storage(storage, names=names, ensure=False)
    service = DeadLetterService(tables)
    try:
        if args.replay:
            def send(queue: str, body: str) -> None:
                with build_queue_client(storage, queue) as client:
                    client.send_message(body)

            try:
                letter = service.replay(args.replay, send)
            except KeyError as error:
                print(f"error: {error.args[0]}", file=sys.stderr)
                return 1
            print(f"replayed dead letter {letter.letter_id} ({letter.function}, target {letter.target or '?'})")
            return 0
        try:
            letters = service.letters(target=args.target, function=args.function)
        except Exception as error:  # a missing table or unreachable account: say so, no traceback
            print(f"error: cannot read the dead letters: {error}", file=sys.stderr)
            return 1
        print(f"{len(letters)} dead letter(s)")
        render(letters, sys.stdout)
        return 0
    finally:
        tables.close()
