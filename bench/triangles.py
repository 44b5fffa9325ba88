"""Triangles over a skewed graph through the real server: the worst-case-optimal join
(`WcojJoin`, the default plan of a cyclic rule body) against the forced binary plan
(`serve --binary-joins`), beside DuckDB's SQL triangle query and clingo, in one run.

    .venv/bin/python bench/triangles.py [--scale 1.0] [--skew 2.5] [--rounds 2]

Data (seeded numpy, triangles_data.py): a directed power-law graph of 200,000 x S edges
(`--edges` to set it outright) among a quarter as many vertices, degrees of exponent `--skew`
(2.5: the hub has about 1,700 out-edges and as many in-edges); written as Parquet and loaded
once with `pomoview load` into one data folder, which every server of the run then starts
over. The header says how many two-paths the graph has: the binary plan holds them all
(hydration time and memory grow with them, about 6 s and 180 MiB per million here), the
worst-case-optimal one holds indexes of the edges only. Skew 2.5 (10.6 million two-paths)
keeps the binary plan to about a minute on two cores; 2.3 nearly triples its two-paths. The
whole view's answer is one gRPC message, which the client takes up to 4 MiB of (about
500,000 triangles: skew 2.1 has a million), so a graph with more stops before the servers.

Views (PROGRAM): `triangles()`, the whole relation (read with no key), and `tri(a)`, the same
body looked up by its first vertex. Each is its own relation, so each has its own join.

Per round, the plans alternate (wcoj, binary, then the peers; A B A B), each on a fresh
server process (tests/e2e/server_process.py) over the same data folder. Before anything is
timed, the server's health service says Spark is up and one keyed lookup of a third view
(`successors(src)`, a state of its own) runs a Spark job: a fresh JVM's first job takes
seconds longer than the next, and would otherwise land on whichever lookup came first.
- whole view: its first lookup (hydration: the Spark fetch of the edges, the join, the
  answer read once) timed and checked against DuckDB's and clingo's answers; the states of
  its nodes (Describe): the largest intermediate state (every stateful node but the source
  indexes and the Reader) against inputs + output; RSS of the server before and after;
  `pomoview explain triangles --text` names a WcojJoin under the default plan only.
- writes (both views present): per edge, `tri(a: src)` looked up (and checked), then the
  edge inserted and then deleted through the client, each timed from the write until a
  lookup of `tri(a: src)` with the write's epoch (min_epoch) answers, the ack apart, and
  checked against DuckDB over the file plus the edge; `--writes` edges from the hub (the
  vertex with the most two-paths through it) to a vertex two steps away (each closes
  triangles) and as many random ones. After the first hub insert the whole view is read at
  its epoch and checked too; after all writes (which net to nothing) once more.
- keyed view from nothing: the program installed again (every state dropped), then the
  first lookup of the hub, `--keys` random vertices (each cold), and all of them again
  (warm), each checked, alternated with DuckDB's query of the same vertex; Spark jobs per
  lookup (Stats), the keyed view's states, and `explain tri`.
Peers: DuckDB's triangle query over the Parquet file (a fresh read each time) and clingo
(parse, ground and solve the facts; `--no-clingo` leaves it out), each timed once per round.

Medians over the rounds (write and lookup times pooled over them). Goals are reported, not
asserted; every answer is checked, and the benchmark exits non-zero (after the table) when
any differs or `explain` shows the other plan. `--scale 1` takes six to eight minutes on two
shared cores, most of it the binary plan and JVM boots; `--scale 0.1` about three.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from triangles_data import (  # noqa: E402
    Check,
    Clingo,
    Duck,
    Edge,
    Shape,
    Triangle,
    by_vertex,
    clingo_available,
    pick_writes,
    power_law_graph,
    random_keys,
    shape,
    write_parquet,
)
from triangles_table import print_tables  # noqa: E402

from pomoview.client import Client  # noqa: E402
from pomoview.client.results import Rows  # noqa: E402
from pomoview.server.cli.commands import main as cli  # noqa: E402
from tests.e2e.server_process import ServerProcess  # noqa: E402

PROGRAM = """
source edge(src: int, dst: int).

