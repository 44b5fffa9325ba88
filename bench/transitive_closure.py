"""Transitive closure over nested time: from scratch vs one-edge updates.

    .venv/bin/python bench/transitive_closure.py [--nodes 2000] [--edges 8000] [--updates 5]
        [--reps 1] [--no-clingo] [--memory]

Builds the DBSP circuit tc(x, z) :- edge(x, z); tc(x, z) :- tc(x, y), edge(y, z)
(a child circuit with an incremental join and DistinctTrace), computes the
closure of a random directed graph from scratch (one epoch inserting every
edge), then times epochs that insert one new random edge, and epochs that
delete one random existing edge. Each update's cost is printed as a ratio
to the from-scratch time (the target is >= 100x cheaper). Peers: a plain-Python
BFS closure of the same graph, and the non-incremental circuit (JoinStream,
Distinct) recomputing after each update is what "from scratch" stands for.
Every update's result is checked against BFS so the figures are of right
answers. Peak memory is the process's peak RSS; `--memory` also measures the memory the
circuit keeps per closure pair after the first epoch (tracemalloc, which slows every step:
its times are not comparable with a run without it).

clingo beside it, in the same run (issue 25's targets are against it): a process of its own
grounds and solves the same two rules over the same edges, timed (ground, then solve), with
its peak RSS and its count of `tc` atoms checked against BFS; left out with a note when the
module is missing, or with `--no-clingo`. With `--reps N` the from-scratch epoch (a new
circuit each time) and clingo alternate N times (A B A B) and the table shows medians; the
one-edge updates run on the first circuit. The circuit's memory is the process's RSS growth
over its first from-scratch epoch (later ones reuse freed memory); clingo's its peak RSS
above what its process held before grounding.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import random
import resource
import statistics
import time
import tracemalloc

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.operators.child import Child, ChildOutput
from pomoview.dataflow.operators.distinct_trace import DistinctTrace
from pomoview.dataflow.operators.feedback import Feedback
from pomoview.dataflow.operators.import_stream import Import
from pomoview.dataflow.operators.index_with import IndexWith
from pomoview.dataflow.operators.input import Input
from pomoview.dataflow.operators.join_trace import incremental_join
from pomoview.dataflow.operators.trace_append import TraceAppend
from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.operators.z1_trace import Z1Trace
from pomoview.dataflow.zset import ZSet

Edge = tuple[int, int]


def closure_circuit() -> tuple[Circuit, ChildOutput, Child]:
    edges = Import(Input("edge", ("x", "y")))
    tc = Feedback(("x", "y"))
    joined = incremental_join(
        IndexWith(tc, lambda r: r[1]),
        IndexWith(edges, lambda r: r[0]),
        lambda key, left, right: (left[0], right[1]),  # type: ignore[index]
        ("x", "y"),
    )
    body = Union((edges, joined))
    result = DistinctTrace(body, Z1Trace(TraceAppend(body)))
    tc.connect(result)
    child = Child([result])
    out = child.output(0)
    return Circuit([out]), out, child


def bfs_closure(edges: set[Edge]) -> set[Edge]:
    succ: dict[int, list[int]] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    pairs: set[Edge] = set()
    for start in succ:
        seen: set[int] = set()
        stack = [start]
        while stack:
            for nxt in succ.get(stack.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        pairs.update((start, s) for s in seen)
    return pairs


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mib() -> float:
    """The process's resident memory now (Linux), in MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


CLINGO_RULES = "tc(X, Z) :- edge(X, Z).\ntc(X, Z) :- tc(X, Y), edge(Y, Z).\n#show tc/2.\n"


