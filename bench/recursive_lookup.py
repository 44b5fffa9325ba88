"""A recursive view looked up by key through the real server (issue 25, part 7): cold and
warm lookups, the state the demanded keys hold, one-edge writes against recomputing, and
RSS, beside BFS, clingo and `serve --full-state` in the same run.

    .venv/bin/python bench/recursive_lookup.py [--scale 1.0] [--lookups 1000] [--cold 20]

Data (seeded numpy, recursive_lookup_data.py says why this shape): at scale S, a layered
power-law graph of 1,000,000 x S edges `edge(x, y)` (a DAG: closures are cones, never the
whole graph) and an org tree of 1,000,000 x S employees `reports(employee, manager)`, 20
levels deep; written as Parquet and loaded with `Client.load` (what `pomoview load` runs)
into one real `pomoview serve` process (tests/e2e/server_process.py). Views (PROGRAM below):
`reach(x)`, the left-linear closure of edge, and `manager_chain(employee)`, every manager
above an employee; both keyed lookups are served from demand (planner/demand/).

Per dataset, on that server:
- first lookup: one key, before any other: the sources the recursion reads are hydrated
  whole there today (part 3 will make them partial); its time and Spark jobs apart.
- cold: `--cold` random keys, each one's first lookup, alternated per key with the peers
  (pomoview, BFS, clingo, pomoview, ...): BFS over an in-memory adjacency (the floor) and
  clingo grounding the facts with the key as a constant (a fresh Control per key; left out
  with a note if the module is missing, or with `--no-clingo`). Spark jobs per lookup are
  the growth of Stats' `spark_jobs` around it. Then each key again (warm), alternated with BFS.
- Zipf: `--lookups` lookups, keys Zipf(1.1) over a random order of the keys; the first of
  each key is cold, the rest warm. Then the states of the view (Describe): the Reader's rows
  against the sum of the demanded closures, the other states' rows (sources hydrated whole,
  join state), and the full closure (every key's; estimated from a sample of 2,000 keys
  when the graph is larger than 20,000 edges). The nested circuit (Child) is not measured by
  Stats (`unmeasured`): its rows are missing from the sum, and the table says so.
- writes: for `--updates` of the cold keys, one edge out of the key (a new node) inserted,
  then deleted: the time from the write until a lookup with its epoch (min_epoch) answers,
  the write's ack apart, against that key's cold lookup (what recomputing it costs).
- RSS of the server process (Stats): before the view's first lookup, after it, and after
  every lookup and write. At the end, RSS a second after installing the same program again
  (which drops every state with the dataflow). Both views share the server (one JVM boot):
  the org view's RSS figures start where the graph's ended, so read them as growth.

Eviction, on the same server: after the writes, `Client.evict()` (the Evict RPC) drops
every key of every partial state; RSS a second later, against RSS before the view's first
lookup (the goal: within 10%). Eviction by the memory budget: a second server, under
`--memory-budget 1K`, looks up the first key and `--evict-keys` of the keys the partial
server demanded (it reads the sources whole, `--whole-source-rows` past their size; the
budget, checked at most every 50 ms after lookups that fill state, evicts some keys as they
come), then one write (an edge that touches no demanded key) steps, after which the budget
evicts every key: RSS before the lookups, with the keys left, and after the write; then
the same keys again, and a write again (RSS that grows again is
held by the server, RSS that does not is kept by its allocator for reuse) (evict_peer).

The full-state peer: a third server with `--full-state`, on a subset (`--full-scale`,
default 0.002: the full closure of the graph at 0.01 is 4 million pairs, several GiB at
today's ~1.2 KB a pair), its first lookup (the whole fixpoint) and each cold key's lookup
after it, alternated with BFS over the subset, its states' rows and RSS growth. It is not
alternated with the partial server (another process, on other data unless the scales
match). The servers run one after the other, each stopped after its turn.

Every answer (pomoview's, clingo's and the full-state server's) is checked against BFS;
a mismatch raises at once. `--scale 0.01` takes about three minutes, 0.1 about six
(on two shared cores).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recursive_lookup_data import (  # noqa: E402
    DATASETS,
    Adjacency,
    Clingo,
    Dataset,
    clingo_available,
    layered_graph,
    org_tree,
    write_parquet,
    zipf_keys,
)
from recursive_lookup_table import mib, print_tables  # noqa: E402

from pomoview.client import Client  # noqa: E402
from tests.e2e.server_process import ServerProcess  # noqa: E402

PROGRAM = """
source edge(x: int, y: int).
source reports(employee: int, manager: int).

