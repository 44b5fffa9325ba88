"""A keyed lookup of a recursive view, with the demand transformation against without it,
in process (the engine): what planner/demand/magic.py buys before the server uses it.

    .venv/bin/python bench/demand_closure.py [--nodes 2000] [--edges 8000] [--keys 20]

The view is `reach(x)`, the left-linear closure of a seeded random graph. Three ways to
answer `reach(x: k)` for random keys k:

- demand: the rewritten program in the engine, its edges loaded once; a lookup inserts k
  into `demand__reach` (one step of the nested circuit), reads `reach__bf`'s rows of k,
  and its eviction deletes k again (one step);
- full: the program as it is, which the server runs today: the whole closure of every node,
  computed once (its time and rows are the price of the first lookup);
- BFS: a plain-Python BFS from k over an in-memory adjacency, the floor.

Demand and BFS alternate per key (A B A B); every answer is checked against BFS. The
table gives medians and p99s per key, rows held, and the process's peak RSS after each
phase (resource.getrusage, so only growth is meaningful).
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import time
from collections import defaultdict
from typing import Any

from pomoview.engine.engine import Engine
from pomoview.planner.compile import compile_program
from pomoview.planner.demand.magic import Demanded, demand_program

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

    demanded = demand_program(compile_program(PROGRAM).checked, "reach", ("x",))
    assert isinstance(demanded, Demanded), demanded
    rss_start = rss_mib()
    started = time.perf_counter()
    engine = Engine(demanded.text, partial=False)
    engine.write(insert={"edge": rows})
    out["demand_load_s"] = time.perf_counter() - started
    lookups, evictions, floor, sizes = [], [], [], []
    held_peak = 0
    for k in keys:
        started = time.perf_counter()
        engine.write(insert={demanded.demand: [{"x": k}]})
        got = {y for x, y in engine.read(demanded.relation) if x == k}
        lookups.append(time.perf_counter() - started)
        held_peak = max(held_peak, len(engine.read(demanded.relation)))
        started = time.perf_counter()
        want = bfs(adjacency, k)
        floor.append(time.perf_counter() - started)
        if got != want:
            raise AssertionError(f"reach({k}): {len(got)} rows, BFS {len(want)}")
        sizes.append(len(want))
        started = time.perf_counter()
        engine.write(delete={demanded.demand: [{"x": k}]})
        evictions.append(time.perf_counter() - started)
        assert not {r for r in engine.read(demanded.relation) if r[0] == k}, "evicted key left rows"
    out["demand"] = {
        "lookup": lookups,
        "evict": evictions,
        "held_peak": held_peak,
        "rss_mib": rss_mib() - rss_start,
    }
    out["bfs"] = floor
    out["closure_rows"] = sizes
    out["held_after"] = len(engine.read(demanded.relation))

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
        for k, size in zip(keys, sizes, strict=True):
            assert len({r for r in all_rows if r[0] == k}) == size
    print_table(out)
    return out


def print_table(out: dict[str, Any]) -> None:
    d, floor = out["demand"], out["bfs"]
    ms = 1e3
    print(
        f"\nreach(x) by key, {out['nodes']:,} nodes, {out['edges']:,} edges, {len(out['keys'])} keys; "
        f"closure rows per key: median {statistics.median(out['closure_rows']):,.0f}, "
        f"max {max(out['closure_rows']):,}"
    )
    print(f"{'figure':58} | {'value':>14} | peer / ratio")
    lookup, bfs_p50 = statistics.median(d["lookup"]), statistics.median(floor)
    print(
        f"{'demand: lookup (insert the key, step, read) p50 / p99 ms':58} | "
        f"{lookup * ms:6.2f} / {pct(d['lookup'], 0.99) * ms:6.2f} | "
        f"BFS p50 {bfs_p50 * ms:.3f} ms: {lookup / bfs_p50:,.0f}x the floor"
    )
    print(
        f"{'demand: eviction (delete the key, step) p50 / p99 ms':58} | "
        f"{statistics.median(d['evict']) * ms:6.2f} / {pct(d['evict'], 0.99) * ms:6.2f} |"
    )
    print(f"{'demand: loading the edges (no key demanded) s':58} | {out['demand_load_s']:14.2f} |")
    print(
        f"{'demand: rows held, peak (one key at a time) / after all evictions':58} | "
        f"{d['held_peak']:>6,} / {out['held_after']:>5,} | the largest closure: {max(out['closure_rows']):,}"
    )
    print(f"{'demand: peak RSS growth MiB':58} | {d['rss_mib']:14.1f} |")
    if "full" in out:
        full = out["full"]
        print(
            f"{'full: the whole closure, once (the first lookup today) s':58} | {full['s']:14.2f} | "
            f"{full['s'] / lookup:,.0f}x a demanded lookup"
        )
        print(f"{'full: rows held':58} | {full['rows']:14,} |")
        print(f"{'full: peak RSS growth MiB':58} | {full['rss_mib']:14.1f} |")
    print("answers checked against BFS: all equal")


if __name__ == "__main__":
    main()
