"""A keyed lookup of a recursive view, with the demand transformation against without it,
in process (the engine): what planner/demand/magic.py buys before the server uses it.

    .venv/bin/python bench/demand_closure.py [--nodes 2000] [--edges 8000] [--keys 20]

The view is `reach(x)`, the left-linear closure of a seeded random graph, its edges
written once. Two ways to answer `reach(x: k)` for random keys k:

- demand: the server's path, in process: a partial engine whose reader of `reach` by x is
  built from the demand transformation (planner/demand/readers.py); a key's first lookup
  inserts it into the demand source (one step of the nested circuit), and the keys stay
  demanded until one eviction takes them all (one step deleting them);
- BFS: a plain-Python BFS from k over an in-memory adjacency, the floor;

and, for scale, a full reader (`partial=False`): the whole closure of every node, which
every keyed lookup of a recursive view paid before demand.

Per key, demand and BFS alternate (A B A B); every answer is checked against BFS. Then one
edge out of each demanded key is inserted and deleted again (each a write that changes
that key's closure), against the key's cold lookup (what recomputing it costs). The table
gives medians and p99s, the rows the demanded relation holds against the closures' rows,
and RSS growth (/proc/self/statm) with the keys demanded and after evicting them.
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import time
from collections import defaultdict
from typing import Any

from pomoview.dataflow.operators.demand_gate import DemandGate
from pomoview.engine.engine import Engine

PROGRAM = """
source edge(x: int, y: int).
view reach(x).
reach(x: X, y: Y) :- edge(x: X, y: Y).
reach(x: X, y: Z) :- reach(x: X, y: Y), edge(x: Y, y: Z).
"""


def graph(nodes: int, edges: int, seed: int) -> set[tuple[int, int]]:
    """A random directed graph; out-degrees skewed (a node's chance grows with its id's
    rank under a power law), so closures vary from empty to most of the graph."""
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) ** 0.8 for i in range(nodes)]
    sources = rng.choices(range(nodes), weights=weights, k=edges)
    return {(x, rng.randrange(nodes)) for x in sources}


def bfs(adjacency: dict[int, list[int]], start: int) -> set[int]:
    seen: set[int] = set()
    frontier = list(adjacency.get(start, ()))
    while frontier:
        node = frontier.pop()
        if node not in seen:
            seen.add(node)
            frontier.extend(adjacency.get(node, ()))
    return seen


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_now_mib() -> float:
    """The process's resident set now (Linux), for growth that can also shrink."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def demanded_rows(engine: Engine) -> int:
    """Rows the demanded relation holds (what the states above the view's DemandGate hold)."""
    (gate,) = [n for n in engine.graph.graph.nodes if isinstance(n, DemandGate)]
    return len(gate.inputs[0].query((), [()]))