view reach(x).
reach(x: X, y: Y) :- edge(x: X, y: Y).
reach(x: X, y: Z) :- reach(x: X, y: Y), edge(x: Y, y: Z).

view manager_chain(employee).
manager_chain(employee: E, manager: M) :- reports(employee: E, manager: M).
manager_chain(employee: E, manager: M) :-
    manager_chain(employee: E, manager: X), reports(employee: X, manager: M).
"""
FRESH = 10**12  # the ids of the nodes the writes add: never in the data
EXACT_FULL_CLOSURE = 20_000  # edges up to which the full closure is summed, not estimated
STARTED = [time.monotonic()]


def say(text: str) -> None:
    print(f"[{time.monotonic() - STARTED[0]:6.1f} s] {text}", flush=True)


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - started, out


def make_data(scale: float, seed: int) -> dict[str, np.ndarray]:
    n = max(200, round(1_000_000 * scale))
    return {"graph": layered_graph(n, seed), "org": org_tree(n, seed + 1)}


class Server:
    """One `pomoview serve` process with both sources loaded, and a client of it."""

    def __init__(self, tmp: Path, label: str, data: dict[str, np.ndarray], extra: list[str]) -> None:
        folder, self.label = tmp / label, label
        folder.mkdir()
        (folder / "program.pomo").write_text(PROGRAM)
        self.process = ServerProcess(
            folder / "data", program=folder / "program.pomo", flush_interval=5.0, extra_args=extra
        )
        self.paths = {
            ds.source: write_parquet(folder / f"{ds.source}.parquet", data[ds.name], ds.columns)
            for ds in DATASETS
        }
        self.db: Client | None = None
        self.load_s = 0.0

    def start_and_load(self) -> Server:
        self.process.start()
        db = self.db = Client(self.process.address, timeout=3600.0)
        self.load_s = timed(lambda: [db.load(s, p, timeout=3600) for s, p in self.paths.items()])[0]
        return self

    def stop(self) -> None:
        if self.db is not None:
            self.db.close()
        if self.process.process is not None and self.process.process.poll() is None:
            self.process.stop(timeout=120.0)


def rss(db: Client) -> int:
    return int(db.stats()["memory"]["rss_bytes"])  # type: ignore[index]


def spark_jobs(db: Client) -> int:
    return int(db.stats()["spark_jobs"])  # type: ignore[call-overload]


def lookup(db: Client, ds: Dataset, key: int, min_epoch: int | None = None) -> set[int]:
    rows = db.lookup(ds.view, ds.key(key), min_epoch=min_epoch)
    return {int(r[ds.columns[1]]) for r in rows}  # type: ignore[call-overload]


def check(got: set[int], want: set[int], what: str) -> None:
    if got != want:
        missing, extra = sorted(want - got)[:5], sorted(got - want)[:5]
        raise AssertionError(
            f"{what}: {len(got)} rows, BFS {len(want)} (missing e.g. {missing}, extra e.g. {extra})"
        )


def cold_phase(
    db: Client, ds: Dataset, keys: list[int], adj: Adjacency, clingo: Clingo | None
) -> dict[str, Any]:
    """Each key's first lookup, then the peers' (A B C A B C); then each key warm, with BFS."""
    out: dict[str, Any] = {"s": [], "jobs": [], "bfs": [], "clingo": [], "warm": [], "warm_bfs": []}
    out["by_key"] = {}
    for key in keys:
        jobs = spark_jobs(db)
        dt, got = timed(lookup, db, ds, key)
        out["jobs"].append(spark_jobs(db) - jobs)
        out["s"].append(dt)
        out["by_key"][key] = dt
        dt, want = timed(adj.closure, key)
        out["bfs"].append(dt)
        check(got, want, f"cold {ds.view}({key})")
        if clingo is not None:
            dt, answer = timed(clingo.closure, key)
            out["clingo"].append(dt)
            check(answer, want, f"clingo's {ds.view}({key})")
    for key in keys:
        dt, got = timed(lookup, db, ds, key)
        out["warm"].append(dt)
        dt, want = timed(adj.closure, key)
        out["warm_bfs"].append(dt)
        check(got, want, f"warm {ds.view}({key})")
    return out


def zipf_phase(db: Client, ds: Dataset, keys: list[int], adj: Adjacency, seen: set[int]) -> dict[str, Any]:
    """The Zipf lookups: the first of each key (not looked up before) cold, the rest warm;
    each answer checked. `seen` (the keys already demanded) grows with them."""
    cold: list[float] = []
    warm: list[float] = []
    closures: dict[int, set[int]] = {}
    for key in keys:
        dt, got = timed(lookup, db, ds, key)
        (warm if key in seen else cold).append(dt)
        seen.add(key)
        if key not in closures:
            closures[key] = adj.closure(key)
        check(got, closures[key], f"Zipf {ds.view}({key})")
    return {"cold": cold, "warm": warm, "distinct": len(closures)}


def state_of(db: Client, ds: Dataset) -> dict[str, Any]:
    """The view's states (Describe): the Reader's rows, the others' by operator, and whether
    any is unmeasured (the Child: the nested circuit's own traces)."""
    nodes: list[dict[str, Any]] = db.describe(ds.view)["nodes"]  # type: ignore[assignment]
    stateful = [n for n in nodes if n["stateful"]]
    reader = sum(int(n["rows"]) for n in stateful if n["operator"] == "Reader")
    others: dict[str, int] = {}
    for n in stateful:
        if n["operator"] != "Reader" and not n["unmeasured"]:
            others[n["operator"]] = others.get(n["operator"], 0) + int(n["rows"])
    unmeasured = [str(n["operator"]) for n in stateful if n["unmeasured"]]
    gate = [str(n["detail"]) for n in nodes if n["operator"] == "DemandGate"]
    return {"reader": reader, "others": others, "unmeasured": unmeasured, "gate": gate}


def update_phase(
    db: Client, ds: Dataset, keys: list[int], adj: Adjacency, cold: dict[int, float]
) -> dict[str, Any]:
    """Per key: one edge out of it to a new node inserted, then deleted; each timed from the
    write until a lookup with its epoch answers (the ack apart), each answer checked."""
    out: dict[str, list[float]] = {
        "insert": [],
        "delete": [],
        "insert_ack": [],
        "delete_ack": [],
        "ratio": [],
    }
    for key in keys:
        row = ds.row(key, FRESH + key)
        for kind, change in (("insert", ([row], [])), ("delete", ([], [row]))):
            started = time.perf_counter()
            epoch = db.write_batch({ds.source: change})
            acked = time.perf_counter()
            got = lookup(db, ds, key, min_epoch=epoch)
            done = time.perf_counter()
            if kind == "insert":
                adj.add(key, FRESH + key)
            else:
                adj.remove(key, FRESH + key)
            check(got, adj.closure(key), f"{ds.view}({key}) after the {kind}")
            out[kind].append(done - started)
            out[f"{kind}_ack"].append(acked - started)
            out["ratio"].append(cold[key] / (done - started))
    return out


def full_closure(adj: Adjacency, keys: list[int], rng: np.random.Generator, edges: int) -> tuple[int, bool]:
    """Every key's closure summed (exact), or estimated from 2,000 keys (False) when large."""
    if edges <= EXACT_FULL_CLOSURE:
        return adj.full_closure_rows(keys), True
    sample = rng.choice(np.array(keys), 2000, replace=False) if len(keys) > 2000 else keys
    rows = adj.full_closure_rows(int(k) for k in sample)
    return round(rows * len(keys) / len(sample)), False


def run_dataset(server: Server, ds: Dataset, pairs: np.ndarray, args: argparse.Namespace) -> dict[str, Any]:
    """Every phase of one dataset on the partial server; see the module docstring."""
    db = server.db
    assert db is not None
    rng = np.random.default_rng(args.seed + 7)
    adj = Adjacency(pairs)
    population = np.unique(pairs[:, 0])  # the keys with an answer
    picks = rng.choice(population, min(len(population), args.cold + 1), replace=False)
    first, cold_keys = int(picks[0]), [int(k) for k in picks[1:]]
    out: dict[str, Any] = {"rows": len(pairs), "keys": len(population), "rss_before": rss(db)}
    jobs = spark_jobs(db)
    out["first_s"], got = timed(lookup, db, ds, first)
    out["first_jobs"], out["rss_first"] = spark_jobs(db) - jobs, rss(db)
    check(got, adj.closure(first), f"first {ds.view}({first})")
    say(f"  {ds.view}: first lookup {out['first_s']:.2f} s, {out['first_jobs']} Spark jobs")
    clingo = Clingo(pairs) if args.clingo else None
    out["cold"] = cold_phase(db, ds, cold_keys, adj, clingo)
    say(f"  {ds.view}: {len(cold_keys)} cold keys, p50 {statistics.median(out['cold']['s']) * 1e3:.1f} ms")
    seen = {first, *cold_keys}
    zipf = zipf_keys(rng, population, args.lookups)
    out["zipf"] = zipf_phase(db, ds, zipf, adj, seen)
    # In the order of their first lookups: the eviction server's sample is then the Zipf
    # workload's, not the lowest ids (the first layers, whose closures are the largest).
    out["demanded"] = list(dict.fromkeys([first, *cold_keys, *zipf]))
    closures = {k: adj.closure(k) for k in seen}
    out["closures"] = sum(len(c) for c in closures.values())
    out["full"], out["full_exact"] = full_closure(adj, population.tolist(), rng, len(pairs))
    out["state"] = state_of(db, ds)
    say(f"  {ds.view}: {args.lookups} Zipf lookups, {len(seen)} keys demanded; state {out['state']}")
    updated = cold_keys[: args.updates]
    out["updates"] = update_phase(db, ds, updated, adj, out["cold"]["by_key"])
    # An edge out of k changes the answer of every demanded key whose closure holds k.
    out["updates"]["answers"] = [1 + sum(k in c for c in closures.values()) for k in updated]
    out["rss_held"] = rss(db)
    # Evict (everything partial): the view's keys, their demand and the states above go; a
    # second later, RSS against where the view's first lookup started.
    out["evicted"] = db.evict()
    time.sleep(1.0)
    out["rss_evicted"], out["state_evicted"] = rss(db), state_of(db, ds)
    return out


def evict_peer(
    server: Server, data: dict[str, np.ndarray], demanded: dict[str, list[int]], args: argparse.Namespace
) -> dict[str, Any]:
    """A server under `--memory-budget 1K`. The budget is checked after an applied step and
    after a lookup that fetched or filled state (server/reads/lookups.py), at most every
    50 ms: the first lookup hydrates the sources (a fetch), the next `--evict-keys` (keys
    the partial server demanded, answers checked) are answered from them, and the budget
    evicts some of them as they come (those after its last check stay); then one write of
    an edge that touches none of them is a step after which the budget evicts every key,
    retracting its demand. Per view: RSS before the lookups, after the first, with the keys
    left and after the write; the DemandGate's counts and the Reader's present keys after
    it."""
    db = server.db
    assert db is not None
    out: dict[str, Any] = {"load_s": server.load_s}
    for ds in DATASETS:
        adj, keys = Adjacency(data[ds.name]), demanded[ds.name][: args.evict_keys + 1]
        r: dict[str, Any] = {"keys": len(keys), "rss_before": rss(db)}
        for i, key in enumerate(keys):
            check(lookup(db, ds, key), adj.closure(key), f"{ds.view}({key}) under the budget")
            if i == 0:
                r["rss_first"] = rss(db)
        r["rss_held"], r["held"], r["rss_after"] = evict_all(db, ds)
        r["state"] = state_of(db, ds)
        stats: dict[str, Any] = db.stats()
        r["rounds"] = stats["memory"]["eviction_rounds"]
        r["present"] = sum(int(x["present_keys"]) for x in stats["readers"] if x["view"] == ds.view)
        # The same keys again, then evicted again: RSS that grows again is held by the
        # server; RSS that stays is memory its allocator kept for reuse.
        for key in keys:
            check(lookup(db, ds, key), adj.closure(key), f"{ds.view}({key}) under the budget, again")
        r["rss_held2"], _, r["rss_after2"] = evict_all(db, ds)
        out[ds.name] = r
        rss_change = " -> ".join(
            mib(r[k]) for k in ("rss_before", "rss_held", "rss_after", "rss_held2", "rss_after2")
        )
        say(f"  evict {ds.view}: RSS {rss_change}; {r['state']['gate']}")
    return out


def evict_all(db: Client, ds: Dataset) -> tuple[int, dict[str, Any], int]:
    """RSS and the view's states with the keys held, then one write of an edge that touches
    none of them (a step: the budget evicts every key after it), and RSS after it."""
    held = rss(db), state_of(db, ds)
    time.sleep(0.06)  # the budget reads RSS at most every 50 ms (memory_budget.py)
    row = ds.row(-1, -2)  # no key has it in its closure
    db.write_batch({ds.source: ([row], [])})
    epoch = db.write_batch({ds.source: ([], [row])})
    while int(db.stats()["applied_epoch"]) < epoch:  # type: ignore[call-overload]
        time.sleep(0.01)  # (a lookup with min_epoch would demand its key)
    return held[0], held[1], rss(db)


def full_state_peer(server: Server, data: dict[str, np.ndarray], args: argparse.Namespace) -> dict[str, Any]:
    """`serve --full-state` on the subset: per view, the first lookup (the whole fixpoint),
    then the cold keys' lookups alternated with BFS, the states' rows and RSS growth."""
    db = server.db
    assert db is not None
    out: dict[str, Any] = {"scale": min(args.scale, args.full_scale), "load_s": server.load_s}
    for ds in DATASETS:
        adj, rng = Adjacency(data[ds.name]), np.random.default_rng(args.seed + 9)
        population = np.unique(data[ds.name][:, 0])
        keys = [int(k) for k in rng.choice(population, min(len(population), args.cold + 1), replace=False)]
        before, jobs = rss(db), spark_jobs(db)
        first_s, got = timed(lookup, db, ds, keys[0])
        check(got, adj.closure(keys[0]), f"full-state {ds.view}({keys[0]})")
        r: dict[str, Any] = {"first_s": first_s, "first_jobs": spark_jobs(db) - jobs, "s": [], "bfs": []}
        for key in keys[1:]:
            dt, got = timed(lookup, db, ds, key)
            r["s"].append(dt)
            dt, want = timed(adj.closure, key)
            r["bfs"].append(dt)
            check(got, want, f"full-state {ds.view}({key})")
        r["state"] = state_of(db, ds)
        r["rss_growth"] = rss(db) - before
        r["full"] = adj.full_closure_rows(population.tolist())
        out[ds.name] = r
        say(f"  full-state {ds.view}: first lookup {first_s:.2f} s, {r['full']:,} closure rows")
    return out


def partial_phase(server: Server, data: dict[str, np.ndarray], args: argparse.Namespace) -> dict[str, Any]:
    """Both views on the partial server, then every state dropped by installing the program
    again (a rebuild): RSS a second later."""
    out: dict[str, Any] = {ds.name: run_dataset(server, ds, data[ds.name], args) for ds in DATASETS}
    assert server.db is not None
    held = rss(server.db)
    server.db.install(PROGRAM)
    time.sleep(1.0)
    out["reinstall"] = (held, rss(server.db))
    return out


def turn(server: Server, phase: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Starts and loads `server`, runs `phase`, stops the server whatever happens."""
    try:
        server.start_and_load()
        say(f"{server.label}: loaded in {server.load_s:.1f} s on {server.process.address}")
        return phase()
    finally:
        server.stop()


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=1.0, help="1.0: 1,000,000 edges and employees")
    parser.add_argument("--lookups", type=int, default=1000, help="Zipf lookups per view")
    parser.add_argument("--cold", type=int, default=20, help="cold keys per view, alternated with peers")
    parser.add_argument("--updates", type=int, default=5, help="keys whose edge is inserted and deleted")
    parser.add_argument("--full-scale", type=float, default=0.002, help="the --full-state peer's scale")
    parser.add_argument("--no-full", action="store_true", help="leave out the --full-state peer")
    parser.add_argument("--no-evict", action="store_true", help="leave out the eviction server")
    parser.add_argument("--evict-keys", type=int, default=100, help="keys looked up under the budget")
    parser.add_argument("--no-clingo", dest="clingo", action="store_false", help="leave out clingo")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--server-arg", action="append", default=[], help="a serve flag (--server-arg=--x=y)")
    args = parser.parse_args(argv)
    if args.cold < 1 or args.lookups < 1 or not 1 <= args.updates <= args.cold:
        parser.error("--cold and --lookups must be >= 1, and 1 <= --updates <= --cold")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    STARTED[0] = time.monotonic()
    out: dict[str, Any] = {"scale": args.scale, "loadavg_before": os.getloadavg(), "notes": []}
    if args.clingo and not clingo_available():
        args.clingo = False
        out["notes"].append("clingo: the python module is not installed; its column is left out")
    data = make_data(args.scale, args.seed)
    say(f"data: {len(data['graph']):,} edges, {len(data['org']):,} reports rows")
    full_data = make_data(min(args.scale, args.full_scale), args.seed)
    with tempfile.TemporaryDirectory(prefix="recursive-lookup-") as tmp_name:
        tmp = Path(tmp_name)
        # One server at a time (three JVMs booting at once on two cores took longer in all),
        # each stopped after its turn.
        partial = Server(tmp, "partial", data, args.server_arg)
        out.update(turn(partial, lambda: partial_phase(partial, data, args)))
        out["load_s"] = partial.load_s
        if not args.no_evict:
            demanded = {ds.name: out[ds.name]["demanded"] for ds in DATASETS}
            whole = ["--whole-source-rows", str(10**12)]  # see the module docstring
            evict = Server(tmp, "evict", data, ["--memory-budget", "1K", *whole, *args.server_arg])
            out["evict"] = turn(evict, lambda: evict_peer(evict, data, demanded, args))
        if not args.no_full:
            full_data = make_data(min(args.scale, args.full_scale), args.seed)
            full = Server(tmp, "full", full_data, ["--full-state", *args.server_arg])
            out["full_state"] = turn(full, lambda: full_state_peer(full, full_data, args))
    out["loadavg_after"] = os.getloadavg()
    print_tables(out, args)
    return out


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds, stopping the servers
    main()