% Every triangle a -> b -> c with its shortcut a -> c: the whole relation, read with no key.
triangles(a: A, b: B, c: C) :- edge(src: A, dst: B), edge(src: B, dst: C), edge(src: A, dst: C).
view triangles().

% The same body as a relation of its own, looked up by its first vertex.
tri(a: A, b: B, c: C) :- edge(src: A, dst: B), edge(src: B, dst: C), edge(src: A, dst: C).
view tri(a).

% Looked up once at each server's start, before anything is timed: the first Spark job of a
% fresh JVM takes seconds longer than the next ones (its own SourceIndex, keyed by src).
successors(src: S, dst: D) :- edge(src: S, dst: D).
view successors(src).
"""
WHOLE, KEYED, WARM_UP = "triangles", "tri", "successors"
PLANS = {"wcoj": [], "binary": ["--binary-joins"]}
MAX_TRIANGLES = 450_000  # at about 8 bytes each, what the whole view's answer fits in 4 MiB
STARTED = [time.monotonic()]


def say(text: str) -> None:
    print(f"[{time.monotonic() - STARTED[0]:6.1f} s] {text}", flush=True)


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - started, out


@dataclass
class Run:
    """What every server of the run shares: the data, the peers, the truth, the checks."""

    args: argparse.Namespace
    folder: Path
    parquet: Path
    shape: Shape
    duck: Duck
    truth: set[Triangle]
    writes: dict[str, list[Edge]]
    keys: list[int]
    check: Check = field(default_factory=Check)
    loaded: dict[str, Any] = field(default_factory=dict)
    by_a: dict[int, set[Triangle]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_a = by_vertex(self.truth)


def triples(rows: Rows) -> set[Triangle]:
    return {(int(r["a"]), int(r["b"]), int(r["c"])) for r in rows}  # type: ignore[call-overload]


def rss(db: Client) -> int:
    return int(db.stats()["memory"]["rss_bytes"])  # type: ignore[index]


def spark_jobs(db: Client) -> int:
    return int(db.stats()["spark_jobs"])  # type: ignore[call-overload]


def row(edge: Edge) -> dict[str, int]:
    return {"src": edge[0], "dst": edge[1]}


# -- the server --------------------------------------------------------------------------------


def cli_load(address: str, path: Path) -> dict[str, Any]:
    """`pomoview load edge FILE` (the command line, its progress bar discarded), timed."""
    command = [sys.executable, "-m", "pomoview.server.cli", "load", "edge", str(path), "--address", address]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"pomoview load failed ({done.returncode}): {done.stderr[-2000:]}")
    return {"s": elapsed, "printed": done.stdout.strip()}


def wait_for_spark(address: str, timeout: float) -> None:
    """Blocks until the server's health service says `pomoview.spark` is SERVING (its Spark
    session has an executor): a lookup timed before would count the JVM's boot."""
    request = health_pb2.HealthCheckRequest(service="pomoview.spark")
    with grpc.insecure_channel(address) as channel:
        for reply in health_pb2_grpc.HealthStub(channel).Watch(request, timeout=timeout):
            if reply.status == health_pb2.HealthCheckResponse.SERVING:
                return
    raise RuntimeError(f"the server at {address} stopped watching its Spark health")


