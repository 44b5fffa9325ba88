"""The `pomoview` command line: `serve`, `install`, `write`, `lookup`, `load`, `subscribe`,
`stats`, `explain`.

Only the standard library, `pomoview.client`, `pomoview.server.api.security` (grpc and the
standard library), `pomoview.server.spark.conf` (the standard library), `cli_values` (the
CLI's JSON values), `arguments` (the subcommands' arguments, as data) and `explain`
(drawing a view's dataflow) are imported at module level: a client-only install has no
pyspark or lark, and `serve` imports the server lazily.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from pomoview.client import Client, PomoviewError, Unauthenticated, Unavailable
from pomoview.server.api import security
from pomoview.server.cli import arguments, explain
from pomoview.server.cli.arguments import Command
from pomoview.server.cli.subscribe import add_subscribe_parser
from pomoview.server.cli.values import (
    UsageError,
    format_relation,
    parse_json_row,
    parse_key,
    read_changes_file,
    row_to_json,
)
from pomoview.server.limits import requests as limits
from pomoview.server.spark.conf import SparkConfError, resolve_spark_conf
from pomoview.server.spark.priority import DEFAULT_SPARK_NICE

DEFAULT_ADDRESS = "127.0.0.1:7878"

# ---------------------------------------------------------------- serve configuration

# `serve` settings read from a flag, else from the environment, else a default:
# setting -> (environment variable, default). The store's default, "", means <data>/store.
SERVE_ENV: dict[str, tuple[str, str]] = {
    "data": ("POMOVIEW_DATA", "./data"),
    "store": ("POMOVIEW_STORE", ""),
    "spark_master": ("POMOVIEW_SPARK_MASTER", "local[*]"),
    "spark_nice": ("POMOVIEW_SPARK_NICE", str(DEFAULT_SPARK_NICE)),
    "metrics_port": ("POMOVIEW_METRICS_PORT", ""),  # "": no metrics endpoint
    "memory_budget": ("POMOVIEW_MEMORY_BUDGET", ""),  # "": a quarter of the machine's memory
    "spark_timeout": ("POMOVIEW_SPARK_TIMEOUT", "300"),  # seconds; 0: no deadline
    "spark_write_timeout": ("POMOVIEW_SPARK_WRITE_TIMEOUT", "3600"),
    "tls_cert": ("POMOVIEW_TLS_CERT", ""),  # "": no TLS
    "tls_key": ("POMOVIEW_TLS_KEY", ""),
    "tls_client_ca": ("POMOVIEW_TLS_CLIENT_CA", ""),  # "": client certificates not asked for
    # The input limits: max_message_bytes, max_program_bytes, ... (server/limits.py)
    **limits.env_settings(),
}


def resolve_serve_config(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> dict[str, tuple[str, str]]:
    """Each `SERVE_ENV` setting's value and where it came from: "flag", "env NAME" or
    "default". A flag wins over the environment, which wins over the default; an empty
    environment variable counts as unset."""
    env = os.environ if environ is None else environ
    out: dict[str, tuple[str, str]] = {}
    for name, (var, default) in SERVE_ENV.items():
        flag = getattr(args, name)
        if flag is not None:
            out[name] = (flag, "flag")
        elif env.get(var):
            out[name] = (env[var], f"env {var}")
        else:
            out[name] = (default, "default")
    return out


def metrics_port(config: Mapping[str, tuple[str, str]]) -> int | None:
    """The resolved metrics port, None when off; raises UsageError for a bad one."""
    text, origin = config["metrics_port"]
    if not text:
        return None
    if not text.isdigit() or int(text) > 65535:
        where = "--metrics-port" if origin == "flag" else origin
        raise UsageError(f"{where}: expected a port number (0 to 65535), got {text!r}")
    return int(text)


def spark_nice(config: Mapping[str, tuple[str, str]]) -> int:
    """The resolved niceness of the Spark JVM below the server's; raises UsageError for
    anything but an integer from 0 to 19."""
    text, origin = config["spark_nice"]
    if not (text.strip().isdigit() and int(text) <= 19):
        where = "--spark-nice" if origin == "flag" else origin
        raise UsageError(f"{where}: expected a niceness from 0 to 19, got {text!r}")
    return int(text)


def spark_timeout(config: Mapping[str, tuple[str, str]], name: str) -> float | None:
    """A resolved Spark deadline in seconds, None for 0 (no deadline); raises UsageError for
    anything but a finite number >= 0."""
    text, origin = config[name]
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        where = "--" + name.replace("_", "-") if origin == "flag" else origin
        raise UsageError(f"{where}: expected seconds (a number >= 0; 0 for no deadline), got {text!r}")
    return seconds or None


# ---------------------------------------------------------------- subcommands


def cmd_serve(args: argparse.Namespace) -> int:
    """Runs the server until SIGINT/SIGTERM."""
    config = resolve_serve_config(args)
    try:  # before the server's imports, which take seconds
        server_limits = limits.Limits.resolve(config)
    except limits.LimitConfigError as err:
        print(f"pomoview: {err}", file=sys.stderr)
        return 2
    try:
        from pomoview.server.api.app import serve  # needs the server extra (pyspark, lark)
    except ModuleNotFoundError as err:
        print(
            f"pomoview: serve needs the server extra ({err.name} is missing): "
            "pip install 'pomoview[server]'",
            file=sys.stderr,
        )
        return 2

    from pomoview.server.views.memory_budget import default_budget, parse_bytes
    from pomoview.server.views.subscriptions import DEFAULT_BUFFER_ROWS
    from pomoview.server.views.view_state import DEFAULT_WHOLE_SOURCE_ROWS

    metrics = metrics_port(config)
    timeouts = {name: spark_timeout(config, name) for name in ("spark_timeout", "spark_write_timeout")}
    budget_text, budget_origin = config["memory_budget"]
    try:
        budget = parse_bytes(budget_text) if budget_text else default_budget()
    except ValueError as err:
        where = "--memory-budget" if budget_origin == "flag" else budget_origin
        print(f"pomoview: {where}: {err}", file=sys.stderr)
        return 2
    config["memory_budget"] = (str(budget), budget_origin)
    try:
        spark_conf = resolve_spark_conf(Path(config["data"][0]), args.spark_conf, os.environ)
    except SparkConfError as err:
        print(f"pomoview: {err}", file=sys.stderr)
        return 2
    try:
        server_security = security.server_security(
            token_file=args.token_file,
            tls_cert=config.pop("tls_cert"),
            tls_key=config.pop("tls_key"),
            tls_client_ca=config.pop("tls_client_ca"),
            insecure=args.insecure,
            environ=os.environ,
        )
    except security.SecurityConfigError as err:
        print(f"pomoview: {err}", file=sys.stderr)
        return 2
    serve(
        data_dir=Path(config["data"][0]),
        host=args.host,
        port=args.port,
        metrics_port=metrics,
        program=Path(args.program) if args.program else None,
        spark_master=config["spark_master"][0],
        spark_conf=spark_conf,
        spark_nice=spark_nice(config),
        flush_interval=args.flush_interval,
        max_apply_lag=args.max_apply_lag,
        store=config["store"][0] or None,
        full_state=args.full_state or os.environ.get("POMOVIEW_FULL_STATE", "") not in ("", "0"),
        binary_joins=args.binary_joins or os.environ.get("POMOVIEW_BINARY_JOINS", "") not in ("", "0"),
        memory_budget=budget,
        spark_timeout=timeouts["spark_timeout"],
        spark_write_timeout=timeouts["spark_write_timeout"],
        security=server_security,
        subscription_buffer=args.subscription_buffer or DEFAULT_BUFFER_ROWS,
        limits=server_limits,
        hit_replica=args.hit_replica or os.environ.get("POMOVIEW_HIT_REPLICA", "") not in ("", "0"),
        whole_source_rows=(
            args.whole_source_rows
            if args.whole_source_rows is not None
            else int(os.environ.get("POMOVIEW_WHOLE_SOURCE_ROWS") or DEFAULT_WHOLE_SOURCE_ROWS)
        ),
        origins={name: origin for name, (_, origin) in config.items()},
    )
    return 0


def client_from_args(args: argparse.Namespace) -> Client:
    try:
        options = security.client_options(args.token_file, args.tls_ca, os.environ)
    except security.SecurityConfigError as err:
        raise UsageError(str(err)) from None
    return Client(args.address, **options)


def cmd_install(args: argparse.Namespace) -> int:
    """Installs a program file and prints its relations."""
    path = Path(args.file)
    try:
        text = path.read_text()
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from None
    with client_from_args(args) as db:
        relations = db.install(text, filename=str(path))
    for rel in relations:
        print(format_relation(rel))
    return 0


def cmd_write(args: argparse.Namespace) -> int:
    """Writes one batch over one source and prints its epoch."""
    inserts = [parse_json_row(t, "--insert") for t in args.insert]
    deletes = [parse_json_row(t, "--delete") for t in args.delete]
    if args.file:
        more_inserts, more_deletes = read_changes_file(Path(args.file))
        inserts += more_inserts
        deletes += more_deletes
    with client_from_args(args) as db:
        epoch = db.write(args.source, insert=inserts, delete=deletes)
    print(f"epoch {epoch}")
    return 0


def cmd_lookup(args: argparse.Namespace) -> int:
    """Prints the rows matching a key, one JSON line each, in a deterministic order: sorted,
    or for a page (`--limit`, `--after`) in the view's order."""
    key = parse_key(args.key)
    after = None if args.after is None else parse_json_row(args.after, "--after")
    paged = args.limit is not None or after is not None
    with client_from_args(args) as db:
        rows = db.lookup(args.view, key, min_epoch=args.min_epoch, limit=args.limit, after=after)
    lines = [row_to_json(r) for r in rows]
    for line in lines if paged else sorted(lines):
        print(line)
    return 0


