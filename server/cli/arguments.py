"""The `pomoview` subcommands' arguments as data: one `Argument` (names, then the rest of
`add_argument`'s arguments) per flag or positional, in the order `--help` lists them, and
`Command`, a subcommand's entry in the table commands.py builds its parser from. Only the
standard library and server/spark/priority.py (itself stdlib-only, for the default it
states): a client-only install imports it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pomoview.server.spark.priority import DEFAULT_SPARK_NICE

# One argument: its name or flags, and the rest of `add_argument`'s arguments.
Argument = tuple[tuple[str, ...], dict[str, Any]]


def arg(*names: str, **options: Any) -> Argument:
    return names, options


@dataclass(frozen=True)
class Command:
    """A subcommand: `add_parser`'s help and description, its arguments, then its mutually
    exclusive groups, then the flags other modules add (`more_flags`), and the handler
    `main` runs with the parsed arguments."""

    name: str
    handler: Callable[[argparse.Namespace], int]
    help: str
    description: str | None = None
    arguments: tuple[Argument, ...] = ()
    exclusive: tuple[tuple[Argument, ...], ...] = ()
    more_flags: tuple[Callable[[argparse.ArgumentParser], None], ...] = ()
    client: bool = True  # takes the client options: --address, the token and TLS flags


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


# Flags with an environment variable default to None: resolve_serve_config fills them in,
# and logs where each value came from.
SERVE: tuple[Argument, ...] = (
    arg(
        "--data",
        default=None,
        metavar="DIR",
        help="data folder: write-ahead log, installed program, and the store by default "
        "(env POMOVIEW_DATA, default ./data)",
    ),
    arg(
        "--store",
        default=None,
        metavar="PATH_OR_URI",
        help="where the Parquet store lives: a local folder or a file:// URI (on a Spark "
        "cluster, a file system mounted at the same path on every node), or any URI Spark's "
        "Hadoop client can write, e.g. hdfs://namenode/pomoview or s3a://bucket/pomoview "
        "(env POMOVIEW_STORE, default DIR/store)",
    ),
    arg(
        "--spark-master",
        default=None,
        metavar="URL",
        help="Spark master URL, e.g. local[4] or spark://host:7077 "
        "(env POMOVIEW_SPARK_MASTER, default local[*])",
    ),
    arg(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the server's session, e.g. spark.cores.max=2 or "
        "spark.executor.memory=2g; repeatable. Also read from DIR/spark.conf (KEY VALUE per "
        "line) and env POMOVIEW_SPARK_CONF (KEY=VALUE;KEY=VALUE); a flag wins over the "
        "variable, which wins over the file. With a cluster master, spark.driver.host and "
        "spark.driver.bindAddress default to --host when it is an IP address",
    ),
    arg(
        "--spark-nice",
        default=None,
        metavar="N",
        help="how many steps lower than the server's the CPU priority of the Spark driver JVM is "
        "(0 to 19; 0 keeps it equal): its flushes, compactions and JIT compiler give way to "
        "hits and to the apply when the cores are busy, and a cold miss's Spark job waits "
        f"too (Linux; env POMOVIEW_SPARK_NICE, default {DEFAULT_SPARK_NICE})",
    ),
    arg(
        "--host",
        default="127.0.0.1",
        help="address to listen on; one beyond loopback needs a token, client certificates or "
        "--insecure (default %(default)s)",
    ),
    arg("--port", type=int, default=7878, help="port to listen on; 0 picks a free one (default %(default)s)"),
    arg("--program", default=None, metavar="FILE", help="program file to install at start"),
    arg(
        "--metrics-port",
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics, HOST as --host "
        "(env POMOVIEW_METRICS_PORT, default off)",
    ),
    arg(
        "--flush-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="seconds between moves of the write-ahead log into the Parquet store (default %(default)s)",
    ),
    arg(
        "--max-apply-lag",
        type=float,
        default=0.1,  # applier.DEFAULT_MAX_APPLY_LAG (test_config checks they agree)
        metavar="SECONDS",
        help="the most the views may fall behind the acknowledged writes: past it a write waits "
        "before it is acknowledged (backpressure), and is refused after 30 s of waiting "
        "(default %(default)s)",
    ),
    arg(
        "--full-state",
        action="store_true",
        help="materialize every state in full (no partial state, no upqueries after the first "
        "scan); for comparison in benchmarks (env POMOVIEW_FULL_STATE=1)",
    ),
    arg(
        "--whole-source-rows",
        type=int,
        default=None,
        metavar="ROWS",
        help="a recursive view, or one with a cyclic body, looked up by key reads a source of at "
        "most this many rows (by the "
        "store's counts) whole, fetched once; a larger source, or one whose count the store does "
        "not know (a remote store's bulk load), in slices fetched by demand, a keyed Spark job per level of "
        "the closure (env POMOVIEW_WHOLE_SOURCE_ROWS, default 250000)",
    ),
    arg(
        "--binary-joins",
        action="store_true",
        help="plan every rule body as a chain of binary joins, cyclic ones too (a triangle, a "
        "4-cycle), instead of one worst-case-optimal join; for comparison in benchmarks "
        "(env POMOVIEW_BINARY_JOINS=1)",
    ),
    arg(
        "--hit-replica",
        action="store_true",
        help="answer hits (lookups of present keys) in a second process, from a copy of the "
        "views' present keys kept current by this one, so that write load does not slow them; "
        "everything else is passed on to this process (env POMOVIEW_HIT_REPLICA=1)",
    ),
    arg(
        "--memory-budget",
        default=None,
        metavar="BYTES",
        help="the most memory partial state may take (its estimated size, calibrated against "
        "the server's RSS); past it, least recently used keys are evicted: bytes, or with K, M, "
        "G (powers of 1024); default a quarter of the machine's memory, printed at start (env "
        "POMOVIEW_MEMORY_BUDGET)",
    ),
    arg(
        "--subscription-buffer",
        type=_positive_int,
        default=None,
        metavar="ROWS",
        help="changed rows a subscription may hold unsent; a subscriber that falls further "
        "behind is ended with RESOURCE_EXHAUSTED (default 10000)",
    ),
    arg(
        "--spark-timeout",
        default=None,
        metavar="SECONDS",
        help="the deadline of a lookup's Spark job (an upquery of the Parquet store); past it the "
        "job is cancelled and the lookups waiting on it get DEADLINE_EXCEEDED; 0 for none "
        "(env POMOVIEW_SPARK_TIMEOUT, default 300)",
    ),
    arg(
        "--spark-write-timeout",
        default=None,
        metavar="SECONDS",
        help="the deadline of the Spark jobs that write the store (a flush, a compaction, a bulk "
        "load's passes), longer than a read's since they grow with the data; past it they are "
        "cancelled, and a flush or compaction is retried later; 0 for none "
        "(env POMOVIEW_SPARK_WRITE_TIMEOUT, default 3600)",
    ),
)

INSTALL: tuple[Argument, ...] = (arg("file", metavar="FILE"),)

WRITE: tuple[Argument, ...] = (
    arg("source", metavar="SOURCE"),
    arg("--insert", action="append", default=[], metavar="JSON"),
    arg("--delete", action="append", default=[], metavar="JSON"),
    arg(
        "--file",
        default=None,
        metavar="JSONL",
        help='JSON lines: {"insert": row}, {"delete": row} or a bare row',
    ),
)

LOOKUP: tuple[Argument, ...] = (
    arg("view", metavar="VIEW"),
    arg("key", nargs="+", metavar="KEY", help="a JSON object, or name=value pairs"),
    arg("--min-epoch", type=_non_negative_int, default=None, metavar="N"),
    arg(
        "--limit",
        type=_positive_int,
        default=None,
        metavar="N",
        help="a page of a view declared with `order by`: at most N rows, printed in the view's order",
    ),
    arg(
        "--after",
        default=None,
        metavar="ROW",
        help="a page's start (a JSON object with at least the view's order attributes; the last "
        "row of the previous page as printed): the rows after it, in the view's order",
    ),
)

LOAD: tuple[Argument, ...] = (
    arg("source", metavar="SOURCE"),
    arg("file", metavar="FILE", help="a file, or a folder of files of one format"),
    arg(
        "--format",
        choices=["csv", "parquet", "jsonl"],
        default=None,
        help="the file's format (default: from its extension: .csv, .parquet, .jsonl)",
    ),
    arg(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a CSV option: header=true|false, delimiter=C, quote=C, escape=C",
    ),
    arg("--no-header", action="store_true", help="CSV without a header line: columns in declared order"),
)

EVICT: tuple[Argument, ...] = (
    arg("view", nargs="?", default=None, metavar="VIEW", help="the view (default: every view)"),
    arg(
        "--key",
        action="append",
        nargs="+",
        default=[],
        metavar="KEY",
        help="a key of VIEW to evict (a JSON object, or name=value pairs); repeat for more "
        "(default: every key of VIEW)",
    ),
)

STATS: tuple[Argument, ...] = (arg("--json", action="store_true", help="print the stats as JSON"),)

EXPLAIN: tuple[Argument, ...] = (arg("view", metavar="VIEW"),)
# A mutually exclusive group: `explain` writes a drawing or prints a tree, not both.
EXPLAIN_OUTPUT: tuple[Argument, ...] = (
    arg(
        "-o",
        "--output",
        default=None,
        metavar="FILE",
        help="a .svg or .dot file, or - for DOT on stdout (default VIEW.svg)",
    ),
    arg("--text", action="store_true", help="print the dataflow as a tree instead"),
)