def explain(address: str, view: str) -> str:
    """`pomoview explain VIEW --text`'s output."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = cli(["explain", view, "--text", "--address", address])
    return printed.getvalue() if status == 0 else f"(explain exited {status})"


def states(db: Client, view: str) -> dict[str, Any]:
    """The view's stateful nodes (Describe): each one's rows, the largest intermediate state
    (every stateful node but the source indexes and the Reader: joins, Distinct), the sum."""
    nodes: list[dict[str, Any]] = db.describe(view)["nodes"]  # type: ignore[assignment]
    held = [n for n in nodes if n["stateful"]]
    middle = [n for n in held if n["operator"] not in ("SourceIndex", "Reader")]
    top = max(middle, key=lambda n: int(n["rows"]))
    return {
        "nodes": [(str(n["id"]), str(n["operator"]), str(n["detail"]), int(n["rows"])) for n in held],
        "largest": int(top["rows"]),
        "largest_detail": str(top["detail"]),
        "total": sum(int(n["rows"]) for n in held),
        "sources": sum(1 for n in held if n["operator"] == "SourceIndex"),
    }


def check_plan(run: Run, plan: str, address: str, view: str, what: str) -> bool:
    """Whether `explain VIEW` names a WcojJoin, checked against the plan."""
    shows = "WcojJoin(" in explain(address, view)
    run.check.holds(shows == (plan == "wcoj"), f"{what}: explain {view} shows WcojJoin: {shows}")
    return shows


def on_server(run: Run, plan: str, label: str) -> dict[str, Any]:
    """A fresh `pomoview serve` of `plan` over the run's data folder (the first one loads
    the Parquet file): every phase, then the server stopped whatever happens; when a phase
    fails, the end of the server's log is printed first."""
    server = ServerProcess(
        run.folder / "data",
        program=run.folder / "program.pomo",
        flush_interval=5.0,
        extra_args=[*PLANS[plan], *run.args.server_arg],
    )
    started = time.perf_counter()
    server.start(timeout=600.0)
    db = Client(server.address, timeout=3600.0)
    try:
        wait_for_spark(server.address, timeout=600.0)
        if not run.loaded:
            run.loaded.update(cli_load(server.address, run.parquet))
            say(f"{label}: {run.loaded['printed']} in {run.loaded['s']:.1f} s")
            started += run.loaded["s"]
        out: dict[str, Any] = {"warm_up_s": timed(db.lookup, WARM_UP, {"src": run.shape.hub})[0]}
        out["start_s"] = time.perf_counter() - started
        return phases(run, db, server.address, plan, label, out)
    except BaseException:
        log = server.log_path.read_text(errors="replace") if server.log_path.exists() else ""
        print(f"{label} failed; the end of the server's log:\n{log[-4000:]}", file=sys.stderr)
        raise
    finally:
        db.close()
        if server.process is not None and server.process.poll() is None:
            server.stop(timeout=300.0)


def phases(run: Run, db: Client, address: str, plan: str, label: str, out: dict[str, Any]) -> dict[str, Any]:
    """The whole view, the writes, the keyed view from nothing; `explain` of both."""
    out["whole"] = whole_phase(run, db, plan, label)
    out["explain_whole"] = check_plan(run, plan, address, WHOLE, label)
    out["writes"] = write_phase(run, db, label)
    out["rss_writes"] = rss(db)
    dt, rows = timed(db.lookup, WHOLE, {})
    run.check.same(triples(rows), run.truth, f"{label}: {WHOLE}() after the writes")
    out["reread_s"] = dt
    db.install(PROGRAM)  # drops every state: the keyed view from nothing
    out["keyed"] = keyed_phase(run, db, label)
    out["explain_keyed"] = check_plan(run, plan, address, KEYED, label)
    return out


# -- the phases --------------------------------------------------------------------------------


def whole_phase(run: Run, db: Client, plan: str, label: str) -> dict[str, Any]:
    """The whole view's first lookup on a fresh server, its states and RSS."""
    out: dict[str, Any] = {"rss_before": rss(db)}
    jobs = spark_jobs(db)
    out["s"], rows = timed(db.lookup, WHOLE, {})
    out["jobs"], out["rss_after"] = spark_jobs(db) - jobs, rss(db)
    got = triples(rows)
    run.check.same(got, run.truth, f"{label}: {WHOLE}() against DuckDB")
    out["states"] = states(db, WHOLE)
    growth = (out["rss_after"] - out["rss_before"]) / 2**20
    say(
        f"{label}: {WHOLE}() {len(got):,} rows in {out['s']:.2f} s; largest state "
        f"{out['states']['largest']:,} rows; RSS +{growth:,.0f} MiB"
    )
    return out