class ProgressBar:
    """A one-line text bar on a stream, redrawn in place with a carriage return."""

    WIDTH = 30

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = ""

    def update(self, report: Mapping[str, object]) -> None:
        fraction = min(max(float(report["fraction"]), 0.0), 1.0)  # type: ignore[arg-type]
        filled = int(fraction * self.WIDTH)
        line = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {fraction * 100:3.0f}% {report['phase']}"
        rows = report.get("rows")
        if isinstance(rows, int) and rows:
            line += f", {rows:,} rows"
        if line != self.shown:
            # Pad over the rest of a longer previous line.
            self.stream.write("\r" + line.ljust(len(self.shown)))
            self.stream.flush()
            self.shown = line

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = ""


def parse_options(pairs: Sequence[str]) -> dict[str, str]:
    """Parses repeated `--option KEY=VALUE`."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--option: expected KEY=VALUE, got {pair!r}")
        options[key] = value
    return options


def cmd_load(args: argparse.Namespace) -> int:
    """Bulk-imports a file into a source with a progress bar on stderr; prints the count."""
    options = parse_options(args.option)
    if args.no_header:
        options["header"] = "false"
    bar = ProgressBar(sys.stderr)
    try:
        with client_from_args(args) as db:
            rows, epoch = db.load(
                args.source, args.file, format=args.format, options=options, progress=bar.update
            )
    finally:
        bar.close()
    print(f"loaded {rows} rows into {args.source} at epoch {epoch}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Prints the server's counters and a table of its dataflow's states (or JSON)."""
    with client_from_args(args) as db:
        stats = db.stats()
    if args.json:
        print(json.dumps(stats, indent=2, sort_keys=True))
        return 0
    print(format_stats(stats))
    return 0


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def cmd_evict(args: argparse.Namespace) -> int:
    """Evicts keys of a view, every key of a view, or everything partial; prints what it did."""
    if args.key and args.view is None:
        raise UsageError("--key needs the VIEW it belongs to")
    keys = [parse_key(tokens) for tokens in args.key]
    with client_from_args(args) as db:
        done = db.evict(args.view, keys or None)
    scope = args.view or "every view"
    what = f"{plural(len(keys), 'key')} of {scope}" if keys else f"every key of {scope}"
    print(
        f"evicted {plural(done['keys_evicted'], 'key')} ({what}; {done['pinned_keys']} pinned by "
        f"subscriptions left, about {done['estimated_bytes']:,} bytes) at epoch {done['epoch']}"
    )
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    """Draws a view's dataflow as SVG or DOT (server/explain.py), or prints it as a tree."""
    with client_from_args(args) as db:
        described = db.describe(args.view)
    return explain.explain(
        args.view, described, output=args.output, text=args.text, out=sys.stdout, err=sys.stderr
    )


