"""`pomoview subscribe VIEW KEY=VALUE…`: prints the key's rows, then every change to them,
as one JSON line each, until Ctrl-C (or until the server ends the subscription).

A line is `{"epoch": E, "snapshot": true|false, "inserts": [rows], "deletes": [rows]}`; the
first is the snapshot (its rows in `inserts`), each later one an epoch that changed them.
Rows are sorted, as `lookup` prints them. Only the standard library and the client are
imported: it runs on a client-only install.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pomoview.client import Change
from pomoview.server.cli.values import parse_key, row_to_json


def change_to_json(change: Change) -> str:
    """One change as a JSON line, its rows rendered as `lookup` renders them."""
    return json.dumps(
        {
            "epoch": change.epoch,
            "snapshot": change.snapshot,
            "inserts": [json.loads(r) for r in sorted(row_to_json(row) for row in change.inserts)],
            "deletes": [json.loads(r) for r in sorted(row_to_json(row) for row in change.deletes)],
        },
        sort_keys=True,
    )


def cmd_subscribe(args: argparse.Namespace) -> int:
    """Prints the snapshot and the changes, flushing each line; Ctrl-C ends it with 0."""
    from pomoview.server.cli.commands import client_from_args  # the CLI's shared client options

    key = parse_key(args.key)
    with client_from_args(args) as db, db.subscribe(args.view, [key]) as subscription:
        try:
            for change in subscription:
                print(change_to_json(change), flush=True)
        except KeyboardInterrupt:
            return 0
        except BrokenPipeError:  # `| head`: the reader is gone
            sys.stderr.close()
            return 0
    return 0


def add_subscribe_parser(sub: Any, client_opts: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "subscribe",
        parents=[client_opts],
        help="print a view's rows for a key, then every change to them",
        description="Subscribe to a view's rows for one key: print them, then each epoch "
        "that changes them, as JSON lines {epoch, snapshot, inserts, deletes}, until "
        "Ctrl-C. The key's state stays on the server while the subscription is open.",
    )
    p.add_argument("view", metavar="VIEW")
    p.add_argument("key", nargs="+", metavar="KEY", help="a JSON object, or name=value pairs")
    p.set_defaults(handler=cmd_subscribe)