def write_phase(run: Run, db: Client, label: str) -> dict[str, list[Any]]:
    """Each edge of run.writes inserted, then deleted; see the module docstring."""
    out: dict[str, list[Any]] = {}
    whole_checked = False
    for kind, edges in run.writes.items():
        for edge in edges:
            u = edge[0]
            base = run.by_a.get(u, set())
            run.check.same(triples(db.lookup(KEYED, {"a": u})), base, f"{label}: {KEYED}({u}) before")
            added = run.duck.triangles(added=edge, a=u)[1]
            for op, want in (("insert", added), ("delete", base)):
                jobs = spark_jobs(db)
                started = time.perf_counter()
                epoch = db.write("edge", **{op: [row(edge)]})
                acked = time.perf_counter()
                got = triples(db.lookup(KEYED, {"a": u}, min_epoch=epoch))
                done = time.perf_counter()
                run.check.same(got, want, f"{label}: {KEYED}({u}) after the {op} of {edge}")
                trial = {"s": done - started, "ack": acked - started, "jobs": spark_jobs(db) - jobs}
                out.setdefault(f"{op} {kind}", []).append({**trial, "changed": len(added) - len(base)})
                if op == "insert" and not whole_checked:
                    whole = triples(db.lookup(WHOLE, {}, min_epoch=epoch))
                    run.check.same(whole, run.duck.triangles(added=edge)[1], f"{label}: {WHOLE}() + {edge}")
                    whole_checked = True
    medians = ", ".join(f"{k} {statistics.median(t['s'] for t in v) * 1e3:.1f} ms" for k, v in out.items())
    say(f"{label}: writes until visible, medians: {medians}")
    return out


def keyed_phase(run: Run, db: Client, label: str) -> dict[str, Any]:
    """The keyed view from nothing: the hub's lookup first, then the random keys, each cold,
    alternated with DuckDB's query of the same vertex; then every key again (warm)."""
    out: dict[str, Any] = {"cold": [], "jobs": [], "duck": [], "warm": []}
    keys = [run.shape.hub, *run.keys]
    for i, key in enumerate(keys):
        jobs = spark_jobs(db)
        dt, rows = timed(db.lookup, KEYED, {"a": key})
        if i == 0:
            out["first_s"], out["first_jobs"] = dt, spark_jobs(db) - jobs
        else:
            out["cold"].append(dt)
            out["jobs"].append(spark_jobs(db) - jobs)
        run.check.same(triples(rows), run.by_a.get(key, set()), f"{label}: cold {KEYED}({key})")
        duck_s, want = run.duck.triangles(a=key)
        out["duck"].append(duck_s)
        run.check.same(want, run.by_a.get(key, set()), f"DuckDB's {KEYED}({key})")
    for key in keys:
        dt, rows = timed(db.lookup, KEYED, {"a": key})
        out["warm"].append(dt)
        run.check.same(triples(rows), run.by_a.get(key, set()), f"{label}: warm {KEYED}({key})")
    out["states"] = states(db, KEYED)
    out["rss"] = rss(db)
    cold = statistics.median(out["cold"]) * 1e3 if out["cold"] else float("nan")
    say(f"{label}: {KEYED}(hub) first {out['first_s']:.2f} s, then cold p50 {cold:.1f} ms")
    return out


def peers(run: Run, clingo: Clingo | None, label: str) -> dict[str, Any]:
    """DuckDB's whole query and clingo's, each timed once, their answers checked."""
    out: dict[str, Any] = {}
    out["duck"], got = run.duck.triangles()
    run.check.same(got, run.truth, f"{label}: DuckDB")
    if clingo is not None:
        out["clingo"], got = clingo.triangles()
        run.check.same(got, run.truth, f"{label}: clingo against DuckDB")
    say(f"{label}: DuckDB {out['duck']:.2f} s" + (f", clingo {out['clingo']:.2f} s" if clingo else ""))
    return out