def demand_phase(
    rows: list[dict[str, int]], keys: list[int], adjacency: dict[int, list[int]]
) -> dict[str, Any]:
    """The server's path in process: a partial engine whose reader of `reach` by x is served
    from demand. Every key stays demanded (held together), then all are evicted at once."""
    rss_start = rss_now_mib()
    started = time.perf_counter()
    engine = Engine(PROGRAM)
    engine.write(insert={"edge": rows})
    out: dict[str, Any] = {"load_s": time.perf_counter() - started}
    cold, warm, floor, update, held = [], [], [], [], 0
    for k in keys:
        started = time.perf_counter()
        got = {y for _, y in engine.lookup("reach", {"x": k})}
        cold.append(time.perf_counter() - started)
        started = time.perf_counter()
        want = bfs(adjacency, k)
        floor.append(time.perf_counter() - started)
        if got != want:
            raise AssertionError(f"reach({k}): {len(got)} rows, BFS {len(want)}")
        started = time.perf_counter()
        engine.lookup("reach", {"x": k})
        warm.append(time.perf_counter() - started)
        held += len(want)
    # One edge out of a demanded key, inserted then deleted: each changes that key's closure.
    for k in keys:
        new = {"x": k, "y": -1 - k}
        started = time.perf_counter()
        engine.write(insert={"edge": [new]})
        engine.write(delete={"edge": [new]})
        update.append((time.perf_counter() - started) / 2)
    out["held_rows"] = demanded_rows(engine)
    out["closures"] = held
    out["rss_held_mib"] = rss_now_mib() - rss_start
    started = time.perf_counter()
    engine.graph.graph.evict(1 << 40)
    out["evict_all_s"] = time.perf_counter() - started
    out["held_after"] = demanded_rows(engine)
    out["rss_after_mib"] = rss_now_mib() - rss_start
    out.update(cold=cold, warm=warm, bfs=floor, update=update)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--edges", type=int, default=8000)
    parser.add_argument("--keys", type=int, default=20, help="keys looked up (and evicted)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-full", action="store_true", help="leave out the full closure")
    args = parser.parse_args(argv)

    edges = graph(args.nodes, args.edges, args.seed)
    adjacency: dict[int, list[int]] = defaultdict(list)
    for x, y in edges:
        adjacency[x].append(y)
    rows = [{"x": x, "y": y} for x, y in edges]
    keys = random.Random(args.seed + 1).sample(range(args.nodes), args.keys)
    out: dict[str, Any] = {"nodes": args.nodes, "edges": len(edges), "keys": keys}

    out["demand"] = demand_phase(rows, keys, adjacency)
    out["closure_rows"] = [len(bfs(adjacency, k)) for k in keys]

    if not args.skip_full:
        rss_before = rss_mib()
        started = time.perf_counter()
        full = Engine(PROGRAM, partial=False)
        full.write(insert={"edge": rows})
        all_rows = full.read("reach")
        out["full"] = {
            "s": time.perf_counter() - started,
            "rows": len(all_rows),
            "rss_mib": rss_mib() - rss_before,
        }
        for k, size in zip(keys, out["closure_rows"], strict=True):
            assert len({r for r in all_rows if r[0] == k}) == size
    print_table(out)
    return out


def print_table(out: dict[str, Any]) -> None:
    d, ms = out["demand"], 1e3
    closures = out["closure_rows"]
    print(
        f"\nreach(x) by key, {out['nodes']:,} nodes, {out['edges']:,} edges, {len(out['keys'])} keys; "
        f"closure rows per key: median {statistics.median(closures):,.0f}, max {max(closures):,}"
    )
    print(f"{'figure':60} | {'value':>15} | peer / ratio")
    cold, bfs_p50 = statistics.median(d["cold"]), statistics.median(d["bfs"])
    print(
        f"{'cold lookup (demand the key, step the recursion) p50 / p99 ms':60} | "
        f"{cold * ms:6.2f} / {pct(d['cold'], 0.99) * ms:6.2f} | "
        f"BFS p50 {bfs_p50 * ms:.3f} ms: {cold / bfs_p50:,.0f}x the floor"
    )
    print(
        f"{'warm lookup p50 / p99 ms':60} | "
        f"{statistics.median(d['warm']) * ms:6.3f} / {pct(d['warm'], 0.99) * ms:6.3f} |"
    )
    ratios = [c / u for c, u in zip(d["cold"], d["update"], strict=True)]
    print(
        f"{'edge insert or delete at a demanded key p50 / p99 ms':60} | "
        f"{statistics.median(d['update']) * ms:6.3f} / {pct(d['update'], 0.99) * ms:6.3f} | "
        f"recomputing the key (its cold lookup) / update: median {statistics.median(ratios):,.0f}x"
    )
    print(f"{'loading the edges (nothing demanded) s':60} | {d['load_s']:15.2f} |")
    print(
        f"{'rows held by the demanded relation, every key demanded':60} | {d['held_rows']:>15,} | "
        f"the demanded closures: {d['closures']:,} ({d['held_rows'] / max(1, d['closures']):.2f}x)"
    )
    print(f"{'rows held after evicting every key':60} | {d['held_after']:>15,} |")
    print(
        f"{'RSS growth MiB: keys demanded / after evicting them all':60} | "
        f"{d['rss_held_mib']:6.1f} / {d['rss_after_mib']:6.1f} | "
        f"evicting all took {d['evict_all_s'] * ms:.1f} ms"
    )
    if "full" in out:
        full = out["full"]
        print(
            f"{'full: the whole closure, once (a full reader) s':60} | {full['s']:15.2f} | "
            f"{full['s'] / cold:,.0f}x a cold demanded lookup"
        )
        print(f"{'full: rows held':60} | {full['rows']:15,} |")
        print(f"{'full: peak RSS growth MiB':60} | {full['rss_mib']:15.1f} |")
    print("answers checked against BFS: all equal")


if __name__ == "__main__":
    main()