def clingo_closure(edges: list[Edge]) -> dict[str, float]:
    """clingo over `edges` (run in a process of its own): ground and solve seconds, the tc
    atoms of its model, and its peak RSS above its RSS before grounding (MiB)."""
    import clingo

    control = clingo.Control(["--warn=none"])
    control.add("base", [], "".join(f"edge({a},{b}).\n" for a, b in edges) + CLINGO_RULES)
    before = rss_mib()
    started = time.perf_counter()
    control.ground([("base", [])])
    ground_s = time.perf_counter() - started
    pairs = [0]

    def on_model(model: clingo.Model) -> None:
        pairs[0] = len(model.symbols(shown=True))

    started = time.perf_counter()
    control.solve(on_model=on_model)
    solve_s = time.perf_counter() - started
    return {"ground_s": ground_s, "solve_s": solve_s, "pairs": pairs[0], "rss_mib": peak_rss_mib() - before}


def run_clingo(edges: set[Edge]) -> dict[str, float]:
    """`clingo_closure` in a spawned process (its memory is its own, and ours stays ours)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(clingo_closure, (sorted(edges),))


def clingo_available() -> bool:
    try:
        import clingo  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--edges", type=int, default=8000)
    parser.add_argument("--updates", type=int, default=5, help="inserts and deletes to time, each")
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument("--memory", action="store_true", help="trace allocations: bytes kept per pair")
    parser.add_argument("--reps", type=int, default=1, help="from-scratch epochs and clingo runs, alternated")
    parser.add_argument("--no-clingo", dest="clingo", action="store_false", help="leave out clingo")
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps must be >= 1")
    notes = []
    if args.clingo and not clingo_available():
        args.clingo = False
        notes.append("clingo: the python module is not installed; its rows are left out")
    rng = random.Random(args.seed)
    edges: set[Edge] = set()
    while len(edges) < args.edges:
        edges.add((rng.randrange(args.nodes), rng.randrange(args.nodes)))

    started = time.perf_counter()
    want = bfs_closure(edges)
    bfs_s = time.perf_counter() - started

    if args.memory:
        tracemalloc.start()
    circuit, out, child = closure_circuit()
    rss_before, rss_now_before = peak_rss_mib(), rss_mib()
    traced_before = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    first = circuit.step({"edge": ZSet({e: 1 for e in edges})})[id(out)]
    scratch_s = time.perf_counter() - started
    growth_mib = rss_mib() - rss_now_before
    # The first epoch allocates millions of objects, which sooner or later costs CPython one
    # full cyclic-GC pass over all of them. Run it here and show it, rather than let it land
    # on whichever update comes first.
    started = time.perf_counter()
    gc.collect()
    gc_s = time.perf_counter() - started
    assert isinstance(first, ZSet)
    kept = ""
    if args.memory:
        # The circuit's state alone: the epoch's output delta is the caller's, not state.
        pairs = len(first)
        del first
        gc.collect()
        kept_bytes = tracemalloc.get_traced_memory()[0] - traced_before
        kept = f"; the circuit keeps {kept_bytes / 2**20:,.0f} MiB, {kept_bytes / pairs:,.0f} bytes per pair"
        tracemalloc.stop()
        first = child.totals[0].value()
    closure = ZSet(dict(first.items()))
    assert set(closure.positive()) == want and len(closure) == len(want), "closure differs from BFS"
    scratch, clingos = [scratch_s], []
    for rep in range(args.reps):  # A B A B: clingo, then (after the first) a new circuit
        if args.clingo:
            clingos.append(run_clingo(edges))
            assert clingos[-1]["pairs"] == len(want), f"clingo found {clingos[-1]['pairs']:,} pairs"
        if rep + 1 < args.reps:
            again, again_out, _ = closure_circuit()
            started = time.perf_counter()
            got = again.step({"edge": ZSet({e: 1 for e in edges})})[id(again_out)]
            scratch.append(time.perf_counter() - started)
            assert isinstance(got, ZSet) and len(got) == len(want), "closure differs from BFS"
            del again, again_out, got
            gc.collect()
    print(
        f"graph: {args.nodes} nodes, {len(edges)} edges; closure {len(closure):,} pairs "
        f"after {child.iterations} iterations{kept}\n"
    )

    rows: list[tuple[str, float, int, int]] = []  # (kind, seconds, output changes, iterations)

    def update(kind: str, edge: Edge, weight: int) -> None:
        started = time.perf_counter()
        delta = circuit.step({"edge": ZSet({edge: weight})}).get(id(out))
        took = time.perf_counter() - started
        if weight > 0:
            edges.add(edge)
        else:
            edges.discard(edge)
        changes = len(delta) if isinstance(delta, ZSet) else 0
        if isinstance(delta, ZSet):
            closure.extend(delta)
        rows.append((kind, took, changes, child.iterations))

    for _ in range(args.updates):
        while (e := (rng.randrange(args.nodes), rng.randrange(args.nodes))) in edges:
            pass
        update("insert", e, 1)
        update("delete", rng.choice(sorted(edges)), -1)
    # Random edges mostly land inside the giant strongly connected component, where the
    # closure does not change (only path lengths do). Also time one that does: an edge into
    # a node nothing reaches, inserted and then deleted again.
    unreached = sorted(set(range(args.nodes)) - {b for _, b in edges})
    if unreached:
        indegree: dict[int, int] = {}
        for _, b in edges:
            indegree[b] = indegree.get(b, 0) + 1
        hub = max(indegree, key=lambda b: indegree[b])  # surely inside the giant component
        update("insert that grows the closure", (hub, unreached[0]), 1)
        update("delete that shrinks the closure", (hub, unreached[0]), -1)
    assert set(closure.positive()) == bfs_closure(edges), "maintained closure differs from BFS"

    print("| step | ms | x cheaper than from scratch | closure changes | iterations |")
    print("|---|---|---|---|---|")
    print(f"| from scratch (circuit) | {scratch_s * 1000:,.0f} | 1.0 | {len(want):,} | - |")
    if args.reps > 1:
        each = ", ".join(f"{t * 1000:,.0f}" for t in scratch)
        median_ms = statistics.median(scratch) * 1000
        print(f"| from scratch, median of {args.reps} ({each}) | {median_ms:,.0f} | - | - | - |")
    print(f"| full GC pass after it | {gc_s * 1000:,.0f} | - | - | - |")
    for kind in dict.fromkeys(k for k, _, _, _ in rows):
        times = [t for k, t, _, _ in rows if k == kind]
        for k, took, changes, its in (r for r in rows if r[0] == kind):
            print(f"| one-edge {k} | {took * 1000:,.1f} | {scratch_s / took:,.0f} | {changes:,} | {its} |")
        if len(times) > 1:
            median = statistics.median(times)
            print(f"| one-edge {kind}, median | {median * 1000:,.1f} | {scratch_s / median:,.0f} | - | - |")
    print(
        f"\npeer: plain-Python BFS closure of the same graph {bfs_s * 1000:,.0f} ms "
        f"(the circuit from scratch takes {scratch_s / bfs_s:,.1f}x as long)"
    )
    print(f"peak RSS: {peak_rss_mib():,.0f} MiB (before the first epoch: {rss_before:,.0f} MiB)")
    pairs = len(want)
    print(
        f"RSS growth over the first from-scratch epoch: {growth_mib:,.0f} MiB, "
        f"{growth_mib * 2**20 / pairs:,.0f} bytes per pair"
    )
    if clingos:
        ground = statistics.median(c["ground_s"] for c in clingos)
        total = statistics.median(c["ground_s"] + c["solve_s"] for c in clingos)
        rss = statistics.median(c["rss_mib"] for c in clingos)
        median_scratch = statistics.median(scratch)
        print(
            f"peer: clingo {pairs:,} tc atoms, median of {len(clingos)}: ground {ground * 1000:,.0f} ms, "
            f"ground and solve {total * 1000:,.0f} ms, peak RSS growth {rss:,.0f} MiB "
            f"({rss * 2**20 / pairs:,.0f} bytes per pair); the circuit from scratch / clingo's ground: "
            f"{median_scratch / ground:,.2f}x time, {growth_mib / rss if rss else float('nan'):,.2f}x memory"
        )
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