# -- the run -----------------------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=1.0, help="1.0: 200,000 edges")
    parser.add_argument("--edges", type=int, default=None, help="edges outright (instead of --scale)")
    parser.add_argument("--vertices", type=int, default=None, help="default: a quarter of the edges")
    parser.add_argument("--skew", type=float, default=2.5, help="the degrees' power-law exponent (> 2)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of wcoj, binary, peers")
    parser.add_argument("--writes", type=int, default=5, help="edges of each kind inserted then deleted")
    parser.add_argument("--keys", type=int, default=10, help="random vertices looked up in tri(a)")
    parser.add_argument("--no-clingo", dest="clingo", action="store_false", help="leave out clingo")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--server-arg", action="append", default=[], help="a serve flag (--server-arg=--x=y)")
    args = parser.parse_args(argv)
    args.edges = args.edges or max(100, round(200_000 * args.scale))
    args.vertices = args.vertices or max(20, args.edges // 4)
    if args.skew <= 2.0 or args.rounds < 1 or args.writes < 1 or args.keys < 1:
        parser.error("--skew must be > 2, and --rounds, --writes and --keys >= 1")
    return args


def prepare(args: argparse.Namespace, folder: Path) -> tuple[Run, np.ndarray]:
    """The graph, its Parquet file, the program file, DuckDB's answer (the truth)."""
    pairs = power_law_graph(args.edges, args.vertices, args.skew, args.seed)
    s = shape(pairs)
    say(
        f"graph: {s.edges:,} edges among {s.vertices:,} vertices, {s.two_paths:,} two-paths; "
        f"hub {s.hub} ({s.hub_out:,} out, {s.hub_in:,} in)"
    )
    (folder / "program.pomo").write_text(PROGRAM)
    parquet = write_parquet(folder / "edge.parquet", pairs)
    duck = Duck(parquet)
    warm_s, truth = duck.triangles()  # also warms DuckDB up; not counted
    say(f"DuckDB: {len(truth):,} triangles ({warm_s:.2f} s, first query, not counted)")
    if len(truth) > MAX_TRIANGLES:
        raise SystemExit(
            f"{len(truth):,} triangles: the whole view's answer would pass the client's 4 MiB message "
            f"(about {MAX_TRIANGLES:,} triangles); use a smaller --scale or a larger --skew"
        )
    writes = pick_writes(pairs, s.hub, args.writes, args.seed)
    keys = random_keys(pairs, args.keys, args.seed, leave_out=s.hub)
    return Run(args, folder, parquet, s, duck, truth, writes, keys), pairs


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    STARTED[0] = time.monotonic()
    out: dict[str, Any] = {"loadavg_before": os.getloadavg(), "notes": []}
    if args.clingo and not clingo_available():
        args.clingo = False
        out["notes"].append("clingo: the python module is not installed; its column is left out")
    with tempfile.TemporaryDirectory(prefix="triangles-") as tmp:
        run, pairs = prepare(args, Path(tmp))
        clingo = Clingo(pairs) if args.clingo else None
        results: dict[str, list[dict[str, Any]]] = {plan: [] for plan in PLANS}
        peer_runs: list[dict[str, Any]] = []
        for r in range(args.rounds):
            for plan in PLANS:
                results[plan].append(on_server(run, plan, f"round {r + 1} {plan}"))
            peer_runs.append(peers(run, clingo, f"round {r + 1} peers"))
    out.update(
        args=args,
        shape=run.shape,
        triangles=len(run.truth),
        load=run.loaded,
        writes=run.writes,
        results=results,
        peers=peer_runs,
        checked=run.check.count,
        wrong=run.check.wrong,
        loadavg_after=os.getloadavg(),
    )
    print_tables(out)
    if run.check.wrong:
        raise SystemExit("answers differ:\n" + "\n".join(run.check.wrong[:20]))
    return out


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds, stopping the server
    main()