STATE_COLUMNS = (
    "id", "operator", "key", "mode", "keys", "rows", "bytes", "dropped", "upqueries", "evictions", "views"
)
COUNTERS = ("applied_epoch", "durable_epoch", "flushed_epoch", "upqueries", "spark_jobs", "dropped_deltas")


def format_stats(stats: Mapping[str, object]) -> str:
    """The counters on one line, then one row per stateful node: its operator, key columns,
    partial or full, present keys, rows, estimated bytes, deltas dropped at missing keys,
    keys filled by upqueries, evictions, and the views that read it."""
    head = ", ".join(f"{name} {stats[name]}" for name in COUNTERS)
    if "apply_lag_seconds" in stats:
        head += f"\napply lag: {stats['apply_lag_seconds']:.3f} s, {stats['apply_lag_epochs']} epochs"
    if stats.get("states_epoch", stats["applied_epoch"]) != stats["applied_epoch"]:
        head += f"\nstates as of epoch {stats['states_epoch']} (read at the end of an earlier step)"
    if stats.get("replica_hits"):
        head += f"\nhits answered by the hit replica: {stats['replica_hits']}"
    spark = stats.get("spark")
    if isinstance(spark, Mapping) and spark.get("status"):
        head += f"\nspark: {spark['status']}"
    memory = stats.get("memory")
    if isinstance(memory, Mapping) and memory.get("budget"):
        mib = {k: v // (1 << 20) for k, v in memory.items()}
        head += (
            f"\nmemory: rss {mib['rss_bytes']} MiB (at start {mib['baseline_rss_bytes']}), "
            f"budget {mib['budget']} MiB, partial state ~{mib['partial_state_bytes']} MiB "
            f"estimated, {memory['eviction_rounds']} eviction rounds"
        )
    states = stats.get("states") or []
    assert isinstance(states, list)
    rows = [
        (
            str(n["id"]),
            str(n["operator"]),
            *(
                (
                    ",".join(map(str, n["key"])) or "()",  # type: ignore[call-overload]
                    "partial" if n["partial"] else "full",
                    str(n["present_keys"]),
                    str(n["rows"]),
                    str(n["bytes"]),
                )
                # A recursive view's Child keeps its state in a nested circuit, unmeasured.
                if not n["unmeasured"]
                else ("-",) * 5
            ),
            str(n["dropped"]),
            str(n["upqueries"]),
            str(n["evictions"]),
            ",".join(map(str, n["views"])),  # type: ignore[call-overload]
        )
        for n in states
        if n["stateful"]
    ]
    if not rows:
        return head + "\n(no state yet: nothing has been looked up)"
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(STATE_COLUMNS)]
    lines = [head, "  ".join(c.ljust(w) for c, w in zip(STATE_COLUMNS, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------- parser

# Every subcommand in the order `pomoview --help` lists them; `subscribe` adds its own parser.
COMMANDS: tuple[Command | Callable[[Any, argparse.ArgumentParser], None], ...] = (
    Command(
        "serve",
        cmd_serve,
        help="run the server",
        description="Run the server. A flag wins over its environment variable, which wins "
        "over the default.",
        arguments=arguments.SERVE,
        more_flags=(security.add_serve_flags, limits.add_serve_flags),
        client=False,
    ),
    Command("install", cmd_install, help="install a program", arguments=arguments.INSTALL),
    Command("write", cmd_write, help="write one batch to a source", arguments=arguments.WRITE),
    Command("lookup", cmd_lookup, help="look up a view by key", arguments=arguments.LOOKUP),
    Command(
        "load",
        cmd_load,
        help="bulk-import a CSV, Parquet or JSON-lines file into a source",
        description="Bulk-import a file into a source as one epoch, with a progress bar. The "
        "server's Spark reads the file: a relative FILE is made absolute here, so FILE must "
        "be at that path on the server's machine (the default server runs on this one); a "
        "URI (e.g. file:///data/votes.csv) is passed as is. A row that does not fit the "
        "source stops the import, naming FILE:ROW and the reason, and nothing is loaded.",
        arguments=arguments.LOAD,
    ),
    add_subscribe_parser,
    Command("stats", cmd_stats, help="print server stats", arguments=arguments.STATS),
    Command(
        "evict",
        cmd_evict,
        help="drop cached state: keys of a view, a view, or everything",
        description="Drop the server's cached (partial) state: the given keys of VIEW, every key "
        "of VIEW's readers, or, without VIEW, every key of every partial state. The next lookups "
        "fetch it again, with the same answers. Full states and keys a subscription pins stay.",
        arguments=arguments.EVICT,
    ),
    Command(
        "explain",
        cmd_explain,
        help="draw a view's dataflow (SVG, DOT or text)",
        description="Draw the dataflow the server built for VIEW (at its first lookup): each "
        "operator, and for each state its key columns, partial or full, present keys and rows. "
        "Writes VIEW.svg in the current folder by default; SVG needs Graphviz's dot program "
        "(apt-get install graphviz), without which the DOT is written instead (VIEW.dot).",
        arguments=arguments.EXPLAIN,
        exclusive=(arguments.EXPLAIN_OUTPUT,),
    ),
)


def _client_options() -> argparse.ArgumentParser:
    """The options every client command shares, as a parent parser."""
    client_opts = argparse.ArgumentParser(add_help=False)
    client_opts.add_argument(
        "--address",
        default=os.environ.get("POMOVIEW_ADDRESS", DEFAULT_ADDRESS),
        help="server host:port (env POMOVIEW_ADDRESS, default %(default)s)",
    )
    security.add_client_flags(client_opts)
    return client_opts


def _add_command(sub: Any, command: Command, client_opts: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        command.name,
        parents=[client_opts] if command.client else [],
        help=command.help,
        description=command.description,
    )
    # Each parser gets its own copy of the options: an append flag's default list is the
    # parsed value when the flag is absent, and must not be shared between parsers.
    for names, options in command.arguments:
        p.add_argument(*names, **copy.deepcopy(options))
    for group in command.exclusive:
        exclusive = p.add_mutually_exclusive_group()
        for names, options in group:
            exclusive.add_argument(*names, **copy.deepcopy(options))
    for add_flags in command.more_flags:
        add_flags(p)
    p.set_defaults(handler=command.handler)


def build_parser() -> argparse.ArgumentParser:
    """Returns the parser; defaults read the environment at call time."""
    parser = argparse.ArgumentParser(prog="pomoview", description="pomoview view server")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    client_opts = _client_options()
    for command in COMMANDS:
        if isinstance(command, Command):
            _add_command(sub, command, client_opts)
        else:
            command(sub, client_opts)
    return parser


def _is_connect_failure(err: Unavailable) -> bool:
    # grpc reports an unreachable server as UNAVAILABLE with this text; a server that
    # answers UNAVAILABLE itself (e.g. Spark down) sends its own message instead.
    text = err.details.lower()
    return "failed to connect" in text or "connection refused" in text


def main(argv: list[str] | None = None) -> int:
    """Runs the `pomoview` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits with status 2 on usage errors
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        status = handler(args)
        sys.stdout.flush()  # here, not at exit: a closed pipe is then caught below
        return status
    except BrokenPipeError:
        # The reader of the output went away (`pomoview stats | head`): the rest is not
        # wanted. stdout goes to /dev/null so that the interpreter's last flush does not
        # fail again (Python's documented recipe); the status is a SIGPIPE death's, as a
        # shell reports it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except UsageError as err:
        parser.print_usage(sys.stderr)
        print(f"pomoview: error: {err}", file=sys.stderr)
        return 2
    except Unavailable as err:
        if _is_connect_failure(err):
            print(
                f"error: cannot connect to pomoview server at {args.address}: {err}",
                file=sys.stderr,
            )
        else:
            print(f"error: {err.code.name}: {err}", file=sys.stderr)
        return 1
    except Unauthenticated as err:
        print(
            f"error: {err.code.name}: {err} (give the token with --token-file FILE or {security.TOKEN_ENV})",
            file=sys.stderr,
        )
        return 1
    except PomoviewError as err:
        print(f"error: {err.code.name}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
